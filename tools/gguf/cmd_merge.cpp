// gguf merge FIRST_SHARD OUT [--dry-run] [--json]: one file from a split model, every shard checked
// first; merge(split(X)) is X byte for byte.
#include <cstdio>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/json.h"
#include "ggufkit/split.h"
#include "output.h"

namespace gguf_cli {
namespace {

struct MergeArgs {
  bool force = false;  // --force: replace an existing output
  std::string first, output;
  bool dry_run = false;
  bool json = false;
};

std::string merge_json(const ggufkit::SplitModel& model, const std::string& output, uint64_t out_bytes) {
  std::string out;
  ggufkit::json::Writer w(out);
  w.begin_object().key("shards").begin_array();
  for (size_t i = 0; i < model.shards().size(); ++i) {
    w.begin_object()
        .member("path", model.paths()[i].string())
        .member("tensors", model.shards()[i].tensors().size())
        .member("file_bytes", model.shards()[i].file_size())
        .end_object();
  }
  w.end_array().member("output", output).member("tensor_count", model.tensors().size()).member("file_bytes", out_bytes);
  w.end_object();
  return out + "\n";
}

int run_merge(const MergeArgs& args) {
  auto model = ggufkit::SplitModel::open(args.first);
  if (!model) {
    report_error(args.first, model.error());
    return kUsageOrIoError;
  }
  if (!model->metadata_file().find(ggufkit::keys::kSplitCount)) {
    fmt::print(stderr, "gguf: merge: {} is not a split model (it has no split.count)\n", terminal_safe(args.first));
    return kUsageOrIoError;
  }
  if (!outputs_allowed({args.output}, {.overwrite = args.force, .inputs = {model->paths().begin(), model->paths().end()}})) {
    return kUsageOrIoError;
  }
  auto builder = ggufkit::merge_builder(*model);
  if (!builder) {
    report_error(args.first, builder.error());
    return kUsageOrIoError;
  }
  const uint64_t out_bytes = builder->file_bytes();
  std::string out;
  if (args.dry_run) {
    if (args.json) {
      out = merge_json(*model, args.output, out_bytes);
    } else {
      for (size_t i = 0; i < model->shards().size(); ++i) {
        fmt::format_to(std::back_inserter(out), "{}  {} tensors  {} ({} bytes)\n", terminal_safe(model->paths()[i].string()),
                       model->shards()[i].tensors().size(), human_bytes(model->shards()[i].file_size()),
                       model->shards()[i].file_size());
      }
      fmt::format_to(std::back_inserter(out), "-> {}  {} tensors  {} ({} bytes)\n", terminal_safe(args.output), model->tensors().size(),
                     human_bytes(out_bytes), out_bytes);
    }
  } else {
    ggufkit::WriteOptions options;
    options.output.overwrite = args.force;
    watch_interrupts();
    options.cancel = &interrupt_flag();
    const Progress progress;
    options.progress = [&progress](size_t done, size_t all) { progress.item(done, all, 0, 0, "tensors written"); };
    if (const int status = write_status("merge", ggufkit::write_merged(*model, args.output, options), args.output,
                                        args.output);
        status != kOk) {
      return status;
    }
    out = args.json ? merge_json(*model, args.output, out_bytes) : args.output + "\n";
  }
  return write_result(out);
}

}  // namespace

Runner register_merge(CLI::App& app) {
  auto args = std::make_shared<MergeArgs>();
  CLI::App* cmd = app.add_subcommand("merge", "Merge a split model into one file (checks every shard first)");
  add_force_flag(*cmd, args->force);
  add_progress_flags(*cmd);
  cmd->add_option("first_shard", args->first, "The first shard, PREFIX-00001-of-0000N.gguf")->required();
  cmd->add_option("output", args->output, "GGUF file to write (never one of the shards)")->required();
  cmd->add_flag("--dry-run", args->dry_run, "Check the shards and print what would be written; write nothing");
  cmd->add_flag("--json", args->json, "Machine-readable output");
  return [args] { return run_merge(*args); };
}

}  // namespace gguf_cli
