// Importance matrices: llama-imatrix's per-weight activation statistics, which steer the
// low-bit quantizers (and are required by IQ1/IQ2/IQ3_XXS). Both of llama.cpp's file forms are
// read: the GGUF form ("<weight>.in_sum2" and "<weight>.counts" f32 tensors plus imatrix.* keys)
// and the legacy .dat form. The values handed to the quantizers are the ones llama-quantize
// computes from them (sums divided by counts, per expert).
//
// Files are untrusted input: sizes and counts are checked before anything is allocated.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ggufkit/error.h"

namespace ggufkit {

struct ImportanceEntry {
  std::string name;           // the weight's tensor name, e.g. "blk.0.attn_q.weight"
  std::vector<float> values;  // ne[0] weights per expert (ne[0] * n_expert for expert tensors)
};

struct ImportanceMatrix {
  std::vector<ImportanceEntry> entries;  // sorted by name, names unique
  std::vector<std::string> datasets;     // the texts it was computed on, when the file names them
  uint32_t chunk_count = 0;              // chunks it was computed on (0 when the file does not say)
  uint32_t chunk_size = 0;               // tokens per chunk (GGUF form only; 0 for the legacy form)
  bool legacy = false;                   // read from the .dat form

  // The entry for a weight, or nullptr.
  const ImportanceEntry* find(std::string_view name) const;
};

// The metadata keys of the GGUF form (llama.cpp's LLM_KV_IMATRIX_*). llama-quantize refuses a GGUF
// importance matrix that lacks any of the three.
inline constexpr std::string_view kImatrixDatasetsKey = "imatrix.datasets";
inline constexpr std::string_view kImatrixChunkCountKey = "imatrix.chunk_count";
inline constexpr std::string_view kImatrixChunkSizeKey = "imatrix.chunk_size";

// Reads either form (a GGUF file is recognised by its magic).
//
// Where llama.cpp's loader is lenient and we are not: a partial trailer of a legacy file (chunk
// count or dataset name cut short), a negative legacy chunk count or dataset-name length, counts
// that are negative, not finite or not a divisor of the sums' size, and imatrix.chunk_count or
// imatrix.chunk_size of another type than uint32 (llama.cpp asserts) are errors.
// As llama.cpp: a legacy name repeated keeps its last entry; legacy names and the dataset name end
// at their first NUL byte; bytes after the legacy trailer are ignored; an imatrix.datasets that is
// not an array of strings is ignored.
Expected<ImportanceMatrix> load_importance_matrix(const std::filesystem::path& path);
// The same from bytes already in memory (an embedded or downloaded matrix).
Expected<ImportanceMatrix> parse_importance_matrix(std::span<const std::byte> bytes);

// llama-quantize's --exclude-weights: drops the entries whose name contains any of `parts`.
void exclude_importance_entries(ImportanceMatrix& matrix, std::span<const std::string> parts);
// llama-quantize's --include-weights: keeps only the entries whose name contains one of `parts`.
// As llama-quantize, an empty `parts` keeps everything (the option was not given).
void include_importance_entries(ImportanceMatrix& matrix, std::span<const std::string> parts);

}  // namespace ggufkit
