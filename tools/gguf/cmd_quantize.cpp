// gguf quantize IN OUT TYPE [--pure] [--threads N] [--dry-run] [llama-quantize's type and metadata
// options]: llama-quantize's job, byte for byte.
// Without --pure, TYPE's preset chooses each tensor's type as llama-quantize does (Q4_K_M gives some
// tensors Q6_K...).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <csignal>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "cli_docs.h"
#include "commands.h"
#include "ggufkit/conventions.h"
#include "ggufkit/imatrix.h"
#include "ggufkit/quantize.h"
#include "output.h"

namespace gguf_cli {
namespace {

struct QuantizeArgs {
  bool force = false;  // --force: replace an existing output
  bool no_sync = false;  // --no-sync: no fsync before the rename
  std::string input, output, type;
  bool pure = false;
  bool dry_run = false;
  bool quiet = false;
  bool leave_output_tensor = false;
  bool allow_requantize = false;
  bool keep_split = false;
  std::string output_tensor_type, token_embedding_type, imatrix;
  // --tensor-type PATTERN=TYPE and --tensor-type-file FILE in command-line order (file: true).
  std::vector<std::pair<bool, std::string>> tensor_type_sources;
  std::vector<std::string> override_kv, include_weights, exclude_weights;
  unsigned threads = 0;
};

// One tensor's size for the dry run: bytes below 10 KiB, KiB/MiB/GiB above.
std::string short_bytes(uint64_t bytes) { return bytes < 10240 ? fmt::format("{} B", bytes) : human_bytes(bytes); }

// llama-quantize's closing figures: sizes and bits per weight before and after.
void print_sizes(std::FILE* to, const ggufkit::QuantizeSizes& s) {
  fmt::print(to, "model size: {:8.2f} MiB ({:.2f} bits per weight)\n", static_cast<double>(s.source_bytes) / 1048576.0,
             s.source_bits_per_weight());
  fmt::print(to, "quant size: {:8.2f} MiB ({:.2f} bits per weight), {} of {} tensors quantized, {} copied\n",
             static_cast<double>(s.output_bytes) / 1048576.0, s.output_bits_per_weight(), s.converted,
             s.converted + s.copied, s.copied);
}

// --output-tensor-type and --token-embedding-type: any tensor type name, in any case.
bool parse_type_option(const char* flag, const std::string& text, std::optional<ggufkit::TensorType>& out) {
  if (text.empty()) return true;
  out = ggufkit::parse_tensor_type(text);
  if (!out) {
    fmt::print(stderr, "gguf: {} '{}' is not a tensor type{}\n", flag, terminal_safe(text),
               suggestion_or(ggufkit::nearest_name(text, tensor_type_names(), {.fold = true}), " (q8_0, q6_K, f16...)"));
  }
  return out.has_value();
}

// The overrides in llama-quantize's order: the --tensor-type options and the PATTERN=TYPE words of
// each --tensor-type-file (separated by white space) where the options stand.
bool collect_tensor_types(const QuantizeArgs& args, std::vector<ggufkit::TensorTypeOverride>& out) {
  std::vector<std::string> words;
  for (const auto& [is_file, text] : args.tensor_type_sources) {
    if (!is_file) {
      words.push_back(text);
      continue;
    }
    std::ifstream in(text);
    if (!in) {
      fmt::print(stderr, "gguf: --tensor-type-file: cannot open {}\n", terminal_safe(text));
      return false;
    }
    for (std::string word; in >> word;) words.push_back(word);
  }
  for (const auto& word : words) {
    auto o = ggufkit::parse_tensor_type_override(word);
    if (!o) {
      fmt::print(stderr, "gguf: --tensor-type: {}\n", terminal_safe(o.error().message));
      return false;
    }
    out.push_back(std::move(*o));
  }
  return true;
}

int run_quantize(const QuantizeArgs& args) {
  ggufkit::QuantizeOptions options;
  if (!parse_type_option("--output-tensor-type", args.output_tensor_type, options.output_tensor_type) ||
      !parse_type_option("--token-embedding-type", args.token_embedding_type, options.token_embedding_type) ||
      !collect_tensor_types(args, options.tensor_types)) {
    return kUsageOrIoError;
  }
  for (const auto& text : args.override_kv) {
    auto o = ggufkit::parse_metadata_override(text);
    if (!o) {
      fmt::print(stderr, "gguf: {}\n", terminal_safe(o.error().message));
      return kUsageOrIoError;
    }
    options.metadata_overrides.push_back(std::move(*o));
  }
  options.quantize_output_tensor = !args.leave_output_tensor;
  options.allow_requantize = args.allow_requantize;
  options.keep_split = args.keep_split;
  options.dry_run = args.dry_run;
  // --imatrix, narrowed by --include-weights or --exclude-weights (llama-quantize: not both).
  ggufkit::ImportanceMatrix importance;
  if (!args.include_weights.empty() && !args.exclude_weights.empty()) {
    fmt::print(stderr, "gguf: --include-weights and --exclude-weights cannot be used together\n");
    return kUsageOrIoError;
  }
  if ((!args.include_weights.empty() || !args.exclude_weights.empty()) && args.imatrix.empty()) {
    fmt::print(stderr, "gguf: --include-weights and --exclude-weights select entries of --imatrix, which is missing\n");
    return kUsageOrIoError;
  }
  if (!args.imatrix.empty()) {
    auto loaded = ggufkit::load_importance_matrix(args.imatrix);
    if (!loaded) {
      report_error(args.imatrix, loaded.error());
      return kUsageOrIoError;
    }
    importance = std::move(*loaded);
    ggufkit::exclude_importance_entries(importance, args.exclude_weights);
    if (!args.include_weights.empty()) ggufkit::include_importance_entries(importance, args.include_weights);
    if (importance.entries.empty()) fmt::print(stderr, "gguf: quantize: no importance matrix entries left: quantizing without one\n");
    options.importance = &importance;
    options.importance_file = args.imatrix;
  }
  // TYPE as llama-quantize reads it: Q4_K_M, 15, q4_K, COPY (set_quantize_target).
  if (!ggufkit::set_quantize_target(args.type, options)) {
    fmt::print(stderr, "gguf: '{}' is not a quantization type{}\n", terminal_safe(args.type),
               suggestion_or(ggufkit::nearest_name(args.type, quantization_type_names(), {.fold = true}),
                             " (try q4_0, q8_0, q4_K, Q4_K_M, iq4_xs...; gguf types lists them)"));
    return kUsageOrIoError;
  }
  // A split model is read from its first shard; the output is one file.
  const auto input = ggufkit::SplitModel::open(args.input);
  if (!input) {
    report_error(args.input, input.error());
    return kUsageOrIoError;
  }
  options.pure = args.pure;
  options.threads = ggufkit::Threads{args.threads};
  options.sync = !args.no_sync;
  options.output.overwrite = args.force;
  options.cancel = &interrupt_flag();
  auto plan = ggufkit::plan_quantize(*input, options);
  if (!plan) {
    report_error(args.input, plan.error());
    return kUsageOrIoError;
  }
  const auto outputs = ggufkit::quantize_output_paths(*plan, args.output, options);
  ggufkit::OutputPolicy policy = options.output;
  policy.inputs.assign(input->paths().begin(), input->paths().end());
  if (!outputs_allowed(outputs, policy)) return kUsageOrIoError;
  if (args.dry_run) {
    for (const auto& p : plan->tensors) {
      fmt::print("{:<40} {:>8} -> {:<8} {:>10}  {}\n", terminal_safe(p.tensor->name), ggufkit::type_name(p.tensor->type),
                 ggufkit::type_name(p.target), short_bytes(p.bytes), p.convert ? terminal_safe(p.note) : "copied");
    }
    for (const auto& o : options.metadata_overrides) fmt::print("metadata: {} set\n", terminal_safe(o.key));
    if (options.importance != nullptr) {
      fmt::print("importance matrix: {} entries{}\n", importance.entries.size(),
                 importance.entries.empty() ? " (none used)" : "");
    }
    if (args.keep_split) {
      for (const auto& out : outputs) fmt::print("output: {}\n", terminal_safe(out.string()));
    }
    if (!args.allow_requantize) {
      for (const auto& p : plan->tensors) {
        if (p.convert && ggufkit::type_traits(p.tensor->type).quantized) {
          fmt::print("{} is already quantized: quantizing needs --allow-requantize\n", terminal_safe(p.tensor->name));
        }
      }
    }
    print_sizes(stdout, ggufkit::quantize_sizes(*plan));
    fmt::print("tensor data: {} ({} bytes, padding included)\n", human_bytes(plan->tensor_bytes), plan->tensor_bytes);
    return kOk;
  }
  // Progress on stderr: tensor, percent of the bytes, time left.
  std::vector<uint64_t> bytes;
  for (const auto& p : plan->tensors) bytes.push_back(p.bytes);
  const LongRun run("quantize", std::move(bytes));
  options.progress = [&](size_t done, size_t all) {
    const auto& p = plan->tensors[done - 1];
    run.tensor_done(done, all, p.tensor->name, ggufkit::type_name(p.target));
  };
  options.tensor_progress = [&](size_t index, uint64_t done, uint64_t size) {
    const auto& p = plan->tensors[index];
    run.tensor_moving(index, plan->tensors.size(), done, size, p.tensor->name, ggufkit::type_name(p.target));
  };
  const auto start = std::chrono::steady_clock::now();
  if (const int status = run.finish(ggufkit::quantize_model(*input, args.output, options), args.output, args.input);
      status != kOk) {
    return status;
  }
  // The output paths are the result (stdout); the figures are llama-quantize's closing report.
  for (const auto& out : outputs) fmt::print("{}\n", terminal_safe(out.string()));
  if (!args.quiet) {
    print_sizes(stderr, ggufkit::quantize_sizes(*plan));
    fmt::print(stderr, "quantize time: {:.2f} s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return kOk;
}

}  // namespace

Runner register_quantize(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand("quantize", "Quantize a model as llama-quantize does (byte-identical output)");
  add_force_flag(*cmd, args->force);
  add_no_sync_flag(*cmd, args->no_sync);
  cmd->footer(quantize_presets_footer());
  cmd->add_option("input", args->input, "GGUF model to read")->required();
  cmd->add_option("output", args->output, "GGUF file to write (never the input)")->required();
  cmd->add_option("type", args->type, "Target: a tensor type (q4_0, q8_0, q4_K, iq4_xs...), a file type (Q4_K_M), its llama-quantize number (15), or COPY (every tensor copied as it is)")
      ->required()
      ->type_name("TYPE");
  cmd->add_flag("--pure", args->pure, "Every quantizable tensor gets the type (llama-quantize --pure); without it TYPE's preset chooses per tensor");
  cmd->add_flag("--dry-run", args->dry_run,
                "Print each tensor's type and size, and the model's size before and after; write nothing");
  add_progress_flags(*cmd, &args->quiet);
  cmd->add_option("--threads", args->threads, "Threads (default: one per core)");
  cmd->add_option("--output-tensor-type", args->output_tensor_type,
                  "Type of output.weight (and of token_embd when it doubles as the output)")
      ->type_name("TYPE");
  cmd->add_option("--token-embedding-type", args->token_embedding_type, "Type of token_embd.weight")->type_name("TYPE");
  cmd->add_flag("--leave-output-tensor", args->leave_output_tensor, "Copy output.weight as it is");
  // Called as each option is parsed, so that the two keep their command-line order.
  cmd->add_option_function<std::string>(
         "--tensor-type", [args](const std::string& v) { args->tensor_type_sources.emplace_back(false, v); },
         "REGEX=TYPE: tensors whose name contains a match get TYPE (repeatable; the first match wins; "
         "only with a quantized TYPE, as llama-quantize)")
      ->trigger_on_parse()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option_function<std::string>(
         "--tensor-type-file", [args](const std::string& v) { args->tensor_type_sources.emplace_back(true, v); },
         "A file of REGEX=TYPE words separated by spaces or newlines (repeatable)")
      ->trigger_on_parse()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("--override-kv", args->override_kv,
                  "KEY=TYPE:VALUE (TYPE int, float, bool or str): set a metadata key in the output (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--imatrix", args->imatrix,
                  "Importance matrix from llama-imatrix (GGUF or legacy .dat): better low-bit quantization; "
                  "required by IQ1_*, IQ2_* and IQ3_XXS tensors");
  cmd->add_option("--include-weights", args->include_weights,
                  "Use the importance matrix only for tensors whose name contains this (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--exclude-weights", args->exclude_weights,
                  "Do not use the importance matrix for tensors whose name contains this (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--keep-split", args->keep_split,
                "Write one output shard per input shard (OUTPUT-00001-of-0000N.gguf), as llama-quantize --keep-split");
  cmd->add_flag("--allow-requantize", args->allow_requantize,
                "Dequantize quantized input tensors and quantize them again (quality suffers)");
  return [args] { return run_quantize(*args); };
}

}  // namespace gguf_cli
