// What `gguf info` shows: parameter count, bytes, bits per weight and the type histogram.
#pragma once

#include <cstdint>
#include <map>
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

}  // namespace ggufkit
