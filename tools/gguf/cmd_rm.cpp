// gguf rm FILE KEY...: remove metadata keys.
#include "commands.h"
#include "edit_common.h"
#include "output.h"

namespace gguf_cli {

Runner register_rm(CLI::App& app) {
  struct RmArgs {
    EditTarget target;
    std::vector<std::string> keys;
  };
  auto args = std::make_shared<RmArgs>();
  CLI::App* cmd = app.add_subcommand("rm", "Remove metadata keys (tensors are never touched)");
  args->target.verb = "rm";
  cmd->add_option("file", args->target.file, "GGUF file to edit")->required();
  cmd->add_option("keys", args->keys, "Keys to remove")->required();
  add_edit_options(*cmd, args->target);
  return [args] {
    std::vector<ggufkit::MetadataChange> changes;
    for (const std::string& key : args->keys) changes.push_back(ggufkit::MetadataChange::remove(key));
    if (!append_extra_changes(args->target, changes)) return static_cast<int>(kUsageOrIoError);
    return run_edit(args->target, changes);
  };
}

}  // namespace gguf_cli
