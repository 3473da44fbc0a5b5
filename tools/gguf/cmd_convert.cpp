// gguf convert HF_DIR OUT.gguf [--outtype f32|f16|bf16|q8_0|TYPE|PRESET] [--threads N] [--dry-run] [--json]
// [--no-tokenizer] [--pure] [llama-quantize's type and metadata options]:
// a Hugging Face safetensors checkpoint to GGUF as llama.cpp's convert_hf_to_gguf.py writes it,
// streamed tensor by tensor; with a quantization preset (Q4_K_M), in the same pass the file
// `gguf quantize` would make of it. Prints the output path (or, with --dry-run, the plan) on
// stdout, progress on stderr.
#include <csignal>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/convert.h"
#include "ggufkit/convert_quantized.h"
#include "ggufkit/json.h"
#include "output.h"
#include "quantize_flags.h"

namespace gguf_cli {
namespace {

struct ConvertArgs {
  bool force = false;  // --force: replace an existing output
  bool no_sync = false;  // --no-sync: no fsync before the rename
  std::string input, output;
  std::string outtype = "f16";
  unsigned threads = 0;
  bool dry_run = false;
  bool json = false;
  bool no_tokenizer = false;
  bool pure = false;  // --pure, and the other quantize options: --outtype is then quantize's TYPE
  std::shared_ptr<QuantizeFlags> quantize = std::make_shared<QuantizeFlags>();
  std::string intermediate;  // --intermediate: the type converted to before quantizing
};

// --outtype names the converter's own output type (as convert_hf_to_gguf.py's --outtype:
// convert_own_out_type) when no quantize option is given; otherwise it is llama-quantize's TYPE
// (Q4_K_M, Q8_0, IQ4_XS, 15, q4_K with --pure...), reached through the intermediate type in one pass.
std::optional<ggufkit::TensorType> converter_out_type(const ConvertArgs& args) {
  if (args.pure || args.quantize->any()) return std::nullopt;
  return ggufkit::convert_own_out_type(args.outtype);
}

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("{{{}}}", fmt::join(shape, ", ")); }

int print_plan_json(const ggufkit::ConvertPlan& plan, std::optional<ggufkit::TensorType> intermediate = std::nullopt) {
  std::string out;
  ggufkit::json::Writer w(out);
  w.begin_object()
      .member("hf_architecture", plan.hf_architecture)
      .member("architecture", plan.architecture)
      .member("file_type", plan.file_type)
      .member("parameter_count", plan.parameter_count)
      .member("tensor_bytes", plan.tensor_bytes);
  if (intermediate) w.member("intermediate", ggufkit::type_name(*intermediate));
  w.key("metadata_keys").begin_array();
  for (const auto& [key, value] : plan.metadata) w.value(key);
  w.end_array().key("tensors").begin_array();
  for (const auto& t : plan.tensors) {
    w.begin_object()
        .member("hf_name", t.hf_name)
        .member("name", t.gguf_name)
        .key("shape")
        .array(t.shape)
        .member("source_dtype", t.source ? ggufkit::safetensors_dtype_name(t.source->dtype) : std::string_view("generated"))
        .member("type", ggufkit::type_name(t.type))
        .member("transform", ggufkit::convert_transform_name(t.transform))
        .member("bytes", t.bytes)
        .member("note", t.note)
        .end_object();
  }
  w.end_array().key("skipped").array(plan.skipped).end_object();
  return write_result(out + "\n");
}

void print_plan(const ggufkit::ConvertPlan& plan, std::optional<ggufkit::TensorType> intermediate = std::nullopt) {
  fmt::print("architecture: {} -> {}\n", terminal_safe(plan.hf_architecture), plan.architecture);
  if (intermediate) fmt::print("quantized from: {} (gguf convert --outtype {}, then gguf quantize)\n", ggufkit::type_name(*intermediate), ggufkit::type_name(*intermediate));
  for (const auto& t : plan.tensors) {
    const std::string from = t.source ? std::string(ggufkit::safetensors_dtype_name(t.source->dtype)) : "generated";
    fmt::print("{:<40} -> {:<28} {:<20} {:>9} -> {:<6}{}{}\n", t.hf_name.empty() ? "(generated)" : terminal_safe(t.hf_name),
               terminal_safe(t.gguf_name), shape_text(t.shape), from, ggufkit::type_name(t.type),
               t.transform == ggufkit::ConvertTransform::none ? "" : fmt::format(" [{}]", ggufkit::convert_transform_name(t.transform)),
               t.note.empty() ? "" : fmt::format(" ({})", t.note));
  }
  for (const auto& name : plan.skipped) fmt::print("{:<40} dropped\n", terminal_safe(name));
  fmt::print("metadata: {} keys\n", plan.metadata.size());
  fmt::print("parameters: {}\n", plan.parameter_count);
  fmt::print("tensor data: {} ({} bytes)\n", human_bytes(plan.tensor_bytes), plan.tensor_bytes);
}

// The plan of a preset conversion as the plain one prints it: the output's types, sizes and notes
// (tensors in the converter's order).
ggufkit::ConvertPlan final_plan(const ggufkit::ConvertQuantizedPlan& plan) {
  ggufkit::ConvertPlan shown = plan.convert;
  const auto infos = plan.header->tensors();
  for (const auto& p : plan.quantize.tensors) {
    auto& t = shown.tensors[static_cast<size_t>(p.tensor - infos.data())];
    t.type = p.target;
    t.bytes = p.bytes;
    if (p.convert) t.note = p.note;
  }
  shown.tensor_bytes = plan.quantize.tensor_bytes;
  shown.file_type = plan.quantize.file_type;
  return shown;
}

int run_convert_quantized(const ConvertArgs& args, const ggufkit::ConvertOptions& options) {
  ggufkit::QuantizeOptions quantize;
  ggufkit::ImportanceMatrix importance;
  if (!apply_quantize_flags(*args.quantize, quantize, importance, "convert")) return kUsageOrIoError;
  (void)ggufkit::set_quantize_target(args.outtype, quantize);  // run_convert checked it
  quantize.pure = args.pure;
  quantize.dry_run = args.dry_run;
  std::optional<ggufkit::TensorType> intermediate;
  if (!args.intermediate.empty()) {
    intermediate = ggufkit::parse_tensor_type(args.intermediate);
    if (!intermediate || (*intermediate != ggufkit::TensorType::F32 && *intermediate != ggufkit::TensorType::F16 &&
                          *intermediate != ggufkit::TensorType::BF16)) {
      fmt::print(stderr, "gguf: convert: --intermediate '{}' is not f32, f16 or bf16\n", terminal_safe(args.intermediate));
      return kUsageOrIoError;
    }
  }
  auto plan = ggufkit::plan_convert_quantized(args.input, options, quantize, intermediate);
  if (!plan) {
    report_error(args.input, plan.error());
    return kUsageOrIoError;
  }
  if (!outputs_allowed({args.output}, {.overwrite = args.force, .inputs = plan->convert.inputs})) return kUsageOrIoError;
  if (args.dry_run) {
    const ggufkit::ConvertPlan shown = final_plan(*plan);
    if (args.json) return print_plan_json(shown, plan->intermediate);
    print_plan(shown, plan->intermediate);
    return kOk;
  }
  std::vector<uint64_t> bytes;
  for (const auto& p : plan->quantize.tensors) bytes.push_back(p.bytes);
  const LongRun run("convert", std::move(bytes));
  ggufkit::ConvertOptions run_options = options;
  run_options.progress = [&](size_t done, size_t all) {
    const auto& p = plan->quantize.tensors[done - 1];
    run.tensor_done(done, all, p.tensor->name, ggufkit::type_name(p.target));
  };
  run_options.tensor_progress = [&](size_t index, uint64_t done, uint64_t size) {
    const auto& p = plan->quantize.tensors[index];
    run.tensor_moving(index, plan->quantize.tensors.size(), done, size, p.tensor->name, ggufkit::type_name(p.target));
  };
  if (const int status = run.finish(ggufkit::write_convert_quantized(*plan, args.output, run_options, quantize),
                                    args.output, args.output);
      status != kOk) {
    return status;
  }
  fmt::print("{}\n", terminal_safe(args.output));
  return kOk;
}

int run_convert(const ConvertArgs& args) {
  const auto type = converter_out_type(args);
  ggufkit::QuantizeOptions target;
  if (!type && !ggufkit::set_quantize_target(args.outtype, target)) {
    fmt::print(stderr, "gguf: convert: '{}' is not an output type (f32, f16, bf16, q8_0, a type ggufkit quantizes "
                       "without an importance matrix: q4_0, q4_K, q6_K..., or a quantization preset: Q4_K_M, Q8_0, "
                       "IQ4_XS...)\n", terminal_safe(args.outtype));
    return kUsageOrIoError;
  }
  if (!args.intermediate.empty() && type) {
    fmt::print(stderr, "gguf: convert: --intermediate applies to a quantization preset, not to --outtype {}\n", terminal_safe(args.outtype));
    return kUsageOrIoError;
  }
  ggufkit::ConvertOptions options;
  options.out_type = type.value_or(ggufkit::TensorType::F16);
  options.threads = ggufkit::Threads{args.threads};
  options.sync = !args.no_sync;
  options.output.overwrite = args.force;
  options.cancel = &interrupt_flag();
  options.tokenizer = !args.no_tokenizer;
  if (!type) return run_convert_quantized(args, options);
  auto plan = ggufkit::plan_convert(args.input, options);
  if (!plan) {
    report_error(args.input, plan.error());
    return kUsageOrIoError;
  }
  if (!outputs_allowed({args.output}, {.overwrite = args.force, .inputs = plan->inputs})) return kUsageOrIoError;
  if (args.dry_run) {
    if (args.json) {
      return print_plan_json(*plan);
    } else {
      print_plan(*plan);
    }
    return kOk;
  }
  std::vector<uint64_t> bytes;
  for (const auto& t : plan->tensors) bytes.push_back(t.bytes);
  const LongRun run("convert", std::move(bytes));
  options.progress = [&](size_t done, size_t all) {
    const auto& t = plan->tensors[done - 1];
    run.tensor_done(done, all, t.gguf_name, ggufkit::type_name(t.type));
  };
  options.tensor_progress = [&](size_t index, uint64_t done, uint64_t size) {
    const auto& t = plan->tensors[index];
    run.tensor_moving(index, plan->tensors.size(), done, size, t.gguf_name, ggufkit::type_name(t.type));
  };
  if (const int status = run.finish(ggufkit::write_converted(*plan, args.output, options), args.output, args.output);
      status != kOk) {
    return status;
  }
  fmt::print("{}\n", terminal_safe(args.output));
  return kOk;
}

}  // namespace

Runner register_convert(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* cmd = app.add_subcommand(
      "convert", "Convert a Hugging Face safetensors checkpoint to GGUF as llama.cpp's convert_hf_to_gguf.py does");
  add_force_flag(*cmd, args->force);
  add_no_sync_flag(*cmd, args->no_sync);
  add_progress_flags(*cmd);
  cmd->footer(fmt::format("Checkpoint classes (config.json's architectures[0]): {}.",
                          fmt::join(ggufkit::convert_supported_architectures(), ", ")));
  cmd->add_option("model_dir", args->input, "Checkpoint directory: config.json, model.safetensors (or an index and "
                                             "shards), tokenizer.json")
      ->required();
  cmd->add_option("output", args->output, "GGUF file to write")->required();
  cmd->add_option("--outtype", args->outtype,
                  "Type of the weight matrices: f32, f16 (default), bf16, q8_0, or another quantized type "
                  "(1-D tensors and norms stay f32); or a quantization preset as gguf quantize takes it "
                  "(Q4_K_M, Q8_0, IQ4_XS: upper case; any TYPE with --pure or another quantize option): the "
                  "file gguf quantize would make of the f16/bf16/f32 conversion, in one pass")
      ->type_name("TYPE");
  cmd->add_option("--threads", args->threads, "Threads for quantizing (default: one per core)");
  cmd->add_flag("--dry-run", args->dry_run, "Print each tensor's name, shape and type; write nothing");
  cmd->add_flag("--json", args->json, "With --dry-run: the plan as JSON");
  cmd->add_option("--intermediate", args->intermediate,
                  "With a preset: the type converted to before quantizing (default: the checkpoint's own: bf16 "
                  "for BF16, f32 for F32, else f16)")
      ->type_name("TYPE");
  cmd->add_flag("--pure", args->pure, "With a preset: every quantizable tensor gets its type (gguf quantize --pure)");
  add_quantize_flags(*cmd, args->quantize);
  cmd->add_flag("--no-tokenizer", args->no_tokenizer,
                "Write no tokenizer.* keys (for tools that need the tensors only: llama.cpp does not load such a file)");
  return [args] { return run_convert(*args); };
}

}  // namespace gguf_cli
