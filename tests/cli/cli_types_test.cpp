// gguf types: every preset gguf quantize takes, with llama-quantize's numbers, and every tensor
// type; the same facts in text and JSON, from the library's tables; and quantize --help's list.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "ggufkit/conventions.h"
#include "ggufkit/quant.h"
#include "ggufkit/quantize.h"
#include "ggufkit/tensor_types.h"
#include "test_support.h"

namespace {

using ggufkit::test::CommandResult;
using ggufkit::test::run_gguf;
using nlohmann::json;

// llama-quantize's QUANT_OPTIONS (tools/quantize/quantize.cpp) by number, in llama_ftype order, and
// NVFP4 (llama.h's 39, which gguf quantize takes too); the presets needing an importance matrix
// are those whose main type llama-quant.cpp's tensor_requires_imatrix names.
const std::vector<std::pair<uint32_t, std::string>> kPresets = {
    {0, "F32"},      {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},     {7, "Q8_0"},     {8, "Q5_0"},
    {9, "Q5_1"},     {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},  {13, "Q3_K_L"},  {14, "Q4_K_S"},
    {15, "Q4_K_M"},  {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"},
    {21, "Q2_K_S"},  {22, "IQ3_XS"}, {23, "IQ3_XXS"}, {24, "IQ1_S"},  {25, "IQ4_NL"},  {26, "IQ3_S"},
    {27, "IQ3_M"},   {28, "IQ2_S"},  {29, "IQ2_M"},  {30, "IQ4_XS"},  {31, "IQ1_M"},   {32, "BF16"},
    {36, "TQ1_0"},   {37, "TQ2_0"},  {38, "MXFP4_MOE"}, {39, "NVFP4"}, {40, "Q1_0"},   {41, "Q2_0"},
};
const std::vector<uint32_t> kNeedImatrix = {19, 20, 21, 23, 24, 28, 29, 31};

std::string importance_use(bool required, bool accepted) { return required ? "required" : accepted ? "used" : "ignored"; }

TEST(CliTypes, JsonListsEveryPresetAndType) {
  const CommandResult r = run_gguf({"types", "--json"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  const json got = json::parse(r.out);

  json presets = json::array();
  for (const auto& [id, name] : kPresets) {
    const auto main = ggufkit::file_type_default_type(id);
    ASSERT_TRUE(main) << name;
    const ggufkit::FileTypeInfo* info = ggufkit::find_file_type(id);
    ASSERT_NE(info, nullptr);
    const bool required = std::find(kNeedImatrix.begin(), kNeedImatrix.end(), id) != kNeedImatrix.end();
    EXPECT_EQ(ggufkit::preset_requires_importance_matrix(id), required) << name;
    presets.push_back({{"id", id},
                       {"name", name},
                       {"type", ggufkit::type_name(*main)},
                       {"bits_per_weight", ggufkit::type_traits(*main).bits_per_weight()},
                       {"imatrix", importance_use(required, ggufkit::quant_capabilities(*main).accepts_imatrix)},
                       {"alias", info->selected_by ? json(ggufkit::type_name(*info->selected_by)) : json(nullptr)},
                       {"description", info->description}});
  }
  json types = json::array();
  for (const ggufkit::TypeTraits& t : ggufkit::all_type_traits()) {
    if (t.status != ggufkit::TypeStatus::supported) continue;
    const auto caps = ggufkit::quant_capabilities(static_cast<ggufkit::TensorType>(t.id));
    types.push_back({{"id", t.id},
                     {"name", t.name},
                     {"block_size", t.block_size},
                     {"block_bytes", t.block_bytes},
                     {"bits_per_weight", t.bits_per_weight()},
                     {"quantize", caps.quantize},
                     {"dequantize", caps.dequantize},
                     {"imatrix", importance_use(caps.requires_imatrix, caps.accepts_imatrix)}});
  }
  EXPECT_EQ(got, (json{{"presets", presets}, {"types", types}}));
  // Facts from llama.cpp, not from our tables: Q4_K_M is 15 on q4_K, q4_K selects it; IQ2_S's main
  // type is iq2_xs (llama-quant.cpp's default type table).
  EXPECT_EQ(got["presets"][12], (json{{"id", 15}, {"name", "Q4_K_M"}, {"type", "q4_K"}, {"bits_per_weight", 4.5},
                                      {"imatrix", "used"}, {"alias", "q4_K"}, {"description", "Q4_K - Medium"}}));
  EXPECT_EQ(got["presets"][25]["name"], "IQ2_S");
  EXPECT_EQ(got["presets"][25]["type"], "iq2_xs");
}

TEST(CliTypes, TextHasTheSameRows) {
  const CommandResult r = run_gguf({"types"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  const json got = json::parse(run_gguf({"types", "--json"}).out);
  std::string expected =
      "presets (gguf quantize IN OUT PRESET, or its number; type and bpw are those of its main tensors, alias the "
      "type name that selects it alone):\n"
      "    id  preset     type        bpw  imatrix   alias    description\n";
  for (const json& p : got["presets"]) {
    expected += fmt::format("  {:>4}  {:<10} {:<8} {:>6.2f}  {:<9} {:<8} {}\n", p["id"].get<uint32_t>(),
                            p["name"].get<std::string>(), p["type"].get<std::string>(), p["bits_per_weight"].get<double>(),
                            p["imatrix"].get<std::string>(), p["alias"].is_null() ? "-" : p["alias"].get<std::string>(),
                            p["description"].get<std::string>());
  }
  expected +=
      "\ntensor types (--pure, --output-tensor-type, --tensor-type; bpw of the block as stored; imatrix as ggml's "
      "kernel needs it, where presets say what llama-quantize needs):\n"
      "    id  type     block bytes    bpw  quantize dequantize imatrix\n";
  for (const json& t : got["types"]) {
    expected += fmt::format("  {:>4}  {:<8} {:>5} {:>5} {:>6.2f}  {:<8} {:<10} {}\n", t["id"].get<uint32_t>(),
                            t["name"].get<std::string>(), t["block_size"].get<uint32_t>(),
                            t["block_bytes"].get<uint32_t>(), t["bits_per_weight"].get<double>(),
                            t["quantize"].get<bool>() ? "yes" : "no", t["dequantize"].get<bool>() ? "yes" : "no",
                            t["imatrix"].get<std::string>());
  }
  EXPECT_EQ(r.out, expected);
  EXPECT_NE(r.out.find("    15  Q4_K_M     q4_K       4.50  used      q4_K     Q4_K - Medium\n"), std::string::npos);
}

TEST(CliTypes, QuantizeHelpListsThePresets) {
  const CommandResult r = run_gguf({"quantize", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  const size_t at = r.out.find("Presets (TYPE; number or name, any case; * needs an importance matrix, --imatrix):\n");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::string listed;
  for (const auto& [id, name] : kPresets) {
    const bool required = std::find(kNeedImatrix.begin(), kNeedImatrix.end(), id) != kNeedImatrix.end();
    listed += fmt::format("{}{}{} ({})", listed.empty() ? "" : ", ", name, required ? "*" : "", id);
  }
  std::string shown = r.out.substr(at);
  shown = shown.substr(shown.find('\n') + 1);
  shown = shown.substr(0, shown.find("Bits per weight"));
  std::string joined;  // the lines, without their indentation and breaks
  for (size_t pos = 0; pos < shown.size();) {
    const size_t end = shown.find('\n', pos);
    std::string line = shown.substr(pos, end - pos);
    line.erase(0, line.find_first_not_of(' '));
    joined += (joined.empty() || joined.back() == ',' ? (joined.empty() ? "" : " ") : "") + line;
    pos = end == std::string::npos ? shown.size() : end + 1;
  }
  EXPECT_EQ(joined, listed);
  EXPECT_NE(r.out.find("Bits per weight and every tensor type: gguf types"), std::string::npos);
}

}  // namespace
