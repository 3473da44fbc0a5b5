// The CLI documented from its own definition: the bash completion script (`gguf completion bash`)
// and the man page (`gguf --man-page`, installed as gguf.1) are generated from the CLI11 tree that
// --help prints, so that neither can drift from the options the parser accepts.
//
// Values are completed from the option's type name: "TYPE" (a tensor type or a quantization
// preset), a list "a|b|c" or a CLI::IsMember check (those words); everything else falls back to
// file names.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ggufkit/conventions.h"

namespace gguf_cli {

// The names `gguf quantize` and `gguf convert --outtype` accept as TYPE (in any case): the
// quantization presets as llama-quantize spells them (Q4_K_M, F16...) and the tensor types as ggml
// does (q8_0, iq4_xs, bf16...), the ones llama.cpp still reads; quantization_type_names() is both.
std::vector<std::string> preset_names();
// The presets themselves (every llama_ftype llama.cpp still defines with a default tensor type), in
// id order; ggufkit::file_type_preset_name names each.
std::vector<const ggufkit::FileTypeInfo*> quantize_presets();
std::vector<std::string> tensor_type_names();
std::vector<std::string> quantization_type_names();

// After CLI11's ExtrasError: "gguf VERB: unknown option '--thread' (did you mean --threads?)" for the
// first unknown option of the verb that was parsed; nullopt when the extras are no options (CLI11's
// own message then says what was not expected).
std::optional<std::string> unknown_option_message(CLI::App& app);

std::string bash_completion_script(const CLI::App& app);
std::string man_page(const CLI::App& app);

}  // namespace gguf_cli
