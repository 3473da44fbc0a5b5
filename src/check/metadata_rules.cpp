// Required metadata (issue 5, item 2): the keys every engine relies on, the types the GGUF spec
// gives the general.* keys, and general.file_type against the tensors' actual types.
#include <fmt/format.h>

#include <map>

#include "check_internal.h"
#include "ggufkit/tensor_types.h"

namespace ggufkit::check {
namespace {

// The general.* keys of the GGUF spec (docs/gguf.md) and their types. Arrays are arrays of
// strings. llama.cpp reads general.architecture and general.file_type strictly typed (a wrong
// type is an error); the others only informational (a wrong type is a warning).
struct StandardKey {
  std::string_view key;
  ValueType type;
  bool strict;
};
constexpr StandardKey kStandardKeys[] = {
    {"general.architecture", ValueType::String, true},
    {"general.file_type", ValueType::UInt32, true},
    {"general.quantization_version", ValueType::UInt32, false},
    {"general.type", ValueType::String, false},
    {"general.name", ValueType::String, false},
    {"general.author", ValueType::String, false},
    {"general.version", ValueType::String, false},
    {"general.organization", ValueType::String, false},
    {"general.basename", ValueType::String, false},
    {"general.finetune", ValueType::String, false},
    {"general.description", ValueType::String, false},
    {"general.quantized_by", ValueType::String, false},
    {"general.size_label", ValueType::String, false},
    {"general.license", ValueType::String, false},
    {"general.license.name", ValueType::String, false},
    {"general.license.link", ValueType::String, false},
    {"general.url", ValueType::String, false},
    {"general.doi", ValueType::String, false},
    {"general.uuid", ValueType::String, false},
    {"general.repo_url", ValueType::String, false},
    {"general.source.url", ValueType::String, false},
    {"general.source.doi", ValueType::String, false},
    {"general.source.uuid", ValueType::String, false},
    {"general.source.repo_url", ValueType::String, false},
    {"general.base_model.count", ValueType::UInt32, false},
    {"general.dataset.count", ValueType::UInt32, false},
    {"general.tags", ValueType::Array, false},
    {"general.languages", ValueType::Array, false},
    {"general.datasets", ValueType::Array, false},
};

std::string type_text(const ValueView& v) {
  if (const auto arr = v.as_array()) return fmt::format("array of {}", value_type_name(arr->element_type()));
  return std::string(value_type_name(v.type()));
}

void check_standard_types(const ModelUnderCheck& model, Findings& out) {
  for (const StandardKey& k : kStandardKeys) {
    const KeyValue* kv = model.find(k.key);
    if (kv == nullptr) continue;
    const ValueView& v = kv->value;
    bool ok = v.type() == k.type;
    if (ok && k.type == ValueType::Array) ok = v.as_array()->element_type() == ValueType::String;
    if (ok) continue;
    const std::string expected =
        k.type == ValueType::Array ? std::string("array of string") : std::string(value_type_name(k.type));
    if (k.strict) {
      out.error("metadata.wrong_type", k.key, kv->offset,
                fmt::format("{} is {}; the spec and llama.cpp want {} (llama.cpp refuses the file): set it again "
                            "with gguf set --type {}",
                            k.key, type_text(v), expected, expected));
    } else {
      out.warning("metadata.wrong_type", k.key, kv->offset,
                  fmt::format("{} is {}; the spec gives it the type {}: tools that follow the spec will not read it",
                              k.key, type_text(v), expected));
    }
  }
}

bool is_quantized(const TensorInfo& t) {
  const TypeTraits* traits = find_type_traits(static_cast<uint32_t>(t.type));
  return traits != nullptr && traits->quantized;
}

// Does the file hold what general.file_type claims? Its preset's main type must appear, unless no
// tensor could take it (rows not a multiple of its block, where llama-quantize falls back).
void check_file_type(const ModelUnderCheck& model, Findings& out) {
  const KeyValue* kv = model.find(keys::kFileType);
  if (kv == nullptr) return;
  const auto id = kv->value.as_uint();
  if (!id) return;  // wrong type: reported above
  const FileTypeInfo* info = find_file_type(static_cast<uint32_t>(*id));
  if (info == nullptr) {
    out.warning("metadata.unknown_file_type", keys::kFileType, kv->offset,
                fmt::format("general.file_type {} is not a llama.cpp file type; llama.cpp only prints it, but tools "
                            "that name the quantization will not know it",
                            *id));
    return;
  }
  if (info->removed) {
    out.warning("metadata.removed_file_type", keys::kFileType, kv->offset,
                fmt::format("general.file_type {} ({}) is a file type llama.cpp removed", *id, info->name));
    return;
  }
  const auto main = file_type_default_type(info->id);
  if (!main || model.tensors.empty()) return;
  std::map<TensorType, size_t> counts;
  bool any_could_hold = false;
  const uint32_t block = type_traits(*main).block_size;
  for (const TensorInfo* t : model.tensors) {
    ++counts[t->type];
    if (t->n_dims >= 2 && block != 0 && t->ne[0] % block == 0) any_could_hold = true;
  }
  const bool all_f32 = counts.size() == 1 && counts.begin()->first == TensorType::F32;
  bool consistent;
  if (*main == TensorType::F32) {
    consistent = all_f32;
  } else {
    consistent = counts.contains(*main) || !any_could_hold;
  }
  if (consistent) return;
  TensorType most = counts.begin()->first;
  for (const auto& [type, n] : counts) {
    if (n > counts[most]) most = type;
  }
  out.warning("metadata.file_type_mismatch", keys::kFileType, kv->offset,
              fmt::format("general.file_type says {} ({}), but no tensor is {} (the most common type is {}): tools "
                          "that show the quantization from this key mislabel the file; set it to what the file holds",
                          info->name, info->description, type_name(*main), type_name(most)));
}

}  // namespace

void check_required_metadata(const ModelUnderCheck& model, Findings& out) {
  const KeyValue* arch = model.find(keys::kArchitecture);
  if (arch == nullptr) {
    out.error("metadata.missing_architecture", keys::kArchitecture, std::nullopt,
              "general.architecture is missing: llama.cpp cannot load a model without it (it picks the "
              "hyperparameter keys and the tensor layout by it); add it with gguf set");
  } else if (const auto name = arch->value.as_string(); name && name->empty()) {
    out.error("metadata.missing_architecture", keys::kArchitecture, arch->offset,
              "general.architecture is empty: llama.cpp cannot load a model without one");
  }
  check_standard_types(model, out);
  bool any_quantized = false;
  for (const TensorInfo* t : model.tensors) any_quantized |= is_quantized(*t);
  if (any_quantized && model.find(keys::kQuantizationVersion) == nullptr) {
    out.warning("metadata.missing_quantization_version", keys::kQuantizationVersion, std::nullopt,
                "the file has quantized tensors but no general.quantization_version: llama.cpp does not need it, "
                "but it is how readers tell ggml's current block layouts (version 2) from older ones; "
                "gguf set FILE general.quantization_version 2 --type uint32 if the file is current");
  }
  if (const KeyValue* kv = model.find(keys::kQuantizationVersion)) {
    if (const auto v = kv->value.as_uint(); v && *v != kQuantizationVersionCurrent) {
      out.warning("metadata.quantization_version", keys::kQuantizationVersion, kv->offset,
                  fmt::format("general.quantization_version is {}; llama.cpp's current block layouts are version 2",
                              *v));
    }
  }
  check_file_type(model, out);
}

}  // namespace ggufkit::check
