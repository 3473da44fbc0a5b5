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

#include <fmt/format.h>

#include "cli_docs.h"
#include "commands.h"
#include "ggufkit/conventions.h"
#include "ggufkit/imatrix.h"
#include "ggufkit/quantize.h"
#include "output.h"
#include "quantize_flags.h"

namespace gguf_cli {
namespace {

struct QuantizeArgs {
  bool force = false;  // --force: replace an existing output
  bool no_sync = false;  // --no-sync: no fsync before the rename
  std::string input, output, type;
  bool pure = false;
  bool dry_run = false;
  bool quiet = false;
  bool allow_requantize = false;
  bool keep_split = false;
  std::shared_ptr<QuantizeFlags> flags = std::make_shared<QuantizeFlags>();
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

int run_quantize(const QuantizeArgs& args) {
  ggufkit::QuantizeOptions options;
  ggufkit::ImportanceMatrix importance;
  if (!apply_quantize_flags(*args.flags, options, importance, "quantize")) return kUsageOrIoError;
  options.allow_requantize = args.allow_requantize;
  options.keep_split = args.keep_split;
  options.dry_run = args.dry_run;
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
  add_quantize_flags(*cmd, args->flags);
  cmd->add_flag("--keep-split", args->keep_split,
                "Write one output shard per input shard (OUTPUT-00001-of-0000N.gguf), as llama-quantize --keep-split");
  cmd->add_flag("--allow-requantize", args->allow_requantize,
                "Dequantize quantized input tensors and quantize them again (quality suffers)");
  return [args] { return run_quantize(*args); };
}

}  // namespace gguf_cli
