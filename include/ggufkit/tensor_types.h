// The ggml tensor type table: one table, used everywhere (reader checks, sizes, names, CLI parsing).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace ggufkit {

// Ids exactly as ggml's enum ggml_type (llama.cpp 80fb11ac). Gaps are ids ggml removed.
enum class TensorType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3,
  Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35,
  MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42,
};

// One past the largest id ggml defines (GGML_TYPE_COUNT).
inline constexpr uint32_t kTensorTypeIdLimit = 43;

enum class TypeStatus : uint8_t {
  supported,  // llama.cpp reads it
  removed,    // ggml defined this id once; files using it no longer load
};

struct TypeTraits {
  uint32_t id;
  std::string_view name;        // ggml's name: "f32", "q4_K", "iq4_xs", "mxfp4"...
  uint32_t block_size;          // elements per block (0 for removed ids)
  uint32_t block_bytes;         // bytes per block (0 for removed ids)
  bool quantized;
  TypeStatus status;
  std::string_view note;        // for removed ids: what it was and what replaced it

  double bits_per_weight() const {
    return block_size == 0 ? 0.0 : 8.0 * block_bytes / block_size;
  }
  TensorType type() const { return static_cast<TensorType>(id); }
};

// Every id 0..kTensorTypeIdLimit-1, removed ones included, in id order.
std::span<const TypeTraits> all_type_traits();

// nullptr for ids ggml never defined (>= kTensorTypeIdLimit).
const TypeTraits* find_type_traits(uint32_t id);
// For an id outside the table: a record named "unknown" with block size 0.
const TypeTraits& type_traits(TensorType type);
inline std::string_view type_name(TensorType type) { return type_traits(type).name; }

// Case-insensitive: "q4_k", "Q4_K" and "q4_K" all name Q4_K. Removed types are not parsed.
std::optional<TensorType> parse_tensor_type(std::string_view name);

// Bytes of ne0 elements of this type; nullopt when ne0 is not a multiple of the block size
// or the result would overflow.
std::optional<uint64_t> row_size(TensorType type, int64_t ne0);

}  // namespace ggufkit
