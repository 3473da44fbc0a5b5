#!/usr/bin/env bash
# The CLI links only what every verb needs: the libraries only some verbs use (libcrypto for SHA
# digests, libcurl for remote files) are loaded when first needed (src/io/lazy_library.h), because
# the dynamic loader binds every linked library's symbols, and its dependencies', at every start.
#   tests/startup/linked_libraries_test.sh GGUF_BINARY
# Prints the exact NEEDED list on failure.
set -uo pipefail
gguf=$1
needed=$(readelf -d "$gguf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
expected="ld-linux-x86-64.so.2 libc.so.6 libfmt.so.9 libgcc_s.so.1 libm.so.6 libsimdjson.so.14 libstdc++.so.6 libxxhash.so.0 "
if [[ "$needed" != "$expected" ]]; then
  printf 'FAILED: %s links\n  expected: %s\n  actual:   %s\n' "$gguf" "$expected" "$needed"
  exit 1
fi
# Both are still found when a verb needs them: a SHA-256 manifest and a remote address's error.
sample=$(dirname "$0")/../../samples/tiny-llama-f16.gguf
if ! "$gguf" hash "$sample" --algorithm sha256 | grep -q '^file [0-9a-f]\{64\} '; then
  echo "FAILED: gguf hash --algorithm sha256 did not load libcrypto"
  exit 1
fi
out=$("$gguf" info http://127.0.0.1:1/x.gguf --timeout 2 2>&1 >/dev/null)
if [[ "$out" == *"cannot load"* || -z "$out" ]]; then
  printf 'FAILED: a remote address did not load libcurl: %s\n' "$out"
  exit 1
fi
echo "linked: $needed"
