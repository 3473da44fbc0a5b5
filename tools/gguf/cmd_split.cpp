// gguf split: placeholder until the verb lands.
#include <fmt/format.h>

#include "commands.h"
#include "output.h"

namespace gguf_cli {

Runner register_split(CLI::App& app) {
  app.add_subcommand("split", "(not implemented yet)");
  return [] {
    fmt::print(stderr, "gguf split: not implemented yet\n");
    return kUsageOrIoError;
  };
}

}  // namespace gguf_cli
