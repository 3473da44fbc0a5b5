// llama-quantize's preset rules (llama_tensor_get_type_impl in src/llama-quant.cpp of llama.cpp
// 80fb11ac, as behaviour) written as one table. Each tensor gets a role from its name; the first
// "choose" row whose preset, role and conditions match gives the type (no row: the preset's default
// type); then every matching "adjust" row may change that result. The fallback for rows that are
// not whole blocks comes after (policy.cpp).
#include "preset_rules.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>

#include "ggufkit/conventions.h"

namespace ggufkit::preset_rules {
namespace {

// llama_ftype ids (llama.h).
enum Preset : uint32_t {
  Q4_0 = 2, Q4_1 = 3, Q8_0 = 7, Q5_0 = 8, Q5_1 = 9, Q2_K = 10, Q3_K_S = 11, Q3_K_M = 12, Q3_K_L = 13,
  Q4_K_S = 14, Q4_K_M = 15, Q5_K_S = 16, Q5_K_M = 17, Q6_K = 18, IQ2_XXS = 19, IQ2_XS = 20, Q2_K_S = 21,
  IQ3_XS = 22, IQ3_XXS = 23, IQ1_S = 24, IQ4_NL = 25, IQ3_S = 26, IQ3_M = 27, IQ2_S = 28, IQ2_M = 29,
  IQ4_XS = 30, IQ1_M = 31, TQ1_0 = 36, TQ2_0 = 37, MXFP4_MOE = 38, Q2_0 = 41,
};

// A set of presets, as bits of their ids.
using Presets = uint64_t;
constexpr Presets only(std::initializer_list<Preset> presets) {
  Presets bits = 0;
  for (Preset p : presets) bits |= Presets{1} << p;
  return bits;
}
constexpr Presets kAny = ~Presets{0};
// The 1- and 2-bit IQ presets: their own branch in llama.cpp, and nothing else applies to them.
constexpr Presets kTwoBitIq = only({IQ2_XXS, IQ2_XS, IQ1_S, IQ2_S, IQ2_M, IQ1_M});

// What a tensor is, by name (llama.cpp's tensor_category, first match wins: "attn_qkv.weight"
// before "attn_v.weight"...). attn_qkv and attn_kv_b count as attn_v: llama.cpp tests for the
// attn_v-like group before its own attn_qkv branch, so that branch never runs.
enum class Role : uint8_t { output, token_embd, attn_v, attn_k, attn_q, attn_output, ffn_up, ffn_gate, ffn_down, other, any_but_output };

// Conditions on the model and on the tensor's place among its kind. "Layer" is the tensor's block
// (from its name in expert models, else its count among tensors of its role) of n_layer; attn_v
// rules count attn_v-like tensors instead (of n_attention_v).
enum class When : uint8_t {
  always,
  gqa_4,                // n_head / n_head_kv >= 4
  experts_4,            // 4 experts or more
  experts_8,            // exactly 8 experts (Mixtral)
  not_experts_8,
  falcon,
  not_falcon,
  first_eighth,         // layer < n/8
  first_sixteenth,      // layer < n/16
  middle,               // n/8 <= layer < 7n/8
  more_bits,            // llama.cpp's use_more_bits: first and last eighth, and every third layer between
  first_two,            // layer < 2
  first_four,           // layer < 4
  count_first_eighth,   // the 2-bit IQ branch: the ffn_down count (not the block) < n/8
  rows_not_whole_default_blocks,  // a row is not whole blocks of the preset's default type
  default_is_not_q8_0,
  expert_tensor,        // a 3-D tensor of experts (bailingmoe3: only its ffn experts)
  type_is_q3_k_or_q4_k, // adjust rows: the type chosen so far
  is_70b,
  with_imatrix,         // an importance matrix is given
  without_imatrix,
};

enum class Stage : uint8_t { choose, adjust };

struct Rule {
  Stage stage;
  Presets presets;
  Role role;
  When when;
  When and_when;
  TensorType type;
};

using T = TensorType;
constexpr When kAlways = When::always;

// clang-format off
constexpr Rule kRules[] = {
  // output.weight, and token_embd.weight when it doubles as the output (no output.weight)
  {Stage::choose, only({MXFP4_MOE}), Role::output, kAlways, kAlways, T::Q8_0},
  {Stage::choose, kAny, Role::output, When::falcon, kAlways, T::Q8_0},
  {Stage::choose, kAny, Role::output, When::rows_not_whole_default_blocks, kAlways, T::Q8_0},
  {Stage::choose, only({IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ2_S, IQ2_M, IQ1_M}), Role::output, kAlways, kAlways, T::Q5_K},
  {Stage::choose, kAny, Role::output, When::default_is_not_q8_0, kAlways, T::Q6_K},
  // MXFP4_MOE: experts MXFP4, everything else Q8_0
  {Stage::choose, only({MXFP4_MOE}), Role::any_but_output, When::expert_tensor, kAlways, T::MXFP4},
  {Stage::choose, only({MXFP4_MOE}), Role::any_but_output, kAlways, kAlways, T::Q8_0},
  // token_embd (its own tensor)
  {Stage::choose, only({IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M}), Role::token_embd, kAlways, kAlways, T::Q2_K},
  {Stage::choose, only({IQ2_S, IQ2_M, IQ3_XXS}), Role::token_embd, kAlways, kAlways, T::IQ3_S},
  {Stage::choose, only({TQ1_0, TQ2_0, Q2_0}), Role::token_embd, kAlways, kAlways, T::Q4_K},
  // the 1- and 2-bit IQ presets
  {Stage::choose, kTwoBitIq, Role::attn_v, When::gqa_4, kAlways, T::Q4_K},
  {Stage::choose, kTwoBitIq, Role::attn_v, When::experts_4, kAlways, T::Q4_K},
  {Stage::choose, only({IQ2_S, IQ2_M}), Role::attn_v, kAlways, kAlways, T::IQ3_S},
  {Stage::choose, kTwoBitIq, Role::attn_v, kAlways, kAlways, T::Q2_K},
  {Stage::choose, kTwoBitIq, Role::attn_k, When::experts_8, kAlways, T::Q4_K},
  {Stage::choose, only({IQ2_S, IQ2_M}), Role::ffn_down, When::count_first_eighth, kAlways, T::IQ3_S},
  {Stage::choose, kTwoBitIq, Role::ffn_down, When::count_first_eighth, kAlways, T::Q2_K},
  {Stage::choose, kTwoBitIq, Role::attn_output, When::experts_8, kAlways, T::Q5_K},
  {Stage::choose, only({IQ1_S, IQ1_M}), Role::attn_output, kAlways, kAlways, T::IQ2_XXS},
  {Stage::choose, only({IQ2_S, IQ2_M}), Role::attn_output, kAlways, kAlways, T::IQ3_S},
  // attn_v (and attn_qkv, attn_kv_b)
  {Stage::choose, only({Q2_K}), Role::attn_v, When::gqa_4, kAlways, T::Q4_K},
  {Stage::choose, only({Q2_K}), Role::attn_v, kAlways, kAlways, T::Q3_K},
  {Stage::choose, only({Q2_K_S}), Role::attn_v, When::gqa_4, kAlways, T::Q4_K},
  {Stage::choose, only({IQ3_XXS}), Role::attn_v, When::gqa_4, kAlways, T::Q4_K},
  {Stage::choose, only({IQ3_XXS}), Role::attn_v, When::with_imatrix, kAlways, T::IQ3_XXS},
  {Stage::choose, only({IQ3_XXS}), Role::attn_v, kAlways, kAlways, T::IQ3_S},
  {Stage::choose, only({IQ3_XS, IQ3_S}), Role::attn_v, When::gqa_4, kAlways, T::Q4_K},
  {Stage::choose, only({IQ3_M}), Role::attn_v, kAlways, kAlways, T::Q4_K},
  {Stage::choose, only({Q3_K_M}), Role::attn_v, When::first_two, kAlways, T::Q5_K},
  {Stage::choose, only({Q3_K_M}), Role::attn_v, kAlways, kAlways, T::Q4_K},
  {Stage::choose, only({Q3_K_L}), Role::attn_v, kAlways, kAlways, T::Q5_K},
  {Stage::choose, only({IQ4_NL, IQ4_XS}), Role::attn_v, When::gqa_4, kAlways, T::Q5_K},
  {Stage::choose, only({Q4_K_M, Q5_K_M}), Role::attn_v, When::more_bits, kAlways, T::Q6_K},
  {Stage::choose, only({Q4_K_S}), Role::attn_v, When::first_four, kAlways, T::Q5_K},
  {Stage::adjust, ~(kTwoBitIq | only({MXFP4_MOE})), Role::attn_v, When::is_70b, When::type_is_q3_k_or_q4_k, T::Q5_K},
  {Stage::adjust, ~(kTwoBitIq | only({MXFP4_MOE})), Role::attn_v, When::experts_8, kAlways, T::Q8_0},
  // attn_k, attn_q
  {Stage::choose, kAny, Role::attn_k, When::experts_8, kAlways, T::Q8_0},
  {Stage::choose, only({IQ3_XS}), Role::attn_k, kAlways, kAlways, T::IQ3_XXS},
  {Stage::choose, only({IQ3_XXS}), Role::attn_k, kAlways, kAlways, T::IQ2_S},
  {Stage::choose, only({IQ3_XS}), Role::attn_q, kAlways, kAlways, T::IQ3_XXS},
  {Stage::choose, only({IQ3_XXS}), Role::attn_q, kAlways, kAlways, T::IQ2_S},
  // ffn_down
  {Stage::choose, only({Q2_K}), Role::ffn_down, kAlways, kAlways, T::Q3_K},
  {Stage::choose, only({Q2_K_S}), Role::ffn_down, When::first_eighth, kAlways, T::Q4_K},
  {Stage::choose, only({IQ3_XXS}), Role::ffn_down, When::without_imatrix, When::first_eighth, T::Q4_K},
  {Stage::choose, only({IQ3_XXS}), Role::ffn_down, When::without_imatrix, kAlways, T::Q3_K},
  {Stage::choose, only({Q3_K_M}), Role::ffn_down, When::first_sixteenth, kAlways, T::Q5_K},
  {Stage::choose, only({Q3_K_M}), Role::ffn_down, When::not_falcon, kAlways, T::Q4_K},
  {Stage::choose, only({Q3_K_M}), Role::ffn_down, When::more_bits, kAlways, T::Q4_K},
  {Stage::choose, only({IQ3_M}), Role::ffn_down, When::first_eighth, kAlways, T::Q4_K},
  {Stage::choose, only({IQ3_M}), Role::ffn_down, When::experts_8, When::more_bits, T::Q4_K},
  {Stage::choose, only({Q3_K_L}), Role::ffn_down, When::falcon, kAlways, T::Q4_K},
  {Stage::choose, only({Q3_K_L}), Role::ffn_down, kAlways, kAlways, T::Q5_K},
  {Stage::choose, only({Q4_K_M}), Role::ffn_down, When::falcon, When::first_sixteenth, T::Q6_K},
  {Stage::choose, only({Q4_K_M}), Role::ffn_down, When::falcon, When::more_bits, T::Q5_K},
  {Stage::choose, only({Q4_K_M}), Role::ffn_down, When::falcon, kAlways, T::Q4_K},
  {Stage::choose, only({Q4_K_M}), Role::ffn_down, When::more_bits, kAlways, T::Q6_K},
  {Stage::choose, only({IQ4_NL, IQ4_XS}), Role::ffn_down, When::first_eighth, When::without_imatrix, T::Q5_K},
  {Stage::choose, only({Q5_K_M}), Role::ffn_down, When::more_bits, kAlways, T::Q6_K},
  {Stage::choose, only({Q4_K_S}), Role::ffn_down, When::not_falcon, When::first_eighth, T::Q5_K},
  // llama.cpp guards the first ffn_down layers of Q4_0 and Q5_0 with an importance matrix only
  {Stage::choose, only({Q4_0}), Role::ffn_down, When::with_imatrix, When::first_eighth, T::Q4_1},
  {Stage::choose, only({Q5_0}), Role::ffn_down, When::with_imatrix, When::first_eighth, T::Q5_1},
  // attn_output
  {Stage::choose, only({Q2_K, IQ3_XS, IQ3_XXS, Q3_K_S, Q3_K_M, IQ4_NL, Q4_K_S, Q4_K_M, IQ3_S, IQ3_M, IQ4_XS}),
   Role::attn_output, When::not_falcon, When::experts_8, T::Q5_K},
  {Stage::choose, only({Q2_K}), Role::attn_output, When::not_falcon, When::not_experts_8, T::Q3_K},
  {Stage::choose, only({IQ3_XXS}), Role::attn_output, When::not_falcon, When::not_experts_8, T::IQ3_S},
  {Stage::choose, only({Q3_K_M, IQ3_M}), Role::attn_output, When::not_falcon, When::not_experts_8, T::Q4_K},
  {Stage::choose, only({Q3_K_L}), Role::attn_output, When::not_falcon, When::not_experts_8, T::Q5_K},
  {Stage::choose, only({Q3_K_L}), Role::attn_output, When::falcon, kAlways, T::Q4_K},
  // ffn_gate, ffn_up
  {Stage::choose, only({IQ3_XS}), Role::ffn_gate, When::middle, kAlways, T::IQ3_XXS},
  {Stage::choose, only({IQ3_XS}), Role::ffn_up, When::middle, kAlways, T::IQ3_XXS},
};
// clang-format on

Role role_of(std::string_view name, bool tied_embeddings) {
  const auto has = [&](std::string_view s) { return name.find(s) != std::string_view::npos; };
  if (name == "output.weight") return Role::output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") {
    return tied_embeddings ? Role::output : Role::token_embd;
  }
  if (has("attn_qkv.weight") || has("attn_kv_b.weight") || has("attn_v.weight")) return Role::attn_v;
  if (has("attn_k.weight")) return Role::attn_k;
  if (has("attn_q.weight")) return Role::attn_q;
  if (has("attn_output.weight")) return Role::attn_output;
  if (has("ffn_up")) return Role::ffn_up;
  if (has("ffn_gate")) return Role::ffn_gate;
  if (has("ffn_down")) return Role::ffn_down;
  return Role::other;
}

bool use_more_bits(int layer, int n) { return layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2; }

// Where a tensor stands among its kind, for the layer conditions.
struct Position {
  int layer = 0, n = 0;  // the layer rules' index and count
  int count = 0;         // the raw count of this role's tensors so far (the 2-bit IQ branch)
};

struct Context {
  const ModelFacts& facts;
  const TensorInfo& tensor;
  Role role;
  TensorType default_type;
  TensorType chosen;
  Position at;
};

bool holds(When when, const Context& c) {
  const int i = c.at.layer, n = c.at.n;
  switch (when) {
    case When::always: return true;
    case When::gqa_4: return c.facts.n_gqa >= 4;
    case When::experts_4: return c.facts.n_expert >= 4;
    case When::experts_8: return c.facts.n_expert == 8;
    case When::not_experts_8: return c.facts.n_expert != 8;
    case When::falcon: return c.facts.arch == "falcon";
    case When::not_falcon: return c.facts.arch != "falcon";
    case When::first_eighth: return i < n / 8;
    case When::first_sixteenth: return i < n / 16;
    case When::middle: return i >= n / 8 && i < 7 * n / 8;
    case When::more_bits: return use_more_bits(i, n);
    case When::first_two: return i < 2;
    case When::first_four: return i < 4;
    case When::count_first_eighth: return c.at.count < c.facts.n_layer / 8;
    case When::rows_not_whole_default_blocks: return c.tensor.ne[0] % type_traits(c.default_type).block_size != 0;
    case When::default_is_not_q8_0: return c.default_type != TensorType::Q8_0;
    case When::expert_tensor:
      return c.tensor.ne[2] > 1 && (c.facts.arch != "bailingmoe3" || c.role == Role::ffn_up ||
                                    c.role == Role::ffn_gate || c.role == Role::ffn_down);
    case When::type_is_q3_k_or_q4_k: return c.chosen == TensorType::Q3_K || c.chosen == TensorType::Q4_K;
    case When::is_70b: return c.facts.is_70b;
    case When::with_imatrix: return c.facts.importance_matrix;
    case When::without_imatrix: return !c.facts.importance_matrix;
  }
  return false;
}

bool applies(const Rule& r, uint32_t file_type, const Context& c) {
  if (file_type >= 64 || (r.presets & (Presets{1} << file_type)) == 0) return false;
  const bool role_matches = r.role == c.role || (r.role == Role::any_but_output && c.role != Role::output);
  return role_matches && holds(r.when, c) && holds(r.and_when, c);
}

// The integer value of layer 0 for keys that may be per-layer arrays.
std::optional<uint64_t> first_layer_value(const GgufFile& file, const std::string& key) {
  const auto v = file.get(key);
  if (!v) return std::nullopt;
  if (const auto array = v->as_array()) {
    const auto first = array->at(0);
    return first ? first->as_uint() : std::nullopt;
  }
  return v->as_uint();
}

// llama.cpp's LLM_TYPE_70B, for the architectures whose hparams loaders name it.
bool is_70b_model(std::string_view arch, int n_layer, uint64_t n_head, uint64_t n_head_kv) {
  if (arch == "llama") return n_layer == 80 && n_head != n_head_kv;
  if (arch == "qwen2" || arch == "deci" || arch == "olmo") return n_layer == 80;
  if (arch == "jais2") return n_layer == 68;
  return false;
}

}  // namespace

Expected<ModelFacts> model_facts(const GgufFile& metadata, std::span<const TensorInfo* const> tensors,
                                 std::span<const MetadataOverride> overrides) {
  ModelFacts facts;
  const ModelMetadata meta(metadata);
  facts.arch = std::string(meta.architecture().value_or(""));
  // llama_model_quantize loads the hyperparameters with the --override-kv values: an int override
  // replaces a scalar key (present or not: block_count, expert_count), but not a per-layer array,
  // and not a head count the file lacks (llama.cpp reads those only when the file has them).
  // An override of another type is ignored (llama.cpp warns and reads the file's value).
  const auto hparam = [&](const std::string& key, bool only_when_present) -> std::optional<uint64_t> {
    const auto file_value = first_layer_value(metadata, key);
    for (const MetadataOverride& o : overrides) {
      if (o.key != key) continue;
      const auto stored = metadata.get(key);
      if ((only_when_present && !stored) || (stored && stored->as_array())) break;
      if (const auto v = o.value.view().as_uint(); v && o.value.type() == ValueType::UInt32) return v;
      break;
    }
    return file_value;
  };
  const std::string prefix = facts.arch + ".";
  facts.n_layer = static_cast<int>(hparam(prefix + "block_count", false).value_or(0));
  const uint64_t n_head = hparam(prefix + "attention.head_count", true).value_or(0);
  // llama.cpp's loader: without the key, as many kv heads as heads.
  const uint64_t n_head_kv = hparam(prefix + "attention.head_count_kv", true).value_or(n_head);
  facts.n_gqa = n_head_kv == 0 ? 0 : static_cast<int>(n_head / n_head_kv);
  facts.n_expert = static_cast<int>(hparam(prefix + "expert_count", false).value_or(0));
  facts.is_70b = is_70b_model(facts.arch, facts.n_layer, n_head, n_head_kv);
  for (const TensorInfo* t : tensors) {
    if (t->name == "output.weight") facts.tied_embeddings = false;
    if (role_of(t->name, true) == Role::attn_v) ++facts.n_attention_v;
  }
  return facts;
}

Expected<TensorType> TypeChooser::choose(const TensorInfo& tensor) {
  const Role role = role_of(tensor.name, facts_.tied_embeddings);
  Position at;
  // ffn tensors: their block, read from the name in expert models (llama.cpp: experts need not be
  // stored in layer order), else their count so far.
  const auto ffn_position = [&](int& seen) -> Expected<Position> {
    Position p{seen, facts_.n_layer, seen};
    ++seen;
    if (std::max(1, facts_.n_expert) > 1) {
      int layer = -1;
      if (std::sscanf(std::string(tensor.name).c_str(), "blk.%d.", &layer) != 1 || layer < 0 ||
          layer >= facts_.n_layer) {
        return make_error(ErrorCode::invalid_argument, tensor.info_offset, std::string(tensor.name),
                          "cannot tell the block of this expert model's tensor (of " +
                              std::to_string(facts_.n_layer) + ")");
      }
      p.layer = layer;
    }
    return p;
  };
  switch (role) {
    case Role::attn_v: at = {attention_v_seen_, facts_.n_attention_v, attention_v_seen_}; ++attention_v_seen_; break;
    case Role::ffn_down:
    case Role::ffn_gate:
    case Role::ffn_up: {
      int& seen = role == Role::ffn_down ? ffn_down_seen_ : role == Role::ffn_gate ? ffn_gate_seen_ : ffn_up_seen_;
      auto p = ffn_position(seen);
      if (!p) return p.error();
      at = *p;
      break;
    }
    default: break;
  }
  Context c{facts_, tensor, role, default_type_, default_type_, at};
  const auto first = std::ranges::find_if(kRules, [&](const Rule& r) {
    return r.stage == Stage::choose && applies(r, file_type_, c);
  });
  if (first != std::end(kRules)) c.chosen = first->type;
  for (const Rule& r : kRules) {
    if (r.stage == Stage::adjust && applies(r, file_type_, c)) c.chosen = r.type;
  }
  return c.chosen;
}

bool needs_importance_matrix(std::string_view name, TensorType type, uint32_t file_type) {
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight" || name == "output.weight") return false;
  switch (type) {
    case TensorType::IQ3_XXS:
    case TensorType::IQ2_XXS:
    case TensorType::IQ2_XS:
    case TensorType::IQ2_S:
    case TensorType::IQ1_M:
    case TensorType::IQ1_S: return true;
    case TensorType::Q2_K: return file_type == Q2_K_S;  // only a Q2_K_S file's Q2_K tensors
    default: return false;
  }
}

}  // namespace ggufkit::preset_rules
