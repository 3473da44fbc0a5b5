#!/usr/bin/env bash
# Builds the benchmarks in Release mode (build-bench/), makes sure the llama.cpp oracle is
# installed, and runs them, each printing ratios against llama.cpp in the same run.
#   bench/run.sh                 all three benchmarks
#   bench/run.sh open [ARGS...]  opening vocabularies (ARGS: Google Benchmark flags and/or GGUF files)
#   bench/run.sh quant [ARGS...] conversion kernels (ARGS: --seconds S, --rows N, --threads N, type names)
#   bench/run.sh model [ARGS...] whole-model quantization against llama_model_quantize (ARGS: --model F16.gguf,
#                                --layers/--embd/--ff/--vocab N, --threads N, --repeat R, type names)
#   bench/run.sh edit [GIB]      gguf set in place and as a rewrite against cp, on a GIB GiB model (default 8)
#   bench/run.sh hash [GIB]      gguf hash against openssl dgst and xxhsum on a GIB GiB model (default 1)
#   bench/run.sh convert [ARGS...] Hugging Face safetensors -> GGUF against cp, and peak memory (ARGS: --gib N, --experts N,
#                                --dtype bf16|f16, --shard-gib N, --threads N, --repeat R, --dir D, --keep)
#   bench/run.sh tokenizer       gguf convert's time on each real tokenizer.json of the oracle install
#   bench/run.sh estimate [ARGS...] gguf estimate (whole process) against llama.cpp's no-alloc load (ARGS: --repeat R, --model NAME)
#   bench/run.sh python [ARGS...] the Python package ggufkit (build-bench/python) against llama.cpp's gguf-py: opening a
#                                vocabulary and reading its tokens, (de)quantizing (ARGS: --repeat R, --kernel-repeat K,
#                                --rows/--cols N, --no-memory, --python-dir D (or GGUFKIT_PYTHON_DIR), --gguf-py D)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-bench"

"$ROOT/scripts/install-oracle.sh"

"$ROOT/scripts/configure.sh" release "$BUILD" -DGGUFKIT_TESTS=OFF -DGGUFKIT_BENCH=ON -DGGUFKIT_PYTHON=ON
cmake --build "$BUILD" --target bench_open bench_quant bench_quantize_model make_big_model bench_convert bench_estimate gguf python -j "$(nproc)"
# The Python the module was built for (Debian's /usr/bin/python3, with numpy).
python=$(sed -n 's/^Python3_EXECUTABLE:FILEPATH=//p' "$BUILD/CMakeCache.txt")
python=${python:-/usr/bin/python3}

what=${1:-all}
[ $# -gt 0 ] && shift
case "$what" in
  open) exec "$BUILD/bench/bench_open" "$@" ;;
  quant) exec "$BUILD/bench/bench_quant" "$@" ;;
  model) exec "$BUILD/bench/bench_quantize_model" "$@" ;;
  edit) exec "$ROOT/bench/bench_edit.sh" "$BUILD" "$@" ;;
  hash) exec "$ROOT/bench/bench_hash.sh" "$BUILD" "$@" ;;
  convert) exec "$BUILD/bench/bench_convert" "$@" ;;
  tokenizer) exec "$ROOT/bench/bench_tokenizer.sh" "$BUILD" ;;
  estimate) exec "$BUILD/bench/bench_estimate" "$@" ;;
  python) exec "$python" "$ROOT/bench/bench_python.py" "$@" ;;
  all) "$BUILD/bench/bench_open" && "$BUILD/bench/bench_quant" && "$BUILD/bench/bench_quantize_model" && "$ROOT/bench/bench_edit.sh" "$BUILD" && "$ROOT/bench/bench_hash.sh" "$BUILD" && "$BUILD/bench/bench_convert" && "$ROOT/bench/bench_tokenizer.sh" "$BUILD" && "$python" "$ROOT/bench/bench_python.py" ;;
  *) echo "usage: bench/run.sh [open|quant|model|edit|hash|convert|tokenizer|python|all] [ARGS...]" >&2; exit 2 ;;
esac
