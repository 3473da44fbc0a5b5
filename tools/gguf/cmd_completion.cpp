// gguf completion bash: the shell completion script, generated from the CLI's own definition
// (cli_docs.h). `make install` installs it; `source <(gguf completion bash)` uses it at once.
#include <cstdio>

#include <fmt/format.h>

#include "cli_docs.h"
#include "commands.h"
#include "output.h"

namespace gguf_cli {

Runner register_completion(CLI::App& app) {
  auto shell = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("completion", "Print the shell completion script (bash): verbs, options, types, files");
  cmd->add_option("shell", *shell, "The shell (bash)")->required()->check(CLI::IsMember({"bash"}));
  cmd->footer("Example: source <(gguf completion bash)");
  return [&app, shell] { return write_result(bash_completion_script(app)); };
}

}  // namespace gguf_cli
