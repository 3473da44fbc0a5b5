// gguf extract FILE [TENSOR...] -o OUT [--type f32|f16|raw]: tensors to NumPy .npy files. FILE may be
// the first shard of a split model: the tensors of every shard are then available.
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "commands.h"
#include "ggufkit/extract.h"
#include "ggufkit/split.h"
#include "output.h"

namespace gguf_cli {
namespace {

namespace fs = std::filesystem;

struct ExtractArgs {
  std::string file;
  std::vector<std::string> tensors;
  std::string out;
  std::string type = "f32";
};

// Tensor names may hold '/', which cannot be part of a file name.
std::string file_name_for(std::string_view tensor) {
  std::string name(tensor);
  std::replace(name.begin(), name.end(), '/', '_');
  return name + ".npy";
}

int run_extract(const ExtractArgs& args) {
  static const std::map<std::string, ggufkit::ExtractType> kTypes = {
      {"f32", ggufkit::ExtractType::f32}, {"f16", ggufkit::ExtractType::f16}, {"raw", ggufkit::ExtractType::raw}};
  auto model = ggufkit::SplitModel::open(args.file);
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
        fmt::print(stderr, "gguf: {}: no tensor named '{}'\n", args.file, name);
        return kUsageOrIoError;
      }
      chosen.push_back(t);
    }
  }
  if (chosen.empty()) {
    fmt::print(stderr, "gguf: {}: the file has no tensors\n", args.file);
    return kUsageOrIoError;
  }
  // OUT is a directory when it is one, when it ends with '/', or when several tensors go out.
  const fs::path out(args.out);
  std::error_code ec;
  const bool to_directory = fs::is_directory(out, ec) || args.out.ends_with('/') || chosen.size() > 1;
  if (to_directory && !fs::is_directory(out, ec)) {
    fs::create_directories(out, ec);
    if (ec) {
      fmt::print(stderr, "gguf: {}: cannot create the directory: {}\n", args.out, ec.message());
      return kUsageOrIoError;
    }
  }
  const auto type = kTypes.at(args.type);
  for (size_t i = 0; i < chosen.size(); ++i) {
    const ggufkit::TensorInfo& t = *chosen[i]->info;
    const fs::path target = to_directory ? out / file_name_for(t.name) : out;
    if (chosen.size() > 1) fmt::print(stderr, "[{}/{}] {}\n", i + 1, chosen.size(), t.name);
    if (auto r = ggufkit::extract_npy(model->shard_of(*chosen[i]), t, type, target, /*sync=*/false); !r) {
      report_error(model->paths()[chosen[i]->shard].string(), r.error());
      return kUsageOrIoError;
    }
    fmt::print("{}\n", target.string());
  }
  return kOk;
}

}  // namespace

Runner register_extract(CLI::App& app) {
  auto args = std::make_shared<ExtractArgs>();
  CLI::App* cmd = app.add_subcommand("extract", "Write tensors as NumPy .npy files (shape: ggml's reversed)");
  cmd->add_option("file", args->file, "GGUF file (or the first shard of a split model)")->required();
  cmd->add_option("tensors", args->tensors, "Tensors to extract (default: all)");
  cmd->add_option("-o,--output", args->out, "Output .npy file (one tensor) or directory")->required();
  cmd->add_option("--type", args->type, "f32 (dequantized, default), f16, or raw (the stored bytes)")
      ->transform(CLI::IsMember({"f32", "f16", "raw"}, CLI::ignore_case));
  return [args] { return run_extract(*args); };
}

}  // namespace gguf_cli
