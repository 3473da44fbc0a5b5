// gguf get FILE KEY [--json]: one value, exactly. A string prints as its raw bytes (no newline
// added), so `gguf get m.gguf tokenizer.chat_template > t.jinja` round-trips with `set --from-file`.
#include <cstdio>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/json.h"
#include "output.h"

namespace gguf_cli {

Runner register_get(CLI::App& app) {
  struct GetArgs {
    std::string file, key;
    bool json = false;
  };
  auto args = std::make_shared<GetArgs>();
  CLI::App* cmd = app.add_subcommand("get", "Print one metadata value (a string as raw text, the rest as JSON)");
  cmd->add_option("file", args->file, "GGUF file")->required();
  cmd->add_option("key", args->key, "Metadata key")->required();
  cmd->add_flag("--json", args->json, "Print the value as JSON (strings quoted and escaped)");
  add_remote_options(*cmd);
  return [args] {
    const auto file = open_or_report(args->file, metadata_only_ok());
    if (!file) return static_cast<int>(kUsageOrIoError);
    const ggufkit::KeyValue* kv = file->find(args->key);
    if (kv == nullptr) {
      fmt::print(stderr, "gguf: {}: no key '{}'{}\n", terminal_safe(args->file), terminal_safe(args->key),
                 terminal_safe(ggufkit::did_you_mean(nearest_key(*file, args->key))));
      return static_cast<int>(kProblemFound);
    }
    if (!args->json && kv->value.type() == ggufkit::ValueType::String) {
      const auto s = kv->value.as_string().value_or("");
      std::fwrite(s.data(), 1, s.size(), stdout);
      return static_cast<int>(kOk);
    }
    std::string out;
    ggufkit::json::append_value(out, kv->value);
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
    return static_cast<int>(kOk);
  };
}

}  // namespace gguf_cli
