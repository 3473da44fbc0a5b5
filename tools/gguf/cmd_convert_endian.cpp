// gguf convert-endian IN OUT --to little|big [--dry-run]: the same model in the other byte order
// (big-endian files are for s390x). Metadata, tensor infos and every tensor type whose block
// layout is known are converted; OUT is written atomically and IN is never modified.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/endian.h"
#include "output.h"

namespace gguf_cli {
namespace {

struct ConvertEndianArgs {
  bool force = false;  // --force: replace an existing output
  std::string input, output, to;
  bool dry_run = false;
};

int run_convert_endian(const ConvertEndianArgs& args) {
  const ggufkit::ByteOrder to = args.to == "big" ? ggufkit::ByteOrder::big : ggufkit::ByteOrder::little;
  if (!outputs_allowed({args.output}, {.overwrite = args.force, .inputs = {args.input}})) return kUsageOrIoError;
  const auto input = open_or_report(args.input);
  if (!input) return kUsageOrIoError;
  const ggufkit::ConvertEndianPlan plan = ggufkit::plan_convert_endian(*input, to);
  const auto from_name = ggufkit::byte_order_name(plan.from), to_name = ggufkit::byte_order_name(plan.to);
  if (plan.swaps() && !plan.unsupported.empty()) {
    fmt::print(stderr, "gguf: convert-endian: {}: {} tensor(s) have a type whose byte layout is not known:\n",
               terminal_safe(args.input), plan.unsupported.size());
    for (const std::string& t : plan.unsupported) fmt::print(stderr, "  {}\n", terminal_safe(t));
    return kUsageOrIoError;
  }
  if (args.dry_run) {
    fmt::print("{}: {}-endian, {} tensors, {} of tensor data\n", terminal_safe(args.input), from_name, input->tensors().size(),
               human_bytes(plan.tensor_bytes));
    if (plan.swaps()) {
      fmt::print("would write {} as {}-endian: header, metadata and tensor data byte-swapped\n", terminal_safe(args.output), to_name);
    } else {
      fmt::print("already {}-endian: would copy it unchanged to {}\n", to_name, terminal_safe(args.output));
    }
    return kOk;  // main checks that stdout took it (finish_output)
  }
  ggufkit::ConvertEndianOptions options;
  options.output.overwrite = args.force;
  watch_interrupts();
  options.cancel = &interrupt_flag();
  const Progress progress;
  options.progress = [&progress](uint64_t done, uint64_t total) { progress.bytes(done, total, "tensor data converted"); };
  if (const int status = write_status("convert-endian", ggufkit::convert_endian(*input, args.output, to, options),
                                      args.output, args.input);
      status != kOk) {
    return status;
  }
  fmt::print("{}: {}-endian -> {}: {}-endian{}\n", terminal_safe(args.input), from_name, terminal_safe(args.output), to_name,
             plan.swaps() ? "" : " (already in that order: copied)");
  return kOk;
}

}  // namespace

Runner register_convert_endian(CLI::App& app) {
  auto args = std::make_shared<ConvertEndianArgs>();
  CLI::App* cmd = app.add_subcommand("convert-endian", "Write a copy of a model in the other byte order (little or big-endian)");
  add_force_flag(*cmd, args->force);
  add_progress_flags(*cmd);
  cmd->add_option("input", args->input, "GGUF file to read (little- or big-endian)")->required();
  cmd->add_option("output", args->output, "GGUF file to write (atomically; never the input)")->required();
  cmd->add_option("--to", args->to, "Byte order of the output")->required()->check(CLI::IsMember({"little", "big"}));
  cmd->add_flag("--dry-run", args->dry_run, "Say what would be done; write nothing");
  return [args] { return run_convert_endian(*args); };
}

}  // namespace gguf_cli
