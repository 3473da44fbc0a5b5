// gguf convert HF_DIR OUT.gguf (to be written: issue 7).
#include "commands.h"

namespace gguf_cli {

Runner register_convert(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("convert", "Convert a Hugging Face safetensors checkpoint to GGUF (not yet)");
  (void)cmd;
  return [] { return 2; };
}

}  // namespace gguf_cli
