#!/usr/bin/env bash
# Runs every suite `make test` promises and ends with one summary line:
#   "make test: N passed, N failed, N skipped"
# Suites: the release build (all labels), the ASan+UBSan build (all but the oracle, whose library is
# not instrumented), and a short libFuzzer run on the reader.
set -uo pipefail
release=${1:-build}
asan=${2:-build-asan}
fuzz_bin=${3:-build-fuzz/fuzz/fuzz_reader}
fuzz_seconds=${4:-60}
jobs=$(nproc)
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

passed=0 failed=0 skipped=0 status=0
count() {  # count LOG: adds ctest's results to the totals
  local log=$1 total fails skips
  total=$(sed -n 's/.*tests passed, \([0-9]*\) tests\{0,1\} failed out of \([0-9]*\).*/\2/p' "$log" | tail -1)
  fails=$(sed -n 's/.*tests passed, \([0-9]*\) tests\{0,1\} failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
  skips=$(grep -c '\*\*\*Skipped\|Not Run' "$log" || true)
  total=${total:-0} fails=${fails:-0}
  passed=$((passed + total - fails - skips)) failed=$((failed + fails)) skipped=$((skipped + skips))
}

echo "== release build: every test" >&2
ctest --test-dir "$release" --output-on-failure -j"$jobs" 2>&1 | tee "$logdir/release.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
count "$logdir/release.log"

echo "== ASan+UBSan build: every test but the oracle comparisons" >&2
ctest --test-dir "$asan" --output-on-failure -j"$jobs" -LE oracle 2>&1 | tee "$logdir/asan.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
count "$logdir/asan.log"

echo "== libFuzzer on the reader, ${fuzz_seconds}s" >&2
if scripts/run-fuzz.sh "$fuzz_bin" "$fuzz_seconds"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)) status=1
fi

echo "make test: $passed passed, $failed failed, $skipped skipped"
exit $status
