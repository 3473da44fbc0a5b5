// gguf check: the driver. Structure first (a file that cannot be parsed gets only structure
// findings), then the semantic passes over the model.
#include "ggufkit/check.h"

#include <fmt/format.h>

#include <algorithm>

#include "check_internal.h"
#include "ggufkit/reader.h"

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

void run_semantic_passes(const ModelUnderCheck& model, const ModelUnderCheck* base, Findings& out) {
  check_required_metadata(model, out);
  check_architecture(model, out);
  check_tokenizer(model, out);
  check_rope(model, out);
  check_lora(model, base, out);
  check_compatibility(model, out);
}

ModelUnderCheck model_of(const GgufFile& file) {
  ModelUnderCheck m;
  m.metadata = &file;
  for (const TensorInfo& t : file.tensors()) m.tensors.push_back(&t);
  return m;
}

void add_reader_error(const Error& e, Findings& out) {
  out.error(fmt::format("structure.{}", error_code_name(e.code)), e.subject, e.offset, e.message);
}

}  // namespace
}  // namespace check

CheckReport check_bytes(std::span<const std::byte> bytes, const CheckOptions& options) {
  (void)options;
  check::Findings findings;
  CheckReport report;
  auto file = GgufFile::parse(bytes);
  if (!file) {
    check::add_reader_error(file.error(), findings);
    report.complete = false;
  } else {
    check::run_semantic_passes(check::model_of(*file), nullptr, findings);
  }
  report.findings = findings.take();
  return report;
}

Expected<CheckReport> check_file(const std::filesystem::path& path, const CheckOptions& options) {
  auto mapping = MappedFile::open(path);
  if (!mapping) return std::move(mapping).error();
  check::Findings findings;
  CheckReport report;
  std::optional<GgufFile> base;
  if (options.base) {
    auto b = GgufFile::open(*options.base);
    if (!b) return std::move(b).error();
    base.emplace(std::move(b).value());
  }
  auto file = GgufFile::parse(mapping->bytes());
  if (!file) {
    check::add_reader_error(file.error(), findings);
    report.complete = false;
  } else {
    const auto base_model = base ? std::optional(check::model_of(*base)) : std::nullopt;
    check::run_semantic_passes(check::model_of(*file), base_model ? &*base_model : nullptr, findings);
  }
  report.findings = findings.take();
  return report;
}

}  // namespace ggufkit
