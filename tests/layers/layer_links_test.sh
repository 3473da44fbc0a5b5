#!/bin/bash
# cmake/check_layer_links.sh, the build step that makes an upward call a build error: objects that
# use only their own layer, the layers below and outside libraries pass; a use of a symbol only a
# layer above defines fails with exit status 1 and one line naming the object, the symbol and the
# layer that defines it.
#   layer_links_test.sh SOURCE_DIR CXX NM
set -u
src=$(realpath "${1:?usage: layer_links_test.sh SOURCE_DIR CXX NM}")
cxx=${2:?} nm=${3:?}
check="$src/cmake/check_layer_links.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 2
failures=0

# Three layers' objects: low uses mid's summarize (an upward call, declared by hand so that no
# #include shows it) and std::string; mid uses low; high defines an inline function low also
# instantiates (defined in both: not an upward use).
cat > low.cpp <<'CPP'
#include <string>
namespace ggufkit { int summarize(int); inline int shared_inline(int x) { return x + 1; }
int low_entry(int x) { return summarize(x) + shared_inline(x) + static_cast<int>(std::to_string(x).size()); }
int low_helper(int x) { return x * 2; } }
CPP
cat > low_ok.cpp <<'CPP'
namespace ggufkit { inline int shared_inline(int x) { return x + 1; } int low_helper(int x) { return x * 2; }
int low_entry(int x) { return shared_inline(x); } }
CPP
cat > mid.cpp <<'CPP'
namespace ggufkit { int low_helper(int); int summarize(int x) { return low_helper(x); } }
CPP
cat > high.cpp <<'CPP'
namespace ggufkit { inline int shared_inline(int x) { return x + 1; } int summarize(int);
int high_entry(int x) { return shared_inline(summarize(x)); } }
CPP
for f in low low_ok mid high; do
  "$cxx" -std=c++20 -O0 -c "$f.cpp" -o "$f.o" || exit 2
done

expect() {  # expect NAME STATUS STDERR LAYER=OBJECTS...
  local name=$1 want_status=$2 want_err=$3
  shift 3
  rm -f stamp
  bash "$check" stamp "$nm" "$@" > out 2> err
  local status=$?
  local stamped=no
  [[ -e stamp ]] && stamped=yes
  local want_stamp=no
  [[ $want_status == 0 ]] && want_stamp=yes
  if [[ $status != "$want_status" || -s out || "$(cat err)" != "$want_err" || $stamped != "$want_stamp" ]]; then
    echo "FAIL $name: status $status (want $want_status), stamp $stamped (want $want_stamp)"
    echo "--- stdout:"; cat out
    echo "--- stderr:"; cat err
    echo "--- wanted stderr:"; printf '%s\n' "$want_err"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

expect "downward uses, shared inline functions and std:: pass" 0 "" \
  format=low_ok.o meta=mid.o check=high.o
expect "a call to the layer above fails" 1 \
  "layer link: low.o (format) uses ggufkit::summarize(int), defined by the layer meta above it" \
  format=low.o meta=mid.o check=high.o
expect "the same objects in the other order pass" 0 "" \
  format=mid.o:low_ok.o meta=low.o check=high.o
expect "every upward use is listed, with the lowest layer above that defines it" 1 \
  "layer link: high.o (format) uses ggufkit::summarize(int), defined by the layer meta above it
layer link: mid.o (meta) uses ggufkit::low_helper(int), defined by the layer check above it" \
  format=high.o meta=mid.o check=low.o

if ((failures > 0)); then
  echo "$failures case(s) failed"
  exit 1
fi
echo "all cases passed"
