#!/usr/bin/env bash
# Metadata edits on multi-GB models against cp, in one run:
#   bench/bench_edit.sh [BUILD_DIR] [GIB]
# Makes a dense GIB GiB model (default 2: every byte must be copied) and a sparse 4*GIB GiB one
# (holes: no disk used; cp and gguf both skip holes), then times, best of 3, with the source in the
# page cache and nothing dirty before each run:
#   cp                    vs `gguf set` in place (a same-length name: one write of a few bytes, fsync included)
#   cp TMP; mv TMP FILE   vs `gguf set --no-sync` as a rewrite (a longer name: the header outgrows its
#                         padding). Replacing a file costs more than creating one (ext4 starts writing the
#                         new file back at the rename, and the old one's pages are freed), so the fair
#                         comparison is cp to a temporary file renamed over the original, as a safe edit does.
#   the same + sync       vs `gguf set` as a rewrite (it fsyncs before renaming)
set -euo pipefail
build=${1:-build-bench}
gib=${2:-2}
gguf=$build/gguf
maker=$build/bench/make_big_model
work=$(mktemp -d "${TMPDIR:-/tmp}/ggufkit-bench-edit-XXXXXX")
trap 'rm -rf "$work"' EXIT

now() { date +%s%N; }
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a < b) ? a : b }'; }
fresh_copy() { rm -f "$work/copy.gguf"; cp "$1" "$work/copy.gguf"; sync "$work/copy.gguf"; }

run_case() {
  local label=$1 file=$2
  local size t0 t1 cp=1e18 cp_mv=1e18 cp_sync=1e18 in_place=1e18 rewrite=1e18 rewrite_nosync=1e18
  size=$(stat -c %s "$file")
  cat "$file" > /dev/null  # into the page cache
  sync
  for i in 1 2 3; do
    rm -f "$work/copy.gguf"; sync
    t0=$(now); cp "$file" "$work/copy.gguf"; t1=$(now); cp=$(min "$cp" $((t1 - t0)))
    fresh_copy "$file"
    t0=$(now); cp "$file" "$work/tmp.gguf"; mv "$work/tmp.gguf" "$work/copy.gguf"; t1=$(now)
    cp_mv=$(min "$cp_mv" $((t1 - t0)))
    fresh_copy "$file"
    t0=$(now); cp "$file" "$work/tmp.gguf"; sync "$work/tmp.gguf"; mv "$work/tmp.gguf" "$work/copy.gguf"; t1=$(now)
    cp_sync=$(min "$cp_sync" $((t1 - t0)))
  done
  fresh_copy "$file"
  for i in 1 2 3; do  # same length, a different last letter each time
    t0=$(now); "$gguf" set "$work/copy.gguf" general.name "ggufkit edit benchmar$i" > /dev/null; t1=$(now)
    in_place=$(min "$in_place" $((t1 - t0)))
  done
  for i in 1 2 3; do
    fresh_copy "$file"
    t0=$(now); "$gguf" set --no-sync "$work/copy.gguf" general.name "a name long enough to move the header $i" > /dev/null
    t1=$(now); rewrite_nosync=$(min "$rewrite_nosync" $((t1 - t0)))
    fresh_copy "$file"
    t0=$(now); "$gguf" set "$work/copy.gguf" general.name "a name long enough to move the header $i" > /dev/null
    t1=$(now); rewrite=$(min "$rewrite" $((t1 - t0)))
  done
  awk -v l="$label" -v s="$size" -v c="$cp" -v cm="$cp_mv" -v cs="$cp_sync" -v i="$in_place" -v r="$rewrite" -v rn="$rewrite_nosync" 'BEGIN {
    printf "%-7s %6.2f GiB  in place           %7.3f s  vs cp                %7.3f s: %7.1fx faster\n", l, s / 2^30, i / 1e9, c / 1e9, c / i
    printf "%-7s %10s  rewrite --no-sync  %7.3f s  vs cp tmp; mv        %7.3f s: %7.2fx the time\n", "", "", rn / 1e9, cm / 1e9, rn / cm
    printf "%-7s %10s  rewrite (fsync)    %7.3f s  vs cp tmp; sync; mv  %7.3f s: %7.2fx the time\n", "", "", r / 1e9, cs / 1e9, r / cs }'
}

"$maker" "$work/dense.gguf" "$gib" --dense
"$maker" "$work/sparse.gguf" "$((gib * 4))"
echo "gguf set against cp: $(uname -sr), $(df -T "$work" | awk 'NR==2 { print $2 }') file system in $work"
run_case "dense" "$work/dense.gguf"
run_case "sparse" "$work/sparse.gguf"
