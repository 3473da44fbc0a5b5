#!/bin/bash
# cmake/CheckLayers.cmake, the build step that enforces docs/library.md's layers: the tree as it
# is passes, and each kind of break (an include of a layer above, a relative path into src/ from a
# test, an internal header in the CLI, a src/ folder that is no layer, a public header no layer
# declares) fails with exit status 1 and exactly its message.
#   layers_test.sh SOURCE_DIR
set -u
src=${1:?usage: layers_test.sh SOURCE_DIR}
check="$src/cmake/CheckLayers.cmake"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fresh_tree() {
  rm -rf "$work/tree"
  mkdir -p "$work/tree"
  cp -r "$src/src" "$src/include" "$work/tree/"
  mkdir -p "$work/tree/tools/gguf" "$work/tree/tests/hash"
  printf '#include "ggufkit/reader.h"\n#include "output.h"\n' > "$work/tree/tools/gguf/cmd_ok.cpp"
  printf '#include "hash/sha256.h"\n' > "$work/tree/tests/hash/ok_test.cpp"
}

# expect NAME STATUS STDERR: runs the checker on the tree; the "CMake Error at FILE:LINE" line is
# cmake's own and is left out of the comparison.
expect() {
  local name=$1 want_status=$2 want_err=$3
  cmake -DROOT="$work/tree" -P "$check" > "$work/out" 2> "$work/err"
  local status=$?
  local err
  err=$(grep -v '^CMake Error at ' "$work/err")
  if [[ $status != "$want_status" || -s "$work/out" || "$err" != "$want_err" ]]; then
    echo "FAIL $name: status $status (want $want_status)"
    echo "--- stdout:"; cat "$work/out"
    echo "--- stderr:"; printf '%s\n' "$err"
    echo "--- wanted stderr:"; printf '%s\n' "$want_err"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

fresh_tree
expect "the tree passes" 0 ""

fresh_tree
sed -i '1i #include "ggufkit/writer.h"' "$work/tree/src/format/value.cpp"
expect "format includes writer" 1 "  layers: 1 problem(s) with the layering of docs/library.md:

    src/format/value.cpp: #include \"ggufkit/writer.h\" is in layer writer, above format"

fresh_tree
sed -i '1i #include "quantize/preset_rules.h"' "$work/tree/src/check/check.cpp"
sed -i '1i #include "ggufkit/quantize.h"' "$work/tree/include/ggufkit/check.h"
expect "check includes the quantizer (public and internal)" 1 "  layers: 2 problem(s) with the layering of docs/library.md:

    src/check/check.cpp: #include \"quantize/preset_rules.h\" is in layer quantize, above check
    include/ggufkit/check.h: #include \"ggufkit/quantize.h\" is in layer quantize, above check"

fresh_tree
printf '#include "../../src/hash/sha256.h"\n' > "$work/tree/tests/hash/bad_test.cpp"
printf '#include "format/checked_math.h"\n' > "$work/tree/tools/gguf/cmd_bad.cpp"
expect "a test reaches into src/, the CLI into the library" 1 "  layers: 2 problem(s) with the layering of docs/library.md:

    tools/gguf/cmd_bad.cpp: #include \"format/checked_math.h\": tools/ uses the public headers (include/ggufkit/) only
    tests/hash/bad_test.cpp: includes a library source by a relative path into src/"

fresh_tree
mkdir -p "$work/tree/src/telemetry"
printf '#include "ggufkit/reader.h"\n' > "$work/tree/src/telemetry/telemetry.cpp"
printf '#pragma once\n' > "$work/tree/include/ggufkit/telemetry.h"
expect "a folder and a header no layer declares" 1 "  layers: 3 problem(s) with the layering of docs/library.md:

    src/telemetry: a folder that is no layer: add it to LAYERS in cmake/CheckLayers.cmake and to docs/library.md
    include/ggufkit/telemetry.h: a public header no layer declares: add it to cmake/CheckLayers.cmake
    include/ggufkit/ggufkit.h: does not include ggufkit/telemetry.h (the umbrella header lists every public header)"

if ((failures > 0)); then
  echo "$failures case(s) failed"
  exit 1
fi
echo "all cases passed"
