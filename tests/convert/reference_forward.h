// A plain forward pass of Hugging Face's LlamaForCausalLM (transformers' modeling_llama.py), in
// float64, from the weights in PyTorch layout: the yardstick llama.cpp's logits are measured against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tiny_checkpoint.h"

namespace ggufkit::test {

// The logits of every position of `tokens` (processed as one causal sequence starting at position
// 0): result[position][token id].
std::vector<std::vector<double>> reference_llama_logits(const TinyLlama& model, const std::vector<int32_t>& tokens);

// How far `actual` is from `reference`.
struct LogitsDistance {
  double max_abs = 0;             // max |actual - reference|
  double max_abs_reference = 0;   // max |reference|
  double scaled = 0;              // max_abs / max_abs_reference
  double max_relative = 0;        // max |actual - reference| / |reference| over |reference| >= floor
  int64_t values = 0;
};
// `relative_floor_fraction`: values whose |reference| is below that fraction of max |reference| are
// left out of max_relative (their relative error measures rounding noise, not agreement).
LogitsDistance logits_distance(const std::vector<float>& actual, const std::vector<double>& reference,
                               double relative_floor_fraction = 0.01);
std::string describe(const LogitsDistance& d);

}  // namespace ggufkit::test
