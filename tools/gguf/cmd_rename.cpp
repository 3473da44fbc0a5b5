// gguf rename FILE OLD NEW [OLD NEW]...: rename metadata keys; each keeps its place and value.
#include <fmt/format.h>

#include "commands.h"
#include "edit_common.h"
#include "output.h"

namespace gguf_cli {

Runner register_rename(CLI::App& app) {
  struct RenameArgs {
    EditTarget target;
    std::vector<std::string> pairs;
  };
  auto args = std::make_shared<RenameArgs>();
  CLI::App* cmd = app.add_subcommand("rename", "Rename metadata keys (value and position kept)");
  args->target.verb = "rename";
  cmd->add_option("file", args->target.file, "GGUF file to edit")->required();
  cmd->add_option("pairs", args->pairs, "OLD NEW [OLD NEW]...")->required();
  add_edit_options(*cmd, args->target);
  return [args] {
    if (args->pairs.size() % 2 != 0) {
      fmt::print(stderr, "gguf rename: give OLD NEW pairs\n");
      return static_cast<int>(kUsageOrIoError);
    }
    std::vector<ggufkit::MetadataChange> changes;
    for (size_t i = 0; i < args->pairs.size(); i += 2) {
      changes.push_back(ggufkit::MetadataChange::rename(args->pairs[i], args->pairs[i + 1]));
    }
    if (!append_extra_changes(args->target, changes)) return static_cast<int>(kUsageOrIoError);
    return run_edit(args->target, changes);
  };
}

}  // namespace gguf_cli
