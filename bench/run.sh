#!/usr/bin/env bash
# Builds the benchmarks in Release mode (build-bench/), makes sure the llama.cpp oracle is
# installed, and runs bench_open. Extra arguments go to bench_open: Google Benchmark flags
# (--benchmark_filter=..., --benchmark_repetitions=5, ...) and/or GGUF files (default: the
# vocabularies in ../shared/corpus/vocab).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-bench"

"$ROOT/scripts/install-oracle.sh"

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGGUFKIT_TESTS=OFF -DGGUFKIT_BENCH=ON >/dev/null
cmake --build "$BUILD" --target bench_open -j "$(nproc)"

exec "$BUILD/bench/bench_open" "$@"
