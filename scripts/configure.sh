#!/usr/bin/env bash
# Configures a build directory the way the Makefile's targets need it:
#   scripts/configure.sh release  DIR [CMAKE ARGS...]   Release (-O3, no debug information), GCC
#   scripts/configure.sh sanitize DIR [CMAKE ARGS...]   clang, ASan+UBSan with line tables (the
#                                                       library at -O1, the rest at -O0), the tests,
#                                                       the libFuzzer targets and the Python module
# Ninja is used when installed. Re-running with the same arguments does nothing (the build tool
# re-runs CMake itself when a CMakeLists.txt changes); other arguments reconfigure the directory.
set -euo pipefail
mode=${1:?usage: configure.sh release|sanitize DIR [CMAKE ARGS...]}
dir=${2:?usage: configure.sh release|sanitize DIR [CMAKE ARGS...]}
shift 2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

generator="Unix Makefiles"
command -v ninja >/dev/null 2>&1 && generator=Ninja
args=(-G "$generator")
case "$mode" in
  release) args+=(-DCMAKE_BUILD_TYPE=Release) ;;
  sanitize)
    args+=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug
           "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -gline-tables-only" -DGGUFKIT_SANITIZE=ON -DGGUFKIT_FUZZ=ON -DGGUFKIT_TESTS=ON
           -DGGUFKIT_PYTHON=ON) ;;
  *) echo "configure.sh: unknown mode '$mode' (release or sanitize)" >&2; exit 2 ;;
esac
# A compiler cache when one is installed (developers' machines; CI has none and builds from scratch).
command -v ccache >/dev/null 2>&1 && args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
args+=("$@")

stamp="$dir/.ggufkit-configured"
want="$mode ${args[*]}"
if [[ -f "$dir/CMakeCache.txt" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
# A directory configured with another generator or compiler cannot be reused as it is.
if [[ -f "$dir/CMakeCache.txt" ]]; then
  cached_gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$dir/CMakeCache.txt")
  cached_cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt")
  want_cxx=$([[ $mode == sanitize ]] && echo clang++ || echo "")
  if [[ "$cached_gen" != "$generator" || ( -n "$want_cxx" && "$(basename "$cached_cxx")" != "$want_cxx"* ) ]]; then
    rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
  fi
fi
mkdir -p "$dir"
if ! cmake -S "$root" -B "$dir" "${args[@]}" > "$dir/configure.log" 2>&1; then
  cat "$dir/configure.log" >&2
  echo "configure.sh: cmake failed for $dir (log above, also in $dir/configure.log)" >&2
  exit 2
fi
echo "$want" > "$stamp"
