// Comparing two GGUF files (metadata, tensor directory, tensor data).
//
// What counts as a difference is the content a model loader sees: metadata keys and values, tensor
// names, types, shapes and (with DiffOptions::data) bytes. The layout does not: metadata and tensor
// order, tensor offsets, padding, the data offset, the GGUF version (v2 and v3 share one layout) and
// the alignment. A file re-aligned to 64 bytes, with the same tensors and the same bytes, is equal;
// its layout differences are reported in DiffResult::layout, for information. That is why
// general.alignment is not compared as a metadata key: it is reported as the layout's alignment.
//
// The result holds views (keys, values, tensor infos) into the two files: they must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/quant.h"
#include "ggufkit/reader.h"
#include "ggufkit/split.h"
#include "ggufkit/value.h"

namespace ggufkit {

struct DiffOptions {
  // Compare tensor bytes, and the dequantized values of tensors whose bytes differ.
  bool data = false;
  // Threads for the data comparison (0: one per core). The figures do not depend on it.
  Threads threads = kAllCores;
  // How many differing elements of a metadata array are recorded (the count is always exact).
  size_t max_shown_elements = 5;
  // Elements dequantized at a time per thread and file: bounds the memory the data comparison uses
  // (2 * 4 bytes * segment_elements per thread). Rounded up to whole blocks of both types.
  size_t segment_elements = size_t{1} << 16;
  // Called after each tensor whose data was compared: (tensors done, tensors to compare).
  std::function<void(size_t, size_t)> progress;
};

enum class Change : uint8_t { added, removed, changed };
std::string_view change_name(Change change);  // "added", "removed", "changed"

// Layout: never a content difference (see above).
struct LayoutDiff {
  uint32_t version_a = 0, version_b = 0;
  uint32_t alignment_a = 0, alignment_b = 0;
  uint32_t shards_a = 1, shards_b = 1;  // files a split model is made of (diff_models)
  // The keys (tensors) present in both files do not come in the same order.
  bool metadata_order_differs = false;
  bool tensor_order_differs = false;

  bool differs() const {
    return version_a != version_b || alignment_a != alignment_b || shards_a != shards_b || metadata_order_differs ||
           tensor_order_differs;
  }
};

// One element of a metadata array that differs. An element past the end of one array has no
// value on that side.
struct ElementDiff {
  uint64_t index = 0;
  std::optional<ValueView> a, b;
};

// Element-wise comparison of two arrays with the same element type.
struct ArrayDiff {
  uint64_t length_a = 0, length_b = 0;
  // Elements that differ among the first min(length_a, length_b) (compared byte for byte).
  uint64_t differing = 0;
  // The first differing elements in index order, then the first elements past the shorter
  // array's end; at most DiffOptions::max_shown_elements in all.
  std::vector<ElementDiff> shown;
};

struct MetadataDiff {
  std::string_view key;
  Change change = Change::changed;
  std::optional<ValueView> a, b;  // a absent when added, b absent when removed
  // The value type differs (for arrays: the element type).
  bool type_changed = false;
  // Two arrays of the same element type, compared element by element.
  std::optional<ArrayDiff> elements;
};

struct TensorDiff {
  std::string_view name;
  Change change = Change::changed;
  const TensorInfo* a = nullptr;  // null when added
  const TensorInfo* b = nullptr;  // null when removed
  bool type_changed = false;
  bool shape_changed = false;  // dimensions (or their number) differ
};

// Figures over the dequantized (float32) values, accumulated in double.
struct ValueStats {
  uint64_t elements = 0;
  uint64_t differing = 0;       // elements whose float values are not equal (NaN never equals)
  uint64_t non_finite = 0;      // elements where either side is NaN or infinite: left out of the figures below
  double max_abs_diff = 0;      // max |a - b|
  double rmse = 0;              // sqrt(mean((a - b)^2))
  // dot(a, b) / (|a| |b|); 1 when both are all zeros, 0 when only one is.
  double cosine = 1;
};

// The data of a tensor present in both files with the same dimensions, when it is not the same bytes.
struct DataDiff {
  std::string_view name;
  const TensorInfo* a = nullptr;
  const TensorInfo* b = nullptr;
  // Present when both types can be dequantized; otherwise `note` says why not.
  std::optional<ValueStats> values;
  std::string note;
};

struct DiffCounts {
  size_t keys_a = 0, keys_b = 0;          // general.alignment left out (it is layout)
  size_t tensors_a = 0, tensors_b = 0;
  // With DiffOptions::data: tensors present in both with the same dimensions, and how many of
  // them hold the same type and bytes.
  size_t data_compared = 0;
  size_t data_bytes_equal = 0;
};

struct DiffResult {
  bool data_compared = false;              // DiffOptions::data was set
  LayoutDiff layout;
  std::vector<MetadataDiff> metadata;      // sorted by key (bytewise)
  std::vector<TensorDiff> tensors;         // added, removed, type or shape changed; sorted by name
  std::vector<DataDiff> data;              // tensors whose data differ; sorted by name
  DiffCounts counts;

  // No content difference (layout differences do not count).
  bool identical() const { return metadata.empty() && tensors.empty() && data.empty(); }
};

// Compares A with B. Fails only when tensor data cannot be read as its type claims (a validated
// file never does that). Every key is compared but general.alignment.
Expected<DiffResult> diff_files(const GgufFile& a, const GgufFile& b, const DiffOptions& options = {});
// Compares two models, either of which may be split (SplitModel opens plain files too): the
// metadata of their first shards, the tensors of all their shards. How a model is sharded is
// layout: the split.no, split.count and split.tensors.count keys are not compared, and the number
// of shards is reported in LayoutDiff. A split model equals the merged file.
Expected<DiffResult> diff_models(const SplitModel& a, const SplitModel& b, const DiffOptions& options = {});

// The building blocks, for callers comparing single values.
// Element-wise comparison of two arrays (of any, possibly different, lengths); nullopt when their
// element types differ.
std::optional<ArrayDiff> diff_arrays(const ArrayView& a, const ArrayView& b, size_t max_shown);
// Figures of two float vectors of one length, as diff_files computes them per segment.
ValueStats compare_values(std::span<const float> a, std::span<const float> b);

}  // namespace ggufkit
