// llama.cpp's llama_ftype table (include/llama.h) with the descriptions llama_model_ftype_name prints.
#include <algorithm>
#include <array>
#include <cctype>

#include "ggufkit/conventions.h"

namespace ggufkit {
namespace {

constexpr std::array<FileTypeInfo, 43> kFileTypes = {{
    {0, "ALL_F32", "all F32", false},
    {1, "MOSTLY_F16", "F16", false},
    {2, "MOSTLY_Q4_0", "Q4_0", false},
    {3, "MOSTLY_Q4_1", "Q4_1", false},
    {4, "MOSTLY_Q4_1_SOME_F16", "Q4_1, some F16 (removed)", true},
    {5, "MOSTLY_Q4_2", "Q4_2 (removed)", true},
    {6, "MOSTLY_Q4_3", "Q4_3 (removed)", true},
    {7, "MOSTLY_Q8_0", "Q8_0", false},
    {8, "MOSTLY_Q5_0", "Q5_0", false},
    {9, "MOSTLY_Q5_1", "Q5_1", false},
    {10, "MOSTLY_Q2_K", "Q2_K - Medium", false},
    {11, "MOSTLY_Q3_K_S", "Q3_K - Small", false},
    {12, "MOSTLY_Q3_K_M", "Q3_K - Medium", false},
    {13, "MOSTLY_Q3_K_L", "Q3_K - Large", false},
    {14, "MOSTLY_Q4_K_S", "Q4_K - Small", false},
    {15, "MOSTLY_Q4_K_M", "Q4_K - Medium", false},
    {16, "MOSTLY_Q5_K_S", "Q5_K - Small", false},
    {17, "MOSTLY_Q5_K_M", "Q5_K - Medium", false},
    {18, "MOSTLY_Q6_K", "Q6_K", false},
    {19, "MOSTLY_IQ2_XXS", "IQ2_XXS - 2.0625 bpw", false},
    {20, "MOSTLY_IQ2_XS", "IQ2_XS - 2.3125 bpw", false},
    {21, "MOSTLY_Q2_K_S", "Q2_K - Small", false},
    {22, "MOSTLY_IQ3_XS", "IQ3_XS - 3.3 bpw", false},
    {23, "MOSTLY_IQ3_XXS", "IQ3_XXS - 3.0625 bpw", false},
    {24, "MOSTLY_IQ1_S", "IQ1_S - 1.5625 bpw", false},
    {25, "MOSTLY_IQ4_NL", "IQ4_NL - 4.5 bpw", false},
    {26, "MOSTLY_IQ3_S", "IQ3_S - 3.4375 bpw", false},
    {27, "MOSTLY_IQ3_M", "IQ3_S mix - 3.66 bpw", false},
    {28, "MOSTLY_IQ2_S", "IQ2_S - 2.5 bpw", false},
    {29, "MOSTLY_IQ2_M", "IQ2_M - 2.7 bpw", false},
    {30, "MOSTLY_IQ4_XS", "IQ4_XS - 4.25 bpw", false},
    {31, "MOSTLY_IQ1_M", "IQ1_M - 1.75 bpw", false},
    {32, "MOSTLY_BF16", "BF16", false},
    {33, "MOSTLY_Q4_0_4_4", "Q4_0_4_4 (removed: use Q4_0)", true},
    {34, "MOSTLY_Q4_0_4_8", "Q4_0_4_8 (removed: use Q4_0)", true},
    {35, "MOSTLY_Q4_0_8_8", "Q4_0_8_8 (removed: use Q4_0)", true},
    {36, "MOSTLY_TQ1_0", "TQ1_0 - 1.69 bpw ternary", false},
    {37, "MOSTLY_TQ2_0", "TQ2_0 - 2.06 bpw ternary", false},
    {38, "MOSTLY_MXFP4_MOE", "MXFP4 MoE", false},
    {39, "MOSTLY_NVFP4", "NVFP4", false},
    {40, "MOSTLY_Q1_0", "Q1_0", false},
    {41, "MOSTLY_Q2_0", "Q2_0", false},
    {1024, "GUESSED", "guessed", false},
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

std::optional<uint32_t> parse_file_type(std::string_view name) {
  const std::string n = upper(name);
  for (const FileTypeInfo& f : kFileTypes) {
    const std::string_view full = f.name;
    if (n == full) return f.id;
    for (std::string_view prefix : {"MOSTLY_", "ALL_"}) {
      if (full.substr(0, prefix.size()) == prefix && n == full.substr(prefix.size())) return f.id;
    }
  }
  return std::nullopt;
}

}  // namespace ggufkit
