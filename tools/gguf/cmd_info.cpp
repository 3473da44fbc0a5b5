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
  auto it = std::back_inserter(out);
  out += "{\"file\":";
  ggufkit::json::append_string(out, path);
  fmt::format_to(it, ",\"version\":{},\"alignment\":{},\"data_offset\":{},\"file_size\":{}", f.version(),
                 f.alignment(), f.data_offset(), model.file_bytes());
  auto opt_string = [&](const char* key, std::optional<std::string_view> v) {
    fmt::format_to(it, ",\"{}\":", key);
    if (v) {
      ggufkit::json::append_string(out, *v);
    } else {
      out += "null";
    }
  };
  opt_string("architecture", meta.architecture());
  opt_string("name", meta.name());
  const auto ft = meta.file_type();
  const auto* fti = ft && *ft <= UINT32_MAX ? ggufkit::find_file_type(static_cast<uint32_t>(*ft)) : nullptr;
  if (ft) {
    fmt::format_to(it, ",\"file_type\":{}", *ft);
  } else {
    out += ",\"file_type\":null";
  }
  opt_string("file_type_name", fti ? std::optional<std::string_view>(fti->name) : std::nullopt);
  fmt::format_to(it, ",\"parameters\":{},\"tensor_count\":{},\"tensor_bytes\":{},\"bits_per_weight\":", s.parameters,
                 model.tensors().size(), s.tensor_bytes);
  ggufkit::json::append_double(out, s.bits_per_weight);
  out += ",\"types\":[";
  for (size_t i = 0; i < s.types.size(); ++i) {
    const auto& u = s.types[i];
    fmt::format_to(it, "{}{{\"type\":\"{}\",\"tensors\":{},\"elements\":{},\"bytes\":{}}}", i ? "," : "",
                   ggufkit::type_name(u.type), u.tensors, u.elements, u.bytes);
  }
  out += "],\"hyperparameters\":{";
  const auto hp = hyperparameters(meta);
  for (size_t i = 0; i < hp.size(); ++i) {
    if (i) out += ',';
    ggufkit::json::append_string(out, hp[i].key);
    out += ':';
    out += hp[i].json;
  }
  out += "}";
  opt_string("tokenizer_model", meta.tokenizer_model());
  const auto tokens = meta.tokens();
  fmt::format_to(it, ",\"vocab_size\":{}", tokens ? fmt::format("{}", tokens->size()) : "null");
  if (model.is_split()) {  // only for split models: the shards, in order
    out += ",\"shards\":[";
    for (size_t i = 0; i < model.paths().size(); ++i) {
      if (i) out += ',';
      ggufkit::json::append_string(out, model.paths()[i].string());
    }
    out += ']';
  }
  out += "}";
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
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? status : kUsageOrIoError;
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
