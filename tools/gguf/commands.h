// One function pair per verb: register its options on the CLI11 app, then run it.
#pragma once

#include <CLI/CLI.hpp>

namespace gguf_cli {

// Each register_* adds a subcommand and returns a callback that runs it and returns the exit code.
using Runner = std::function<int()>;
Runner register_info(CLI::App& app);
Runner register_dump(CLI::App& app);
Runner register_extract(CLI::App& app);
Runner register_quantize(CLI::App& app);
Runner register_get(CLI::App& app);
Runner register_set(CLI::App& app);
Runner register_rm(CLI::App& app);
Runner register_rename(CLI::App& app);
Runner register_diff(CLI::App& app);
Runner register_split(CLI::App& app);
Runner register_merge(CLI::App& app);
Runner register_convert_endian(CLI::App& app);
Runner register_check(CLI::App& app);
Runner register_hash(CLI::App& app);
Runner register_convert(CLI::App& app);
Runner register_completion(CLI::App& app);
Runner register_types(CLI::App& app);
Runner register_estimate(CLI::App& app);
// `gguf estimate` takes llama-cli's short options of several letters (-ub, -np, -ctk, -ctv, -fa,
// -kvu), which CLI11 cannot declare: rewritten to their long names before parsing.
void expand_llama_short_options(int argc, char** argv);
// The presets, for `gguf quantize --help` (from the table `gguf types` prints).
std::string quantize_presets_footer();

// --force, the same for every verb that writes a file: without it an existing output is refused.
// An input, a directory, a device or a FIFO is never replaced (ggufkit::OutputPolicy).
inline CLI::Option* add_force_flag(CLI::App& cmd, bool& force) {
  return cmd.add_flag("--force,-f", force, "Replace the output if it exists (never an input, directory or device)");
}

// --no-sync, the same for every verb that writes a file: no fsync before the rename.
inline CLI::Option* add_no_sync_flag(CLI::App& cmd, bool& no_sync) {
  return cmd.add_flag("--no-sync", no_sync,
                      "Do not fsync before the rename: faster, still safe if the process dies, not if the power fails");
}

}  // namespace gguf_cli
