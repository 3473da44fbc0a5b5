// gguf diff: placeholder until the verb lands.
#include <fmt/format.h>

#include "commands.h"
#include "output.h"

namespace gguf_cli {

Runner register_diff(CLI::App& app) {
  app.add_subcommand("diff", "(not implemented yet)");
  return [] {
    fmt::print(stderr, "gguf diff: not implemented yet\n");
    return kUsageOrIoError;
  };
}

}  // namespace gguf_cli
