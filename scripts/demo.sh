#!/usr/bin/env bash
# `make demo`: the job ggufkit exists for, end to end, on the sample model in samples/:
# look inside, validate, quantize, set a chat template, diff, hash and verify, split and merge back,
# extract a tensor. Each step is printed as the command a user would type, then its real output
# (long outputs shortened). Works in a temporary directory, removed at the end.
#   scripts/demo.sh [GGUF_BINARY] [SAMPLE]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
gguf=$(realpath "${1:-$root/build/gguf}")
sample=$(realpath "${2:-$root/samples/tiny-llama-f16.gguf}")
[[ -x "$gguf" ]] || { echo "demo: no gguf binary at $gguf (run make)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ggufkit-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
cp "$sample" model-f16.gguf

bold=$'\e[1m' dim=$'\e[2m' reset=$'\e[0m'
[[ -t 1 ]] || bold='' dim='' reset=''
step=0

# say TEXT: a step's heading.
say() {
  step=$((step + 1))
  printf '\n%s%d. %s%s\n' "$bold" "$step" "$1" "$reset"
}
# run [-n LINES] [-x STATUS] CMD...: prints the command as typed, then its output, at most LINES
# lines (default 14). The command must exit with STATUS (default 0); stderr (progress) is shown
# only when it does not.
run() {
  local lines=14 expect=0
  while [[ $1 == -n || $1 == -x ]]; do
    [[ $1 == -n ]] && lines=$2
    [[ $1 == -x ]] && expect=$2
    shift 2
  done
  local shown=("$@")
  [[ ${shown[0]} == "$gguf" ]] && shown[0]=gguf
  printf '%s$ %s%s\n' "$bold" "${shown[*]}" "$reset"
  local rc=0
  "$@" > out.txt 2> err.txt || rc=$?
  local total
  total=$(wc -l < out.txt)
  head -n "$lines" out.txt
  (( total > lines )) && printf '%s  ... (%d more lines)%s\n' "$dim" $((total - lines)) "$reset"
  if [[ $rc -ne $expect ]]; then
    cat err.txt >&2
    echo "demo: '${shown[*]}' exited with $rc (expected $expect)" >&2
    exit 1
  fi
  rm -f out.txt err.txt
}

echo "${bold}ggufkit demo${reset}: the sample model $(basename "$sample") ($(stat -c %s "$sample") bytes), in $work"

say "Look inside: format, model, size, tensor types, hyperparameters, tokenizer"
run -n 20 "$gguf" info model-f16.gguf

say "Validate it as an untrusted download: structure, metadata, architecture, tokenizer (exit 0: no errors)"
run "$gguf" check model-f16.gguf

say "Quantize to Q4_K_M with llama-quantize's rules (byte-identical output); tensors whose rows are not a multiple of 256 fall back as llama-quantize does"
run "$gguf" quantize model-f16.gguf model-q4_k_m.gguf Q4_K_M
run -n 12 "$gguf" info model-q4_k_m.gguf

say "Set a chat template from a file, into a new file (tensors are never touched)"
printf '%s' '{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}' > chat.jinja
run "$gguf" set model-q4_k_m.gguf tokenizer.chat_template --from-file chat.jinja -o model-chat.gguf
run "$gguf" get model-chat.gguf tokenizer.chat_template
echo

say "Diff the original and the edited file (exit 1: they differ)"
run -x 1 "$gguf" diff model-q4_k_m.gguf model-chat.gguf

say "Hash every tensor and the file into a manifest, then verify the file against it"
run -n 6 "$gguf" hash model-chat.gguf
"$gguf" hash model-chat.gguf > model-chat.manifest
run "$gguf" hash model-chat.gguf --check model-chat.manifest

say "Split into shards of at most 50 KB (as llama-gguf-split), merge them back, compare the bytes"
mkdir parts
run "$gguf" split model-chat.gguf parts/model --max-size 50K
run "$gguf" merge parts/model-00001-of-00003.gguf merged.gguf
run cmp merged.gguf model-chat.gguf
echo "merged.gguf and model-chat.gguf are byte-identical"

say "Extract one tensor, dequantized, as a NumPy .npy file"
run "$gguf" extract model-chat.gguf token_embd.weight -o token_embd.npy
printf '%s$ head -c 128 token_embd.npy | tail -c +11%s\n' "$bold" "$reset"
head -c 128 token_embd.npy | tail -c +11 | tr -d '\0' | sed 's/ *$//'
echo "($(stat -c %s token_embd.npy) bytes: float32 values, NumPy shape = ggml's reversed)"

echo
echo "${bold}Shown${reset}: info, check, quantize, set, get, diff, hash, split, merge and extract on the sample (the temporary files are removed)." \
     "Next: README.md ('The CLI'), docs/cli.md, and 'gguf --help' / 'gguf VERB --help'; 'make install' puts gguf, its man page and completion in /usr/local."
