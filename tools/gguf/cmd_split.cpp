// gguf split IN PREFIX (--max-size 2G | --max-tensors N) [--dry-run] [--json]: llama-gguf-split's
// shards (PREFIX-00001-of-0000N.gguf), loadable by llama.cpp as one model.
#include <cstdio>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/json.h"
#include "ggufkit/split.h"
#include "output.h"

namespace gguf_cli {
namespace {

struct SplitArgs {
  bool force = false;  // --force: replace an existing output
  std::string input, prefix, max_size;
  uint64_t max_tensors = 0;
  bool dry_run = false;
  bool json = false;
};

std::string plan_json(const std::string& input, const ggufkit::GgufFile& file, const ggufkit::SplitPlan& plan) {
  std::string out;
  ggufkit::json::Writer w(out);
  w.begin_object().member("input", input).key("shards").begin_array();
  for (const auto& s : plan.shards) {
    w.begin_object()
        .member("path", s.path)
        .member("tensors", s.tensor_count)
        .member("tensor_bytes", s.tensor_bytes)
        .member("file_bytes", s.file_bytes);
    if (s.tensor_count) {
      w.member("first_tensor", file.tensors()[s.first_tensor].name)
          .member("last_tensor", file.tensors()[s.first_tensor + s.tensor_count - 1].name);
    } else {
      w.key("first_tensor").null().key("last_tensor").null();
    }
    w.end_object();
  }
  w.end_array().member("tensor_count", file.tensors().size()).member("total_file_bytes", plan.total_file_bytes());
  w.end_object();
  return out + "\n";
}

std::string plan_text(const ggufkit::GgufFile& file, const ggufkit::SplitPlan& plan) {
  std::string out;
  for (const auto& s : plan.shards) {
    fmt::format_to(std::back_inserter(out), "{}  {} tensors  {} ({} bytes)\n", terminal_safe(s.path), s.tensor_count,
                   human_bytes(s.file_bytes), s.file_bytes);
  }
  fmt::format_to(std::back_inserter(out), "{} shards, {} tensors, {} ({} bytes)\n", plan.shards.size(),
                 file.tensors().size(), human_bytes(plan.total_file_bytes()), plan.total_file_bytes());
  return out;
}

int run_split(const SplitArgs& args) {
  ggufkit::SplitLimits limits;
  if (!args.max_size.empty()) {
    const auto bytes = ggufkit::parse_size(args.max_size);
    if (!bytes) {
      fmt::print(stderr, "gguf: split: {}\n", terminal_safe(bytes.error().message));
      return kUsageOrIoError;
    }
    limits.max_bytes = *bytes;
  } else if (args.max_tensors > 0) {
    limits.max_tensors = args.max_tensors;
  } else {
    fmt::print(stderr, "gguf: split: give --max-size SIZE (e.g. 2G) or --max-tensors N (N >= 1)\n");
    return kUsageOrIoError;
  }
  const auto input = open_or_report(args.input);
  if (!input) return kUsageOrIoError;
  if (const auto count = input->get(ggufkit::keys::kSplitCount); count && count->as_uint().value_or(0) > 1) {
    fmt::print(stderr, "gguf: split: {} is a shard of a split model; merge it first (gguf merge)\n", terminal_safe(args.input));
    return kUsageOrIoError;
  }
  auto plan = ggufkit::plan_split(*input, args.prefix, limits);
  if (!plan) {
    report_error(args.input, plan.error());
    return kUsageOrIoError;
  }
  std::vector<std::filesystem::path> shards;
  for (const auto& s : plan->shards) shards.emplace_back(s.path);
  if (!outputs_allowed(shards, {.overwrite = args.force, .inputs = {args.input}})) return kUsageOrIoError;
  if (args.dry_run) {
    const std::string out = args.json ? plan_json(args.input, *input, *plan) : plan_text(*input, *plan);
    return write_result(out);
  }
  ggufkit::SplitWriteOptions options;
  options.output.overwrite = args.force;
  watch_interrupts();
  options.cancel = &interrupt_flag();
  options.input_path = args.input;
  const Progress progress;
  options.progress = [&progress](size_t done, size_t all, const std::string& path) {
    progress.item(done, all, 0, 0, path);
  };
  const std::string shards_text = fmt::format("{}-*-of-{:05}.gguf", args.prefix, plan->shards.size());
  if (const int status = write_status("split", ggufkit::write_split(*input, *plan, options), shards_text, args.input);
      status != kOk) {
    return status;
  }
  std::string out;
  if (args.json) {
    out = plan_json(args.input, *input, *plan);
  } else {
    for (const auto& s : plan->shards) out += terminal_safe(s.path) + "\n";
  }
  return write_result(out);
}

}  // namespace

Runner register_split(CLI::App& app) {
  auto args = std::make_shared<SplitArgs>();
  CLI::App* cmd = app.add_subcommand("split", "Split a model into shards llama.cpp loads as one (llama-gguf-split)");
  add_force_flag(*cmd, args->force);
  add_progress_flags(*cmd);
  cmd->add_option("input", args->input, "GGUF model to split")->required();
  cmd->add_option("prefix", args->prefix, "Shards are written as PREFIX-00001-of-0000N.gguf ...")->required();
  auto* size = cmd->add_option("--max-size", args->max_size,
                               "Most tensor bytes per shard: 2G, 500M (powers of 1000, as llama-gguf-split), 1GiB, bytes")
                   ->type_name("SIZE");
  auto* tensors = cmd->add_option("--max-tensors", args->max_tensors, "Most tensors per shard")
                      ->check(CLI::Range(uint64_t{1}, uint64_t{INT32_MAX}));
  size->excludes(tensors);
  cmd->add_flag("--dry-run", args->dry_run, "Print the shards (files, tensors, sizes); write nothing");
  cmd->add_flag("--json", args->json, "The plan as JSON");
  return [args] { return run_split(*args); };
}

}  // namespace gguf_cli
