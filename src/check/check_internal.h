// Shared by the check passes: a collector of findings and the model the semantic passes look at.
#pragma once

#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "ggufkit/check.h"
#include "ggufkit/conventions.h"
#include "ggufkit/reader.h"

namespace ggufkit::check {

// Collects findings; the same (code, subject, offset) is kept once, so passes need not coordinate.
class Findings {
 public:
  void add(Severity severity, std::string_view code, std::string_view subject, std::optional<uint64_t> offset,
           std::string message);
  void error(std::string_view code, std::string_view subject, std::optional<uint64_t> offset, std::string message) {
    add(Severity::error, code, subject, offset, std::move(message));
  }
  void warning(std::string_view code, std::string_view subject, std::optional<uint64_t> offset, std::string message) {
    add(Severity::warning, code, subject, offset, std::move(message));
  }
  void info(std::string_view code, std::string_view subject, std::optional<uint64_t> offset, std::string message) {
    add(Severity::info, code, subject, offset, std::move(message));
  }
  // Findings added after this carry `file` (a shard or the base model); empty for the checked file.
  void set_file(std::string file) { file_ = std::move(file); }

  std::vector<Finding> take() { return std::move(findings_); }
  std::span<const Finding> all() const { return findings_; }

 private:
  std::vector<Finding> findings_;
  std::set<std::tuple<std::string, std::string, uint64_t, std::string>> seen_;
  std::string file_;
};

// The model as the semantic passes see it: metadata from one file (the first shard) and the
// tensors of every shard, in model order. Tensor records may have problems the structure pass
// reported (an unknown type id: type_traits() gives a record with block size 0); names and shapes
// are always as stored.
struct ModelUnderCheck {
  const GgufFile* metadata = nullptr;
  std::vector<const TensorInfo*> tensors;

  ModelMetadata meta() const { return ModelMetadata(*metadata); }
  const KeyValue* find(std::string_view key) const { return metadata->find(key); }
  // nullptr when absent; the first one when a broken file repeats a name.
  const TensorInfo* find_tensor(std::string_view name) const;
};

// The structure pass (structure.cpp). A problem the reader collected becomes a finding (an
// unknown type id a fork uses becomes compat.fork_type_id); `file` may be null when the parse
// stopped. The extras are what the reader accepts but should not go unnoticed.
void add_reader_problem(const Error& problem, const GgufFile* file, Findings& out);
void check_structure_extras(const GgufFile& file, Findings& out);

// The passes. Each reads the model and adds findings; none fails.
void check_required_metadata(const ModelUnderCheck& model, Findings& out);  // metadata.*
void check_architecture(const ModelUnderCheck& model, Findings& out);       // arch.*
void check_tokenizer(const ModelUnderCheck& model, Findings& out);          // tokenizer.*
void check_rope(const ModelUnderCheck& model, Findings& out);               // rope.*
// adapter.* checks; with a base, every lora_a/lora_b pair against the base's tensors.
void check_lora(const ModelUnderCheck& adapter, const ModelUnderCheck* base, Findings& out);  // lora.*
void check_projector(const ModelUnderCheck& model, Findings& out);          // mmproj.*
void check_compatibility(const ModelUnderCheck& model, Findings& out);      // compat.*

// What a file is (CheckReport::kind) decides which passes apply: general.type "adapter", an
// adapter.type key or lora_a/lora_b tensors; general.type "mmproj" or the "clip" architecture.
// A value type's name with its article, for messages: "an int32", "a uint32" (a "you" sound), "an array".
inline std::string with_article(std::string_view type_name) {
  const bool vowel = !type_name.empty() && std::string_view("aeio").find(type_name[0]) != std::string_view::npos;
  return (vowel ? "an " : "a ") + std::string(type_name);
}

bool looks_like_adapter(const ModelUnderCheck& model);
bool is_projector(const ModelUnderCheck& model);

}  // namespace ggufkit::check
