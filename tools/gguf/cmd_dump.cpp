// gguf dump FILE [--json] [--no-tensors] [--full]: every metadata entry and every tensor. FILE may be
// the first shard of a split model: the metadata is the first shard's, the tensors all shards'.
#include <cstdio>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/json.h"
#include "printer.h"
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
  auto model = open_model(args.file, metadata_only_ok());
  if (!model) {
    report_error(args.file, model.error());
    return kUsageOrIoError;
  }
  const ggufkit::GgufFile& file = model->metadata_file();
  const bool split = model->is_split();
  const ValueTextLimits limits = args.full ? ValueTextLimits{} : kDumpLimits;
  std::string out;
  const auto p = Printer::make(args.json, out);
  p->begin_object().field("file", args.file).begin_line();
  p->field("version", file.version(), fmt::format("GGUF v{}", file.version()));
  p->field("byte_order", ggufkit::byte_order_name(file.byte_order()),
           fmt::format(" · {}-endian", ggufkit::byte_order_name(file.byte_order())));
  p->field("alignment", file.alignment(), fmt::format(" · alignment {}", file.alignment()));
  p->field("data_offset", file.data_offset(), fmt::format(" · data offset {}", file.data_offset()));
  p->field("file_size", file.file_size(), fmt::format(" · {} bytes", file.file_size()));
  p->field("tensor_data", file.has_tensor_data(), no_tensor_data_note(file));
  p->end_line();

  p->text(fmt::format("{} metadata entries:", file.metadata().size())).begin_array("metadata");
  size_t i = 0;
  for (const ggufkit::KeyValue& kv : file.metadata()) {
    p->field_with({}, [&](ggufkit::json::Writer& w) { ggufkit::write_dump_entry(w, kv); },
                  fmt::format("{:5}  {:<40} {:<16} {}", ++i, shorten_for_display(kv.key, 200),
                              value_type_text(kv.value), value_text(kv.value, limits)));
  }
  p->end_array();

  if (!args.no_tensors) {
    p->text(fmt::format("{} tensors:", model->tensors().size())).begin_array("tensors");
    i = 0;
    for (const ggufkit::ModelTensor& mt : model->tensors()) {
      const ggufkit::TensorInfo& t = *mt.info;
      const auto shard = split ? std::optional<uint32_t>(mt.shard) : std::nullopt;
      p->field_with({}, [&](ggufkit::json::Writer& w) { ggufkit::write_dump_tensor(w, t, shard); },
                    fmt::format("{:5}  {:<40} {:<8} {:<24} {}offset {:<12} size {}", ++i,
                                shorten_for_display(t.name, 64), ggufkit::type_name(t.type),
                                fmt::format("[{}]", fmt::join(t.shape(), ", ")),
                                shard ? fmt::format("shard {:<3} ", *shard + 1) : "", t.offset, t.size));
    }
    p->end_array();
  }

  if (split) {  // the shards, after the tensors (as in the library's dump of a split model)
    p->text(fmt::format("split model: {} shards, {} bytes in all", model->shards().size(), model->file_bytes()));
    p->begin_array("shards");
    for (size_t s = 0; s < model->shards().size(); ++s) {
      const ggufkit::GgufFile& f = model->shards()[s];
      const std::string path = model->paths()[s].string();
      p->begin_object().begin_line(fmt::format("  shard {}  ", s + 1));
      p->field("path", path, path).field("version", f.version());
      p->field("byte_order", ggufkit::byte_order_name(f.byte_order()));
      p->field("alignment", f.alignment());
      p->field("data_offset", f.data_offset(), fmt::format(" · data offset {}", f.data_offset()));
      p->field("file_size", f.file_size(), fmt::format(" · {} bytes", f.file_size()));
      p->field("tensor_data", f.has_tensor_data(), no_tensor_data_note(f));
      p->field("tensor_count", f.tensors().size(), fmt::format(" · {} tensors", f.tensors().size()));
      p->end_line().end_object();
    }
    p->end_array();
  }
  p->end_object();
  return write_result(out);
}

}  // namespace

Runner register_dump(CLI::App& app) {
  auto args = std::make_shared<DumpArgs>();
  CLI::App* cmd = app.add_subcommand("dump", "Print every metadata entry and every tensor");
  cmd->add_option("file", args->file, "GGUF file (or the first shard of a split model)")->required();
  cmd->add_flag("--json", args->json, "Complete values as JSON");
  add_remote_options(*cmd);
  cmd->add_flag("--no-tensors", args->no_tensors, "Leave out the tensor list");
  cmd->add_flag("--full", args->full, "Do not shorten long arrays and strings (text mode)");
  return [args] { return run_dump(*args); };
}

}  // namespace gguf_cli
