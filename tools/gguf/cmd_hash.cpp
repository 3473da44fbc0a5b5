// gguf hash FILE [--algorithm xxh64|sha1|sha256] [--json] [--check MANIFEST] [--threads N]: per-tensor
// and whole-file digests as a manifest (on stdout), or verification of a model against a manifest
// (exit 0 when everything matches, 1 when something differs, 2 when a file cannot be read).
// With llama.cpp's gguf-hash options (--xxh64 --sha1 --sha256 --uuid --all --no-layer, or
// --format gguf-hash) the lines gguf-hash prints; --check reads either kind of manifest.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>

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
  std::string format = "ggufkit";
  std::string check;
  bool json = false;
  unsigned threads = 0;
  // gguf-hash's options.
  bool xxh64 = false;
  bool sha1 = false;
  bool sha256 = false;
  bool uuid = false;
  bool all = false;
  bool no_layer = false;

  bool gguf_hash_selected() const { return xxh64 || sha1 || sha256 || uuid || all; }
  bool gguf_hash_format() const { return format == "gguf-hash" || gguf_hash_selected() || no_layer; }
  std::vector<DigestAlgorithm> gguf_hash_algorithms() const {
    std::vector<DigestAlgorithm> out;
    if (xxh64 || all) out.push_back(DigestAlgorithm::xxh64);
    if (sha1 || all) out.push_back(DigestAlgorithm::sha1);
    if (sha256 || all) out.push_back(DigestAlgorithm::sha256);
    if (uuid) out.push_back(DigestAlgorithm::uuid);
    return out;
  }
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

// The report of a check, written to stdout as it is made: `out` (the printer's text) goes out
// each MiB, so that a manifest of a million tensors the model lacks is never held as a report.
struct Report {
  std::string out;
  int written = kOk;
  void flush(size_t at_least) {
    if (out.size() < at_least) return;
    if (written == kOk) written = write_result(out);
    out.clear();
  }
};

// The mismatches, one line each, printed as `compare` finds them; returns how many.
size_t print_mismatches(Printer& p, Report& report, const std::function<void(const ggufkit::MismatchHandler&)>& compare) {
  size_t count = 0;
  p.begin_array("mismatches");
  compare([&](const ManifestMismatch& m) {
    p.begin_object().begin_line();
    p.field("kind", m.kind, m.kind);
    p.field("name", m.name, m.name.empty() ? "" : " " + shorten_for_display(m.name, 120));
    p.field("message", m.message, ": " + m.message);
    p.end_line().end_object();
    ++count;
    report.flush(size_t{1} << 20);
  });
  p.end_array();
  return count;
}

// The mismatches, then the verdict; the number of mismatches.
size_t print_check(Printer& p, Report& report, const std::string& file, const Manifest& expected,
                   const Manifest& actual) {
  p.begin_object();
  const size_t mismatches = print_mismatches(p, report, [&](const ggufkit::MismatchHandler& on) {
    ggufkit::compare_manifests(expected, actual, on);
  });
  p.begin_line();
  p.field("file", file, file);
  p.field("ok", mismatches == 0, mismatches == 0 ? ": OK (" : ": FAILED (");
  // What was compared: the model's tensors and files (a listed one the model lacks is a mismatch).
  p.field("tensors_checked", actual.tensors.size(), plural(actual.tensors.size(), "tensor", "tensors"));
  p.field("files_checked", actual.files.size(), " and " + plural(actual.files.size(), "file", "files"));
  p.field("algorithm", ggufkit::digest_algorithm_name(expected.algorithm),
          fmt::format(" checked with {}", ggufkit::digest_algorithm_name(expected.algorithm)));
  p.field("mismatch_count", mismatches, ", " + plural(mismatches, "mismatch", "mismatches") + ")");
  p.end_line().end_object();
  return mismatches;
}

// The manifest, opened to be read line by line (the parsers stream it: memory is what its entries
// take, whatever its size); a regular file of at most kMaxManifestBytes.
std::optional<std::ifstream> open_manifest(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  const auto size = ec || !std::filesystem::is_regular_file(status) ? 0 : std::filesystem::file_size(path, ec);
  if (ec || !std::filesystem::is_regular_file(status) || size > kMaxManifestBytes) {
    fmt::print(stderr, "gguf: {}: {}\n", terminal_safe(path),
               ec                                          ? ec.message()
               : !std::filesystem::is_regular_file(status) ? std::string("not a regular file")
                                                           : fmt::format("{} bytes, too large for a manifest (the limit is {})",
                                                                         size, kMaxManifestBytes));
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fmt::print(stderr, "gguf: {}: cannot read\n", terminal_safe(path));
    return std::nullopt;
  }
  return in;
}

// "gguf: MANIFEST: message" for a manifest the parser refused.
int manifest_refused(const std::string& path, const ggufkit::Error& error) {
  fmt::print(stderr, "gguf: {}: {}\n", terminal_safe(path), terminal_safe(error.message));
  return kUsageOrIoError;
}

std::string gguf_hash_json(const ggufkit::GgufHashManifest& m) {
  std::string out;
  ggufkit::json::Writer w(out);
  w.begin_object().member("file", m.file).key("digests").begin_array();
  for (const ggufkit::GgufHashEntry& e : m.entries) {
    w.begin_object().member("algorithm", ggufkit::digest_algorithm_name(e.algorithm)).member("digest", e.digest);
    w.key("tensor");
    if (e.tensor.empty()) {
      w.null();
    } else {
      w.value(e.tensor);
    }
    w.end_object();
  }
  w.end_array().end_object();
  return out + "\n";
}

std::string algorithm_list(const std::vector<DigestAlgorithm>& algorithms) {
  std::string out;
  for (const DigestAlgorithm a : algorithms) out += (out.empty() ? "" : ", ") + std::string(ggufkit::digest_algorithm_name(a));
  return out;
}

// A gguf-hash manifest checked as gguf-hash checks it: with the algorithms asked for, else the
// strongest the manifest has; per tensor where the manifest has tensor lines.
// Progress on stderr while the digests run: bytes digested (a byte once per digest), FILE.
ggufkit::HashProgress hashing_progress(const std::string& file) {
  if (!progress_enabled()) return {};
  auto progress = std::make_shared<Progress>();
  return [progress, file](uint64_t done, uint64_t total) { progress->bytes(done, total, file); };
}

int run_gguf_hash_check(const HashArgs& args, std::istream& text) {
  auto expected = ggufkit::parse_gguf_hash(text);
  if (!expected) return manifest_refused(args.check, expected.error());
  const auto have = ggufkit::gguf_hash_algorithms(*expected);
  std::vector<DigestAlgorithm> use = args.gguf_hash_algorithms();
  if (use.empty()) use = {ggufkit::strongest_gguf_hash_algorithm(*expected)};
  for (const DigestAlgorithm a : use) {
    if (std::find(have.begin(), have.end(), a) == have.end()) {
      fmt::print(stderr, "gguf hash: {} has no {} lines (it has {})\n", terminal_safe(args.check), ggufkit::digest_algorithm_name(a),
                 algorithm_list(have));
      return kUsageOrIoError;
    }
  }
  const bool per_tensor = ggufkit::has_gguf_hash_lines(*expected, use, ggufkit::GgufHashLines::tensor);
  auto file = ggufkit::GgufFile::open(args.file);
  if (!file) {
    report_error(args.file, file.error());
    return kUsageOrIoError;
  }
  const auto actual =
      ggufkit::gguf_hash_file(*file, args.file,
                              {.algorithms = use, .per_tensor = per_tensor, .progress = hashing_progress(args.file)},
                              ggufkit::Threads{args.threads});
  size_t tensors = 0;
  for (const auto& e : actual.entries) tensors += e.tensor.empty() || e.algorithm != use.front() ? 0 : 1;
  const bool model = ggufkit::has_gguf_hash_lines(*expected, use, ggufkit::GgufHashLines::model);
  Report report;
  size_t mismatches = 0;
  {
    auto p = Printer::make(args.json, report.out);
    p->begin_object();
    mismatches = print_mismatches(*p, report, [&](const ggufkit::MismatchHandler& on) {
      ggufkit::compare_gguf_hash(*expected, actual, on);
    });
    p->begin_line();
    p->field("file", args.file, args.file);
    p->field("ok", mismatches == 0, mismatches == 0 ? ": OK (" : ": FAILED (");
    p->field("tensors_checked", tensors, plural(tensors, "tensor", "tensors"));
    p->field("model_checked", model, model ? " and the model digest" : "");
    p->field("algorithms", algorithm_list(use), " checked with " + algorithm_list(use));
    p->field("manifest_format", "gguf-hash", " against a gguf-hash manifest");
    p->field("mismatch_count", mismatches, ", " + plural(mismatches, "mismatch", "mismatches") + ")");
    p->end_line().end_object();
  }
  report.flush(0);
  if (report.written != kOk) return report.written;
  return mismatches == 0 ? kOk : kProblemFound;
}

// gguf-hash's lines for one file.
int run_gguf_hash(const HashArgs& args) {
  std::vector<DigestAlgorithm> use = args.gguf_hash_algorithms();
  if (use.empty()) use = {DigestAlgorithm::xxh64};  // gguf-hash's default
  auto file = ggufkit::GgufFile::open(args.file);
  if (!file) {
    report_error(args.file, file.error());
    return kUsageOrIoError;
  }
  const auto m = ggufkit::gguf_hash_file(
      *file, args.file, {.algorithms = use, .per_tensor = !args.no_layer, .progress = hashing_progress(args.file)},
      ggufkit::Threads{args.threads});
  return write_result(args.json ? gguf_hash_json(m) : ggufkit::format_gguf_hash(m));
}

int run_hash(const HashArgs& args) {
  if (args.format != "ggufkit" && args.format != "gguf-hash") {
    fmt::print(stderr, "gguf hash: unknown --format '{}' (ggufkit or gguf-hash)\n", terminal_safe(args.format));
    return kUsageOrIoError;
  }
  auto algorithm = ggufkit::parse_digest_algorithm(args.algorithm);
  if (!algorithm || *algorithm == DigestAlgorithm::uuid) {
    fmt::print(stderr, "gguf hash: unknown algorithm '{}' (xxh64, sha1 or sha256; the model id is --uuid)\n",
               terminal_safe(args.algorithm));
    return kUsageOrIoError;
  }
  std::optional<Manifest> expected;
  if (!args.check.empty()) {
    auto text = open_manifest(args.check);
    if (!text) return kUsageOrIoError;
    const bool gguf_hash = ggufkit::is_gguf_hash_manifest(*text);
    text->clear();
    text->seekg(0);
    if (gguf_hash) return run_gguf_hash_check(args, *text);
    if (args.gguf_hash_selected() || args.no_layer) {
      fmt::print(stderr, "gguf hash: {} is a ggufkit manifest: it is checked with its own algorithm, without "
                         "gguf-hash's options\n", terminal_safe(args.check));
      return kUsageOrIoError;
    }
    auto parsed = ggufkit::parse_manifest(*text);
    if (!parsed) return manifest_refused(args.check, parsed.error());
    expected = std::move(parsed).value();
    algorithm = expected->algorithm;  // verify with the manifest's own algorithm
  } else if (args.gguf_hash_format()) {
    return run_gguf_hash(args);
  }
  auto model = ggufkit::SplitModel::open(args.file);
  if (!model) {
    report_error(args.file, model.error());
    return kUsageOrIoError;
  }
  const Manifest actual =
      ggufkit::hash_model(*model, *algorithm, ggufkit::Threads{args.threads}, hashing_progress(args.file));
  if (expected) {
    Report report;
    const size_t mismatches = print_check(*Printer::make(args.json, report.out), report, args.file, *expected, actual);
    report.flush(0);
    if (report.written != kOk) return report.written;
    return mismatches == 0 ? kOk : kProblemFound;
  }
  // A manifest is a file format (hash.h), written as the library writes it, not a report.
  return write_result(args.json ? manifest_json(actual) : ggufkit::format_manifest(actual));
}

}  // namespace

Runner register_hash(CLI::App& app) {
  auto args = std::make_shared<HashArgs>();
  CLI::App* cmd = app.add_subcommand("hash", "Digests of every tensor and file (a manifest), or verify a model "
                                             "against a manifest");
  cmd->add_option("file", args->file, "GGUF file, or the first shard of a split model")->required();
  cmd->add_option("--algorithm,-a", args->algorithm, "xxh64 (fast, default), sha1 or sha256")
      ->type_name("xxh64|sha1|sha256");
  cmd->add_option("--check,-c", args->check,
                  "Verify against this manifest (gguf hash's, or gguf-hash's / gguf_hash.py's lines); exit 1 on a "
                  "mismatch");
  cmd->add_option("--format", args->format,
                  "ggufkit (files and tensors with sizes, default) or gguf-hash (llama.cpp gguf-hash's lines)")
      ->type_name("ggufkit|gguf-hash");
  cmd->add_flag("--xxh64", args->xxh64, "gguf-hash's: xxh64 lines (its default)");
  cmd->add_flag("--sha1", args->sha1, "gguf-hash's: sha1 lines");
  cmd->add_flag("--sha256", args->sha256, "gguf-hash's: sha256 lines");
  cmd->add_flag("--uuid", args->uuid, "gguf-hash's: the model id (UUIDv5 of every tensor's data)");
  cmd->add_flag("--all", args->all, "gguf-hash's: xxh64, sha1 and sha256 lines");
  cmd->add_flag("--no-layer", args->no_layer, "gguf-hash's: the model's lines only, no per-tensor lines");
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->add_option("--threads,-t", args->threads, "Threads (default: all cores)");
  add_progress_flags(*cmd);
  return [args] { return run_hash(*args); };
}

}  // namespace gguf_cli
