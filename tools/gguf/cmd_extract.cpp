// gguf extract FILE [TENSOR...] -o OUT [--type f32|f16|raw]: tensors to NumPy .npy files. FILE may be
// the first shard of a split model: the tensors of every shard are then available.
#include <cstdio>
#include <filesystem>

#include <map>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/extract.h"
#include "ggufkit/remote.h"
#include "ggufkit/split.h"
#include "output.h"

namespace gguf_cli {
namespace {

namespace fs = std::filesystem;

struct ExtractArgs {
  bool force = false;  // --force: replace existing .npy files
  std::string file;
  std::vector<std::string> tensors;
  std::string out;
  std::string type = "f32";
};

// The file a tensor goes to in a directory: its name with '/' (which cannot be in a file name) and
// every character a terminal acts on (what terminal_safe escapes) replaced by '_', then ".npy".
std::string file_name_for(std::string_view tensor) {
  std::string name;
  for (size_t i = 0; i < tensor.size();) {
    size_t n = 1;  // one character: a byte and the continuation bytes after it
    while (i + n < tensor.size() && n < 4 && (static_cast<unsigned char>(tensor[i + n]) & 0xC0) == 0x80) ++n;
    const std::string_view c = tensor.substr(i, n);
    name += c == "/" || terminal_safe(c) != c ? std::string_view("_") : c;
    i += n;
  }
  if (name.empty() || name == "." || name == "..") name = "_";
  return name + ".npy";
}

int run_extract(const ExtractArgs& args) {
  static const std::map<std::string, ggufkit::ExtractType> kTypes = {
      {"f32", ggufkit::ExtractType::f32}, {"f16", ggufkit::ExtractType::f16}, {"raw", ggufkit::ExtractType::raw}};
  // A remote address: its header, then each tensor's bytes alone (fetch_remote_tensor).
  const bool remote = ggufkit::is_remote_address(args.file);
  auto model = open_model(args.file, {});
  if (!model) {
    report_error(args.file, model.error());
    return kUsageOrIoError;
  }

  std::vector<const ggufkit::ModelTensor*> chosen;
  if (args.tensors.empty()) {
    for (const auto& t : model->tensors()) chosen.push_back(&t);
  } else {
    for (const std::string& name : args.tensors) {
      const ggufkit::ModelTensor* t = model->find_tensor(name);
      if (t == nullptr) {
        fmt::print(stderr, "gguf: {}: no tensor named '{}'{}\n", terminal_safe(args.file), terminal_safe(name),
                   terminal_safe(ggufkit::did_you_mean(nearest_tensor(*model, name))));
        return kUsageOrIoError;
      }
      chosen.push_back(t);
    }
  }
  if (chosen.empty()) {
    fmt::print(stderr, "gguf: {}: the file has no tensors\n", terminal_safe(args.file));
    return kUsageOrIoError;
  }
  // OUT is a directory when it is one, when it ends with '/', or when several tensors go out.
  const fs::path out(args.out);
  std::error_code ec;
  const bool to_directory = fs::is_directory(out, ec) || args.out.ends_with('/') || chosen.size() > 1;
  if (to_directory && !fs::is_directory(out, ec)) {
    fs::create_directories(out, ec);
    if (ec) {
      fmt::print(stderr, "gguf: {}: cannot create the directory: {}\n", terminal_safe(args.out), ec.message());
      return kUsageOrIoError;
    }
  }
  const auto type = kTypes.at(args.type);
  const ggufkit::OutputPolicy policy{.overwrite = args.force,
                                     .inputs = {model->paths().begin(), model->paths().end()}};
  // Every file name first: two tensors may not go to one file, and no output may be refused halfway.
  std::vector<fs::path> targets;
  std::map<std::string, std::string_view> tensor_of_file;
  for (const ggufkit::ModelTensor* mt : chosen) {
    const std::string_view name = mt->info->name;
    targets.push_back(to_directory ? out / file_name_for(name) : out);
    const auto [at, added] = tensor_of_file.emplace(targets.back().filename().string(), name);
    if (!added) {
      fmt::print(stderr, "gguf: {}: the tensors '{}' and '{}' would both be written to {}: extract one of them with -o FILE\n",
                 terminal_safe(args.file), terminal_safe(at->second), terminal_safe(name), terminal_safe(targets.back().string()));
      return kUsageOrIoError;
    }
  }
  if (!outputs_allowed(targets, policy)) return kUsageOrIoError;
  const Progress progress;  // for several tensors: by their bytes
  uint64_t all_bytes = 0, done_bytes = 0;
  for (const auto* c : chosen) all_bytes += c->info->size;
  // SIGINT/SIGTERM stop between two files: every file written is complete, none is half written.
  watch_interrupts();
  for (size_t i = 0; i < chosen.size(); ++i) {
    if (interrupt_flag().load()) {
      fmt::print(stderr, "gguf: extract: interrupted; {} of {} tensors written\n", i, chosen.size());
      return kInterrupted;
    }
    const ggufkit::TensorInfo& t = *chosen[i]->info;
    const fs::path& target = targets[i];
    std::optional<ggufkit::GgufFile> fetched;
    if (remote) {
      auto f = fetch_remote_tensor_or_report(args.file, model->shard_of(*chosen[i]), t);
      if (!f) return kUsageOrIoError;
      fetched = std::move(f);
    }
    const ggufkit::GgufFile& source = fetched ? *fetched : model->shard_of(*chosen[i]);
    const ggufkit::TensorInfo& info = fetched ? fetched->tensors()[0] : t;
    if (auto r = ggufkit::extract_npy(source, info, type, target, /*sync=*/false, policy, &interrupt_flag()); !r) {
      if (r.error().code == ggufkit::ErrorCode::cancelled || interrupt_flag().load()) {
        fmt::print(stderr, "gguf: extract: interrupted; {} of {} tensors written\n", i, chosen.size());
        return kInterrupted;
      }
      report_error(model->paths()[chosen[i]->shard].string(), r.error());
      return kUsageOrIoError;
    }
    note_written("extract", args.out);
    // Not fmt::print, which throws when stdout fails: the next files are still written, and the
    // failure is reported once at the end (a warning: these files are written).
    std::fputs((terminal_safe(target.string()) + "\n").c_str(), stdout);
    done_bytes += t.size;
    if (chosen.size() > 1) progress.item(i + 1, chosen.size(), done_bytes, all_bytes, t.name);
  }
  return kOk;
}

}  // namespace

Runner register_extract(CLI::App& app) {
  auto args = std::make_shared<ExtractArgs>();
  CLI::App* cmd = app.add_subcommand("extract", "Write tensors as NumPy .npy files (shape: ggml's reversed)");
  add_force_flag(*cmd, args->force);
  add_remote_options(*cmd);
  add_progress_flags(*cmd);
  cmd->add_option("file", args->file, "GGUF file (or the first shard of a split model)")->required();
  cmd->add_option("tensors", args->tensors, "Tensors to extract (default: all)");
  cmd->add_option("-o,--output", args->out, "Output .npy file (one tensor) or directory")->required();
  cmd->add_option("--type", args->type, "f32 (dequantized, default), f16, or raw (the stored bytes)")
      ->transform(CLI::IsMember({"f32", "f16", "raw"}, CLI::ignore_case));
  return [args] { return run_extract(*args); };
}

}  // namespace gguf_cli
