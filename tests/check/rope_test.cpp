// gguf check's RoPE pass on small files built with GgufBuilder: a consistent model passes; each
// test breaks one {arch}.rope.* fact and expects exactly its finding.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <tuple>

#include "ggufkit/reader.h"
#include "tokenizer_rope_lora_fixtures.h"

namespace ggufkit {
namespace {

using test::check_model;
using test::expect_none;
using test::expect_single;
using test::set;

constexpr std::string_view kRope = "rope.";

GgufBuilder model(std::string_view arch = "llama") {
  GgufBuilder b;
  test::add_llama_hparams(b, arch);
  return b;
}

// Scaling of `type` by `factor` from `original` tokens, with context_length `context`.
GgufBuilder scaled(std::string_view type, float factor, uint32_t original, uint32_t context) {
  auto b = model();
  set(b, "llama.rope.scaling.type", MetadataValue::string(type));
  set(b, "llama.rope.scaling.factor", MetadataValue::of(factor));
  set(b, "llama.rope.scaling.original_context_length", MetadataValue::of(original));
  set(b, "llama.context_length", MetadataValue::of(context));
  return b;
}

TEST(CheckRope, ConsistentModelHasNoFindings) {
  expect_none(check_model(model()), kRope);
  for (const std::string type : {"none", "linear", "yarn"}) {
    expect_none(check_model(scaled(type, 4.0f, 2048, 8192)), kRope);
  }
}

TEST(CheckRope, FileWithoutRopeKeysHasNoFindings) {
  GgufBuilder b;
  set(b, "general.architecture", MetadataValue::string("llama"));
  expect_none(check_model(b), kRope);
}

TEST(CheckRope, UnknownScalingTypeIsAnErrorAtItsKey) {
  auto b = model();
  set(b, "llama.rope.scaling.type", MetadataValue::string("dynamic"));
  const auto path = test::write_model(b);
  const auto report = check_file(path);
  ASSERT_TRUE(report);
  const Finding f = expect_single(*report, kRope, "rope.unknown_scaling_type", Severity::error);
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file);
  EXPECT_EQ(f.subject, "llama.rope.scaling.type");
  EXPECT_EQ(f.offset, file->find("llama.rope.scaling.type")->offset);
}

TEST(CheckRope, ScalingTypeOfWrongTypeIsAnError) {
  auto b = model();
  set(b, "llama.rope.scaling.type", MetadataValue::of(uint32_t{2}));
  expect_single(check_model(b), kRope, "rope.wrong_type", Severity::error);
}

TEST(CheckRope, NegativeOrNonFiniteFactorIsAnError) {
  for (const float factor : {-2.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    expect_single(check_model(scaled("linear", factor, 2048, 8192)), kRope, "rope.bad_scaling_factor",
                  Severity::error);
  }
}

TEST(CheckRope, FactorAsFloat64IsAnError) {
  auto b = scaled("yarn", 4.0f, 2048, 8192);
  set(b, "llama.rope.scaling.factor", MetadataValue::of(4.0));
  expect_single(check_model(b), kRope, "rope.wrong_type", Severity::error);
}

TEST(CheckRope, DeclaredScalingWithoutFactorIsAWarning) {
  for (const std::string type : {"linear", "yarn"}) {
    auto b = model();
    set(b, "llama.rope.scaling.type", MetadataValue::string(type));
    expect_single(check_model(b), kRope, "rope.missing_scaling_factor", Severity::warning);
    set(b, "llama.rope.scaling.factor", MetadataValue::of(0.0f));  // llama.cpp reads 0 as "no scaling"
    expect_single(check_model(b), kRope, "rope.missing_scaling_factor", Severity::warning);
  }
}

TEST(CheckRope, LongropeAndNoneNeedNoFactor) {
  for (const std::string type : {"longrope", "none"}) {
    auto b = model();
    set(b, "llama.rope.scaling.type", MetadataValue::string(type));
    expect_none(check_model(b), kRope);
  }
}

TEST(CheckRope, LegacyScaleLinearKeyCountsAsTheFactor) {
  auto b = model();
  set(b, "llama.rope.scaling.type", MetadataValue::string("linear"));
  set(b, "llama.rope.scale_linear", MetadataValue::of(2.0f));
  expect_none(check_model(b), kRope);
  set(b, "llama.rope.scale_linear", MetadataValue::of(-2.0f));
  expect_single(check_model(b), kRope, "rope.bad_scaling_factor", Severity::error);
}

TEST(CheckRope, OriginalContextLongerThanContextIsAWarning) {
  const Finding f = expect_single(check_model(scaled("yarn", 4.0f, 8192, 4096)), kRope,
                                  "rope.original_context_too_long", Severity::warning);
  EXPECT_EQ(f.subject, "llama.rope.scaling.original_context_length");
}

TEST(CheckRope, OriginalContextEqualToContextIsANote) {
  expect_single(check_model(scaled("yarn", 4.0f, 4096, 4096)), kRope, "rope.original_context_too_long",
                Severity::info);
}

TEST(CheckRope, OriginalContextIsNotComparedWithoutScaling) {
  expect_none(check_model(scaled("none", 4.0f, 8192, 4096)), kRope);
  expect_none(check_model(scaled("linear", 1.0f, 8192, 4096)), kRope);
}

TEST(CheckRope, OriginalContextOfWrongTypeIsAnError) {
  auto b = scaled("yarn", 4.0f, 2048, 8192);
  set(b, "llama.rope.scaling.original_context_length", MetadataValue::of(uint64_t{2048}));
  expect_single(check_model(b), kRope, "rope.wrong_type", Severity::error);
}

TEST(CheckRope, OddDimensionCountIsAnError) {
  auto b = model("phi2");
  set(b, "phi2.rope.dimension_count", MetadataValue::of(uint32_t{15}));
  expect_single(check_model(b), kRope, "rope.bad_dimension_count", Severity::error);
}

TEST(CheckRope, DimensionCountAboveHeadSizeIsAnError) {
  auto b = model("phi2");  // head size 64 / 4 = 16
  set(b, "phi2.rope.dimension_count", MetadataValue::of(uint32_t{32}));
  const Finding f = expect_single(check_model(b), kRope, "rope.bad_dimension_count", Severity::error);
  EXPECT_NE(f.message.find("16"), std::string::npos) << f.message;
}

TEST(CheckRope, PartialRotationIsFineExceptForFullRotationArchitectures) {
  auto partial = model("phi2");
  set(partial, "phi2.rope.dimension_count", MetadataValue::of(uint32_t{8}));
  expect_none(check_model(partial), kRope);
  auto llama = model("llama");
  set(llama, "llama.rope.dimension_count", MetadataValue::of(uint32_t{8}));
  expect_single(check_model(llama), kRope, "rope.bad_dimension_count", Severity::error);
}

TEST(CheckRope, KeyLengthIsTheHeadSizeWhenPresent) {
  auto b = model("qwen2");
  set(b, "qwen2.attention.key_length", MetadataValue::of(uint32_t{32}));
  set(b, "qwen2.rope.dimension_count", MetadataValue::of(uint32_t{32}));
  expect_none(check_model(b), kRope);
  set(b, "qwen2.rope.dimension_count", MetadataValue::of(uint32_t{34}));
  expect_single(check_model(b), kRope, "rope.bad_dimension_count", Severity::error);
}

TEST(CheckRope, DimensionCountOfWrongTypeIsAnError) {
  auto b = model();
  set(b, "llama.rope.dimension_count", MetadataValue::of(int32_t{16}));
  expect_single(check_model(b), kRope, "rope.wrong_type", Severity::error);
}

TEST(CheckRope, NonPositiveFreqBaseIsAnError) {
  for (const float base : {0.0f, -10000.0f, std::numeric_limits<float>::quiet_NaN()}) {
    auto b = model();
    set(b, "llama.rope.freq_base", MetadataValue::of(base));
    expect_single(check_model(b), kRope, "rope.bad_freq_base", Severity::error);
  }
  auto swa = model();
  set(swa, "llama.rope.freq_base_swa", MetadataValue::of(0.0f));
  const Finding f = expect_single(check_model(swa), kRope, "rope.bad_freq_base", Severity::error);
  EXPECT_EQ(f.subject, "llama.rope.freq_base_swa");
}

TEST(CheckRope, AttnFactorAsFloat64IsAnError) {
  auto b = model();
  set(b, "llama.rope.scaling.attn_factor", MetadataValue::of(1.0f));
  expect_none(check_model(b), kRope);
  set(b, "llama.rope.scaling.attn_factor", MetadataValue::of(1.0));
  expect_single(check_model(b), kRope, "rope.wrong_type", Severity::error);
}

// The rope.* findings of a yarn-scaled model with `key` set to `value`, one "severity code message" line each.
std::string rope_findings_with(const std::string& key, float value) {
  auto b = scaled("yarn", 4.0f, 2048, 8192);
  set(b, key, MetadataValue::of(value));
  std::string all;
  for (const Finding& f : check_model(b).findings) {
    if (f.code.starts_with(kRope)) all += fmt::format("{} {} {}\n", severity_name(f.severity), f.code, f.message);
  }
  return all;
}

// Issue 29: yarn's and the attention factor's floats, against meta/float_ranges.cpp's table.
TEST(CheckRope, ScalingFloatsOutsideTheirRange) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::string must = "ggml's RoPE computes every rotation angle from it: NaN or an infinity makes every query and key NaN";
  const std::string scale =
      "it multiplies the rotated queries and keys (1 when unscaled): 0 or a negative value is no scaling a model was "
      "trained with";
  const std::string beta = "a yarn beta is a positive number of rotations (32 and 1 by default): the context is divided by it";
  const std::tuple<std::string, float, std::string> cases[] = {
      {"attn_factor", nan, "error rope.bad_value 'llama.rope.scaling.attn_factor' is nan, outside (-inf, inf): " + must},
      {"attn_factor", 0.0f, "warning rope.implausible_value 'llama.rope.scaling.attn_factor' is 0, outside (0, inf): " + scale},
      {"yarn_attn_factor", -1.0f,
       "warning rope.implausible_value 'llama.rope.scaling.yarn_attn_factor' is -1, outside (0, inf): " + scale},
      {"yarn_beta_fast", 0.0f, "warning rope.implausible_value 'llama.rope.scaling.yarn_beta_fast' is 0, outside (0, inf): " + beta},
      {"yarn_beta_slow", inf, "error rope.bad_value 'llama.rope.scaling.yarn_beta_slow' is inf, outside (-inf, inf): " + must},
      {"yarn_ext_factor", nan, "error rope.bad_value 'llama.rope.scaling.yarn_ext_factor' is nan, outside (-inf, inf): " + must},
      {"yarn_log_multiplier", -inf,
       "error rope.bad_value 'llama.rope.scaling.yarn_log_multiplier' is -inf, outside (-inf, inf): " + must},
  };
  for (const auto& [suffix, value, expected] : cases) {
    SCOPED_TRACE(suffix);
    EXPECT_EQ(rope_findings_with("llama.rope.scaling." + suffix, value), expected + "; set the model's rope_scaling parameters\n");
  }
  // llama.cpp's defaults pass (ext_factor -1: "not set").
  auto b = scaled("yarn", 4.0f, 2048, 8192);
  for (const auto& [suffix, value] : {std::pair{"attn_factor", 1.0f}, {"yarn_attn_factor", 1.0f}, {"yarn_beta_fast", 32.0f},
                                      {"yarn_beta_slow", 1.0f}, {"yarn_ext_factor", -1.0f}, {"yarn_log_multiplier", 0.1f}}) {
    set(b, std::string("llama.rope.scaling.") + suffix, MetadataValue::of(value));
  }
  expect_none(check_model(b), kRope);
}

// Issue 29 review: a base or a factor of 1e30 (or a factor of 1e-30) passed without a word.
TEST(CheckRope, ImplausibleBasesAndFactorsAreWarnings) {
  const std::string base_why = "no trained model has such a RoPE base (10000 to a few 1e7); set the model's rope_theta";
  const std::string factor_why =
      "a RoPE scaling factor is the context extension (2 to a few dozen); set the model's rope_scaling parameters";
  const std::tuple<std::string, float, std::string> cases[] = {
      {"rope.freq_base", 1e30f, "warning rope.implausible_value 'llama.rope.freq_base' is 1e+30, outside [1, 10000000000]: " + base_why},
      {"rope.freq_base", 0.5f, "warning rope.implausible_value 'llama.rope.freq_base' is 0.5, outside [1, 10000000000]: " + base_why},
      {"rope.scaling.factor", 1e30f,
       "warning rope.implausible_value 'llama.rope.scaling.factor' is 1e+30, outside [0.0009765625, 1024]: " + factor_why},
      {"rope.scaling.factor", 1e-30f,
       "warning rope.implausible_value 'llama.rope.scaling.factor' is 1e-30, outside [0.0009765625, 1024]: " + factor_why},
  };
  for (const auto& [suffix, value, expected] : cases) {
    SCOPED_TRACE(suffix);
    EXPECT_EQ(rope_findings_with("llama." + suffix, value), expected + "\n");
  }
  // Llama 3's base and DeepSeek's factor of 40 pass.
  auto b = scaled("yarn", 40.0f, 4096, 163840);
  set(b, "llama.rope.freq_base", MetadataValue::of(500000.0f));
  expect_none(check_model(b), kRope);
}

TEST(CheckRope, FreqBaseAsFloat64IsAnError) {
  auto b = model();
  set(b, "llama.rope.freq_base", MetadataValue::of(10000.0));
  expect_single(check_model(b), kRope, "rope.wrong_type", Severity::error);
}

}  // namespace
}  // namespace ggufkit
