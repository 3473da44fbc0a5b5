// gguf dump FILE [--json] [--no-tensors] [--full]: every metadata entry and every tensor. FILE may be
// the first shard of a split model: the metadata is the first shard's, the tensors all shards'.
#include <cstdio>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/json.h"
#include "ggufkit/split.h"
#include "output.h"

namespace gguf_cli {
namespace {

struct DumpArgs {
  std::string file;
  bool json = false;
  bool no_tensors = false;
  bool full = false;
};

// Strings shown up to 120 characters and arrays up to 8 elements, at every level (--full: all).
constexpr ValueTextLimits kDumpLimits{120, 8, 120};

int run_dump(const DumpArgs& args) {
  auto model = ggufkit::SplitModel::open(args.file);
  if (!model) {
    report_error(args.file, model.error());
    return kUsageOrIoError;
  }
  const ggufkit::GgufFile* file = &model->metadata_file();
  const bool split = model->is_split();
  std::string out;
  if (args.json && split) {
    ggufkit::append_dump_json(out, *model, {.metadata = true, .tensors = !args.no_tensors});
  } else if (args.json) {
    ggufkit::append_dump_json(out, *file, {.metadata = true, .tensors = !args.no_tensors});
  } else {
    fmt::format_to(std::back_inserter(out), "GGUF v{} · alignment {} · data offset {} · {} bytes\n",
                   file->version(), file->alignment(), file->data_offset(), file->file_size());
    fmt::format_to(std::back_inserter(out), "{} metadata entries:\n", file->metadata().size());
    size_t i = 0;
    for (const ggufkit::KeyValue& kv : file->metadata()) {
      fmt::format_to(std::back_inserter(out), "{:5}  {:<40} {:<16} {}\n", ++i, shorten_for_display(kv.key, 200),
                     value_type_text(kv.value), value_text(kv.value, args.full ? ValueTextLimits{} : kDumpLimits));
    }
    if (split) {
      fmt::format_to(std::back_inserter(out), "split model: {} shards, {} bytes in all\n", model->shards().size(),
                     model->file_bytes());
      for (size_t s = 0; s < model->shards().size(); ++s) {
        const ggufkit::GgufFile& f = model->shards()[s];
        fmt::format_to(std::back_inserter(out), "  shard {}  {} · {} tensors · data offset {} · {} bytes\n", s + 1,
                       model->paths()[s].string(), f.tensors().size(), f.data_offset(), f.file_size());
      }
    }
    if (!args.no_tensors) {
      fmt::format_to(std::back_inserter(out), "{} tensors:\n", model->tensors().size());
      i = 0;
      for (const ggufkit::ModelTensor& mt : model->tensors()) {
        const ggufkit::TensorInfo& t = *mt.info;
        fmt::format_to(std::back_inserter(out), "{:5}  {:<40} {:<8} {:<24} {}offset {:<12} size {}\n", ++i,
                       shorten_for_display(t.name, 64), ggufkit::type_name(t.type),
                       fmt::format("[{}]", fmt::join(t.shape(), ", ")),
                       split ? fmt::format("shard {:<3} ", mt.shard + 1) : "", t.offset, t.size);
      }
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? kOk : kUsageOrIoError;
}

}  // namespace

Runner register_dump(CLI::App& app) {
  auto args = std::make_shared<DumpArgs>();
  CLI::App* cmd = app.add_subcommand("dump", "Print every metadata entry and every tensor");
  cmd->add_option("file", args->file, "GGUF file (or the first shard of a split model)")->required();
  cmd->add_flag("--json", args->json, "Complete values as JSON");
  cmd->add_flag("--no-tensors", args->no_tensors, "Leave out the tensor list");
  cmd->add_flag("--full", args->full, "Do not shorten long arrays and strings (text mode)");
  return [args] { return run_dump(*args); };
}

}  // namespace gguf_cli
