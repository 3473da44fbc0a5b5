// llama.cpp's llama_ftype table (include/llama.h) with the descriptions llama_model_ftype_name prints.
#include <algorithm>
#include <array>
#include <cctype>

#include "ggufkit/conventions.h"

namespace ggufkit {
namespace {

using T = TensorType;
constexpr std::optional<TensorType> kNone = std::nullopt;

// id, name, description, removed, default tensor type, the type whose name alone selects it
// (llama-quantize's aliases: "Q4_K" is Q4_K_M, "IQ2_S" is IQ2_M).
constexpr std::array<FileTypeInfo, 43> kFileTypes = {{
    {0, "ALL_F32", "all F32", false, T::F32, T::F32},
    {1, "MOSTLY_F16", "F16", false, T::F16, T::F16},
    {2, "MOSTLY_Q4_0", "Q4_0", false, T::Q4_0, T::Q4_0},
    {3, "MOSTLY_Q4_1", "Q4_1", false, T::Q4_1, T::Q4_1},
    {4, "MOSTLY_Q4_1_SOME_F16", "Q4_1, some F16 (removed)", true, kNone, kNone},
    {5, "MOSTLY_Q4_2", "Q4_2 (removed)", true, kNone, kNone},
    {6, "MOSTLY_Q4_3", "Q4_3 (removed)", true, kNone, kNone},
    {7, "MOSTLY_Q8_0", "Q8_0", false, T::Q8_0, T::Q8_0},
    {8, "MOSTLY_Q5_0", "Q5_0", false, T::Q5_0, T::Q5_0},
    {9, "MOSTLY_Q5_1", "Q5_1", false, T::Q5_1, T::Q5_1},
    {10, "MOSTLY_Q2_K", "Q2_K - Medium", false, T::Q2_K, T::Q2_K},
    {11, "MOSTLY_Q3_K_S", "Q3_K - Small", false, T::Q3_K, kNone},
    {12, "MOSTLY_Q3_K_M", "Q3_K - Medium", false, T::Q3_K, T::Q3_K},
    {13, "MOSTLY_Q3_K_L", "Q3_K - Large", false, T::Q3_K, kNone},
    {14, "MOSTLY_Q4_K_S", "Q4_K - Small", false, T::Q4_K, kNone},
    {15, "MOSTLY_Q4_K_M", "Q4_K - Medium", false, T::Q4_K, T::Q4_K},
    {16, "MOSTLY_Q5_K_S", "Q5_K - Small", false, T::Q5_K, kNone},
    {17, "MOSTLY_Q5_K_M", "Q5_K - Medium", false, T::Q5_K, T::Q5_K},
    {18, "MOSTLY_Q6_K", "Q6_K", false, T::Q6_K, T::Q6_K},
    {19, "MOSTLY_IQ2_XXS", "IQ2_XXS - 2.0625 bpw", false, T::IQ2_XXS, T::IQ2_XXS},
    {20, "MOSTLY_IQ2_XS", "IQ2_XS - 2.3125 bpw", false, T::IQ2_XS, T::IQ2_XS},
    {21, "MOSTLY_Q2_K_S", "Q2_K - Small", false, T::Q2_K, kNone},
    {22, "MOSTLY_IQ3_XS", "IQ3_XS - 3.3 bpw", false, T::IQ3_S, kNone},
    {23, "MOSTLY_IQ3_XXS", "IQ3_XXS - 3.0625 bpw", false, T::IQ3_XXS, T::IQ3_XXS},
    {24, "MOSTLY_IQ1_S", "IQ1_S - 1.5625 bpw", false, T::IQ1_S, T::IQ1_S},
    {25, "MOSTLY_IQ4_NL", "IQ4_NL - 4.5 bpw", false, T::IQ4_NL, T::IQ4_NL},
    {26, "MOSTLY_IQ3_S", "IQ3_S - 3.4375 bpw", false, T::IQ3_S, T::IQ3_S},
    {27, "MOSTLY_IQ3_M", "IQ3_S mix - 3.66 bpw", false, T::IQ3_S, kNone},
    {28, "MOSTLY_IQ2_S", "IQ2_S - 2.5 bpw", false, T::IQ2_XS, kNone},
    {29, "MOSTLY_IQ2_M", "IQ2_M - 2.7 bpw", false, T::IQ2_S, T::IQ2_S},
    {30, "MOSTLY_IQ4_XS", "IQ4_XS - 4.25 bpw", false, T::IQ4_XS, T::IQ4_XS},
    {31, "MOSTLY_IQ1_M", "IQ1_M - 1.75 bpw", false, T::IQ1_M, T::IQ1_M},
    {32, "MOSTLY_BF16", "BF16", false, T::BF16, T::BF16},
    {33, "MOSTLY_Q4_0_4_4", "Q4_0_4_4 (removed: use Q4_0)", true, kNone, kNone},
    {34, "MOSTLY_Q4_0_4_8", "Q4_0_4_8 (removed: use Q4_0)", true, kNone, kNone},
    {35, "MOSTLY_Q4_0_8_8", "Q4_0_8_8 (removed: use Q4_0)", true, kNone, kNone},
    {36, "MOSTLY_TQ1_0", "TQ1_0 - 1.69 bpw ternary", false, T::TQ1_0, T::TQ1_0},
    {37, "MOSTLY_TQ2_0", "TQ2_0 - 2.06 bpw ternary", false, T::TQ2_0, T::TQ2_0},
    {38, "MOSTLY_MXFP4_MOE", "MXFP4 MoE", false, T::MXFP4, T::MXFP4},
    {39, "MOSTLY_NVFP4", "NVFP4", false, T::NVFP4, T::NVFP4},
    {40, "MOSTLY_Q1_0", "Q1_0", false, T::Q1_0, T::Q1_0},
    {41, "MOSTLY_Q2_0", "Q2_0", false, T::Q2_0, T::Q2_0},
    {1024, "GUESSED", "guessed", false, kNone, kNone},
}};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const FileTypeInfo* find_file_type(uint32_t id) {
  for (const FileTypeInfo& f : kFileTypes) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

std::span<const FileTypeInfo> all_file_types() { return kFileTypes; }

std::optional<TensorType> file_type_default_type(uint32_t file_type) {
  const FileTypeInfo* f = find_file_type(file_type);
  return f ? f->default_type : std::nullopt;
}

std::optional<uint32_t> file_type_for_type(TensorType type) {
  for (const FileTypeInfo& f : kFileTypes) {
    if (f.selected_by == type) return f.id;
  }
  return std::nullopt;
}

std::string_view file_type_preset_name(const FileTypeInfo& file_type) {
  const std::string_view name = file_type.name;
  for (std::string_view prefix : {"MOSTLY_", "ALL_"}) {
    if (name.starts_with(prefix)) return name.substr(prefix.size());
  }
  return name;
}

std::optional<uint32_t> parse_file_type(std::string_view name) {
  const std::string n = upper(name);
  for (const FileTypeInfo& f : kFileTypes) {
    if (n == f.name || n == file_type_preset_name(f)) return f.id;
  }
  return std::nullopt;
}

}  // namespace ggufkit
