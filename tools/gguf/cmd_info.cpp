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
#include "printer.h"

namespace gguf_cli {
namespace {

struct InfoArgs {
  std::vector<std::string> files;
  bool json = false;
  bool layers = false;  // --layers: a row per block with its types and bits per weight
};

using ggufkit::ModelMetadata;


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

std::string info_label(std::string_view name) { return fmt::format("  {:<14}", name); }

// The special-token keys info shows, as "role" and the key's middle (tokenizer.ggml.<x>_token_id;
// "seperator" is llama.cpp's spelling), in gguf-py's order.
constexpr std::pair<std::string_view, std::string_view> kSpecialTokens[] = {
    {"bos", "bos"},         {"eos", "eos"},         {"eot", "eot"},         {"eom", "eom"},
    {"unk", "unknown"},     {"sep", "seperator"},   {"pad", "padding"},     {"mask", "mask"},
    {"fim_pre", "fim_pre"}, {"fim_suf", "fim_suf"}, {"fim_mid", "fim_mid"}, {"fim_pad", "fim_pad"},
    {"fim_rep", "fim_rep"}, {"fim_sep", "fim_sep"},
};

double info_percent(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// The special tokens the file names (tokenizer.ggml.*_token_id), each with its text, in one line:
// "bos 1 <s> · eos 2 </s>". Left out when there are none.
void print_special_tokens(Printer& p, const ggufkit::ModelMetadata& meta, const std::optional<ggufkit::ArrayView>& tokens) {
  struct Special {
    std::string_view role;
    uint64_t id;
    std::optional<std::string_view> text;  // nullopt: the id is past the vocabulary
  };
  std::vector<Special> specials;
  for (const auto& [role, middle] : kSpecialTokens) {
    if (const auto id = meta.uint(fmt::format("tokenizer.ggml.{}_token_id", middle))) specials.push_back({role, *id, {}});
  }
  if (specials.empty()) return;
  if (tokens && tokens->element_type() == ggufkit::ValueType::String) {
    // Strings have no index: walk the array only as far as the largest special id (the special
    // tokens of most vocabularies are among the first; a pass over 262k tokens was a fifth of info's time).
    uint64_t last = 0;
    for (const Special& s : specials) last = std::max(last, s.id);
    uint64_t i = 0;
    for (std::string_view text : tokens->strings()) {
      if (i > last) break;
      for (Special& s : specials) {
        if (s.id == i) s.text = text;
      }
      ++i;
    }
  }
  p.begin_line(info_label("special")).begin_object("special_tokens");
  bool first = true;
  for (const Special& s : specials) {
    const std::string shown = s.text ? shorten_for_display(*s.text, 40) : std::string("(not in the vocabulary)");
    p.field_with(s.role, [&](ggufkit::json::Writer& w) {
      w.begin_object().key("id").value(s.id).key("text").value(s.text).end_object();
    }, fmt::format("{}{} {} {}", first ? "" : " · ", s.role, s.id, shown));
    first = false;
  }
  p.end_object().end_line();
}

// One file (or split model), for people and as JSON from the same statements.
// --layers: one row per block (blk.N.*) and one for the tensors outside them, each with its
// parameters, bytes, bits per weight and types (most elements first).
void print_layers(Printer& p, const ggufkit::SplitModel& model) {
  std::vector<const ggufkit::TensorInfo*> tensors;
  for (const ggufkit::ModelTensor& t : model.tensors()) tensors.push_back(t.info);
  const auto layers = ggufkit::summarize_layers(tensors);
  size_t blocks = 0;
  uint64_t outside = 0;
  for (const ggufkit::LayerUsage& l : layers) {
    if (l.layer) {
      ++blocks;
    } else {
      for (const auto& u : l.summary.types) outside += u.tensors;
    }
  }
  p.text(info_label("layers") + plural(blocks, "block", "blocks") +
         (outside ? fmt::format(" and {} outside them", plural(outside, "tensor", "tensors")) : ""));
  p.text(fmt::format("    {:<10} {:>8} {:>14} {:>14} {:>7}  {}", "layer", "tensors", "elements", "bytes", "bpw", "types"));
  p.begin_array("layers");
  for (const ggufkit::LayerUsage& l : layers) {
    const ggufkit::FileSummary& s = l.summary;
    uint64_t count = 0;
    std::vector<std::string> types;
    for (const auto& u : s.types) {
      count += u.tensors;
      types.push_back(fmt::format("{} {}", ggufkit::type_name(u.type), u.tensors));
    }
    p.begin_object().begin_line("    ");
    p.field("layer", l.layer, fmt::format("{:<10}", l.layer ? fmt::format("blk.{}", *l.layer) : std::string("other")));
    p.field("tensors", count, fmt::format(" {:>8}", count));
    p.field("parameters", s.parameters, fmt::format(" {:>14}", s.parameters));
    p.field("tensor_bytes", s.tensor_bytes, fmt::format(" {:>14}", s.tensor_bytes));
    p.field("bits_per_weight", s.bits_per_weight, fmt::format(" {:>7.2f}", s.bits_per_weight));
    p.begin_array("types");
    for (const auto& u : s.types) {
      p.begin_object();
      p.field("type", ggufkit::type_name(u.type));
      p.field("tensors", u.tensors);
      p.field("elements", u.elements);
      p.field("bytes", u.bytes);
      p.end_object();
    }
    p.end_array();
    p.text(fmt::format("  {}", fmt::join(types, " · ")));
    p.end_line().end_object();
  }
  p.end_array();
}

void print_info(Printer& p, const std::string& path, const ggufkit::SplitModel& model, bool layers) {
  const ggufkit::GgufFile& f = model.metadata_file();
  const ModelMetadata meta(f);
  const ggufkit::FileSummary s = ggufkit::summarize(model);
  p.begin_object();
  p.field("file", path, path);

  p.begin_line(info_label("format"));
  p.field("version", f.version(), fmt::format("GGUF v{}", f.version()));
  p.field("byte_order", ggufkit::byte_order_name(f.byte_order()),
          fmt::format(", {}-endian", ggufkit::byte_order_name(f.byte_order())));
  p.field("alignment", f.alignment(), fmt::format(", alignment {}", f.alignment()));
  p.field("data_offset", f.data_offset(), fmt::format(", data at offset {}", f.data_offset()));
  p.end_line();

  const auto arch = meta.architecture();
  p.begin_line(info_label("architecture")).field("architecture", arch, arch.value_or("(not set)")).end_line();
  const auto name = meta.name();
  const std::string name_text = name ? shorten_for_display(*name, 100) : "";
  p.begin_line(info_label("name")).field("name", name, name ? std::optional<std::string_view>(name_text) : std::nullopt);
  p.end_line();

  const auto ft = meta.file_type();
  const auto* fti = ft && *ft <= UINT32_MAX ? ggufkit::find_file_type(static_cast<uint32_t>(*ft)) : nullptr;
  p.begin_line(info_label("file type"));
  p.field("file_type", ft, ft ? fmt::format("{}", *ft) : "not set");
  p.field("file_type_name", fti ? std::optional<std::string_view>(fti->name) : std::nullopt,
          fti ? fmt::format(" {} ({})", fti->name, fti->description) : ft ? " (unknown)" : "");
  p.end_line();

  std::vector<std::string> shard_paths;
  for (const auto& sp : model.paths()) shard_paths.push_back(sp.string());
  if (model.is_split()) {  // only for split models: the shards, in order
    p.begin_line(info_label("split"));
    p.array_field("shards", shard_paths,
                  fmt::format("{} shards, {} ... {}", shard_paths.size(), shard_paths.front(),
                              model.paths().back().filename().string()));
    p.end_line();
  }

  p.begin_line(info_label("size"));
  p.field("file_size", model.file_bytes(),
          fmt::format("{} {} ({} bytes)", human_bytes(model.file_bytes()), model.is_split() ? "in all shards" : "file",
                      model.file_bytes()));
  p.field("tensor_bytes", s.tensor_bytes,
          fmt::format(", {} of tensors ({} bytes)", human_bytes(s.tensor_bytes), s.tensor_bytes));
  p.field("tensor_data", model.has_tensor_data(), no_tensor_data_note(f));
  p.end_line();

  p.begin_line(info_label("parameters"));
  p.field("parameters", s.parameters, fmt::format("{} ({})", human_count(s.parameters), s.parameters));
  p.field("tensor_count", model.tensors().size(), fmt::format(" in {} tensors", model.tensors().size()));
  p.field("bits_per_weight", s.bits_per_weight, fmt::format(", {:.2f} bits per weight", s.bits_per_weight));
  p.end_line();

  // The types: a line for people, then one table row per type.
  if (!s.types.empty()) {
    std::vector<std::string> parts;
    for (const auto& u : s.types) parts.push_back(fmt::format("{} {}", ggufkit::type_name(u.type), u.tensors));
    p.text(info_label("types") + fmt::format("{}", fmt::join(parts, " · ")));
    p.text(fmt::format("    {:<8} {:>8} {:>14} {:>9} {:>14} {:>9}", "type", "tensors", "elements", "share", "bytes",
                       "share"));
  }
  p.begin_array("types");
  for (const auto& u : s.types) {
    p.begin_object().begin_line("    ");
    p.field("type", ggufkit::type_name(u.type), fmt::format("{:<8}", ggufkit::type_name(u.type)));
    p.field("tensors", u.tensors, fmt::format(" {:>8}", u.tensors));
    p.field("elements", u.elements,
            fmt::format(" {:>14} {:>8.1f}%", u.elements, info_percent(u.elements, s.parameters)));
    p.field("bytes", u.bytes, fmt::format(" {:>14} {:>8.1f}%", u.bytes, info_percent(u.bytes, s.tensor_bytes)));
    p.end_line().end_object();
  }
  p.end_array();
  if (layers) print_layers(p, model);

  p.begin_line(info_label("hyperparams")).begin_object("hyperparameters");
  bool first = true;
  for (const auto& h : hyperparameters(meta)) {
    p.field_with(h.key, [&](ggufkit::json::Writer& w) { w.raw(h.json); },
                 fmt::format("{}{} {}", first ? "" : " · ", h.label, h.text));
    first = false;
  }
  p.end_object().end_line();

  const auto tokenizer = meta.tokenizer_model();
  const auto tokens = meta.tokens();
  const auto pre = meta.tokenizer_pre();
  const auto merges = meta.merges();
  const auto vocab = tokens ? std::optional<uint64_t>(tokens->size()) : std::nullopt;
  const auto merge_count = merges ? std::optional<uint64_t>(merges->size()) : std::nullopt;
  const bool chat_template = meta.chat_template().has_value();
  const auto if_tokenizer = [&](std::string text) {
    return tokenizer ? std::optional<std::string>(std::move(text)) : std::nullopt;
  };
  const auto tokenizer_text = if_tokenizer(std::string(tokenizer.value_or("")));
  const auto pre_text = if_tokenizer(pre ? fmt::format(" (pre: {})", *pre) : "");
  const auto vocab_text = if_tokenizer(fmt::format(", {} tokens", vocab.value_or(0)));
  const auto merges_text = if_tokenizer(merges ? fmt::format(", {} merges", merges->size()) : "");
  const auto template_text = if_tokenizer(chat_template ? ", chat template" : "");
  p.begin_line(info_label("tokenizer"));
  p.field("tokenizer_model", tokenizer, tokenizer_text);
  p.field("tokenizer_pre", pre, pre_text);
  p.field("vocab_size", vocab, vocab_text);
  p.field("merges", merge_count, merges_text);
  p.field("chat_template", chat_template, template_text);
  p.end_line();
  print_special_tokens(p, meta, tokens);
  p.end_object();
}

int run_info(const InfoArgs& args) {
  int status = kOk;
  std::string out;
  const auto p = Printer::make(args.json, out);
  p->begin_array();
  bool first = true;
  for (const std::string& path : args.files) {
    const auto f = open_model(path, metadata_only_ok());
    if (!f) {
      report_error(path, f.error());
      status = kUsageOrIoError;
      continue;
    }
    if (!first) p->text("");  // a blank line between files
    print_info(*p, path, *f, args.layers);
    first = false;
  }
  p->end_array();
  const int written = write_result(out);
  return written != kOk ? written : status;
}

}  // namespace

Runner register_info(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand("info", "Summarise GGUF files: format, model, size, types, hyperparameters");
  cmd->add_option("files", args->files, "GGUF files (a split model: its first shard)")->required();
  cmd->add_flag("--json", args->json, "Machine-readable output");
  add_remote_options(*cmd);
  cmd->add_flag("--layers", args->layers,
                "Also a row per block (blk.N) and one for the tensors outside them: tensors, elements, bytes, bits "
                "per weight and types");
  return [args] { return run_info(*args); };
}

}  // namespace gguf_cli
