#!/usr/bin/env bash
# A time-boxed libFuzzer run of one reader: fuzz/fuzz_reader.cpp (GGUF) or fuzz/fuzz_safetensors.cpp
# (safetensors files and indexes, SentencePiece tokenizer.model).
#   scripts/run-fuzz.sh FUZZER SECONDS
# Seeds: what the fuzzer's own seed mode writes (GGUFKIT_FUZZ_WRITE_SEEDS); for the GGUF reader also
# the sample model, small valid copies of it and of every corpus model, and the first 64 KiB of each
# vocab file when ../shared is present. The dictionary is fuzz/<reader>.dict (gguf or safetensors).
# Exits non-zero on any crash, leak, timeout, out-of-memory or sanitizer report; the inputs that
# caused it are kept in fuzz/corpus-run/artifacts/ (or $GGUFKIT_FUZZ_ARTIFACTS).
# Needs no TTY; prints one summary line (plus the report on failure).
set -euo pipefail

usage() { echo "usage: $0 FUZZER SECONDS" >&2; exit 2; }
[ $# -eq 2 ] || usage
fuzzer=$1
seconds=$2
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] || usage
[ -x "$fuzzer" ] || { echo "run-fuzz: no fuzzer at $fuzzer (make san)" >&2; exit 2; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shared=${GGUFKIT_SHARED_DIR:-$root/../shared}
artifacts_keep=${GGUFKIT_FUZZ_ARTIFACTS:-$root/fuzz/corpus-run/artifacts}
name=$(basename "$fuzzer")
case "$name" in
  fuzz_reader) dict=$root/fuzz/gguf.dict ;;
  fuzz_safetensors) dict=$root/fuzz/safetensors.dict ;;
  *) echo "run-fuzz: unknown fuzzer $name (fuzz_reader or fuzz_safetensors)" >&2; exit 2 ;;
esac
sample=$root/samples/tiny-llama-f16.gguf

work=$(mktemp -d "${TMPDIR:-/tmp}/ggufkit-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
seeds=$work/seeds
corpus=$work/corpus   # what the run discovers; thrown away with $work
artifacts=$work/artifacts
log=$work/fuzz.log
mkdir -p "$seeds" "$corpus" "$artifacts"

# --- seed corpus ---
models=()
if [ "$name" = fuzz_reader ]; then
  cp "$sample" "$seeds/"
  models=("$sample")
  if [ -d "$shared/corpus" ]; then
    for vocab in "$shared"/corpus/vocab/*.gguf; do
      [ -f "$vocab" ] || continue
      head -c 65536 "$vocab" > "$seeds/$(basename "$vocab" .gguf).first64k"
      models+=("$vocab")
    done
    for model in "$shared"/corpus/tiny-llama/*.gguf; do
      [ -f "$model" ] && models+=("$model")
    done
  fi
fi
# Whole models are larger than -max_len and libFuzzer would cut them into prefixes that never
# parse: the reader's seed mode writes small complete copies instead (arrays cut to 64 elements,
# one block per tensor) plus a seed with every value type; the safetensors fuzzer writes a few
# small valid files and an index.
if ! GGUFKIT_FUZZ_WRITE_SEEDS="$seeds" "$fuzzer" "${models[@]}" > "$log" 2>&1; then
  echo "run-fuzz: $name: FAILED writing the seed corpus" >&2
  cat "$log" >&2
  exit 1
fi
n_seeds=$(find "$seeds" -type f | wc -l)
seed_kib=$(du -sk "$seeds" | cut -f1)

# --- the run ---
# UBSan reports are fatal (and so saved as crash inputs) instead of printed and ignored.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
started=$(date +%s)
status=0
"$fuzzer" \
  -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -dict="$dict" -artifact_prefix="$artifacts/" -print_final_stats=1 \
  "$corpus" "$seeds" > "$log" 2>&1 < /dev/null || status=$?
elapsed=$(( $(date +%s) - started ))

runs=$(grep -a '^stat::number_of_executed_units:' "$log" | awk '{print $2}' | tail -1 || true)
last=$(grep -aE '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -1 || true)
cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<< "$last")
ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<< "$last")
corp=$(sed -nE 's/.* corp: ([0-9]+).*/\1/p' <<< "$last")
rss=$(grep -a '^stat::peak_rss_mb:' "$log" | awk '{print $2}' | tail -1 || true)

problems=$(grep -aE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|==ERROR|SUMMARY: (Address|Undefined|Leak)|fuzz_reader: [0-9]+ inconsistencies|ALARM: working on the last Unit' "$log" || true)
if [ "$status" -ne 0 ] || [ -n "$problems" ] || [ -z "$runs" ]; then
  echo "run-fuzz: $name: FAILED after ${elapsed}s (exit status $status, ${runs:-?} runs)" >&2
  # The report: from the first sanitizer, libFuzzer or exercise message on (not the progress lines).
  awk '/ERROR: |runtime error:|fuzz_reader: [0-9]+ inconsistencies|ALARM:|out-of-memory|==[0-9]+==/ { on = 1 }
       on && !/^\tNEW_FUNC/ { print; if (++n == 80) exit }' "$log" >&2 || true
  [ -n "$problems" ] || tail -20 "$log" >&2
  if compgen -G "$artifacts/*" > /dev/null; then
    mkdir -p "$artifacts_keep"
    cp "$artifacts"/* "$artifacts_keep/"
    echo "run-fuzz: inputs kept in $artifacts_keep:" >&2
    ls -1 "$artifacts" | sed "s|^|  $artifacts_keep/|" >&2
    echo "run-fuzz: reproduce with: $fuzzer <input>" >&2
  fi
  exit 1
fi
echo "run-fuzz: $name: OK: ${runs} runs in ${elapsed}s, coverage ${cov:-?} edges / ${ft:-?} features, corpus ${corp:-?} inputs (from ${n_seeds} seeds, ${seed_kib} KiB), peak RSS ${rss:-?} MB"
