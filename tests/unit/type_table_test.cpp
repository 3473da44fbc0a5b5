// The ggml tensor type table and llama.cpp's file type table.
//
// The expected numbers are ggml's: enum ggml_type in ggml.h and type_traits in ggml.c (block size
// and bytes per block) of llama.cpp 80fb11ac, cross-checked once against ggml_type_name,
// ggml_blck_size and ggml_type_size of the oracle's libggml-base.so (node-llama-cpp 3.21.1). The
// file types are llama_ftype of llama.h and the names llama_model_ftype_name prints.

#include <cstdint>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "ggufkit/conventions.h"
#include "ggufkit/tensor_types.h"

namespace ggufkit {
namespace {

struct GgmlType {
  uint32_t id;
  const char* name;
  uint32_t block_size;
  uint32_t block_bytes;
};

// Every type ggml reads today.
constexpr GgmlType kGgmlTypes[] = {
    {0, "f32", 1, 4},         {1, "f16", 1, 2},          {2, "q4_0", 32, 18},       {3, "q4_1", 32, 20},
    {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},       {8, "q8_0", 32, 34},       {9, "q8_1", 32, 36},
    {10, "q2_K", 256, 84},    {11, "q3_K", 256, 110},    {12, "q4_K", 256, 144},    {13, "q5_K", 256, 176},
    {14, "q6_K", 256, 210},   {15, "q8_K", 256, 292},    {16, "iq2_xxs", 256, 66},  {17, "iq2_xs", 256, 74},
    {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},    {20, "iq4_nl", 32, 18},    {21, "iq3_s", 256, 110},
    {22, "iq2_s", 256, 82},   {23, "iq4_xs", 256, 136},  {24, "i8", 1, 1},          {25, "i16", 1, 2},
    {26, "i32", 1, 4},        {27, "i64", 1, 8},         {28, "f64", 1, 8},         {29, "iq1_m", 256, 56},
    {30, "bf16", 1, 2},       {34, "tq1_0", 256, 54},    {35, "tq2_0", 256, 66},    {39, "mxfp4", 32, 17},
    {40, "nvfp4", 64, 36},    {41, "q1_0", 128, 18},     {42, "q2_0", 64, 18},
};
constexpr uint32_t kRemovedIds[] = {4, 5, 31, 32, 33, 36, 37, 38};

TEST(TypeTable, CoversEveryIdInOrder) {
  const auto all = all_type_traits();
  ASSERT_EQ(all.size(), 43u);
  EXPECT_EQ(kTensorTypeIdLimit, 43u);
  for (uint32_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].id, i);
  EXPECT_EQ(std::size(kGgmlTypes) + std::size(kRemovedIds), 43u);
}

TEST(TypeTable, EverySupportedTypeMatchesGgml) {
  for (const GgmlType& want : kGgmlTypes) {
    SCOPED_TRACE(want.name);
    const TypeTraits* t = find_type_traits(want.id);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->id, want.id);
    EXPECT_EQ(t->name, want.name);
    EXPECT_EQ(t->block_size, want.block_size);
    EXPECT_EQ(t->block_bytes, want.block_bytes);
    EXPECT_EQ(t->status, TypeStatus::supported);
    EXPECT_EQ(t->quantized, want.block_size > 1) << "quantized exactly when elements come in blocks";
    EXPECT_EQ(static_cast<uint32_t>(t->type()), want.id);
    EXPECT_EQ(&type_traits(t->type()), t);
    EXPECT_EQ(type_name(t->type()), want.name);
  }
}

TEST(TypeTable, EnumValuesAreGgmlIds) {
  EXPECT_EQ(static_cast<uint32_t>(TensorType::Q4_K), 12u);
  EXPECT_EQ(static_cast<uint32_t>(TensorType::BF16), 30u);
  EXPECT_EQ(static_cast<uint32_t>(TensorType::TQ1_0), 34u);
  EXPECT_EQ(static_cast<uint32_t>(TensorType::MXFP4), 39u);
  EXPECT_EQ(static_cast<uint32_t>(TensorType::Q2_0), 42u);
}

TEST(TypeTable, RemovedIdsAreKnownButRemoved) {
  for (uint32_t id : kRemovedIds) {
    SCOPED_TRACE(id);
    const TypeTraits* t = find_type_traits(id);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->status, TypeStatus::removed);
    EXPECT_EQ(t->block_size, 0u);
    EXPECT_EQ(t->block_bytes, 0u);
    EXPECT_FALSE(t->note.empty()) << "a removed type says what replaced it";
    EXPECT_EQ(t->bits_per_weight(), 0.0);
  }
  EXPECT_NE(find_type_traits(31)->note.find("Q4_0"), std::string_view::npos);
  EXPECT_NE(find_type_traits(36)->note.find("IQ4_NL"), std::string_view::npos);
}

TEST(TypeTable, UnknownIds) {
  EXPECT_EQ(find_type_traits(43), nullptr);
  EXPECT_EQ(find_type_traits(1000), nullptr);
  EXPECT_EQ(find_type_traits(UINT32_MAX), nullptr);
}

TEST(TypeTable, BitsPerWeight) {
  EXPECT_DOUBLE_EQ(type_traits(TensorType::F32).bits_per_weight(), 32.0);
  EXPECT_DOUBLE_EQ(type_traits(TensorType::BF16).bits_per_weight(), 16.0);
  EXPECT_DOUBLE_EQ(type_traits(TensorType::Q4_0).bits_per_weight(), 4.5);
  EXPECT_DOUBLE_EQ(type_traits(TensorType::Q8_0).bits_per_weight(), 8.5);
  EXPECT_DOUBLE_EQ(type_traits(TensorType::Q4_K).bits_per_weight(), 4.5);
  EXPECT_DOUBLE_EQ(type_traits(TensorType::Q6_K).bits_per_weight(), 6.5625);
  EXPECT_DOUBLE_EQ(type_traits(TensorType::IQ2_XXS).bits_per_weight(), 2.0625);
  EXPECT_DOUBLE_EQ(type_traits(TensorType::MXFP4).bits_per_weight(), 4.25);
}

TEST(TypeTable, ParseIsCaseInsensitive) {
  for (const char* spelling : {"q4_k", "Q4_K", "q4_K", "Q4_k"}) {
    EXPECT_EQ(parse_tensor_type(spelling), TensorType::Q4_K) << spelling;
  }
  EXPECT_EQ(parse_tensor_type("F32"), TensorType::F32);
  EXPECT_EQ(parse_tensor_type("bf16"), TensorType::BF16);
  EXPECT_EQ(parse_tensor_type("IQ4_XS"), TensorType::IQ4_XS);
  EXPECT_EQ(parse_tensor_type("mxfp4"), TensorType::MXFP4);
}

TEST(TypeTable, ParseEveryGgmlName) {
  for (const GgmlType& t : kGgmlTypes) {
    EXPECT_EQ(parse_tensor_type(t.name), static_cast<TensorType>(t.id)) << t.name;
  }
}

TEST(TypeTable, ParseRejectsRemovedAndUnknownNames) {
  EXPECT_FALSE(parse_tensor_type("q4_2"));
  EXPECT_FALSE(parse_tensor_type("q4_0_4_4"));
  EXPECT_FALSE(parse_tensor_type("iq4_nl_8_8"));
  EXPECT_FALSE(parse_tensor_type(""));
  EXPECT_FALSE(parse_tensor_type("q4"));
  EXPECT_FALSE(parse_tensor_type("q4_k "));
  EXPECT_FALSE(parse_tensor_type("q4_k_m"));  // a file type, not a tensor type
  EXPECT_FALSE(parse_tensor_type("12"));
}

TEST(TypeTable, RowSize) {
  EXPECT_EQ(row_size(TensorType::F32, 10), 40u);
  EXPECT_EQ(row_size(TensorType::F16, 3), 6u);
  EXPECT_EQ(row_size(TensorType::Q4_0, 64), 36u);
  EXPECT_EQ(row_size(TensorType::Q4_K, 4096), 16u * 144u);
  EXPECT_EQ(row_size(TensorType::Q8_0, 0), 0u);
  EXPECT_EQ(row_size(TensorType::NVFP4, 128), 72u);
  EXPECT_FALSE(row_size(TensorType::Q4_0, 33)) << "not a multiple of the block size";
  EXPECT_FALSE(row_size(TensorType::Q4_K, 128));
  EXPECT_FALSE(row_size(TensorType::F32, -1));
  EXPECT_FALSE(row_size(static_cast<TensorType>(4), 256)) << "removed type";
  // INT64_MAX float64 values are more bytes than a uint64 holds.
  EXPECT_FALSE(row_size(TensorType::F64, INT64_MAX));
  EXPECT_EQ(row_size(TensorType::I8, INT64_MAX), static_cast<uint64_t>(INT64_MAX));
}

// An id ggml never defined has no size: answering with f32's would size a tensor wrongly.
TEST(TypeTable, RowSizeOfAnUnknownIdIsEmpty) {
  EXPECT_FALSE(row_size(static_cast<TensorType>(43), 4));
  EXPECT_FALSE(row_size(static_cast<TensorType>(1000), 4));
}

// ---- File types (general.file_type) ----

TEST(FileTypes, Q4KMIsFifteen) {
  const FileTypeInfo* f = find_file_type(15);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->id, 15u);
  EXPECT_EQ(f->name, "MOSTLY_Q4_K_M");
  EXPECT_EQ(f->description, "Q4_K - Medium");
  EXPECT_FALSE(f->removed);
}

TEST(FileTypes, ParseAcceptsEverySpelling) {
  EXPECT_EQ(parse_file_type("q4_k_m"), 15u);
  EXPECT_EQ(parse_file_type("Q4_K_M"), 15u);
  EXPECT_EQ(parse_file_type("MOSTLY_Q4_K_M"), 15u);
  EXPECT_EQ(parse_file_type("mostly_q4_k_m"), 15u);
  EXPECT_EQ(parse_file_type("f32"), 0u);
  EXPECT_EQ(parse_file_type("ALL_F32"), 0u);
  EXPECT_EQ(parse_file_type("bf16"), 32u);
  EXPECT_EQ(parse_file_type("MXFP4_MOE"), 38u);
  EXPECT_FALSE(parse_file_type("q4_k"));
  EXPECT_FALSE(parse_file_type(""));
  EXPECT_FALSE(parse_file_type("MOSTLY_"));
}

TEST(FileTypes, TableMatchesLlamaCpp) {
  struct Want {
    uint32_t id;
    const char* name;
    const char* description;
  };
  const Want want[] = {
      {0, "ALL_F32", "all F32"},          {1, "MOSTLY_F16", "F16"},
      {2, "MOSTLY_Q4_0", "Q4_0"},         {3, "MOSTLY_Q4_1", "Q4_1"},
      {7, "MOSTLY_Q8_0", "Q8_0"},         {8, "MOSTLY_Q5_0", "Q5_0"},
      {9, "MOSTLY_Q5_1", "Q5_1"},         {10, "MOSTLY_Q2_K", "Q2_K - Medium"},
      {11, "MOSTLY_Q3_K_S", "Q3_K - Small"}, {12, "MOSTLY_Q3_K_M", "Q3_K - Medium"},
      {13, "MOSTLY_Q3_K_L", "Q3_K - Large"}, {14, "MOSTLY_Q4_K_S", "Q4_K - Small"},
      {16, "MOSTLY_Q5_K_S", "Q5_K - Small"}, {17, "MOSTLY_Q5_K_M", "Q5_K - Medium"},
      {18, "MOSTLY_Q6_K", "Q6_K"},        {19, "MOSTLY_IQ2_XXS", "IQ2_XXS - 2.0625 bpw"},
      {20, "MOSTLY_IQ2_XS", "IQ2_XS - 2.3125 bpw"}, {21, "MOSTLY_Q2_K_S", "Q2_K - Small"},
      {22, "MOSTLY_IQ3_XS", "IQ3_XS - 3.3 bpw"}, {23, "MOSTLY_IQ3_XXS", "IQ3_XXS - 3.0625 bpw"},
      {24, "MOSTLY_IQ1_S", "IQ1_S - 1.5625 bpw"}, {25, "MOSTLY_IQ4_NL", "IQ4_NL - 4.5 bpw"},
      {26, "MOSTLY_IQ3_S", "IQ3_S - 3.4375 bpw"}, {27, "MOSTLY_IQ3_M", "IQ3_S mix - 3.66 bpw"},
      {28, "MOSTLY_IQ2_S", "IQ2_S - 2.5 bpw"}, {29, "MOSTLY_IQ2_M", "IQ2_M - 2.7 bpw"},
      {30, "MOSTLY_IQ4_XS", "IQ4_XS - 4.25 bpw"}, {31, "MOSTLY_IQ1_M", "IQ1_M - 1.75 bpw"},
      {32, "MOSTLY_BF16", "BF16"},        {36, "MOSTLY_TQ1_0", "TQ1_0 - 1.69 bpw ternary"},
      {37, "MOSTLY_TQ2_0", "TQ2_0 - 2.06 bpw ternary"}, {38, "MOSTLY_MXFP4_MOE", "MXFP4 MoE"},
      {39, "MOSTLY_NVFP4", "NVFP4"},      {40, "MOSTLY_Q1_0", "Q1_0"},
      {41, "MOSTLY_Q2_0", "Q2_0"},
  };
  for (const Want& w : want) {
    SCOPED_TRACE(w.name);
    const FileTypeInfo* f = find_file_type(w.id);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->name, w.name);
    EXPECT_EQ(f->description, w.description);
    EXPECT_FALSE(f->removed);
    EXPECT_EQ(parse_file_type(w.name), w.id);
  }
}

TEST(FileTypes, RemovedIds) {
  for (uint32_t id : {4u, 5u, 6u, 33u, 34u, 35u}) {
    SCOPED_TRACE(id);
    const FileTypeInfo* f = find_file_type(id);
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(f->removed);
  }
}

TEST(FileTypes, GuessedAndUnknownIds) {
  const FileTypeInfo* guessed = find_file_type(1024);
  ASSERT_NE(guessed, nullptr);
  EXPECT_EQ(guessed->name, "GUESSED");
  for (uint32_t id : {42u, 43u, 100u, 1023u, 1025u, UINT32_MAX}) {
    EXPECT_EQ(find_file_type(id), nullptr) << id;
  }
  for (const FileTypeInfo& f : all_file_types()) EXPECT_EQ(find_file_type(f.id), &f);
}

// The default tensor type of every preset and the type names that select a preset alone, as
// llama-quant.cpp and llama-quantize's alias list have them: one table answers both.
TEST(FileTypes, DefaultTypesAndSelectingTypes) {
  using T = TensorType;
  const std::map<uint32_t, T> want_default = {
      {0, T::F32},      {1, T::F16},     {2, T::Q4_0},    {3, T::Q4_1},   {7, T::Q8_0},    {8, T::Q5_0},
      {9, T::Q5_1},     {10, T::Q2_K},   {11, T::Q3_K},   {12, T::Q3_K},  {13, T::Q3_K},   {14, T::Q4_K},
      {15, T::Q4_K},    {16, T::Q5_K},   {17, T::Q5_K},   {18, T::Q6_K},  {19, T::IQ2_XXS}, {20, T::IQ2_XS},
      {21, T::Q2_K},    {22, T::IQ3_S},  {23, T::IQ3_XXS}, {24, T::IQ1_S}, {25, T::IQ4_NL}, {26, T::IQ3_S},
      {27, T::IQ3_S},   {28, T::IQ2_XS}, {29, T::IQ2_S},  {30, T::IQ4_XS}, {31, T::IQ1_M},  {32, T::BF16},
      {36, T::TQ1_0},   {37, T::TQ2_0},  {38, T::MXFP4},  {39, T::NVFP4}, {40, T::Q1_0},   {41, T::Q2_0},
  };
  const std::map<T, uint32_t> want_selected = {
      {T::F32, 0},      {T::F16, 1},     {T::BF16, 32},   {T::Q4_0, 2},    {T::Q4_1, 3},    {T::Q5_0, 8},
      {T::Q5_1, 9},     {T::Q8_0, 7},    {T::Q2_K, 10},   {T::Q3_K, 12},   {T::Q4_K, 15},   {T::Q5_K, 17},
      {T::Q6_K, 18},    {T::IQ4_NL, 25}, {T::IQ4_XS, 30}, {T::IQ3_S, 26},  {T::TQ1_0, 36},  {T::TQ2_0, 37},
      {T::MXFP4, 38},   {T::NVFP4, 39},  {T::Q1_0, 40},   {T::Q2_0, 41},   {T::IQ2_XXS, 19}, {T::IQ2_XS, 20},
      {T::IQ2_S, 29},   {T::IQ3_XXS, 23}, {T::IQ1_S, 24}, {T::IQ1_M, 31},
  };
  std::map<uint32_t, T> got_default;
  std::map<T, uint32_t> got_selected;
  for (const FileTypeInfo& f : all_file_types()) {
    if (f.default_type) got_default[f.id] = *f.default_type;
    EXPECT_EQ(file_type_default_type(f.id), f.default_type) << f.name;
    if (f.selected_by) {
      EXPECT_TRUE(got_selected.emplace(*f.selected_by, f.id).second) << "two presets selected by one type: " << f.name;
      EXPECT_EQ(file_type_for_type(*f.selected_by), f.id) << f.name;
    }
  }
  EXPECT_EQ(got_default, want_default);
  EXPECT_EQ(got_selected, want_selected);
  EXPECT_EQ(file_type_default_type(4), std::nullopt);
  EXPECT_EQ(file_type_default_type(1024), std::nullopt);
  EXPECT_EQ(file_type_for_type(T::I8), std::nullopt);
  EXPECT_EQ(file_type_for_type(T::Q8_1), std::nullopt);
}

}  // namespace
}  // namespace ggufkit
