// The llama-quantize options gguf quantize and gguf convert share (quantize_flags.h).
#include "quantize_flags.h"

#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "cli_docs.h"
#include "output.h"

namespace gguf_cli {
namespace {

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
bool collect_tensor_types(const QuantizeFlags& flags, std::vector<ggufkit::TensorTypeOverride>& out) {
  std::vector<std::string> words;
  for (const auto& [is_file, text] : flags.tensor_type_sources) {
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

}  // namespace

void add_quantize_flags(CLI::App& cmd, const std::shared_ptr<QuantizeFlags>& flags) {
  cmd.add_option("--output-tensor-type", flags->output_tensor_type,
                 "Type of output.weight (and of token_embd when it doubles as the output)")
      ->type_name("TYPE");
  cmd.add_option("--token-embedding-type", flags->token_embedding_type, "Type of token_embd.weight")->type_name("TYPE");
  cmd.add_flag("--leave-output-tensor", flags->leave_output_tensor, "Copy output.weight as it is");
  // Called as each option is parsed, so that the two keep their command-line order.
  cmd.add_option_function<std::string>(
         "--tensor-type", [flags](const std::string& v) { flags->tensor_type_sources.emplace_back(false, v); },
         "REGEX=TYPE: tensors whose name contains a match get TYPE (repeatable; the first match wins; "
         "only with a quantized TYPE, as llama-quantize)")
      ->trigger_on_parse()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd.add_option_function<std::string>(
         "--tensor-type-file", [flags](const std::string& v) { flags->tensor_type_sources.emplace_back(true, v); },
         "A file of REGEX=TYPE words separated by spaces or newlines (repeatable)")
      ->trigger_on_parse()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd.add_option("--override-kv", flags->override_kv,
                 "KEY=TYPE:VALUE (TYPE int, float, bool or str): set a metadata key in the output (repeatable)")
      ->allow_extra_args(false);
  cmd.add_option("--imatrix", flags->imatrix,
                 "Importance matrix from llama-imatrix (GGUF or legacy .dat): better low-bit quantization; "
                 "required by IQ1_*, IQ2_* and IQ3_XXS tensors");
  cmd.add_option("--include-weights", flags->include_weights,
                 "Use the importance matrix only for tensors whose name contains this (repeatable)")
      ->allow_extra_args(false);
  cmd.add_option("--exclude-weights", flags->exclude_weights,
                 "Do not use the importance matrix for tensors whose name contains this (repeatable)")
      ->allow_extra_args(false);
}

bool apply_quantize_flags(const QuantizeFlags& flags, ggufkit::QuantizeOptions& options,
                          ggufkit::ImportanceMatrix& importance, std::string_view verb) {
  if (!parse_type_option("--output-tensor-type", flags.output_tensor_type, options.output_tensor_type) ||
      !parse_type_option("--token-embedding-type", flags.token_embedding_type, options.token_embedding_type) ||
      !collect_tensor_types(flags, options.tensor_types)) {
    return false;
  }
  for (const auto& text : flags.override_kv) {
    auto o = ggufkit::parse_metadata_override(text);
    if (!o) {
      fmt::print(stderr, "gguf: {}\n", terminal_safe(o.error().message));
      return false;
    }
    options.metadata_overrides.push_back(std::move(*o));
  }
  options.quantize_output_tensor = !flags.leave_output_tensor;
  // --imatrix, narrowed by --include-weights or --exclude-weights (llama-quantize: not both).
  if (!flags.include_weights.empty() && !flags.exclude_weights.empty()) {
    fmt::print(stderr, "gguf: --include-weights and --exclude-weights cannot be used together\n");
    return false;
  }
  if ((!flags.include_weights.empty() || !flags.exclude_weights.empty()) && flags.imatrix.empty()) {
    fmt::print(stderr, "gguf: --include-weights and --exclude-weights select entries of --imatrix, which is missing\n");
    return false;
  }
  if (!flags.imatrix.empty()) {
    auto loaded = ggufkit::load_importance_matrix(flags.imatrix);
    if (!loaded) {
      report_error(flags.imatrix, loaded.error());
      return false;
    }
    importance = std::move(*loaded);
    ggufkit::exclude_importance_entries(importance, flags.exclude_weights);
    if (!flags.include_weights.empty()) ggufkit::include_importance_entries(importance, flags.include_weights);
    if (importance.entries.empty()) fmt::print(stderr, "gguf: {}: no importance matrix entries left: quantizing without one\n", verb);
    options.importance = &importance;
    options.importance_file = flags.imatrix;
  }
  return true;
}

}  // namespace gguf_cli
