#!/usr/bin/env bash
# Installs the Debian 12 packages ggufkit needs to build, test and benchmark, when missing.
# Runs apt-get only for what is missing, and only as root; otherwise prints the command to run.
set -euo pipefail

packages=(cmake make g++ pkg-config libcli11-dev libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev
          libbenchmark-dev clang libclang-rt-14-dev ca-certificates)
# The oracle (llama.cpp from npm) needs node and npm; any installed node will do.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "ggufkit needs: ${missing[*]}" >&2
  echo "run: sudo apt-get install -y ${missing[*]}" >&2
  exit 2
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
