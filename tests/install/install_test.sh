#!/usr/bin/env bash
# `make install` as a user runs it, checked end to end:
#   tests/install/install_test.sh BUILD_DIR SOURCE_DIR
# Installs BUILD_DIR into a fresh prefix with `cmake --install --strip`, then checks the complete
# list of installed files, that the CLI is stripped and runs, that an outside project builds and
# runs against the package with CMake (find_package) and with pkg-config, that the man page is
# well-formed roff naming every verb, and that the bash completion completes verbs, options, types
# and choices.
set -uo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
sample="$src/samples/tiny-llama-f16.gguf"
work=$(mktemp -d "${TMPDIR:-/tmp}/ggufkit-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
failures=0 checks=0

check() {  # check DESCRIPTION EXPECTED ACTUAL
  checks=$((checks + 1))
  if [[ "$2" != "$3" ]]; then
    failures=$((failures + 1))
    printf 'FAILED: %s\n  expected: %q\n  actual:   %q\n' "$1" "$2" "$3"
  fi
}
run() {  # run LOG CMD...: the command's status; its output in LOG
  local log=$1
  shift
  "$@" > "$log" 2>&1
}

# --- install ---
run "$work/install.log" cmake --install "$build" --prefix "$prefix" --strip
check "cmake --install exit status" 0 $?
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")
libdir=${libdir:-lib}
# The Python package, when the build has it (GGUFKIT_PYTHON): the .py files and the extension module.
pydir=""
if grep -q '^GGUFKIT_PYTHON:BOOL=ON' "$build/CMakeCache.txt"; then
  pydir=$(sed -n 's/^GGUFKIT_PYTHON_INSTALL_DIR:STRING=//p' "$build/CMakeCache.txt")
fi

expected_files=$(
  {
    echo bin/gguf
    (cd "$src/include" && find ggufkit -name '*.h' | sed 's|^|include/|')
    echo "$libdir/libggufkit.a"
    echo "$libdir/cmake/ggufkit/ggufkitConfig.cmake"
    echo "$libdir/cmake/ggufkit/ggufkitConfigVersion.cmake"
    echo "$libdir/cmake/ggufkit/ggufkitTargets.cmake"
    echo "$libdir/cmake/ggufkit/ggufkitTargets-release.cmake"
    echo "$libdir/pkgconfig/ggufkit.pc"
    echo share/bash-completion/completions/gguf
    echo share/man/man1/gguf.1
    if [[ -n "$pydir" ]]; then
      (cd "$src/python" && ls ggufkit/*.py | sed "s|^ggufkit/|$pydir/|")
      (cd "$build/python/ggufkit" && ls _core.*.so | sed "s|^|$pydir/|")
    fi
  } | sort)
check "the installed files" "$expected_files" "$(cd "$prefix" && find . -type f | sed 's|^\./||' | sort)"

# --- the Python package: the system python3 imports it from the prefix and reads the sample ---
if [[ -n "$pydir" ]]; then
  python=$(sed -n 's/^Python3_EXECUTABLE:FILEPATH=//p' "$build/CMakeCache.txt")
  site=$prefix/${pydir%/ggufkit}
  check "installed ggufkit reads the sample" "llama 20 $site/ggufkit/__init__.py" \
    "$(cd "$work" && PYTHONPATH="$site" "$python" -c 'import sys, ggufkit
r = ggufkit.GGUFReader(sys.argv[1])
print(r.fields["general.architecture"].contents(), len(r.tensors), ggufkit.__file__)' "$sample" 2>&1)"
fi

# --- the CLI: stripped, and it runs ---
sections=$(readelf -S --wide "$prefix/bin/gguf" | grep -oE '\.(symtab|debug_[a-z]+)' | sort -u | tr '\n' ' ')
check "bin/gguf has no symbol table or debug sections" "" "$sections"
check "installed gguf --version" "ggufkit 0.1.0" "$("$prefix/bin/gguf" --version 2>&1)"
"$prefix/bin/gguf" info "$sample" > "$work/info.txt" 2>&1
check "installed gguf info exit status" 0 $?
"$build/gguf" info "$sample" > "$work/info-build.txt" 2>&1
check "installed gguf info prints what the built one does" "$(cat "$work/info-build.txt")" "$(cat "$work/info.txt")"

# --- an outside project: CMake package ---
expected_out="llama: 24 keys, 20 tensors, first token_embd.weight f16 65536 bytes"
run "$work/cmake-configure.log" cmake -S "$src/tests/install/consumer" -B "$work/consumer-cmake" -G "Unix Makefiles" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release
status=$?
check "consumer: cmake configure with find_package(ggufkit)" 0 $status
[[ $status -eq 0 ]] || cat "$work/cmake-configure.log"
run "$work/cmake-build.log" cmake --build "$work/consumer-cmake"
status=$?
check "consumer: cmake build" 0 $status
[[ $status -eq 0 ]] || cat "$work/cmake-build.log"
check "consumer (CMake) output" "$expected_out" "$("$work/consumer-cmake/consumer" "$sample" 2>&1)"

# --- an outside project: pkg-config ---
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
check "pkg-config --modversion ggufkit" "0.1.0" "$(pkg-config --modversion ggufkit 2>&1)"
# shellcheck disable=SC2046
run "$work/pc-build.log" ${CXX:-c++} -O1 -o "$work/consumer-pc" "$src/tests/install/consumer/main.cpp" \
  $(pkg-config --cflags --libs ggufkit)
status=$?
check "consumer: c++ \$(pkg-config --cflags --libs ggufkit)" 0 $status
[[ $status -eq 0 ]] || cat "$work/pc-build.log"
check "consumer (pkg-config) output" "$expected_out" "$("$work/consumer-pc" "$sample" 2>&1)"

# --- the man page: roff that names every verb; the same text as the built tool generates ---
man="$prefix/share/man/man1/gguf.1"
check "man page header" '.TH GGUF 1 "" "ggufkit 0.1.0" "User Commands"' "$(grep -m1 '^\.TH' "$man")"
verbs=$("$build/gguf" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF {print $1}' | sort | tr '\n' ' ')
man_verbs=$(sed -n 's/^\.SS "gguf \([a-z-]*\) .*/\1/p' "$man" | sort | tr '\n' ' ')
check "man page has a section for every verb of gguf --help" "$verbs" "$man_verbs"
check "man page is what gguf --man-page prints" "$("$build/gguf" --man-page)" "$(cat "$man")"
check "man page: flags have no value placeholder" "" "$(grep -F '\fI\fR' "$man")"
check "man page: an option's value type" '\fB\-\-threads\fR \fIUINT\fR' "$(sed -n '/^\.SS "gguf quantize/,/^\.SS/p' "$man" | grep -F -m1 '\-\-threads')"
if command -v groff >/dev/null 2>&1; then
  warnings=$(groff -man -Tutf8 -ww -z "$man" 2>&1)
  check "groff -ww finds nothing to warn about" "" "$warnings"
fi

# --- bash completion: the installed script, sourced, as bash calls it ---
completion="$prefix/share/bash-completion/completions/gguf"
complete_words() {  # complete_words WORD...: what _gguf offers for the last word
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _gguf; [[ ${#COMPREPLY[@]} -eq 0 ]] || printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' \
    _ "$completion" "$@"
}
check "completion: verbs" "quantize " "$(complete_words gguf qua)"
check "completion: options of a verb" "--dry-run " "$(complete_words gguf quantize --dry)"
check "completion: a preset as quantize's TYPE" "Q4_K_M Q4_K_S " "$(complete_words gguf quantize in.gguf out.gguf Q4_K_)"
check "completion: after an option's value the positional count is right" "Q8_0 " \
  "$(complete_words gguf quantize --threads 2 in.gguf out.gguf Q8)"
check "completion: flags take no value, so the positionals after one are counted right" "Q8_0 " \
  "$(complete_words gguf quantize --pure in.gguf --dry-run out.gguf Q8)"
check "completion: a flag's next word is an option or a positional, not its value" "--json " \
  "$(complete_words gguf info --json a.gguf --js)"
check "completion: file names for the input (bash's default)" "" "$(complete_words gguf quantize mod)"
check "completion: an option's choices" "sha1 sha256 " "$(complete_words gguf hash --algorithm s)"
check "completion: an IsMember option's choices" "f16 f32 " "$(complete_words gguf extract m.gguf -o x --type f)"
check "completion: convert --outtype" "bf16 " "$(complete_words gguf convert dir out.gguf --outtype bf)"
"$build/gguf" completion zsh > "$work/zsh.out" 2> "$work/zsh.err"
check "gguf completion zsh: exit status 2 (only bash)" 2 $?
check "gguf completion zsh: nothing on stdout" "" "$(cat "$work/zsh.out")"
check "gguf completion zsh: the parser's message" $'shell: zsh not in {bash}\nRun with --help for more information.' \
  "$(cat "$work/zsh.err")"
check "completion: the script is what gguf completion bash prints" "$("$build/gguf" completion bash)" "$(cat "$completion")"

echo "install: $((checks - failures)) passed, $failures failed"
[[ $failures -eq 0 ]]
