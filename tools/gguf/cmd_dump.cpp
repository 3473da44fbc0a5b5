// gguf dump FILE [--json] [--no-tensors] [--full]: every metadata entry and every tensor.
#include <cstdio>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/json.h"
#include "output.h"

namespace gguf_cli {
namespace {

struct DumpArgs {
  std::string file;
  bool json = false;
  bool no_tensors = false;
  bool full = false;
};

constexpr size_t kShownElements = 8;
constexpr size_t kShownChars = 120;

std::string scalar_text(const ggufkit::ValueView& v, bool full) {
  if (v.type() == ggufkit::ValueType::String) {
    const std::string_view s = v.as_string().value_or("");
    return fmt::format("\"{}\"", full ? shorten_for_display(s, SIZE_MAX) : shorten_for_display(s, kShownChars));
  }
  std::string out;
  ggufkit::json::append_value(out, v);
  return out;
}

std::string value_text(const ggufkit::ValueView& v, bool full) {
  const auto arr = v.as_array();
  if (!arr) return scalar_text(v, full);
  std::string out = "[";
  uint64_t shown = 0;
  for (const ggufkit::ValueView e : arr->values()) {
    if (!full && shown == kShownElements) {
      out += fmt::format(", … {} more", arr->size() - shown);
      break;
    }
    if (shown++ > 0) out += ", ";
    out += value_text(e, full);
  }
  return out + "]";
}

std::string type_text(const ggufkit::ValueView& v) {
  const auto arr = v.as_array();
  if (!arr) return std::string(ggufkit::value_type_name(v.type()));
  return fmt::format("{}[{}]", ggufkit::value_type_name(arr->element_type()), arr->size());
}

int run_dump(const DumpArgs& args) {
  const auto file = open_or_report(args.file);
  if (!file) return kUsageOrIoError;
  std::string out;
  if (args.json) {
    ggufkit::append_dump_json(out, *file, {.metadata = true, .tensors = !args.no_tensors});
  } else {
    fmt::format_to(std::back_inserter(out), "GGUF v{} · alignment {} · data offset {} · {} bytes\n",
                   file->version(), file->alignment(), file->data_offset(), file->file_size());
    fmt::format_to(std::back_inserter(out), "{} metadata entries:\n", file->metadata().size());
    size_t i = 0;
    for (const ggufkit::KeyValue& kv : file->metadata()) {
      fmt::format_to(std::back_inserter(out), "{:5}  {:<40} {:<16} {}\n", ++i, shorten_for_display(kv.key, 200),
                     type_text(kv.value), value_text(kv.value, args.full));
    }
    if (!args.no_tensors) {
      fmt::format_to(std::back_inserter(out), "{} tensors:\n", file->tensors().size());
      i = 0;
      for (const ggufkit::TensorInfo& t : file->tensors()) {
        fmt::format_to(std::back_inserter(out), "{:5}  {:<40} {:<8} {:<24} offset {:<12} size {}\n", ++i,
                       shorten_for_display(t.name, 64), ggufkit::type_name(t.type),
                       fmt::format("[{}]", fmt::join(t.shape(), ", ")), t.offset, t.size);
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
  cmd->add_option("file", args->file, "GGUF file")->required();
  cmd->add_flag("--json", args->json, "Complete values as JSON");
  cmd->add_flag("--no-tensors", args->no_tensors, "Leave out the tensor list");
  cmd->add_flag("--full", args->full, "Do not shorten long arrays and strings (text mode)");
  return [args] { return run_dump(*args); };
}

}  // namespace gguf_cli
