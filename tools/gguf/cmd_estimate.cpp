// gguf estimate FILE... [-c N] [-b N] [-ub N] [-np N] [--kv-unified] [--swa-full] [-ctk T] [-ctv T]
// [-fa on|off|auto] [--assume-dense] [--json]: the memory llama.cpp allocates for the model and a
// context on a CPU build (n_gpu_layers = 0, no repacked buffers), from the header alone
// (ggufkit::estimate_memory). The options are llama-cli's and llama-server's; their defaults are
// llama_context_default_params()' but --swa-full, off as in llama-cli and llama-server.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "cli_docs.h"
#include "commands.h"
#include "ggufkit/estimate.h"
#include "ggufkit/quantize.h"
#include "ggufkit/split.h"
#include "output.h"
#include "printer.h"

namespace gguf_cli {
namespace {

struct EstimateArgs {
  std::vector<std::string> files;
  uint64_t ctx_size = 512;
  uint64_t batch_size = 2048;
  uint64_t ubatch_size = 512;
  uint64_t parallel = 1;
  bool kv_unified = false;
  bool swa_full = false;
  std::string cache_type_k = "f16";
  std::string cache_type_v = "f16";
  std::string flash_attn = "auto";
  bool assume_dense = false;
  bool max_ctx = false;
  bool presets = false;
  std::string mem;
  bool json = false;
};

// "24GiB", "24G", "1.5T", "8000MiB", "123456" (bytes); binary units. Nullopt when malformed.
std::optional<uint64_t> parse_size(std::string_view text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(std::string(text), &used);
  } catch (...) {
    return std::nullopt;
  }
  std::string unit(text.substr(used));
  if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "iB") unit.resize(unit.size() - 2);
  else if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b') && unit.size() > 1) unit.pop_back();
  double scale = 1;
  if (unit == "" || unit == "B") scale = 1;
  else if (unit == "K" || unit == "k") scale = 1024.0;
  else if (unit == "M" || unit == "m") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "t") scale = 1024.0 * 1024 * 1024 * 1024;
  else return std::nullopt;
  const double bytes = value * scale;
  if (!(bytes >= 0) || bytes >= 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

// The KV cache types llama-cli and llama-server accept (common/arg.cpp's kv_cache_types).
constexpr std::string_view kCacheTypes[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"};

// llama.cpp's short options of more than one letter, which CLI11 cannot declare.
constexpr std::pair<std::string_view, std::string_view> kLlamaShortOptions[] = {
    {"-ub", "--ubatch-size"}, {"-np", "--parallel"}, {"-ctk", "--cache-type-k"},
    {"-ctv", "--cache-type-v"}, {"-fa", "--flash-attn"}, {"-kvu", "--kv-unified"},
};

std::string bytes_text(uint64_t bytes) { return fmt::format("{:>11}  {:>14}", human_bytes(bytes), bytes); }

std::string cache_label(const ggufkit::CacheEstimate& c) {
  switch (c.kind) {
    case ggufkit::CacheEstimate::Kind::kv: return "KV cache";
    case ggufkit::CacheEstimate::Kind::kv_swa: return "KV cache, sliding window";
    case ggufkit::CacheEstimate::Kind::recurrent: return "recurrent state";
  }
  return "KV cache";
}

void print_estimate(Printer& p, const std::string& path, const ggufkit::MemoryEstimate& e, std::optional<uint64_t> mem) {
  p.begin_object();
  p.begin_line();
  p.field("file", path, terminal_safe(path));
  p.text(" · ");
  p.field("architecture", e.architecture, terminal_safe(e.architecture));
  p.field("assumed_dense", e.assumed_dense, e.assumed_dense ? " (not in the registry: every layer estimated as full attention)" : "");
  p.end_line();
  p.begin_line("  context  ");
  p.field("n_ctx", e.n_ctx, fmt::format("{} cells", e.n_ctx));
  p.field("n_seq", e.n_seq, fmt::format(" · {}", plural(e.n_seq, "sequence", "sequences")));
  p.field("n_ctx_seq", e.n_ctx_seq, fmt::format(" of {}", e.n_ctx_seq));
  p.field("n_batch", e.n_batch, fmt::format(" · batch {}", e.n_batch));
  p.field("n_ubatch", e.n_ubatch, fmt::format(" · ubatch {}", e.n_ubatch));
  p.field("flash_attn", e.flash_attn, fmt::format(" · flash attention {}", e.flash_attn ? "on" : "off"));
  p.end_line();
  p.text(fmt::format("  {:<26} {:>7} {:>7} {:>6} {:>6} {:>11}  {:>14}", "", "cells", "layers", "K", "V", "size", "bytes"));
  p.begin_line(fmt::format("  {:<26} {:>7} {:>7} {:>6} {:>6} ", "model (mapped)", "", "", "", ""));
  p.field("model_bytes", e.model_bytes, bytes_text(e.model_bytes));
  p.end_line();
  p.begin_array("caches");
  for (const ggufkit::CacheEstimate& c : e.caches) {
    const std::string cells = c.streams > 1 ? fmt::format("{}x{}", c.streams, c.cells) : fmt::format("{}", c.cells);
    p.begin_object().begin_line(fmt::format("  {:<26} ", cache_label(c)));
    p.field("kind", ggufkit::cache_kind_name(c.kind));
    p.field("cells", c.cells, fmt::format("{:>7} ", cells));
    p.field("streams", c.streams);
    p.field("layers", c.layers, fmt::format("{:>7} ", c.layers));
    p.field("type_k", ggufkit::type_name(c.type_k), fmt::format("{:>6} ", ggufkit::type_name(c.type_k)));
    const std::optional<std::string_view> type_v = c.has_v ? std::optional(ggufkit::type_name(c.type_v)) : std::nullopt;
    p.field("type_v", type_v, fmt::format("{:>6} ", type_v.value_or("-")));
    p.field("k_bytes", c.k_bytes);
    p.field("v_bytes", c.v_bytes);
    p.field("bytes", c.bytes(), bytes_text(c.bytes()));
    p.end_line().end_object();
  }
  p.end_array();
  const std::string blank = fmt::format("{:>7} {:>7} {:>6} {:>6} ", "", "", "", "");
  p.begin_line(fmt::format("  {:<26} {}", "context (KV + state)", blank));
  p.field("context_bytes", e.context_bytes, bytes_text(e.context_bytes));
  p.end_line();
  p.begin_line(fmt::format("  {:<26} {}", "output buffer", blank));
  p.field("output_bytes", e.output_bytes, bytes_text(e.output_bytes));
  p.end_line();
  p.begin_line(fmt::format("  {:<26} {}", "compute buffer (estimated)", blank));
  p.field("compute_bytes", e.compute_bytes, bytes_text(e.compute_bytes));
  p.field("compute_estimated", true);
  p.end_line();
  p.begin_line(fmt::format("  {:<26} {}", "total", blank));
  p.field("total_bytes", e.total_bytes, bytes_text(e.total_bytes));
  p.end_line();
  if (mem) {
    p.begin_line(fmt::format("  {:<26} {}", "memory", blank));
    p.field("mem_bytes", *mem, bytes_text(*mem));
    p.field("fits", e.total_bytes <= *mem, e.total_bytes <= *mem ? "  fits" : "  does not fit");
    p.end_line();
  }
  p.end_object();
}

// One line and false for an option value llama.cpp would refuse or that does not fit.
bool options_of(const EstimateArgs& a, ggufkit::EstimateOptions& o) {
  const auto fits = [](std::string_view name, uint64_t v, uint64_t max) {
    if (v <= max) return true;
    fmt::print(stderr, "gguf estimate: {} {}: above llama.cpp's limit of {}\n", name, v, max);
    return false;
  };
  if (!fits("--ctx-size", a.ctx_size, UINT32_MAX) || !fits("--batch-size", a.batch_size, UINT32_MAX) ||
      !fits("--ubatch-size", a.ubatch_size, UINT32_MAX) || !fits("--parallel", a.parallel, 256)) {
    return false;
  }
  o.ctx_size = static_cast<uint32_t>(a.ctx_size);
  o.batch_size = static_cast<uint32_t>(a.batch_size);
  o.ubatch_size = static_cast<uint32_t>(a.ubatch_size);
  o.parallel = static_cast<uint32_t>(a.parallel);
  o.kv_unified = a.kv_unified;
  o.swa_full = a.swa_full;
  o.assume_dense = a.assume_dense;
  o.cache_type_k = *ggufkit::parse_tensor_type(a.cache_type_k);
  o.cache_type_v = *ggufkit::parse_tensor_type(a.cache_type_v);
  o.flash_attn = a.flash_attn == "on"    ? ggufkit::FlashAttention::on
                 : a.flash_attn == "off" ? ggufkit::FlashAttention::off
                                         : ggufkit::FlashAttention::automatic;
  return true;
}

// --presets: every quantize preset's exact file (the planner, no quantizing) and the total at the
// context. One line and false when the model is not F32/F16/BF16 or a plan fails.
bool print_presets(Printer& p, const std::string& path, const ggufkit::SplitModel& model,
                   const ggufkit::MemoryEstimate& e, std::optional<uint64_t> mem) {
  for (const ggufkit::ModelTensor& t : model.tensors()) {
    const auto type = t.info->type;
    if (t.info->n_dims >= 2 && type != ggufkit::TensorType::F32 && type != ggufkit::TensorType::F16 &&
        type != ggufkit::TensorType::BF16) {
      fmt::print(stderr, "gguf estimate: {}: --presets needs an F32, F16 or BF16 model ({} is {})\n", terminal_safe(path),
                 terminal_safe(t.info->name), ggufkit::type_name(type));
      return false;
    }
  }
  const uint64_t rest = e.total_bytes - e.model_bytes;
  p.begin_object();
  p.begin_line();
  p.field("file", path, terminal_safe(path));
  p.text(" · ");
  p.field("architecture", e.architecture, terminal_safe(e.architecture));
  p.field("n_ctx", e.n_ctx, fmt::format(" · quantize presets at {} cells: ", e.n_ctx));
  p.field("context_bytes", e.context_bytes, fmt::format("context {}", human_bytes(e.context_bytes)));
  p.field("output_bytes", e.output_bytes, fmt::format(", output {}", human_bytes(e.output_bytes)));
  p.field("compute_bytes", e.compute_bytes, fmt::format(", compute {} (estimated)", human_bytes(e.compute_bytes)));
  if (mem) p.field("mem_bytes", *mem, fmt::format(", memory {}", human_bytes(*mem)));
  p.end_line();
  p.text(fmt::format("  {:<9} {:>11}  {:>14}  {:>11}  {:>11}{}", "preset", "file", "bytes", "model", "total",
                     mem ? "  fits" : ""));
  p.begin_array("presets");
  for (const ggufkit::FileTypeInfo* preset : quantize_presets()) {
    ggufkit::QuantizeOptions q;
    q.file_type = preset->id;
    q.pure = false;
    q.dry_run = true;
    const auto plan = ggufkit::plan_quantize(model, q);
    const auto file = plan ? ggufkit::quantize_output_bytes(model.metadata_file(), *plan, q)
                           : ggufkit::Expected<uint64_t>(plan.error());
    if (!file) {
      report_error(path, file.error());
      return false;
    }
    uint64_t model_bytes = 0;
    for (const auto& t : plan->tensors) model_bytes += (t.bytes + 31) / 32 * 32;  // the CPU buffer's padding
    const uint64_t total = model_bytes + rest;
    const std::string_view name = ggufkit::file_type_preset_name(*preset);
    p.begin_object().begin_line("  ");
    p.field("name", name, fmt::format("{:<9} ", name));
    p.field("id", preset->id);
    p.field("file_bytes", *file, fmt::format("{:>11}  {:>14}  ", human_bytes(*file), *file));
    p.field("model_bytes", model_bytes, fmt::format("{:>11}  ", human_bytes(model_bytes)));
    p.field("total_bytes", total, fmt::format("{:>11}", human_bytes(total)));
    if (mem) p.field("fits", total <= *mem, total <= *mem ? "  yes" : "  no");
    p.end_line().end_object();
  }
  p.end_array();
  p.end_object();
  return true;
}

int run_estimate(const EstimateArgs& args) {
  ggufkit::EstimateOptions options;
  if (!options_of(args, options)) return kUsageOrIoError;
  std::optional<uint64_t> mem;
  if (!args.mem.empty()) {
    mem = parse_size(args.mem);
    if (!mem) {
      fmt::print(stderr, "gguf estimate: --mem {}: not a size (bytes, or with K, M, G, T: 24GiB, 1.5T)\n", args.mem);
      return kUsageOrIoError;
    }
  }
  if (args.max_ctx && !mem) {
    fmt::print(stderr, "gguf estimate: --max-ctx needs --mem SIZE, the memory to fit\n");
    return kUsageOrIoError;
  }
  int status = kOk;
  std::string out;
  const auto p = Printer::make(args.json, out);
  p->begin_array();
  bool first = true;
  for (const std::string& path : args.files) {
    const auto model = ggufkit::SplitModel::open(path, metadata_only_ok());
    if (!model) {
      report_error(path, model.error());
      status = kUsageOrIoError;
      continue;
    }
    std::optional<ggufkit::MemoryEstimate> e;
    if (args.max_ctx) {
      auto best = ggufkit::estimate_max_context(*model, options, *mem);
      if (!best) {
        report_error(path, best.error());
        status = kUsageOrIoError;
        continue;
      }
      if (!*best) {
        auto smallest = options;
        smallest.ctx_size = 256;
        auto need = ggufkit::estimate_memory(*model, smallest);
        fmt::print(stderr, "gguf estimate: {}: not even 256 cells fit in {} ({} needed)\n", terminal_safe(path),
                   human_bytes(*mem), need ? human_bytes(need->total_bytes) : "more");
        status = std::max<int>(status, kProblemFound);
        continue;
      }
      e = std::move(**best);
    } else {
      auto one = ggufkit::estimate_memory(*model, options);
      if (!one) {
        report_error(path, one.error());
        status = kUsageOrIoError;
        continue;
      }
      e = std::move(*one);
    }
    if (!first) p->text("");  // a blank line between files
    first = false;
    if (args.presets) {
      if (!print_presets(*p, path, *model, *e, mem)) status = kUsageOrIoError;
      continue;
    }
    print_estimate(*p, path, *e, mem);
  }
  p->end_array();
  const int written = write_result(out);
  return written != kOk ? written : status;
}

}  // namespace

void expand_llama_short_options(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) != "estimate") return;
  for (int i = 2; i < argc; ++i) {
    for (const auto& [short_name, long_name] : kLlamaShortOptions) {
      if (argv[i] == short_name) argv[i] = const_cast<char*>(long_name.data());  // static storage
    }
  }
}

Runner register_estimate(CLI::App& app) {
  auto args = std::make_shared<EstimateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "estimate", "The memory llama.cpp allocates for a model and a context on the CPU (model, KV cache, output, "
                  "compute, total), from the header alone; options as llama-cli's and llama-server's");
  cmd->add_option("files", args->files, "GGUF files (a split model: its first shard)")->required();
  cmd->add_option("-c,--ctx-size", args->ctx_size, "Context size in tokens (0: the model's context_length)")
      ->capture_default_str();
  cmd->add_option("-b,--batch-size", args->batch_size, "Logical batch size")->capture_default_str();
  cmd->add_option("--ubatch-size", args->ubatch_size, "Physical batch size (-ub)")->capture_default_str();
  cmd->add_option("--parallel", args->parallel, "Sequences (slots) decoded in parallel (-np)")->capture_default_str();
  cmd->add_flag("--kv-unified", args->kv_unified, "One KV buffer shared by every sequence (-kvu; default off)");
  cmd->add_flag("--swa-full", args->swa_full, "Full-size sliding-window caches (default off, as llama-cli)");
  std::vector<std::string> types(std::begin(kCacheTypes), std::end(kCacheTypes));
  cmd->add_option("--cache-type-k", args->cache_type_k, "K cache type (-ctk)")
      ->capture_default_str()
      ->check(CLI::IsMember(types));
  cmd->add_option("--cache-type-v", args->cache_type_v, "V cache type (-ctv); quantized needs flash attention")
      ->capture_default_str()
      ->check(CLI::IsMember(types));
  cmd->add_option("--flash-attn", args->flash_attn, "Flash attention (-fa; auto is on for the CPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off", "auto"}));
  cmd->add_flag("--assume-dense", args->assume_dense,
                "An architecture the registry lacks: estimate every layer as full attention");
  cmd->add_option("--mem", args->mem, "Memory to fit (24GiB, 16G, 1.5T, bytes): says whether the total fits");
  cmd->add_flag("--max-ctx", args->max_ctx,
                "The largest context (256-cell steps, at most the model's context_length) whose total fits --mem");
  cmd->add_flag("--presets", args->presets,
                "For an F32/F16/BF16 model: every quantize preset's exact file size (gguf quantize's planner) and "
                "the total at the context")
      ->excludes("--max-ctx");
  cmd->add_flag("--json", args->json, "Machine-readable output");
  return [args] { return run_estimate(*args); };
}

}  // namespace gguf_cli
