// gguf types [--json]: every quantization preset gguf quantize takes (llama-quantize's list: its
// number, name, main type, bits per weight, whether it needs an importance matrix) and every
// tensor type (ggml's id, block, bits per weight, what ggufkit can do with it).
#include <fmt/format.h>

#include "cli_docs.h"
#include "commands.h"
#include "ggufkit/conventions.h"
#include "ggufkit/quant.h"
#include "ggufkit/quantize.h"
#include "ggufkit/tensor_types.h"
#include "output.h"
#include "printer.h"

namespace gguf_cli {
namespace {

struct TypesArgs {
  bool json = false;
};

// "required", "used" (when given) or "ignored".
std::string_view importance_use(bool required, bool accepted) {
  return required ? "required" : accepted ? "used" : "ignored";
}

void print_types(Printer& p) {
  p.begin_object();
  p.text("presets (gguf quantize IN OUT PRESET, or its number; type and bpw are those of its main tensors, "
         "alias the type name that selects it alone):");
  p.text(fmt::format("  {:>4}  {:<10} {:<8} {:>6}  {:<9} {:<8} {}", "id", "preset", "type", "bpw", "imatrix", "alias",
                     "description"));
  p.begin_array("presets");
  for (const ggufkit::FileTypeInfo* preset : quantize_presets()) {
    const ggufkit::FileTypeInfo& f = *preset;
    const ggufkit::TensorType main = *f.default_type;
    const std::string_view name = ggufkit::file_type_preset_name(f);
    const std::string_view imatrix = importance_use(ggufkit::preset_requires_importance_matrix(f.id),
                                                    ggufkit::quant_capabilities(main).accepts_imatrix);
    const double bpw = ggufkit::type_traits(main).bits_per_weight();
    p.begin_object().begin_line("  ");
    p.field("id", f.id, fmt::format("{:>4}  ", f.id));
    p.field("name", name, fmt::format("{:<10} ", name));
    p.field("type", ggufkit::type_name(main), fmt::format("{:<8} ", ggufkit::type_name(main)));
    p.field("bits_per_weight", bpw, fmt::format("{:>6.2f}  ", bpw));
    p.field("imatrix", imatrix, fmt::format("{:<9} ", imatrix));
    const auto alias = f.selected_by ? std::optional<std::string_view>(ggufkit::type_name(*f.selected_by)) : std::nullopt;
    p.field("alias", alias, fmt::format("{:<8} ", alias.value_or("-")));
    p.field("description", f.description, f.description);
    p.end_line().end_object();
  }
  p.end_array();
  p.text("");
  p.text("tensor types (--pure, --output-tensor-type, --tensor-type; bpw of the block as stored; imatrix as "
         "ggml's kernel needs it, where presets say what llama-quantize needs):");
  p.text(fmt::format("  {:>4}  {:<8} {:>5} {:>5} {:>6}  {:<8} {:<10} {}", "id", "type", "block", "bytes", "bpw",
                     "quantize", "dequantize", "imatrix"));
  p.begin_array("types");
  for (const ggufkit::TypeTraits& t : ggufkit::all_type_traits()) {
    if (t.status != ggufkit::TypeStatus::supported) continue;
    const auto caps = ggufkit::quant_capabilities(static_cast<ggufkit::TensorType>(t.id));
    const std::string_view imatrix = importance_use(caps.requires_imatrix, caps.accepts_imatrix);
    p.begin_object().begin_line("  ");
    p.field("id", t.id, fmt::format("{:>4}  ", t.id));
    p.field("name", t.name, fmt::format("{:<8} ", t.name));
    p.field("block_size", t.block_size, fmt::format("{:>5} ", t.block_size));
    p.field("block_bytes", t.block_bytes, fmt::format("{:>5} ", t.block_bytes));
    p.field("bits_per_weight", t.bits_per_weight(), fmt::format("{:>6.2f}  ", t.bits_per_weight()));
    p.field("quantize", caps.quantize, fmt::format("{:<8} ", caps.quantize ? "yes" : "no"));
    p.field("dequantize", caps.dequantize, fmt::format("{:<10} ", caps.dequantize ? "yes" : "no"));
    p.field("imatrix", imatrix, imatrix);
    p.end_line().end_object();
  }
  p.end_array();
  p.end_object();
}

int run_types(const TypesArgs& args) {
  std::string out;
  print_types(*Printer::make(args.json, out));
  return write_result(out);
}

}  // namespace

std::string quantize_presets_footer() {
  std::string out = "Presets (TYPE; number or name, any case; * needs an importance matrix, --imatrix):\n";
  std::string line = " ";
  for (const ggufkit::FileTypeInfo* f : quantize_presets()) {
    const std::string item = fmt::format(" {}{} ({}),", ggufkit::file_type_preset_name(*f),
                                         ggufkit::preset_requires_importance_matrix(f->id) ? "*" : "", f->id);
    if (line.size() + item.size() > 100) {
      out += line + "\n";
      line = " ";
    }
    line += item;
  }
  line.pop_back();  // the last comma
  out += line + "\n";
  out += "Bits per weight and every tensor type: gguf types";
  return out;
}

Runner register_types(CLI::App& app) {
  auto args = std::make_shared<TypesArgs>();
  CLI::App* cmd = app.add_subcommand("types", "List the quantization presets and tensor types, with bits per weight "
                                              "and importance-matrix needs (llama-quantize's list)");
  cmd->add_flag("--json", args->json, "Machine-readable output");
  return [args] { return run_types(*args); };
}

}  // namespace gguf_cli
