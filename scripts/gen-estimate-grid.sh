#!/usr/bin/env bash
# Regenerates tests/estimate/data/oracle_grid.json: llama.cpp's own memory figures (the oracle's
# libllama with no_alloc, tests/estimate/memory_oracle.h) for every model shape and context of the
# grid in tests/estimate/estimate_oracle_main.cpp. estimate_grid_test checks ggufkit's estimate
# against every row without the oracle. About 20 s.
#
#   scripts/gen-estimate-grid.sh [BUILD_DIR]   (default build/; builds estimate-oracle first)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
cmake --build "$build" --target estimate-oracle >/dev/null
"$build/tests/estimate/estimate-oracle" --grid "$root/tests/estimate/data/oracle_grid.json" 2> >(grep -v '^load_backend' >&2)
echo "wrote $root/tests/estimate/data/oracle_grid.json"
