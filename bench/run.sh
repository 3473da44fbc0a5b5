#!/usr/bin/env bash
# Builds the benchmarks in Release mode (build-bench/), makes sure the llama.cpp oracle is
# installed, and runs them, each printing ratios against llama.cpp in the same run.
#   bench/run.sh                 both benchmarks
#   bench/run.sh open [ARGS...]  opening vocabularies (ARGS: Google Benchmark flags and/or GGUF files)
#   bench/run.sh quant [ARGS...] conversion kernels (ARGS: --seconds S and/or type names)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-bench"

"$ROOT/scripts/install-oracle.sh"

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGGUFKIT_TESTS=OFF -DGGUFKIT_BENCH=ON >/dev/null
cmake --build "$BUILD" --target bench_open bench_quant -j "$(nproc)"

what=${1:-all}
[ $# -gt 0 ] && shift
case "$what" in
  open) exec "$BUILD/bench/bench_open" "$@" ;;
  quant) exec "$BUILD/bench/bench_quant" "$@" ;;
  all) "$BUILD/bench/bench_open" && "$BUILD/bench/bench_quant" ;;
  *) echo "usage: bench/run.sh [open|quant|all] [ARGS...]" >&2; exit 2 ;;
esac
