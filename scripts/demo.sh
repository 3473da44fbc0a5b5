#!/usr/bin/env bash
# The main job on the sample model shipped in samples/: look inside it, then dump it.
set -euo pipefail
gguf=${1:-build/gguf}
sample=${2:-samples/tiny-llama-f16.gguf}
echo "\$ gguf info $sample"
"$gguf" info "$sample"
echo
echo "\$ gguf dump $sample"
"$gguf" dump "$sample"
echo
echo "\$ gguf dump --json --no-tensors $sample | head -c 400"
"$gguf" dump --json --no-tensors "$sample" | head -c 400
echo
