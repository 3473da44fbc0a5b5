// The llama-quantize options `gguf quantize` and `gguf convert --outtype PRESET` share: the type
// overrides, the metadata overrides and the importance matrix (not the target, --pure, or what
// concerns a GGUF input: --keep-split, --allow-requantize).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "ggufkit/imatrix.h"
#include "ggufkit/quantize.h"

namespace gguf_cli {

struct QuantizeFlags {
  bool leave_output_tensor = false;
  std::string output_tensor_type, token_embedding_type, imatrix;
  // --tensor-type PATTERN=TYPE and --tensor-type-file FILE in command-line order (file: true).
  std::vector<std::pair<bool, std::string>> tensor_type_sources;
  std::vector<std::string> override_kv, include_weights, exclude_weights;
  // Whether any of them was given.
  bool any() const {
    return leave_output_tensor || !output_tensor_type.empty() || !token_embedding_type.empty() || !imatrix.empty() ||
           !tensor_type_sources.empty() || !override_kv.empty() || !include_weights.empty() || !exclude_weights.empty();
  }
};

// Registers --output-tensor-type ... --exclude-weights on `cmd`.
void add_quantize_flags(CLI::App& cmd, const std::shared_ptr<QuantizeFlags>& flags);
// Sets `options` from them, loading --imatrix into `importance` (which must outlive `options`); on a
// bad value prints one line on stderr and returns false.
bool apply_quantize_flags(const QuantizeFlags& flags, ggufkit::QuantizeOptions& options,
                          ggufkit::ImportanceMatrix& importance, std::string_view verb);

}  // namespace gguf_cli
