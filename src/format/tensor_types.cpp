#include "ggufkit/tensor_types.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>

namespace ggufkit {
namespace {

constexpr TypeStatus S = TypeStatus::supported;
constexpr TypeStatus R = TypeStatus::removed;

// Block sizes and bytes per block as ggml's type_traits give them (llama.cpp 80fb11ac).
constexpr std::array<TypeTraits, kTensorTypeIdLimit> kTypes = {{
    {0, "f32", 1, 4, false, S, {}},
    {1, "f16", 1, 2, false, S, {}},
    {2, "q4_0", 32, 18, true, S, {}},
    {3, "q4_1", 32, 20, true, S, {}},
    {4, "q4_2", 0, 0, true, R, "Q4_2 was removed from ggml in 2023"},
    {5, "q4_3", 0, 0, true, R, "Q4_3 was removed from ggml in 2023"},
    {6, "q5_0", 32, 22, true, S, {}},
    {7, "q5_1", 32, 24, true, S, {}},
    {8, "q8_0", 32, 34, true, S, {}},
    {9, "q8_1", 32, 36, true, S, {}},
    {10, "q2_K", 256, 84, true, S, {}},
    {11, "q3_K", 256, 110, true, S, {}},
    {12, "q4_K", 256, 144, true, S, {}},
    {13, "q5_K", 256, 176, true, S, {}},
    {14, "q6_K", 256, 210, true, S, {}},
    {15, "q8_K", 256, 292, true, S, {}},
    {16, "iq2_xxs", 256, 66, true, S, {}},
    {17, "iq2_xs", 256, 74, true, S, {}},
    {18, "iq3_xxs", 256, 98, true, S, {}},
    {19, "iq1_s", 256, 50, true, S, {}},
    {20, "iq4_nl", 32, 18, true, S, {}},
    {21, "iq3_s", 256, 110, true, S, {}},
    {22, "iq2_s", 256, 82, true, S, {}},
    {23, "iq4_xs", 256, 136, true, S, {}},
    {24, "i8", 1, 1, false, S, {}},
    {25, "i16", 1, 2, false, S, {}},
    {26, "i32", 1, 4, false, S, {}},
    {27, "i64", 1, 8, false, S, {}},
    {28, "f64", 1, 8, false, S, {}},
    {29, "iq1_m", 256, 56, true, S, {}},
    {30, "bf16", 1, 2, false, S, {}},
    {31, "q4_0_4_4", 0, 0, true, R, "Q4_0_4_4 was removed from GGUF files: use Q4_0 (repacked at load time)"},
    {32, "q4_0_4_8", 0, 0, true, R, "Q4_0_4_8 was removed from GGUF files: use Q4_0 (repacked at load time)"},
    {33, "q4_0_8_8", 0, 0, true, R, "Q4_0_8_8 was removed from GGUF files: use Q4_0 (repacked at load time)"},
    {34, "tq1_0", 256, 54, true, S, {}},
    {35, "tq2_0", 256, 66, true, S, {}},
    {36, "iq4_nl_4_4", 0, 0, true, R, "IQ4_NL_4_4 was removed from GGUF files: use IQ4_NL (repacked at load time)"},
    {37, "iq4_nl_4_8", 0, 0, true, R, "IQ4_NL_4_8 was removed from GGUF files: use IQ4_NL (repacked at load time)"},
    {38, "iq4_nl_8_8", 0, 0, true, R, "IQ4_NL_8_8 was removed from GGUF files: use IQ4_NL (repacked at load time)"},
    {39, "mxfp4", 32, 17, true, S, {}},
    {40, "nvfp4", 64, 36, true, S, {}},
    {41, "q1_0", 128, 18, true, S, {}},
    {42, "q2_0", 64, 18, true, S, {}},
}};

constexpr bool ids_in_order() {
  for (uint32_t i = 0; i < kTypes.size(); ++i) {
    if (kTypes[i].id != i) return false;
  }
  return true;
}
static_assert(ids_in_order(), "the type table is indexed by id");

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::span<const TypeTraits> all_type_traits() { return kTypes; }

const TypeTraits* find_type_traits(uint32_t id) { return id < kTypes.size() ? &kTypes[id] : nullptr; }

const TypeTraits& type_traits(TensorType type) {
  // An id outside the enum (a cast from a bad number) gets a record that matches nothing.
  static constexpr TypeTraits kUnknown{kTensorTypeIdLimit, "unknown", 0, 0, false, TypeStatus::removed,
                                       "not a ggml type id"};
  const TypeTraits* t = find_type_traits(static_cast<uint32_t>(type));
  return t ? *t : kUnknown;
}

std::optional<TensorType> parse_tensor_type(std::string_view name) {
  for (const TypeTraits& t : kTypes) {
    if (t.status == TypeStatus::supported && iequals(t.name, name)) return t.type();
  }
  return std::nullopt;
}

std::optional<uint64_t> row_size(TensorType type, int64_t ne0) {
  const TypeTraits& t = type_traits(type);
  if (t.block_size == 0 || ne0 < 0 || ne0 % t.block_size != 0) return std::nullopt;
  const uint64_t blocks = static_cast<uint64_t>(ne0) / t.block_size;
  if (blocks > std::numeric_limits<uint64_t>::max() / t.block_bytes) return std::nullopt;
  return blocks * t.block_bytes;
}

}  // namespace ggufkit
