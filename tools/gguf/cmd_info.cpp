// gguf info FILE...: what a file is, at a glance. A FILE may be the first shard of a split model:
// the model is then described whole (all shards' tensors and sizes).
#include <algorithm>
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/conventions.h"
#include "ggufkit/json.h"
#include "ggufkit/split.h"
#include "ggufkit/summary.h"
#include "output.h"

namespace gguf_cli {
namespace {

struct InfoArgs {
  std::vector<std::string> files;
  bool json = false;
};

using ggufkit::ModelMetadata;

std::string file_type_text(const ModelMetadata& meta) {
  const auto ft = meta.file_type();
  if (!ft) return "not set";
  const auto* info = *ft <= UINT32_MAX ? ggufkit::find_file_type(static_cast<uint32_t>(*ft)) : nullptr;
  if (!info) return fmt::format("{} (unknown)", *ft);
  return fmt::format("{} {} ({})", *ft, info->name, info->description);
}

struct Hyperparameter {
  std::string key;   // the key without its "{arch}." prefix, as in the JSON output
  std::string label;
  std::string json;  // the value as JSON (a number, or a string literal)
  std::string text;  // the value for people
};

// The main hyperparameters, in the order people read them, printed from the stored values so that
// a float32 shows as the float it is (1e-05, not 9.99999974e-06).
std::vector<Hyperparameter> hyperparameters(const ModelMetadata& meta) {
  std::vector<Hyperparameter> out;
  auto add = [&](const char* label, std::string_view suffix) {
    const auto key = meta.arch_key(suffix);
    if (!key) return;
    if (const auto n = meta.arch_uint(suffix); n && !meta.uint(*key)) {
      out.push_back({std::string(suffix), label, fmt::format("{}", *n), fmt::format("{}", *n)});  // uniform per-layer array
      return;
    }
    const ggufkit::KeyValue* kv = meta.file().find(*key);
    if (kv == nullptr || kv->value.type() == ggufkit::ValueType::Array) return;
    std::string json;
    ggufkit::json::append_value(json, kv->value);
    std::string text = kv->value.type() == ggufkit::ValueType::String
                           ? std::string(kv->value.as_string().value_or(""))
                           : json;
    out.push_back({std::string(suffix), label, std::move(json), std::move(text)});
  };
  add("context", "context_length");
  add("embedding", "embedding_length");
  add("layers", "block_count");
  add("heads", "attention.head_count");
  add("kv heads", "attention.head_count_kv");
  add("feed-forward", "feed_forward_length");
  add("experts", "expert_count");
  add("experts used", "expert_used_count");
  add("rope dims", "rope.dimension_count");
  add("rope base", "rope.freq_base");
  add("rope scaling", "rope.scaling.type");
  add("rope factor", "rope.scaling.factor");
  add("rms eps", "attention.layer_norm_rms_epsilon");
  return out;
}

void info_text(std::string& out, const std::string& path, const ggufkit::SplitModel& model) {
  const ggufkit::GgufFile& f = model.metadata_file();
  const ModelMetadata meta(f);
  const ggufkit::FileSummary s = ggufkit::summarize(model);
  auto it = std::back_inserter(out);
  fmt::format_to(it, "{}\n", path);
  fmt::format_to(it, "  format        GGUF v{}, {}-endian, alignment {}, data at offset {}\n", f.version(),
                 f.byte_order() == ggufkit::ByteOrder::big ? "big" : "little",
                 f.alignment(), f.data_offset());
  fmt::format_to(it, "  architecture  {}\n", meta.architecture().value_or("(not set)"));
  if (const auto name = meta.name()) fmt::format_to(it, "  name          {}\n", shorten_for_display(*name, 100));
  fmt::format_to(it, "  file type     {}\n", file_type_text(meta));
  if (model.is_split()) {
    fmt::format_to(it, "  split         {} shards, {} ... {}\n", model.shards().size(), model.paths().front().string(),
                   model.paths().back().filename().string());
  }
  fmt::format_to(it, "  size          {} {} ({} bytes), {} of tensors ({} bytes)\n", human_bytes(model.file_bytes()),
                 model.is_split() ? "in all shards" : "file", model.file_bytes(), human_bytes(s.tensor_bytes),
                 s.tensor_bytes);
  fmt::format_to(it, "  parameters    {} ({}) in {} tensors, {:.2f} bits per weight\n", human_count(s.parameters),
                 s.parameters, model.tensors().size(), s.bits_per_weight);
  if (!s.types.empty()) {
    std::string line;
    for (const auto& u : s.types) {
      if (!line.empty()) line += " · ";
      line += fmt::format("{} {}", ggufkit::type_name(u.type), u.tensors);
    }
    fmt::format_to(it, "  types         {}\n", line);
    fmt::format_to(it, "    {:<8} {:>8} {:>14} {:>9} {:>14} {:>9}\n", "type", "tensors", "elements", "share",
                   "bytes", "share");
    auto percent = [](uint64_t part, uint64_t whole) {
      return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
    };
    for (const auto& u : s.types) {
      fmt::format_to(it, "    {:<8} {:>8} {:>14} {:>8.1f}% {:>14} {:>8.1f}%\n", ggufkit::type_name(u.type), u.tensors,
                     u.elements, percent(u.elements, s.parameters), u.bytes, percent(u.bytes, s.tensor_bytes));
    }
  }
  const auto hp = hyperparameters(meta);
  if (!hp.empty()) {
    std::string line;
    for (const auto& h : hp) {
      if (!line.empty()) line += " · ";
      line += h.label + " " + h.text;
    }
    fmt::format_to(it, "  hyperparams   {}\n", line);
  }
  if (const auto tokenizer = meta.tokenizer_model()) {
    const auto tokens = meta.tokens();
    std::string line = fmt::format("{}", *tokenizer);
    if (const auto pre = meta.tokenizer_pre()) line += fmt::format(" (pre: {})", *pre);
    line += fmt::format(", {} tokens", tokens ? tokens->size() : 0);
    if (const auto merges = meta.merges()) line += fmt::format(", {} merges", merges->size());
    if (meta.chat_template()) line += ", chat template";
    fmt::format_to(it, "  tokenizer     {}\n", line);
  }
}

void info_json(std::string& out, const std::string& path, const ggufkit::SplitModel& model) {
  const ggufkit::GgufFile& f = model.metadata_file();
  const ModelMetadata meta(f);
  const ggufkit::FileSummary s = ggufkit::summarize(model);
  ggufkit::json::Writer w(out);
  w.begin_object()
      .member("file", path)
      .member("version", f.version())
      .member("alignment", f.alignment())
      .member("data_offset", f.data_offset())
      .member("file_size", model.file_bytes());
  w.member("architecture", meta.architecture());
  w.member("name", meta.name());
  const auto ft = meta.file_type();
  const auto* fti = ft && *ft <= UINT32_MAX ? ggufkit::find_file_type(static_cast<uint32_t>(*ft)) : nullptr;
  w.member("file_type", ft);
  w.member("file_type_name", fti ? std::optional<std::string_view>(fti->name) : std::nullopt);
  w.member("parameters", s.parameters)
      .member("tensor_count", model.tensors().size())
      .member("tensor_bytes", s.tensor_bytes)
      .member("bits_per_weight", s.bits_per_weight);
  w.key("types").begin_array();
  for (const auto& u : s.types) {
    w.begin_object()
        .member("type", ggufkit::type_name(u.type))
        .member("tensors", u.tensors)
        .member("elements", u.elements)
        .member("bytes", u.bytes)
        .end_object();
  }
  w.end_array().key("hyperparameters").begin_object();
  for (const auto& h : hyperparameters(meta)) w.key(h.key).raw(h.json);
  w.end_object();
  w.member("tokenizer_model", meta.tokenizer_model());
  const auto tokens = meta.tokens();
  w.member("vocab_size", tokens ? std::optional<uint64_t>(tokens->size()) : std::nullopt);
  if (model.is_split()) {  // only for split models: the shards, in order
    w.key("shards").begin_array();
    for (const auto& p : model.paths()) w.value(p.string());
    w.end_array();
  }
  w.end_object();
}

int run_info(const InfoArgs& args) {
  int status = kOk;
  std::string out;
  if (args.json) out += "[";
  bool first = true;
  for (const std::string& path : args.files) {
    const auto f = ggufkit::SplitModel::open(path);
    if (!f) {
      report_error(path, f.error());
      status = kUsageOrIoError;
      continue;
    }
    if (args.json) {
      if (!first) out += ",";
      info_json(out, path, *f);
    } else {
      if (!first) out += "\n";
      info_text(out, path, *f);
    }
    first = false;
  }
  if (args.json) out += "]\n";
  const int written = write_result(out);
  return written != kOk ? written : status;
}

}  // namespace

Runner register_info(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand("info", "Summarise GGUF files: format, model, size, types, hyperparameters");
  cmd->add_option("files", args->files, "GGUF files (a split model: its first shard)")->required();
  cmd->add_flag("--json", args->json, "Machine-readable output");
  return [args] { return run_info(*args); };
}

}  // namespace gguf_cli
