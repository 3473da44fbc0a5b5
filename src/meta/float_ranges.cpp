#include "meta/float_ranges.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace ggufkit::meta {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Every finite number; NaN and the infinities are outside.
constexpr FloatInterval kFinite{-kInf, kInf, true, true};
// Finite and >= 0.
constexpr FloatInterval kNonNegative{0, kInf, false, true};
// Finite and > 0.
constexpr FloatInterval kPositive{0, kInf, true, true};

// What llama.cpp does with each value (its source at the version the oracle ships, node-llama-cpp
// 3.21.1):
// - epsilons: ggml_norm, ggml_rms_norm and ggml_l2_norm (ggml-cpu/ops.cpp) GGML_ASSERT(eps >= 0.0f),
//   which aborts on a negative epsilon and on NaN (the comparison is false); an infinite one makes
//   every normalized activation 0. clip.cpp's build_norm takes clip.*.attention.layer_norm_epsilon
//   into the same operations.
// - soft-caps (llama-graph.cpp build_attn_mha, models/gemma2.cpp, gemma3.cpp, grok): the scores are
//   scaled by 1/cap, put through tanh and scaled by cap; gemma2 does so whatever the value, so 0
//   divides by zero there.
// - logit_scale: command-r and cohere2 multiply the logits by it when it is not 0, granite divides
//   them by it (models/granite*.cpp: ggml_scale(cur, 1.0f / f_logit_scale)).
// - embedding_scale, residual_scale (granite), attention.scale (0: 1/sqrt(head size)),
//   expert_weights_scale (llama-graph.cpp build_moe_ffn, skipped at 0 and 1): multipliers, 0 means
//   "not applied".
// - clip.vision.image_mean / image_std (mtmd-image.cpp normalize): (pixel - mean) / std.
// The RoPE keys are the RoPE pass's (check/rope.cpp): the base and the factor in its own code, the
// others in kRopeRules.
constexpr std::string_view kEpsilonMust =
    "llama.cpp aborts on a negative or NaN epsilon (GGML_ASSERT(eps >= 0.0f) in ggml's norm operations), and an "
    "infinite one turns every normalized activation into 0";
constexpr std::string_view kEpsilonShould =
    "an epsilon is a small positive number (1e-5, 1e-6): at 0 a row of zeros is divided by zero, and above 0.1 it "
    "swamps the variance it is added to";
constexpr std::string_view kSoftcapMust =
    "llama.cpp divides the scores by the cap before the tanh and multiplies them by it after: NaN or an infinity "
    "makes every logit NaN";
constexpr std::string_view kSoftcapShould =
    "a cap is a positive number (gemma's 30 and 50): gemma2 divides by it whatever it is, so 0 divides by zero, "
    "and a negative cap is a sign error";
constexpr std::string_view kMultiplierMust =
    "llama.cpp multiplies activations by it (and granite divides its logits by logit_scale): NaN or an infinity "
    "makes the output NaN";
constexpr std::string_view kMultiplierShould =
    "a scale is positive (0 means not applied): a negative one flips the sign of what it scales";

constexpr FloatInterval kEpsilonRange{0, 0.1, true, false};  // (0, 0.1]

constexpr FloatRule kArchitectureRules[] = {
    {"attention.layer_norm_rms_epsilon", kNonNegative, kEpsilonMust, kEpsilonRange, kEpsilonShould},
    {"attention.layer_norm_epsilon", kNonNegative, kEpsilonMust, kEpsilonRange, kEpsilonShould},
    {"attention.group_norm_epsilon", kNonNegative, kEpsilonMust, kEpsilonRange, kEpsilonShould},
    {"attn_logit_softcapping", kFinite, kSoftcapMust, kPositive, kSoftcapShould},
    {"final_logit_softcapping", kFinite, kSoftcapMust, kPositive, kSoftcapShould},
    {"router_logit_softcapping", kFinite, kSoftcapMust, kPositive, kSoftcapShould},
    {"logit_scale", kFinite, kMultiplierMust, kNonNegative, kMultiplierShould},
    {"embedding_scale", kFinite, kMultiplierMust, kNonNegative, kMultiplierShould},
    {"residual_scale", kFinite, kMultiplierMust, kNonNegative, kMultiplierShould},
    {"attention.scale", kFinite, kMultiplierMust, kNonNegative, kMultiplierShould},
    {"expert_weights_scale", kFinite, kMultiplierMust, kNonNegative, kMultiplierShould},
};

// granite's graph (granite, granitemoe and minicpm share it; granite_swa, graniteswitch) scales the
// logits by 1/logit_scale whatever it is (models/granite.cpp: ggml_scale(cur, 1.0f / f_logit_scale)):
// there 0 divides by zero. granitehybrid, command-r and cohere2 skip it at 0; grok, talkie and
// muse-glimmer multiply by it: the table's rule holds for them.
constexpr std::string_view kDivisorMust =
    "granite's graph divides its logits by logit_scale whatever it is: 0 divides by zero, NaN or an infinity makes "
    "every logit NaN, and a negative one flips them";
constexpr FloatRule kDividedLogitScale{"logit_scale", kPositive, kDivisorMust, kPositive, kDivisorMust};
constexpr std::string_view kDividingArchitectures[] = {"granite", "granitemoe", "granite_swa", "graniteswitch",
                                                       "minicpm"};

// The RoPE pass's floats besides the base and the factor (check/rope.cpp checks those): yarn's
// magnitude and correction parameters (ggml's rope: ext_factor mixes the extrapolated and
// interpolated angles, attn_factor scales the result, beta_fast/beta_slow place the correction
// range by dividing the context by them; llama-context.cpp takes a negative ext_factor as "not set").
constexpr std::string_view kRopeMust = "ggml's RoPE computes every rotation angle from it: NaN or an infinity makes "
                                       "every query and key NaN";
constexpr std::string_view kRopeScaleShould =
    "it multiplies the rotated queries and keys (1 when unscaled): 0 or a negative value is no scaling a model "
    "was trained with";
constexpr std::string_view kRopeBetaShould =
    "a yarn beta is a positive number of rotations (32 and 1 by default): the context is divided by it";
constexpr std::string_view kRopeAnyShould = "";

constexpr FloatRule kRopeRules[] = {
    {"rope.scaling.attn_factor", kFinite, kRopeMust, kPositive, kRopeScaleShould},
    {"rope.scaling.yarn_attn_factor", kFinite, kRopeMust, kPositive, kRopeScaleShould},
    {"rope.scaling.yarn_beta_fast", kFinite, kRopeMust, kPositive, kRopeBetaShould},
    {"rope.scaling.yarn_beta_slow", kFinite, kRopeMust, kPositive, kRopeBetaShould},
    {"rope.scaling.yarn_ext_factor", kFinite, kRopeMust, kFinite, kRopeAnyShould},
    {"rope.scaling.yarn_log_multiplier", kFinite, kRopeMust, kFinite, kRopeAnyShould},
};

constexpr std::string_view kClipEpsilonMust =
    "clip aborts on a negative or NaN epsilon (GGML_ASSERT(eps >= 0.0f) in ggml's norm operations), and an "
    "infinite one turns every normalized activation into 0";
constexpr std::string_view kMeanMust = "clip subtracts it from every pixel: NaN or an infinity makes the image NaN";
constexpr std::string_view kStdMust =
    "clip divides every pixel by it: 0 divides by zero, NaN or an infinity makes the image NaN, and a negative one "
    "inverts the image";

constexpr FloatRule kProjectorRules[] = {
    {"vision.attention.layer_norm_epsilon", kNonNegative, kClipEpsilonMust, kEpsilonRange, kEpsilonShould},
    {"audio.attention.layer_norm_epsilon", kNonNegative, kClipEpsilonMust, kEpsilonRange, kEpsilonShould},
    {"vision.image_mean", kFinite, kMeanMust, kFinite, kMeanMust},
    {"vision.image_std", kPositive, kStdMust, kPositive, kStdMust},
};

std::string bound_text(double v) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  return fmt::format("{}", v);
}

}  // namespace

bool FloatInterval::contains(double v) const {
  if (std::isnan(v)) return false;
  // The values are float32: so are the bounds (0.1f is a little above 0.1).
  const double low = static_cast<float>(lo), high = static_cast<float>(hi);
  const bool above = lo_open ? v > low : v >= low;
  const bool below = hi_open ? v < high : v <= high;
  return above && below;
}

std::string FloatInterval::text() const {
  return fmt::format("{}{}, {}{}", lo_open ? '(' : '[', bound_text(lo), bound_text(hi), hi_open ? ')' : ']');
}

std::span<const FloatRule> architecture_float_rules() { return kArchitectureRules; }
const FloatRule& architecture_float_rule(std::string_view arch, const FloatRule& rule) {
  if (rule.suffix != kDividedLogitScale.suffix) return rule;
  for (const std::string_view a : kDividingArchitectures) {
    if (a == arch) return kDividedLogitScale;
  }
  return rule;
}
std::span<const FloatRule> projector_float_rules() { return kProjectorRules; }
std::span<const FloatRule> rope_float_rules() { return kRopeRules; }

const FloatRule* find_float_rule(std::span<const FloatRule> rules, std::string_view prefix, std::string_view key) {
  if (key.size() <= prefix.size() + 1 || !key.starts_with(prefix) || key[prefix.size()] != '.') return nullptr;
  const std::string_view suffix = key.substr(prefix.size() + 1);
  for (const FloatRule& r : rules) {
    if (r.suffix == suffix) return &r;
  }
  return nullptr;
}

std::optional<FloatProblem> judge_float(const FloatRule& rule, std::string_view key, const ValueView& value) {
  const auto judge = [&](float f, std::string_view what) -> std::optional<FloatProblem> {
    const double v = f;
    const bool error = !rule.must.contains(v);
    if (!error && rule.should.contains(v)) return std::nullopt;
    const FloatInterval& range = error ? rule.must : rule.should;
    return FloatProblem{error, v,
                        fmt::format("'{}'{} is {}, outside {}: {}", key, what, f, range.text(),
                                    error ? rule.must_why : rule.should_why)};
  };
  if (const auto f = value.get<float>()) return judge(*f, "");
  const auto array = value.as_array();
  if (!array || array->element_type() != ValueType::Float32) return std::nullopt;
  std::optional<FloatProblem> first;  // the first error, else the first warning
  for (uint64_t i = 0; i < array->size(); ++i) {
    auto problem = judge(*array->get<float>(i), fmt::format(" element {}", i));
    if (problem && problem->error) return problem;
    if (problem && !first) first = std::move(problem);
  }
  return first;
}

}  // namespace ggufkit::meta
