// gguf check, LoRA pass: what llama.cpp's adapter loader (llama-adapter.cpp,
// llama_adapter_lora_init_impl) checks before it applies an adapter, plus the rank agreement its
// graph needs. Without a base, the adapter alone; with one (--base), every pair against the
// base's tensors.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "check_internal.h"

namespace ggufkit::check {
namespace {

constexpr std::string_view kAdapterType = "adapter.type";
constexpr std::string_view kLoraAlpha = "adapter.lora.alpha";
constexpr std::string_view kAloraInvocationTokens = "adapter.alora.invocation_tokens";
constexpr std::string_view kLoraASuffix = ".lora_a";
constexpr std::string_view kLoraBSuffix = ".lora_b";

struct LoraPair {
  const TensorInfo* a = nullptr;
  const TensorInfo* b = nullptr;
  const TensorInfo* either() const { return a ? a : b; }
};

std::optional<uint64_t> offset_of(const ModelUnderCheck& model, std::string_view key) {
  const KeyValue* kv = model.find(key);
  return kv ? std::optional<uint64_t>(kv->offset) : std::nullopt;
}

// A string key llama.cpp reads with gguf_get_val_str (which aborts on another type). Returns ""
// when absent, as llama.cpp does, and nullopt when unreadable.
std::optional<std::string_view> string_key(const ModelUnderCheck& model, std::string_view key, Findings& out) {
  const KeyValue* kv = model.find(key);
  if (!kv) return std::string_view();
  const auto value = kv->value.as_string();
  if (!value) {
    out.error("lora.wrong_type", kv->key, kv->offset,
              fmt::format("{} is a {}; llama.cpp reads it as a string and aborts on any other type; write it as "
                          "a string",
                          kv->key, value_type_name(kv->value.type())));
  }
  return value;
}

void check_general_type(const ModelUnderCheck& adapter, Findings& out) {
  const auto general_type = string_key(adapter, keys::kType, out);
  if (general_type && *general_type != "adapter") {
    out.error("lora.not_adapter", keys::kType, offset_of(adapter, keys::kType),
              general_type->empty()
                  ? std::string("the file has no general.type; llama.cpp loads a LoRA adapter only when general.type "
                                "is 'adapter' (convert_lora_to_gguf.py writes it); set general.type = 'adapter'")
                  : fmt::format("general.type is '{}'; llama.cpp loads a LoRA adapter only when general.type is "
                                "'adapter'; check that this is an adapter file, and set general.type = 'adapter'",
                                *general_type));
  }
}

// adapter.type, the alpha and the aLoRA invocation tokens.
void check_adapter_metadata(const ModelUnderCheck& adapter, Findings& out) {
  const auto adapter_type = string_key(adapter, kAdapterType, out);
  if (adapter_type && *adapter_type != "lora") {
    out.error("lora.not_lora", kAdapterType, offset_of(adapter, kAdapterType),
              adapter_type->empty()
                  ? std::string("the file has no adapter.type; llama.cpp refuses a LoRA adapter unless adapter.type "
                                "is 'lora'; set adapter.type = 'lora'")
                  : fmt::format("adapter.type is '{}'; llama.cpp loads only 'lora' adapters this way and refuses "
                                "the file",
                                *adapter_type));
  }
  const KeyValue* alpha = adapter.find(kLoraAlpha);
  if (!alpha) {
    out.warning("lora.missing_alpha", kLoraAlpha, std::nullopt,
                "the adapter has no adapter.lora.alpha; llama.cpp then applies it at the user's scale without the "
                "alpha / rank factor, which is rarely what training intended; write the training's lora_alpha "
                "as float32");
  } else if (!alpha->value.get<float>()) {
    out.error("lora.wrong_type", alpha->key, alpha->offset,
              fmt::format("adapter.lora.alpha is a {}; llama.cpp reads it with gguf_get_val_f32 and aborts on "
                          "any other type; write it as float32",
                          value_type_name(alpha->value.type())));
  }
  const KeyValue* invocation = adapter.find(kAloraInvocationTokens);
  if (invocation) {
    const auto array = invocation->value.as_array();
    if (!array || array->element_type() != ValueType::UInt32) {
      out.error("lora.wrong_type", invocation->key, invocation->offset,
                "adapter.alora.invocation_tokens must be an array of uint32 token ids; llama.cpp refuses the "
                "adapter otherwise");
    }
  }
}

// lora_a/lora_b pairs by the name of the tensor they modify; other tensors are reported.
std::map<std::string_view, LoraPair> collect_pairs(const ModelUnderCheck& adapter, Findings& out) {
  std::map<std::string_view, LoraPair> pairs;
  for (const TensorInfo* t : adapter.tensors) {
    const std::string_view name = t->name;
    if (name.ends_with(kLoraASuffix)) {
      pairs[name.substr(0, name.size() - kLoraASuffix.size())].a = t;
    } else if (name.ends_with(kLoraBSuffix)) {
      pairs[name.substr(0, name.size() - kLoraBSuffix.size())].b = t;
    } else if (name.ends_with("_norm.weight")) {
      out.info("lora.ignored_tensor", name, t->info_offset,
               "llama.cpp ignores norm tensors in LoRA adapters; most adapters work without them, but if this one "
               "was trained with its norms, its output under llama.cpp will differ from the original");
    } else {
      out.error("lora.unexpected_tensor", name, t->info_offset,
                fmt::format("'{}' is neither a .lora_a nor a .lora_b tensor; llama.cpp refuses an adapter with "
                            "any other tensor ('unexpected suffix'); remove it",
                            name));
    }
  }
  return pairs;
}

// The embedding's pair is stored the other way round (lora_a is looked up by token like the
// embedding itself): a [rank, n_vocab], b [rank, n_embd]. Every other: a [n_in, rank], b [rank, n_out].
bool is_embedding(std::string_view target) { return target.ends_with("token_embd.weight"); }

std::string shape_text(const TensorInfo& t) {
  std::string s = "[";
  for (uint32_t i = 0; i < std::max<uint32_t>(t.n_dims, 1); ++i) s += fmt::format("{}{}", i ? ", " : "", t.ne[i]);
  return s + "]";
}

void check_pair(std::string_view target, const LoraPair& pair, Findings& out) {
  if (!pair.a || !pair.b) {
    const TensorInfo* present = pair.either();
    out.error("lora.missing_pair", present->name, present->info_offset,
              fmt::format("'{}' has no matching {}{}; llama.cpp refuses the adapter ('missing one component'); "
                          "every lora_a needs its lora_b",
                          present->name, target, pair.a ? kLoraBSuffix : kLoraASuffix));
    return;
  }
  const TensorInfo& a = *pair.a;
  const TensorInfo& b = *pair.b;
  const bool embedding = is_embedding(target);
  const int64_t rank_of_a = embedding ? a.ne[0] : a.ne[1];
  if (rank_of_a != b.ne[0]) {
    out.error("lora.rank_mismatch", a.name, a.info_offset,
              embedding ? fmt::format("the embedding pair's ranks differ: {} is {} and {} is {} (both need ne[0] = "
                                      "rank); the pair cannot be multiplied",
                                      a.name, shape_text(a), b.name, shape_text(b))
                        : fmt::format("{} is {} and {} is {}: lora_a's ne[1] must be lora_b's ne[0] (the rank); "
                                      "either the ranks differ or lora_a is not transposed (adapters from "
                                      "llama.cpp's old finetune example are no longer supported); llama.cpp "
                                      "refuses the adapter",
                                      a.name, shape_text(a), b.name, shape_text(b)));
  }
}

void check_against_base(const ModelUnderCheck& adapter, const ModelUnderCheck& base,
                        const std::map<std::string_view, LoraPair>& pairs, Findings& out) {
  const auto adapter_arch = adapter.meta().architecture();
  const auto base_arch = base.meta().architecture();
  if (adapter_arch != base_arch) {
    out.error("lora.architecture_mismatch", keys::kArchitecture, offset_of(adapter, keys::kArchitecture),
              fmt::format("the adapter is for '{}' but the base model is '{}'; llama.cpp refuses it ('model arch "
                          "and LoRA arch mismatch'); use the base model the adapter was trained on",
                          adapter_arch.value_or(""), base_arch.value_or("")));
  }
  for (const auto& [target, pair] : pairs) {
    if (!pair.a || !pair.b) continue;  // reported by check_pair
    const TensorInfo* weight = base.find_tensor(target);
    if (!weight) {
      out.error("lora.missing_base_tensor", pair.a->name, pair.a->info_offset,
                fmt::format("the pair targets '{}', which the base model does not have; llama.cpp refuses the "
                            "adapter ('does not exist in base model'); check that this is the right base model",
                            target));
      continue;
    }
    const TensorInfo& a = *pair.a;
    const TensorInfo& b = *pair.b;
    const bool fits = is_embedding(target) ? weight->ne[0] == b.ne[1] && weight->ne[1] == a.ne[1]
                                           : weight->ne[0] == a.ne[0] && weight->ne[1] == b.ne[1];
    if (!fits) {
      out.error("lora.shape_mismatch", a.name, a.info_offset,
                fmt::format("{} is {} and {} is {}, which do not fit the base's {} {} ({}); llama.cpp refuses "
                            "the adapter ('incorrect shape'); check that this is the right base model",
                            a.name, shape_text(a), b.name, shape_text(b), target, shape_text(*weight),
                            is_embedding(target) ? "expected lora_a [rank, ne1] and lora_b [rank, ne0]"
                                                 : "expected lora_a [ne0, rank] and lora_b [rank, ne1]"));
    }
  }
}

}  // namespace

bool looks_like_adapter(const ModelUnderCheck& model) {
  if (model.meta().type() == std::string_view("adapter") || model.find(kAdapterType)) return true;
  for (const TensorInfo* t : model.tensors) {
    if (t->name.ends_with(kLoraASuffix) || t->name.ends_with(kLoraBSuffix)) return true;
  }
  return false;
}

void check_lora(const ModelUnderCheck& adapter, const ModelUnderCheck* base, Findings& out) {
  const bool adapter_like = looks_like_adapter(adapter);
  if (!base && !adapter_like) return;
  check_general_type(adapter, out);
  // A model given as the adapter: llama.cpp stops at general.type, and so do we (its tensors
  // would all be "unexpected").
  if (!adapter_like) return;
  check_adapter_metadata(adapter, out);
  const auto pairs = collect_pairs(adapter, out);
  for (const auto& [target, pair] : pairs) check_pair(target, pair, out);
  if (base) check_against_base(adapter, *base, pairs, out);
}

}  // namespace ggufkit::check
