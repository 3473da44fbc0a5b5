// gguf check: the driver. Structure first (a file that cannot be parsed gets only structure
// findings), then the semantic passes over the model.
#include "ggufkit/check.h"

#include <fmt/format.h>

#include <algorithm>

#include "check_internal.h"
#include "ggufkit/reader.h"
#include "ggufkit/split.h"

namespace ggufkit {

std::string_view severity_name(Severity severity) {
  switch (severity) {
    case Severity::error: return "error";
    case Severity::warning: return "warning";
    case Severity::info: return "info";
  }
  return "error";
}

std::string Finding::describe() const {
  std::string out = fmt::format("{} {}", severity_name(severity), code);
  if (!file.empty()) out += fmt::format(" in {}", file);
  if (offset) out += fmt::format(" at offset {}", *offset);
  if (!subject.empty()) out += fmt::format(" ({})", subject);
  out += ": ";
  out += message;
  return out;
}

std::string_view file_kind_name(FileKind kind) {
  switch (kind) {
    case FileKind::model: return "model";
    case FileKind::adapter: return "adapter";
    case FileKind::projector: return "projector";
    case FileKind::vocabulary: return "vocabulary";
    case FileKind::shard: return "shard";
  }
  return "model";
}

size_t CheckReport::count(Severity severity) const {
  return static_cast<size_t>(
      std::count_if(findings.begin(), findings.end(), [&](const Finding& f) { return f.severity == severity; }));
}

bool CheckReport::passed(bool strict) const {
  return count(Severity::error) == 0 && (!strict || count(Severity::warning) == 0);
}

namespace check {

void Findings::add(Severity severity, std::string_view code, std::string_view subject, std::optional<uint64_t> offset,
                   std::string message) {
  auto key = std::make_tuple(std::string(code), std::string(subject), offset.value_or(UINT64_MAX), file_);
  if (!seen_.insert(std::move(key)).second) return;
  findings_.push_back(Finding{severity, std::string(code), std::string(subject), offset, std::move(message), file_});
}

const TensorInfo* ModelUnderCheck::find_tensor(std::string_view name) const {
  for (const TensorInfo* t : tensors) {
    if (t->name == name) return t;
  }
  return nullptr;
}

namespace {

// An integer key of the file (split.count, split.no); nullopt when absent or not an integer.
std::optional<uint64_t> uint_key(const GgufFile& file, std::string_view key) {
  const auto v = file.get(key);
  return v ? v->as_uint() : std::nullopt;
}

// A shard of a split model other than the first (split.count > 1, split.no > 0).
bool is_later_shard(const GgufFile& file) {
  return uint_key(file, keys::kSplitCount).value_or(0) > 1 && uint_key(file, keys::kSplitNo).value_or(0) > 0;
}

FileKind kind_of(const ModelUnderCheck& model, bool later_shard) {
  if (later_shard) return FileKind::shard;
  if (looks_like_adapter(model)) return FileKind::adapter;
  if (is_projector(model)) return FileKind::projector;
  if (model.tensors.empty()) return FileKind::vocabulary;
  return FileKind::model;
}

// The passes that apply to the kind of file (check.h, FileKind).
void run_semantic_passes(const ModelUnderCheck& model, const ModelUnderCheck* base, FileKind kind, Findings& out) {
  switch (kind) {
    case FileKind::shard: {
      const GgufFile& file = *model.metadata;
      out.info("split.not_first_shard", keys::kSplitNo, file.find(keys::kSplitNo)->offset,
               fmt::format("this is shard {} of {}: its structure and tensor types were checked; check the first "
                           "shard (-00001-of-) to check the whole model",
                           *uint_key(file, keys::kSplitNo) + 1, *uint_key(file, keys::kSplitCount)));
      check_compatibility(model, out);
      return;
    }
    case FileKind::adapter:
      check_required_metadata(model, out);
      check_lora(model, base, out);
      check_compatibility(model, out);
      return;
    case FileKind::projector:
      check_required_metadata(model, out);
      check_projector(model, out);
      check_compatibility(model, out);
      return;
    case FileKind::vocabulary:  // the hyperparameters it gives must make sense, as in a model
      check_required_metadata(model, out);
      check_architecture(model, out);
      check_tokenizer(model, out);
      check_rope(model, out);
      return;
    case FileKind::model:
      check_required_metadata(model, out);
      check_architecture(model, out);
      check_tokenizer(model, out);
      check_rope(model, out);
      check_lora(model, base, out);  // with --base: says that the file is a model, not an adapter
      check_compatibility(model, out);
      return;
  }
}

void add_tensors(const GgufFile& file, ModelUnderCheck& model) {
  for (const TensorInfo& t : file.tensors()) model.tensors.push_back(&t);
}

Expected<GgufFile> prefix_file(std::span<const std::byte> bytes, uint64_t file_size, const OpenOptions& options) {
  auto r = GgufFile::parse_prefix(bytes, file_size, options);
  if (!r) return std::move(r).error();
  if (r->file) return std::move(*r->file);
  return make_error(ErrorCode::truncated, bytes.size(), {},
                    fmt::format("the header continues past the {} bytes given (it needs at least {})", bytes.size(),
                                r->needed));
}

// One file's structure: every problem the reader can get past, then the extras. nullopt when the
// parse stopped (the stopping problem is a finding too).
// With `file_size`, `bytes` are the first bytes of a larger file (a remote header): the tensor
// data is not checked.
std::optional<GgufFile> check_structure(std::span<const std::byte> bytes, Findings& out,
                                        std::optional<uint64_t> file_size = std::nullopt) {
  std::vector<Error> problems;
  OpenOptions options;
  options.allow_metadata_only = true;  // reported as structure.metadata_only
  options.on_problem = [&](const Error& e) {
    problems.push_back(e);
    return true;
  };
  auto file = file_size ? prefix_file(bytes, *file_size, options) : GgufFile::parse(bytes, options);
  for (const Error& e : problems) add_reader_problem(e, file ? &*file : nullptr, out);
  if (!file) {
    add_reader_problem(file.error(), nullptr, out);
    return std::nullopt;
  }
  check_structure_extras(*file, out);
  return std::move(file).value();
}

struct Shard {
  std::filesystem::path path;
  std::optional<MappedFile> mapping;
  std::optional<GgufFile> file;
};

// The other shards of a split model whose first shard is `first`: each one's structure, and the
// model's consistency as llama.cpp's loader checks it. Returns the shards that parsed.
std::vector<Shard> check_other_shards(const std::filesystem::path& path, const GgufFile& first, Findings& out) {
  std::vector<Shard> shards;
  const auto count = uint_key(first, keys::kSplitCount);
  // A later shard alone is checked as one (run_semantic_passes); the model from its first shard.
  if (!count || *count <= 1 || is_later_shard(first)) return shards;
  const KeyValue* count_kv = first.find(keys::kSplitCount);
  const auto n = static_cast<uint32_t>(std::min<uint64_t>(*count, kMaxShards));
  const auto prefix = split_prefix(path.string(), 0, n);
  if (!prefix) {
    out.error("split.bad_name", keys::kSplitCount, count_kv->offset,
              fmt::format("split.count is {} but the file is not named PREFIX-00001-of-{:05}.gguf, so llama.cpp "
                          "cannot find the other shards: rename the shards as gguf split names them",
                          *count, n));
    return shards;
  }
  bool all_parsed = true;
  for (uint32_t i = 1; i < n; ++i) {
    Shard shard;
    shard.path = split_path(*prefix, i, n);
    out.set_file(shard.path.string());
    auto mapping = MappedFile::open(shard.path);
    if (!mapping) {
      out.error("split.missing_shard", {}, std::nullopt,
                fmt::format("shard {} of {} cannot be read ({}): llama.cpp will refuse the model", i + 1, n,
                            mapping.error().message));
      all_parsed = false;
      continue;
    }
    shard.mapping.emplace(std::move(mapping).value());
    shard.file = check_structure(shard.mapping->bytes(), out);
    all_parsed &= shard.file.has_value();
    shards.push_back(std::move(shard));
  }
  out.set_file({});
  // The loader's own consistency rules (split.no, split.count, tensor count, repeated names,
  // metadata agreeing): SplitModel::open applies them; its first complaint is the finding.
  if (all_parsed) {
    if (auto model = SplitModel::open(path); !model && model.error().code != ErrorCode::io_error) {
      out.error("split.inconsistent", model.error().subject, std::nullopt,
                fmt::format("{}: llama.cpp will refuse the model", model.error().message));
    }
  }
  return shards;
}

}  // namespace
}  // namespace check

CheckReport check_bytes(std::span<const std::byte> bytes, const CheckOptions& options) {
  return check_header(bytes, std::nullopt, options);
}

CheckReport check_header(std::span<const std::byte> header, std::optional<uint64_t> file_size,
                         const CheckOptions& options) {
  (void)options;  // no base model from memory
  check::Findings findings;
  CheckReport report;
  if (auto file = check::check_structure(header, findings, file_size)) {
    check::ModelUnderCheck model;
    model.metadata = &*file;
    check::add_tensors(*file, model);
    report.kind = check::kind_of(model, check::is_later_shard(*file));
    check::run_semantic_passes(model, nullptr, report.kind, findings);
  } else {
    report.complete = false;
  }
  report.findings = findings.take();
  return report;
}

Expected<CheckReport> check_file(const std::filesystem::path& path, const CheckOptions& options) {
  auto mapping = MappedFile::open(path);
  if (!mapping) return std::move(mapping).error();
  std::optional<GgufFile> base;
  if (options.base) {
    auto b = GgufFile::open(*options.base);
    if (!b) {
      Error e = std::move(b).error();
      e.message = fmt::format("the base model {}: {}", options.base->string(), e.message);
      return e;
    }
    base.emplace(std::move(b).value());
  }
  check::Findings findings;
  CheckReport report;
  auto file = check::check_structure(mapping->bytes(), findings);
  if (!file) {
    report.complete = false;
    report.findings = findings.take();
    return report;
  }
  const auto shards = check::check_other_shards(path, *file, findings);
  check::ModelUnderCheck model;
  model.metadata = &*file;
  check::add_tensors(*file, model);
  for (const auto& shard : shards) {
    if (shard.file) check::add_tensors(*shard.file, model);
  }
  report.kind = check::kind_of(model, check::is_later_shard(*file));
  std::optional<check::ModelUnderCheck> base_model;
  if (base) {
    base_model.emplace();
    base_model->metadata = &*base;
    check::add_tensors(*base, *base_model);
  }
  check::run_semantic_passes(model, base_model ? &*base_model : nullptr, report.kind, findings);
  report.findings = findings.take();
  return report;
}

}  // namespace ggufkit
