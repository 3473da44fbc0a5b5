// gguf merge: placeholder until the verb lands.
#include <fmt/format.h>

#include "commands.h"
#include "output.h"

namespace gguf_cli {

Runner register_merge(CLI::App& app) {
  app.add_subcommand("merge", "(not implemented yet)");
  return [] {
    fmt::print(stderr, "gguf merge: not implemented yet\n");
    return kUsageOrIoError;
  };
}

}  // namespace gguf_cli
