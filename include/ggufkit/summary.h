// What `gguf info` shows: parameter count, bytes, bits per weight and the type histogram.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "ggufkit/reader.h"

namespace ggufkit {

struct TypeUsage {
  TensorType type;
  uint64_t tensors = 0;
  uint64_t elements = 0;
  uint64_t bytes = 0;
};

struct FileSummary {
  uint64_t parameters = 0;        // elements of all tensors
  uint64_t tensor_bytes = 0;      // bytes of all tensors, without padding
  double bits_per_weight = 0.0;   // tensor_bytes * 8 / parameters
  std::vector<TypeUsage> types;   // by elements, most first; ties by type id
};

// Adds up tensors one at a time; every summarize() is built on it (a split model's is in split.h).
class SummaryBuilder {
 public:
  void add(const TensorInfo& t);
  FileSummary finish() &&;

 private:
  FileSummary summary_;
  std::map<uint32_t, TypeUsage> by_type_;
};

FileSummary summarize(const GgufFile& file);

// One block of the model (the tensors named blk.N.*), or the tensors outside the blocks (the
// embedding, the output and its norm...): what `gguf info --layers` shows, since files mixing
// types by layer are the norm.
struct LayerUsage {
  std::optional<uint32_t> layer;  // N for blk.N.*; nullopt for the tensors outside the blocks
  FileSummary summary;            // its tensors' parameters, bytes, bits per weight and types
};
// The blocks in numeric order, then the tensors outside them (when there are any).
std::vector<LayerUsage> summarize_layers(std::span<const TensorInfo* const> tensors);
std::vector<LayerUsage> summarize_layers(const GgufFile& file);

}  // namespace ggufkit
