#!/usr/bin/env bash
# Installs the Debian 12 packages ggufkit needs, when missing:
#   scripts/install-deps.sh build   to build the library and the CLI (make, make demo, make install)
#   scripts/install-deps.sh test    also the tests, the sanitizer and fuzz build, the benchmarks and
#                                   the oracle's Node.js (make test, make bench)
# Checks with dpkg first (a fraction of a second when nothing is missing), runs apt-get only for
# what is missing, and only as root; otherwise prints the command to run.
set -euo pipefail
set_name=${1:-test}

build_packages=(cmake make g++ ninja-build pkg-config libcli11-dev libfmt-dev nlohmann-json3-dev libssl-dev libxxhash-dev
                libsimdjson-dev ca-certificates
                # remote files (src/remote/, GGUFKIT_HTTP=ON)
                libcurl4-openssl-dev
                # the Python package (make python, make install): pybind11 and the system Python's headers and numpy
                pybind11-dev python3-dev python3-numpy)
test_packages=(libgtest-dev libbenchmark-dev clang libclang-rt-14-dev lld bash-completion
               # gguf-py's scripts as test oracles (gguf_hash.py, gguf_convert_endian.py); hash benchmark references
               python3 python3-numpy python3-tqdm git openssl xxhash
               # the Python package's tests (pytest against gguf-py)
               python3-pytest
               # SentencePiece itself: spm_train, spm_encode, spm_export_vocab (gguf convert's tokenizer.model tests)
               sentencepiece
               # llama.cpp's convert_hf_to_gguf.py as gguf convert's oracle (tests/convert/reference_convert.py);
               # about 610 MB installed, most of it torch
               python3-torch python3-sentencepiece
               # a real web server for the remote tests (tests/remote/)
               nginx-light)
case "$set_name" in
  build) packages=("${build_packages[@]}") ;;
  test)
    packages=("${build_packages[@]}" "${test_packages[@]}")
    # The oracle (llama.cpp from npm) needs node and npm; any installed node will do.
    command -v node >/dev/null 2>&1 || packages+=(nodejs)
    command -v npm >/dev/null 2>&1 || packages+=(npm)
    ;;
  *) echo "install-deps: unknown set '$set_name' (build or test)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || missing+=("$p")
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
