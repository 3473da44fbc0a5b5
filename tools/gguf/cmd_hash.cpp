// gguf hash FILE [--algorithm xxh64|sha256] [--json] [--check MANIFEST] [--threads N]: per-tensor and
// whole-file digests as a manifest (on stdout), or verification of a model against a manifest
// (exit 0 when everything matches, 1 when something differs, 2 when a file cannot be read).
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "ggufkit/hash.h"
#include "ggufkit/json.h"
#include "ggufkit/split.h"
#include "output.h"
#include "printer.h"

namespace gguf_cli {
namespace {

using ggufkit::DigestAlgorithm;
using ggufkit::Manifest;
using ggufkit::ManifestEntry;
using ggufkit::ManifestMismatch;

struct HashArgs {
  std::string file;
  std::string algorithm = "xxh64";
  std::string check;
  bool json = false;
  unsigned threads = 0;
};

constexpr uintmax_t kMaxManifestBytes = uintmax_t{256} << 20;

void write_entries(ggufkit::json::Writer& w, const std::vector<ManifestEntry>& entries) {
  w.begin_array();
  for (const ManifestEntry& e : entries) {
    w.begin_object().member("name", e.name).member("bytes", e.bytes).member("digest", e.digest).end_object();
  }
  w.end_array();
}

std::string manifest_json(const Manifest& m) {
  std::string out;
  ggufkit::json::Writer w(out);
  w.begin_object().member("algorithm", ggufkit::digest_algorithm_name(m.algorithm));
  w.key("files");
  write_entries(w, m.files);
  w.key("tensors");
  write_entries(w, m.tensors);
  w.end_object();
  return out + "\n";
}

// The mismatches, one line each, then the verdict.
void print_check(Printer& p, const std::string& file, const Manifest& expected,
                 const std::vector<ManifestMismatch>& mismatches) {
  p.begin_object().begin_array("mismatches");
  for (const ManifestMismatch& m : mismatches) {
    p.begin_object().begin_line();
    p.field("kind", m.kind, m.kind);
    p.field("name", m.name, m.name.empty() ? "" : " " + shorten_for_display(m.name, 120));
    p.field("message", m.message, ": " + m.message);
    p.end_line().end_object();
  }
  p.end_array();
  p.begin_line();
  p.field("file", file, file);
  p.field("ok", mismatches.empty(), mismatches.empty() ? ": OK (" : ": FAILED (");
  p.field("tensors_checked", expected.tensors.size(), fmt::format("{} tensors", expected.tensors.size()));
  p.field("files_checked", expected.files.size(), fmt::format(" and {} file(s)", expected.files.size()));
  p.field("algorithm", ggufkit::digest_algorithm_name(expected.algorithm),
          fmt::format(" checked with {}", ggufkit::digest_algorithm_name(expected.algorithm)));
  p.field("mismatch_count", mismatches.size(), ", " + plural(mismatches.size(), "mismatch", "mismatches") + ")");
  p.end_line().end_object();
}

std::optional<Manifest> read_manifest(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > kMaxManifestBytes) {
    fmt::print(stderr, "gguf: {}: {}\n", path, ec ? ec.message() : "too large for a manifest");
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    fmt::print(stderr, "gguf: {}: cannot read\n", path);
    return std::nullopt;
  }
  auto m = ggufkit::parse_manifest(text.str());
  if (!m) {
    fmt::print(stderr, "gguf: {}: {}\n", path, m.error().message);
    return std::nullopt;
  }
  return std::move(m).value();
}

int run_hash(const HashArgs& args) {
  auto algorithm = ggufkit::parse_digest_algorithm(args.algorithm);
  if (!algorithm) {
    fmt::print(stderr, "gguf hash: unknown algorithm '{}' (xxh64 or sha256)\n", args.algorithm);
    return kUsageOrIoError;
  }
  std::optional<Manifest> expected;
  if (!args.check.empty()) {
    expected = read_manifest(args.check);
    if (!expected) return kUsageOrIoError;
    algorithm = expected->algorithm;  // verify with the manifest's own algorithm
  }
  auto model = ggufkit::SplitModel::open(args.file);
  if (!model) {
    report_error(args.file, model.error());
    return kUsageOrIoError;
  }
  const Manifest actual = ggufkit::hash_model(*model, *algorithm, ggufkit::Threads{args.threads});
  std::string out;
  int status = kOk;
  if (expected) {
    const auto mismatches = ggufkit::compare_manifests(*expected, actual);
    print_check(*Printer::make(args.json, out), args.file, *expected, mismatches);
    status = mismatches.empty() ? kOk : kProblemFound;
  } else {
    // A manifest is a file format (hash.h), written as the library writes it, not a report.
    out = args.json ? manifest_json(actual) : ggufkit::format_manifest(actual);
  }
  if (const int written = write_result(out); written != kOk) return written;
  return status;
}

}  // namespace

Runner register_hash(CLI::App& app) {
  auto args = std::make_shared<HashArgs>();
  CLI::App* cmd = app.add_subcommand("hash", "Digests of every tensor and file (a manifest), or verify a model "
                                             "against a manifest");
  cmd->add_option("file", args->file, "GGUF file, or the first shard of a split model")->required();
  cmd->add_option("--algorithm,-a", args->algorithm, "xxh64 (fast, default) or sha256")->type_name("xxh64|sha256");
  cmd->add_option("--check,-c", args->check, "Verify against this manifest (written by gguf hash); exit 1 on a mismatch");
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->add_option("--threads,-t", args->threads, "Threads (default: all cores)");
  return [args] { return run_hash(*args); };
}

}  // namespace gguf_cli
