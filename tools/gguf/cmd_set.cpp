// gguf set FILE KEY VALUE [KEY VALUE]...: set metadata values, in place when they fit.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/conventions.h"
#include "ggufkit/nearest.h"
#include "edit_common.h"
#include "output.h"

namespace gguf_cli {
namespace {

struct SetArgs {
  EditTarget target;
  std::vector<std::string> pairs;  // KEY VALUE ... (or KEY alone with --from-file / --json)
  std::string type;
  std::string from_file;
  std::string json;
  bool new_key = false;  // --new: a key unknown in a namespace ggufkit knows is meant
};

// A key the file lacks, in a namespace whose keys llama.cpp and gguf-py all name, that neither
// names: most likely a misspelling (llama.context_lenght), refused unless --new says it is meant.
bool refuse_unknown_key(const ggufkit::GgufFile& file, const std::string& key, bool new_key) {
  if (new_key || file.find(key) != nullptr) return false;
  const std::string arch(ggufkit::ModelMetadata(file).architecture().value_or(""));
  const std::string_view ns = ggufkit::known_key_namespace(key, arch);
  if (ns.empty() || ggufkit::is_known_key(key, arch)) return false;
  const auto near = ggufkit::nearest_known_key(key, arch);
  fmt::print(stderr, "gguf set: {} is not a key llama.cpp or gguf-py knows in {}.*{}; give --new to add it anyway\n",
             terminal_safe(key), terminal_safe(ns), terminal_safe(ggufkit::did_you_mean(near)));
  return true;
}

// --from-file's value: the bytes of a regular file of at most kMaxStringLength (the longest string
// the reader accepts), read to its end whatever size it reports. A FIFO, a device or a directory is refused
// before anything is read (opened without blocking, then fstat).
std::optional<ggufkit::MetadataValue> value_from_file(const std::string& path) {
  const auto refuse = [&](std::string_view why) {
    fmt::print(stderr, "gguf: {}: {}\n", terminal_safe(path), why);
    return std::nullopt;
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return refuse(fmt::format("cannot open: {}", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return refuse(fmt::format("cannot stat: {}", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) {
    return refuse(fmt::format("{}, not a regular file: --from-file reads a file's bytes",
                              S_ISDIR(st.st_mode)    ? "a directory"
                              : S_ISFIFO(st.st_mode) ? "a FIFO"
                              : S_ISCHR(st.st_mode)  ? "a character device"
                              : S_ISBLK(st.st_mode)  ? "a block device"
                                                     : "a socket"));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > ggufkit::kMaxStringLength) {
    return refuse(fmt::format("{} bytes, over the {} byte limit of a GGUF string", size, ggufkit::kMaxStringLength));
  }
  // Read to the end: st_size is a hint only (a /proc file reports 0, a file may grow while it is read).
  std::string text(static_cast<size_t>(std::max<uint64_t>(size, 4096)) + 1, '\0');
  size_t done = 0;
  for (;;) {
    if (done == text.size()) {
      if (done > ggufkit::kMaxStringLength) {
        return refuse(fmt::format("more than {} bytes, over the {} byte limit of a GGUF string",
                                  ggufkit::kMaxStringLength, ggufkit::kMaxStringLength));
      }
      text.resize(static_cast<size_t>(std::min<uint64_t>(uint64_t{done} * 2, ggufkit::kMaxStringLength + 1)));
    }
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refuse(fmt::format("read error: {}", std::strerror(errno)));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return ggufkit::MetadataValue::string(text);
}

// The value for KEY: the existing key's type is kept unless --type gives one; a new key's is inferred.
ggufkit::Expected<ggufkit::MetadataValue> value_for(const ggufkit::GgufFile& file, const std::string& key,
                                                    const std::string& text, std::optional<ggufkit::ValueType> type) {
  if (type) return ggufkit::parse_scalar_value(text, *type);
  if (const ggufkit::KeyValue* kv = file.find(key)) {
    if (kv->value.type() == ggufkit::ValueType::Array) {
      return ggufkit::make_error(ggufkit::ErrorCode::invalid_argument, kv->offset, key,
                                 "the key holds an array: give the new value with --json");
    }
    return ggufkit::parse_scalar_value(text, kv->value.type());
  }
  return ggufkit::parse_scalar_value(text, ggufkit::infer_value_type(key, text));
}

int run_set(SetArgs& args) {
  std::optional<ggufkit::ValueType> type;
  if (!args.type.empty()) {
    type = ggufkit::parse_value_type(args.type);
    if (!type || *type == ggufkit::ValueType::Array) {
      static const std::vector<std::string> kTypes = {"uint8", "int8",    "uint16",  "int16", "uint32", "int32",
                                                      "uint64", "int64", "float32", "float64", "bool", "string"};
      fmt::print(stderr, "gguf set: unknown --type '{}'{}\n", terminal_safe(args.type),
                 suggestion_or(ggufkit::nearest_name(args.type, kTypes, {.fold = true}),
                               " (uint8, int8, uint16, int16, uint32, int32, uint64, int64, float32, float64, bool, "
                               "string; for arrays the element type)"));
      return kUsageOrIoError;
    }
  }
  const bool single = !args.from_file.empty() || !args.json.empty();
  if (!args.from_file.empty() && !args.json.empty()) {
    fmt::print(stderr, "gguf set: --from-file and --json exclude each other\n");
    return kUsageOrIoError;
  }
  if (single ? args.pairs.size() != 1 : (args.pairs.empty() || args.pairs.size() % 2 != 0)) {
    fmt::print(stderr, "{}\n", single ? "gguf set: --from-file and --json take exactly one KEY"
                                      : "gguf set: give KEY VALUE pairs (or KEY with --from-file or --json)");
    return kUsageOrIoError;
  }
  const auto lock = lock_for_edit(args.target);  // held until the edit is written
  if (!lock) return kUsageOrIoError;
  const auto file = open_or_report(args.target.file);
  if (!file) return kUsageOrIoError;

  for (size_t i = 0; i < args.pairs.size(); i += single ? 1 : 2) {
    if (refuse_unknown_key(*file, args.pairs[i], args.new_key)) return kUsageOrIoError;
  }
  std::vector<ggufkit::MetadataChange> changes;
  auto fail = [&](const ggufkit::Error& e) {
    report_error(args.target.file, e);
    return kUsageOrIoError;
  };
  if (!args.from_file.empty()) {
    if (type && *type != ggufkit::ValueType::String) {
      fmt::print(stderr, "gguf set: --from-file sets a string\n");
      return kUsageOrIoError;
    }
    auto value = value_from_file(args.from_file);
    if (!value) return kUsageOrIoError;
    changes.push_back(ggufkit::MetadataChange::set(args.pairs[0], std::move(*value)));
  } else if (!args.json.empty()) {
    const ggufkit::KeyValue* kv = file->find(args.pairs[0]);
    auto value = ggufkit::parse_json_value(args.json, type, kv ? &kv->value : nullptr);
    if (!value) {
      auto e = std::move(value).error();
      e.subject = args.pairs[0];
      return fail(e);
    }
    changes.push_back(ggufkit::MetadataChange::set(args.pairs[0], std::move(*value)));
  } else {
    for (size_t i = 0; i < args.pairs.size(); i += 2) {
      auto value = value_for(*file, args.pairs[i], args.pairs[i + 1], type);
      if (!value) {
        auto e = std::move(value).error();
        e.subject = args.pairs[i];
        return fail(e);
      }
      changes.push_back(ggufkit::MetadataChange::set(args.pairs[i], std::move(*value)));
    }
  }
  if (!append_extra_changes(args.target, changes)) return kUsageOrIoError;
  return run_edit(args.target, *file, changes);
}

}  // namespace

Runner register_set(CLI::App& app) {
  auto args = std::make_shared<SetArgs>();
  CLI::App* cmd = app.add_subcommand(
      "set", "Set metadata values (in place when they fit, else a safe rewrite); tensors are never touched");
  args->target.verb = "set";
  cmd->add_option("file", args->target.file, "GGUF file to edit")->required();
  cmd->add_option("pairs", args->pairs, "KEY VALUE [KEY VALUE]... (KEY alone with --from-file or --json)")->required();
  cmd->add_option("--type", args->type,
                  "Value type (uint8..int64, float32, float64, bool, string; for --json arrays the element type). "
                  "Default: an existing key keeps its type, a new key's is inferred")
      ->type_name("uint8|int8|uint16|int16|uint32|int32|uint64|int64|float32|float64|bool|string");
  cmd->add_flag("--new", args->new_key,
                "Add a key llama.cpp and gguf-py do not know in general.*, tokenizer.*, split.*, adapter.* or the "
                "architecture's namespace (refused without it as a likely misspelling)");
  cmd->add_option("--from-file", args->from_file, "The value is this file's bytes, exactly (a chat template)");
  cmd->add_option("--json", args->json, "The value as JSON (arrays: '[1, 2, 3]', '[\"a\", \"b\"]')");
  add_edit_options(*cmd, args->target);
  return [args] { return run_set(*args); };
}

}  // namespace gguf_cli
