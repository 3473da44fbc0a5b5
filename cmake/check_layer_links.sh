#!/bin/bash
# The layers of docs/library.md, enforced at link level: each layer's object files may use only
# symbols defined by that layer or a layer below it. An upward call fails the build even when it
# gets past cmake/CheckLayers.cmake (a declaration written out by hand instead of an #include).
# Symbols no layer defines (the C++ library, fmt, libc) are not ours and are not checked.
#
#   check_layer_links.sh STAMP NM LAYER=OBJECT:OBJECT... ...   (layers lowest first)
#
# Exit status 0 and STAMP touched when every layer links only downward; 1 and one line per
# upward use (the object file, its layer, the symbol demangled and the layer that defines it).
set -euo pipefail
export LC_ALL=C  # one collation for sort, comm and join
stamp=$1 nm=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

layers=()
for arg; do
  layer=${arg%%=*}
  IFS=: read -ra objects <<< "${arg#*=}"
  layers+=("$layer")
  # The symbols it defines, and (object, symbol) for each it uses.
  "$nm" -P --defined-only "${objects[@]}" | awk 'NF >= 2 && $1 !~ /:$/ { print $1 }' |
    sort -u > "$work/defines.$layer"
  "$nm" -P -A -u "${objects[@]}" | awk '{ sub(/:$/, "", $1); print $2, $1 }' | sort -u > "$work/uses.$layer"
done

status=0
below="$work/below"
: > "$below"
for i in "${!layers[@]}"; do
  layer=${layers[$i]}
  sort -u "$below" "$work/defines.$layer" -o "$below"
  cp "$below" "$work/excluded"
  for upper in "${layers[@]:$((i + 1))}"; do
    # Used here, defined by `upper` and by nothing at or below this layer (nor by a layer between).
    comm -23 "$work/defines.$upper" "$work/excluded" > "$work/candidates"
    sort -u "$work/excluded" "$work/defines.$upper" -o "$work/excluded"
    join "$work/uses.$layer" "$work/candidates" |
      while read -r symbol object; do
        # CMake's object files are <dir>/./src/<layer>/<file>.cpp.o: named by their source.
        if [[ $object == */./* ]]; then
          object=${object#*/./}
          object=${object%.o}
        fi
        echo "layer link: $object ($layer) uses $(c++filt "$symbol"), defined by the layer $upper above it"
      done > "$work/found"
    if [[ -s "$work/found" ]]; then
      cat "$work/found" >&2
      status=1
    fi
  done
done
if [[ $status == 0 ]]; then
  touch "$stamp"
fi
exit $status
