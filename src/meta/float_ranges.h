// The float hyperparameters llama.cpp asserts on or divides by, and the ranges they must lie in: a
// table (data, one row per key), read by check's architecture and projector passes (and so by
// convert, which refuses to write what check reports). Internal to the library.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ggufkit/value.h"

namespace ggufkit::meta {

// An interval of doubles; NaN is in none.
struct FloatInterval {
  double lo;
  double hi;
  bool lo_open = false;
  bool hi_open = false;
  bool contains(double v) const;
  std::string text() const;  // "[0, inf)"
};

struct FloatRule {
  std::string_view suffix;  // after "{arch}." (architecture rules) or "clip." (projector rules)
  // Outside it, llama.cpp aborts, divides by zero or computes NaN: an error.
  FloatInterval must;
  std::string_view must_why;
  // Outside it (but inside `must`), a value no trained model has: a warning.
  FloatInterval should;
  std::string_view should_why;
};

// Keys "{arch}.<suffix>" (llama-model.cpp, llama-graph.cpp, src/models/*.cpp).
std::span<const FloatRule> architecture_float_rules();
// The rule `arch` is held to for one of architecture_float_rules(): that rule, or the architecture's
// own (granite's graph divides by logit_scale, where the others multiply by it).
const FloatRule& architecture_float_rule(std::string_view arch, const FloatRule& rule);
// Keys "{arch}.rope.*" but the base and the factor (which check/rope.cpp checks in its own code).
std::span<const FloatRule> rope_float_rules();
// Keys "clip.<suffix>" (tools/mtmd/clip.cpp, mtmd-image.cpp); arrays are judged element by element.
std::span<const FloatRule> projector_float_rules();

// The rule of `key` when it is "<prefix>.<suffix>" of a rule in `rules`.
const FloatRule* find_float_rule(std::span<const FloatRule> rules, std::string_view prefix, std::string_view key);

struct FloatProblem {
  bool error;           // outside `must` (else outside `should`)
  double value;
  std::string message;  // "'llama.attention.layer_norm_rms_epsilon' is -1, outside [0, inf): llama.cpp aborts ..."
};

// The first problem of a float32 value, or of an array of float32 (element by element), under
// `rule`; nothing for other types (the loader's type checks report those).
std::optional<FloatProblem> judge_float(const FloatRule& rule, std::string_view key, const ValueView& value);

}  // namespace ggufkit::meta
