#!/usr/bin/env bash
# `make test`: every suite, each phase timed, ending with a table of the phases and one line
#   "make test: N passed, N failed, N skipped"
# Phases: the packages and the oracle (skipped in well under a second when installed), the Release
# build and the sanitizer build (clang, ASan+UBSan; the tests and the fuzzers link the same
# library), every test of the Release build, every test but the oracle comparisons in the
# sanitizer build (the oracle is not instrumented), and a short libFuzzer run of the GGUF and the
# safetensors readers side by side.
#
# Environment: BUILD, SAN_BUILD (directories), JOBS, FUZZ_SECONDS, as the Makefile passes them.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
release=${BUILD:-build}
san=${SAN_BUILD:-build-san}
jobs=${JOBS:-$(nproc)}
fuzz_seconds=${FUZZ_SECONDS:-40}
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

passed=0 failed=0 skipped=0 status=0
phases=()
started_all=$(date +%s)

# phase NAME COMMAND...: runs it, records its wall time and whether it failed.
phase() {
  local name=$1 start rc
  shift
  echo "== $name" >&2
  start=$(date +%s)
  "$@"
  rc=$?
  phases+=("$(printf '%-34s %5ds  %s' "$name" $(( $(date +%s) - start )) "$([[ $rc -eq 0 ]] && echo ok || echo "FAILED ($rc)")")")
  return $rc
}

count() {  # count LOG: adds ctest's results to the totals
  local log=$1 total fails skips
  total=$(sed -n 's/.*tests passed, \([0-9]*\) tests\{0,1\} failed out of \([0-9]*\).*/\2/p' "$log" | tail -1)
  fails=$(sed -n 's/.*tests passed, \([0-9]*\) tests\{0,1\} failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
  skips=$(grep -c '\*\*\*Skipped\|Not Run' "$log" || true)
  total=${total:-0} fails=${fails:-0}
  passed=$((passed + total - fails - skips)) failed=$((failed + fails)) skipped=$((skipped + skips))
}

run_ctest() {  # run_ctest LOG ARGS...
  local log=$1
  shift
  ctest "$@" --output-on-failure -j"$jobs" 2>&1 | tee "$log"
  return "${PIPESTATUS[0]}"
}

summary() {
  echo
  echo "make test: phases (wall time on $(nproc) cores)"
  printf '  %s\n' "${phases[@]}"
  printf '  %-34s %5ds\n' "total" $(( $(date +%s) - started_all ))
  echo "make test: $passed passed, $failed failed, $skipped skipped"
}

build_ok=1
phase "packages (apt, when missing)" scripts/install-deps.sh test || { summary; exit 2; }
phase "oracle (npm, when missing)" scripts/install-oracle.sh || { summary; exit 2; }
phase "release build" bash -c "scripts/configure.sh release '$release' -DGGUFKIT_TESTS=ON -DGGUFKIT_PYTHON=ON &&
                               cmake --build '$release' -j$jobs" || build_ok=0
phase "sanitizer build (ASan+UBSan, fuzz)" bash -c "scripts/configure.sh sanitize '$san' &&
                                                    cmake --build '$san' -j$jobs" || build_ok=0
if [[ $build_ok -eq 0 ]]; then
  status=1
  failed=$((failed + 1))
  summary
  exit 1
fi

phase "release tests (all)" run_ctest "$logdir/release.log" --test-dir "$release" || status=1
count "$logdir/release.log"
phase "sanitizer tests (all but oracle)" run_ctest "$logdir/san.log" --test-dir "$san" -LE oracle || status=1
count "$logdir/san.log"
# The two fuzzers side by side, one per core; each counts as a test.
fuzz_both() {
  local rc=0
  scripts/run-fuzz.sh "$san/fuzz/fuzz_safetensors" "$fuzz_seconds" > "$logdir/fuzz-safetensors.log" 2>&1 &
  local other=$!
  scripts/run-fuzz.sh "$san/fuzz/fuzz_reader" "$fuzz_seconds" || rc=1
  wait "$other" || rc=$((rc | 2))
  cat "$logdir/fuzz-safetensors.log"
  fuzz_status=$rc
  return $rc
}
fuzz_status=0
phase "libFuzzer: GGUF and safetensors readers (${fuzz_seconds}s)" fuzz_both
for bit in 1 2; do
  if (( fuzz_status & bit )); then failed=$((failed + 1)) status=1; else passed=$((passed + 1)); fi
done

summary
exit $status
