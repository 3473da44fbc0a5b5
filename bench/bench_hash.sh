#!/usr/bin/env bash
# gguf hash against the reference tools for the same digests, in one run:
#   bench/bench_hash.sh [BUILD_DIR] [GIB]
# Makes a dense GIB GiB model (default 1), reads it into the page cache, then times, best of 3:
#   openssl dgst -sha256 FILE   vs  gguf hash -a sha256 FILE  (every tensor's digest and the file's)
#                               and gguf hash --sha256 FILE   (gguf-hash's lines: every tensor's and the model's)
#   openssl dgst -sha1 FILE     vs  gguf hash -a sha1 FILE
#   xxhsum FILE (XXH64)         vs  gguf hash FILE            (xxh64, the default)
#                               and gguf hash --xxh64 FILE
# The references hash the file once on one core; gguf hash computes two digests of every byte
# (the file's or the model's, and its tensor's), on all cores.
set -euo pipefail
build=${1:-build-bench}
gib=${2:-1}
gguf=$build/gguf
maker=$build/bench/make_big_model
for tool in openssl xxhsum; do
  command -v "$tool" >/dev/null || { echo "bench_hash: $tool not found (scripts/install-deps.sh test)" >&2; exit 2; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/ggufkit-bench-hash-XXXXXX")
trap 'rm -rf "$work"' EXIT
file=$work/model.gguf
"$maker" "$file" "$gib" --dense >/dev/null 2>&1
cat "$file" >/dev/null

now() { date +%s%N; }
best_of_3() {
  local best=1e18 t0 t1
  for _ in 1 2 3; do
    t0=$(now); "$@" >/dev/null; t1=$(now)
    best=$(awk -v a="$best" -v b=$((t1 - t0)) 'BEGIN { print (a < b) ? a : b }')
  done
  echo "$best"
}
row() {  # label reference-ns ours-ns
  awk -v l="$1" -v r="$2" -v o="$3" 'BEGIN { printf "%-44s %8.3f s %8.3f s %7.2fx\n", l, r / 1e9, o / 1e9, o / r }'
}

echo "bench_hash: $(stat -c %s "$file") bytes, $(nproc) cores; best of 3, file in the page cache"
printf "%-44s %10s %10s %8s\n" "case" "reference" "gguf" "ratio"
sha256=$(best_of_3 openssl dgst -sha256 "$file")
sha1=$(best_of_3 openssl dgst -sha1 "$file")
xxh=$(best_of_3 xxhsum "$file")
row "sha256: openssl dgst vs hash -a sha256" "$sha256" "$(best_of_3 "$gguf" hash -a sha256 "$file")"
row "sha256: openssl dgst vs hash --sha256" "$sha256" "$(best_of_3 "$gguf" hash --sha256 "$file")"
row "sha1: openssl dgst vs hash -a sha1" "$sha1" "$(best_of_3 "$gguf" hash -a sha1 "$file")"
row "xxh64: xxhsum vs hash" "$xxh" "$(best_of_3 "$gguf" hash "$file")"
row "xxh64: xxhsum vs hash --xxh64" "$xxh" "$(best_of_3 "$gguf" hash --xxh64 "$file")"
