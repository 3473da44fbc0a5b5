// What the forward-pass tests share: llama.cpp's GGUF layout of a TinyLlama written by hand (as
// convert_hf_to_gguf.py lays it out), test token sequences, and node-llama-cpp's next tokens.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "test_support.h"
#include "tiny_checkpoint.h"

namespace ggufkit::test {

// convert_hf_to_gguf.py's LlamaModel.permute on a q or k weight [n_heads * head_dim, in_features]:
// within each head, rows (first half i, second half i) become rows (2i, 2i + 1), the adjacent pairs
// llama.cpp's normal rope rotates. n_heads is the kv head count for k.
std::vector<float> permute_rope_rows(const std::vector<float>& weight, int64_t n_heads, int64_t head_dim,
                                     int64_t in_features);

// Writes `model` as the F32 llama GGUF llama.cpp loads: token_embd.weight, blk.N.attn_q.weight
// (permuted), ..., output_norm.weight, output.weight (absent when tied), llama.* keys, and the
// tokenizer.* keys of `vocab_gguf` (a llama.cpp vocabulary file). Empty string, or what went wrong.
std::string write_llama_gguf_by_hand(const TinyLlama& model, const std::filesystem::path& vocab_gguf,
                                     const std::filesystem::path& out);

// The llama 2 vocabulary in the shared corpus (vocab/ggml-vocab-llama-spm.gguf).
std::filesystem::path llama_spm_vocab_path();

// A BOS token then `count - 1` pseudo-random ids of the 32000-token vocabulary (not the 3 specials).
std::vector<int32_t> test_tokens(size_t count, uint32_t seed);

// The node-llama-cpp run of llama_next_tokens.mjs: exit status (0 ran, 1 llama.cpp failed,
// 3 node-llama-cpp missing, -1 could not start) and its output.
struct NextTokens {
  NodeRun run;
  std::vector<int32_t> greedy;  // parsed from the output: the greedy next token at every position
  std::vector<double> top_probability;  // the probability of that token
};
// Expects every position's logits within `tolerance` of the reference (max|diff|/max|ref| and the
// per-value relative error) and prints the worst of both, labelled.
void expect_logits_near_reference(const std::vector<std::vector<float>>& actual,
                                  const std::vector<std::vector<double>>& reference, double tolerance,
                                  const std::string& label);

NextTokens run_node_next_tokens(const std::filesystem::path& model, const std::vector<int32_t>& tokens);

}  // namespace ggufkit::test
