// gguf hash: digests of files and tensors, manifests, verification.
#include "ggufkit/hash.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <istream>
#include <mutex>
#include <cctype>
#include <map>
#include <thread>

#include "ggufkit/text.h"
#include "hash/digest.h"

namespace ggufkit {

std::string_view digest_algorithm_name(DigestAlgorithm algorithm) {
  switch (algorithm) {
    case DigestAlgorithm::xxh64: return "xxh64";
    case DigestAlgorithm::sha256: return "sha256";
    case DigestAlgorithm::sha1: return "sha1";
    case DigestAlgorithm::uuid: return "uuid";
  }
  return "?";
}

std::optional<DigestAlgorithm> parse_digest_algorithm(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "xxh64" || lower == "xxhash64") return DigestAlgorithm::xxh64;
  if (lower == "sha256" || lower == "sha-256") return DigestAlgorithm::sha256;
  if (lower == "sha1" || lower == "sha-1") return DigestAlgorithm::sha1;
  if (lower == "uuid") return DigestAlgorithm::uuid;
  return std::nullopt;
}

size_t digest_length(DigestAlgorithm algorithm) {
  switch (algorithm) {
    case DigestAlgorithm::xxh64: return 16;
    case DigestAlgorithm::sha256: return 64;
    case DigestAlgorithm::sha1: return 40;
    case DigestAlgorithm::uuid: return 36;
  }
  return 0;
}

std::string digest_hex(DigestAlgorithm algorithm, std::span<const std::byte> data) {
  digest::Digester d(algorithm);
  d.update(data);
  return d.finish_hex();
}

namespace {

// One digest over a sequence of byte ranges, written to *out.
struct Stream {
  DigestAlgorithm algorithm = DigestAlgorithm::xxh64;
  std::vector<std::span<const std::byte>> pieces;
  std::string* out = nullptr;
  uint64_t size() const {
    uint64_t n = 0;
    for (const auto& p : pieces) n += p.size();
    return n;
  }
};

// Every stream on `threads` workers, the largest first (a whole file on one core while the other
// takes its tensors; the page cache serves both from one read of the file). A worker's exception
// is rethrown here.
void run_streams(std::vector<Stream>& streams, Threads threads, const HashProgress& progress,
                 const std::atomic<bool>* cancel) {
  const auto cancelled = [cancel] { return cancel != nullptr && cancel->load(); };
  uint64_t total = 0;
  for (const Stream& s : streams) total += s.size();
  std::atomic<uint64_t> hashed{0};
  std::mutex progress_mutex;
  // Slices keep the progress moving inside a large tensor or file.
  constexpr size_t kSlice = size_t{16} << 20;
  const auto digest_piece = [&](digest::Digester& d, std::span<const std::byte> piece) {
    if (!progress && cancel == nullptr) {
      d.update(piece);
      return;
    }
    for (size_t at = 0; at < piece.size(); at += kSlice) {
      if (cancelled()) return;
      const auto slice = piece.subspan(at, std::min(kSlice, piece.size() - at));
      d.update(slice);
      hashed += slice.size();
      if (!progress) continue;
      // One report at a time (a worker that finds another reporting goes on); the count is read
      // under the lock, so that the reports never go back.
      if (std::unique_lock lock(progress_mutex, std::try_to_lock); lock.owns_lock()) {
        if (const uint64_t done = hashed.load(); done < total) progress(done, total);
      }
    }
  };
  std::vector<std::pair<uint64_t, size_t>> order;
  order.reserve(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) order.emplace_back(streams[i].size(), i);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto work = [&] {
    try {
      for (size_t j = next++; j < order.size(); j = next++) {
        Stream& s = streams[order[j].second];
        digest::Digester d(s.algorithm);
        for (const auto& piece : s.pieces) digest_piece(d, piece);
        if (cancelled()) return;  // the digest of an unfinished stream stays empty
        *s.out = d.finish_hex();
      }
    } catch (...) {
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = order.size();
    }
  };
  unsigned n = thread_count(threads);
  n = static_cast<unsigned>(std::min<size_t>(n, std::max<size_t>(order.size(), 1)));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  if (progress && !cancelled()) progress(total, total);
}

}  // namespace

Manifest hash_model(const SplitModel& model, DigestAlgorithm algorithm, Threads threads, const HashProgress& progress,
                    const std::atomic<bool>* cancel) {
  Manifest m;
  m.algorithm = algorithm;
  const auto shards = model.shards();
  const auto tensors = model.tensors();
  m.files.resize(shards.size());
  m.tensors.resize(tensors.size());
  std::vector<Stream> streams;
  streams.reserve(shards.size() + tensors.size());
  for (size_t i = 0; i < shards.size(); ++i) {
    const auto bytes = shards[i].bytes();
    m.files[i].name = model.paths()[i].filename().string();
    m.files[i].bytes = bytes.size();
    streams.push_back({algorithm, {bytes}, &m.files[i].digest});
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    m.tensors[i].name = std::string(tensors[i].info->name);
    m.tensors[i].bytes = tensors[i].data.size();
    streams.push_back({algorithm, {tensors[i].data}, &m.tensors[i].digest});
  }
  run_streams(streams, threads, progress, cancel);
  return m;
}

namespace {

// The lines of a manifest, one at a time (without their \n or \r\n), from a text in memory or a
// stream: a stream is read line by line, so that memory is what the entries take, not the file.
class Lines {
 public:
  explicit Lines(std::string_view text) : text_(text) {}
  explicit Lines(std::istream& in) : in_(&in) {}
  bool next(std::string_view& line) {
    if (in_ != nullptr) {
      if (!std::getline(*in_, buffer_)) return false;
      line = buffer_;
    } else {
      if (text_.empty()) return false;
      const size_t eol = text_.find('\n');
      line = text_.substr(0, eol);
      text_ = eol == std::string_view::npos ? std::string_view{} : text_.substr(eol + 1);
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return true;
  }
  // A stream that failed for another reason than its end (a read error).
  bool failed() const { return in_ != nullptr && in_->bad(); }

 private:
  std::string_view text_;
  std::istream* in_ = nullptr;
  std::string buffer_;
};

Error read_failed() { return make_error(ErrorCode::io_error, std::nullopt, {}, "cannot read the manifest"); }

// digest_hex's spelling: lower-case hex of the right length, or the UUID's 8-4-4-4-12 form.
bool is_digest(DigestAlgorithm algorithm, std::string_view text) {
  if (text.size() != digest_length(algorithm)) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool dash = algorithm == DigestAlgorithm::uuid && (i == 8 || i == 13 || i == 18 || i == 23);
    if (dash ? c != '-' : !(std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A manifest's text quoted in a message: at most 100 bytes of it, so that a hostile line of
// hundreds of megabytes does not become a message as large.
std::string clipped(std::string_view text) {
  constexpr size_t kMax = 100;
  return text.size() <= kMax ? std::string(text) : std::string(text.substr(0, kMax)) + "…";
}

std::string not_a_digest(DigestAlgorithm algorithm, std::string_view text) {
  if (algorithm == DigestAlgorithm::uuid) {
    return fmt::format("'{}' is not a uuid (8-4-4-4-12 lower-case hex digits)", clipped(text));
  }
  return fmt::format("'{}' is not a {} digest ({} lower-case hex digits)", clipped(text),
                     digest_algorithm_name(algorithm), digest_length(algorithm));
}

}  // namespace

std::string format_manifest(const Manifest& manifest) {
  std::string out = "# gguf hash manifest: kind digest bytes name (verify with gguf hash FILE --check THIS)\n";
  out += fmt::format("algorithm {}\n", digest_algorithm_name(manifest.algorithm));
  for (const ManifestEntry& e : manifest.files) out += fmt::format("file {} {} {}\n", e.digest, e.bytes, escape_text(e.name));
  for (const ManifestEntry& e : manifest.tensors) {
    out += fmt::format("tensor {} {} {}\n", e.digest, e.bytes, escape_text(e.name));
  }
  return out;
}

namespace {

Expected<Manifest> parse_manifest_lines(Lines lines) {
  Manifest m;
  bool have_algorithm = false;
  size_t line_no = 0;
  std::string_view line;
  while (lines.next(line)) {
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const auto bad = [&](std::string_view why) {
      return make_error(ErrorCode::invalid_argument, std::nullopt, fmt::format("line {}", line_no),
                        fmt::format("manifest line {}: {}", line_no, why));
    };
    const size_t sp1 = line.find(' ');
    const std::string_view kind = line.substr(0, sp1);
    if (sp1 == std::string_view::npos) return bad("expected 'algorithm NAME' or 'KIND DIGEST BYTES NAME'");
    if (kind == "algorithm") {
      const auto a = parse_digest_algorithm(line.substr(sp1 + 1));
      if (!a) return bad(fmt::format("unknown algorithm '{}' (xxh64, sha1, sha256 or uuid)", clipped(line.substr(sp1 + 1))));
      m.algorithm = *a;
      have_algorithm = true;
      continue;
    }
    if (kind != "file" && kind != "tensor") return bad(fmt::format("unknown entry kind '{}'", clipped(kind)));
    if (!have_algorithm) return bad("an entry before the 'algorithm' line");
    const size_t sp2 = line.find(' ', sp1 + 1);
    const size_t sp3 = sp2 == std::string_view::npos ? sp2 : line.find(' ', sp2 + 1);
    if (sp3 == std::string_view::npos) return bad("expected KIND DIGEST BYTES NAME");
    ManifestEntry e;
    e.digest = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
    if (!is_digest(m.algorithm, e.digest)) return bad(not_a_digest(m.algorithm, e.digest));
    const std::string_view bytes = line.substr(sp2 + 1, sp3 - sp2 - 1);
    if (bytes.empty() || bytes.size() > 19 ||
        !std::all_of(bytes.begin(), bytes.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      return bad(fmt::format("'{}' is not a byte count", clipped(bytes)));
    }
    e.bytes = std::stoull(std::string(bytes));
    auto name = unescape_text(line.substr(sp3 + 1));
    if (!name) return bad("a name with an invalid escape (\\\\ or \\xNN)");
    e.name = std::move(*name);
    (kind == "file" ? m.files : m.tensors).push_back(std::move(e));
  }
  if (lines.failed()) return read_failed();
  if (!have_algorithm) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "not a gguf hash manifest: no 'algorithm' line");
  }
  return m;
}

}  // namespace

Expected<Manifest> parse_manifest(std::string_view text) { return parse_manifest_lines(Lines(text)); }

Expected<Manifest> parse_manifest(std::istream& in) { return parse_manifest_lines(Lines(in)); }

void compare_manifests(const Manifest& expected, const Manifest& actual, const MismatchHandler& on_mismatch) {
  // Memory is the model's names (and a flag each), not the manifest's: a manifest of a million
  // entries the model lacks costs its entries, and its mismatches go out as they are found.
  std::map<std::string_view, size_t> have;
  for (size_t i = 0; i < actual.tensors.size(); ++i) have.emplace(actual.tensors[i].name, i);
  std::vector<bool> listed(actual.tensors.size(), false);
  bool every_tensor_matches = true;
  for (const ManifestEntry& e : expected.tensors) {
    const auto it = have.find(e.name);
    if (it == have.end()) {
      on_mismatch({"missing_tensor", e.name, "the manifest lists it, the model does not have it"});
      every_tensor_matches = false;
      continue;
    }
    listed[it->second] = true;
    const ManifestEntry& a = actual.tensors[it->second];
    if (a.digest != e.digest || a.bytes != e.bytes) {
      on_mismatch({"tensor", e.name,
                   fmt::format("{} bytes with digest {}, the manifest says {} bytes with digest {}", a.bytes, a.digest,
                               e.bytes, e.digest)});
      every_tensor_matches = false;
    }
  }
  for (size_t i = 0; i < actual.tensors.size(); ++i) {
    if (!listed[i]) {
      on_mismatch({"unexpected_tensor", actual.tensors[i].name, "the model has it, the manifest does not list it"});
      every_tensor_matches = false;
    }
  }
  if (expected.files.size() != actual.files.size()) {
    on_mismatch({"file_count", {},
                 fmt::format("the model has {} file(s), the manifest lists {}", actual.files.size(), expected.files.size())});
  } else {
    for (size_t i = 0; i < expected.files.size(); ++i) {
      const ManifestEntry& e = expected.files[i];
      const ManifestEntry& a = actual.files[i];
      if (e.digest == a.digest && e.bytes == a.bytes) continue;
      on_mismatch({"file", a.name,
                   fmt::format("{} bytes with digest {}, the manifest says {} ({} bytes, digest {}){}", a.bytes, a.digest,
                               e.name, e.bytes, e.digest,
                               every_tensor_matches ? ": every tensor matches, so the metadata or padding differs" : "")});
    }
  }
}

std::vector<ManifestMismatch> compare_manifests(const Manifest& expected, const Manifest& actual) {
  std::vector<ManifestMismatch> out;
  compare_manifests(expected, actual, [&](ManifestMismatch m) { out.push_back(std::move(m)); });
  return out;
}

}  // namespace ggufkit

// llama.cpp's gguf-hash format.
namespace ggufkit {

namespace {

constexpr DigestAlgorithm kGgufHashOrder[] = {DigestAlgorithm::xxh64, DigestAlgorithm::sha1, DigestAlgorithm::sha256,
                                              DigestAlgorithm::uuid};

bool wants(const std::vector<DigestAlgorithm>& algorithms, DigestAlgorithm a) {
  return std::find(algorithms.begin(), algorithms.end(), a) != algorithms.end();
}

// The exact names gguf-hash compares with.
std::optional<DigestAlgorithm> gguf_hash_algorithm(std::string_view token) {
  for (const DigestAlgorithm a : kGgufHashOrder) {
    if (token == digest_algorithm_name(a)) return a;
  }
  return std::nullopt;
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view next_token(std::string_view& line) {
  size_t i = 0;
  while (i < line.size() && is_space(line[i])) ++i;
  size_t j = i;
  while (j < line.size() && !is_space(line[j])) ++j;
  const std::string_view token = line.substr(i, j - i);
  line.remove_prefix(j);
  return token;
}

}  // namespace

GgufHashManifest gguf_hash_file(const GgufFile& file, std::string name, const GgufHashOptions& options,
                                Threads threads) {
  GgufHashManifest m;
  m.file = std::move(name);
  const auto tensors = file.tensors();
  std::vector<std::span<const std::byte>> all;
  all.reserve(tensors.size());
  for (const TensorInfo& t : tensors) all.push_back(file.tensor_data(t));
  std::vector<DigestAlgorithm> per_tensor;  // gguf-hash's order; uuid is the model's only
  std::vector<DigestAlgorithm> model;
  for (const DigestAlgorithm a : kGgufHashOrder) {
    if (!wants(options.algorithms, a)) continue;
    if (options.per_tensor && a != DigestAlgorithm::uuid) per_tensor.push_back(a);
    model.push_back(a);
  }
  // Reserved: the streams point into the entries.
  m.entries.reserve(tensors.size() * per_tensor.size() + model.size());
  std::vector<Stream> streams;
  streams.reserve(m.entries.capacity());
  for (size_t i = 0; i < tensors.size(); ++i) {
    for (const DigestAlgorithm a : per_tensor) {
      m.entries.push_back({a, {}, std::string(tensors[i].name)});
      streams.push_back({a, {all[i]}, &m.entries.back().digest});
    }
  }
  for (const DigestAlgorithm a : model) {
    m.entries.push_back({a, {}, {}});
    streams.push_back({a, all, &m.entries.back().digest});
  }
  run_streams(streams, threads, options.progress, nullptr);
  return m;
}

namespace {

// A gguf-hash name as its line spells it: escaped (escape_text, and the spaces and tabs at either
// end as \xNN, which the reader would otherwise trim) when it needs to be; `escaped` says whether.
std::string gguf_hash_name(const std::string& name, bool& escaped) {
  const size_t first = name.find_first_not_of(" \t");
  const size_t end = first == std::string::npos ? 0 : name.find_last_not_of(" \t") + 1;
  const size_t begin = first == std::string::npos ? name.size() : first;
  escaped = begin > 0 || end < name.size() || needs_escape(name);
  if (!escaped) return name;
  const auto hex = [](std::string_view bytes) {
    std::string out;
    for (const char c : bytes) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    return out;
  };
  const std::string_view all(name);
  if (begin >= end) return hex(all);
  return hex(all.substr(0, begin)) + escape_text(all.substr(begin, end - begin)) + hex(all.substr(end));
}

}  // namespace

std::string format_gguf_hash(const GgufHashManifest& manifest) {
  std::string out;
  for (const GgufHashEntry& e : manifest.entries) {
    // A name with a terminal control, a newline or bytes that are not UTF-8 is escaped and its line
    // starts with '\\' (coreutils' sha256sum convention): it stays one line and reads back exactly.
    bool escaped = false;
    const std::string name = gguf_hash_name(e.tensor.empty() ? manifest.file : manifest.file + ":" + e.tensor, escaped);
    out += fmt::format("{}{:<8}  {}  {}\n", escaped ? "\\" : "", digest_algorithm_name(e.algorithm), e.digest, name);
  }
  return out;
}

namespace {

// The algorithm token of a gguf-hash line without its escape mark; `escaped` says whether it had one.
std::string_view algorithm_token_of(std::string_view token, bool& escaped) {
  escaped = token.starts_with('\\');
  return escaped ? token.substr(1) : token;
}

bool is_gguf_hash_lines(Lines lines) {
  std::string_view line;
  while (lines.next(line)) {
    const std::string_view token = next_token(line);
    if (token.empty() || token.front() == '#') continue;
    bool escaped = false;
    return gguf_hash_algorithm(algorithm_token_of(token, escaped)).has_value();
  }
  return false;
}

Expected<GgufHashManifest> parse_gguf_hash_lines(Lines lines) {
  GgufHashManifest m;
  std::vector<size_t> line_numbers;  // of each entry, for the errors found once FILE is known
  size_t line_no = 0;
  const auto bad = [&](std::string_view why) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, fmt::format("line {}", line_no),
                      fmt::format("manifest line {}: {}", line_no, why));
  };
  // Each entry holds its whole name (FILE or FILE:TENSOR) until FILE, the shortest, is known.
  size_t shortest = 0;
  std::string_view line;
  while (lines.next(line)) {
    ++line_no;
    bool escaped = false;
    const std::string_view algorithm_token = algorithm_token_of(next_token(line), escaped);
    if (algorithm_token.empty() || (!escaped && algorithm_token.front() == '#')) continue;
    const auto algorithm = gguf_hash_algorithm(algorithm_token);
    if (!algorithm) {
      return bad(fmt::format("'{}' is not an algorithm of gguf-hash (xxh64, sha1, sha256 or uuid)", clipped(algorithm_token)));
    }
    const std::string_view digest = next_token(line);
    if (!is_digest(*algorithm, digest)) return bad(not_a_digest(*algorithm, digest));
    while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
    if (line.empty()) return bad("expected ALGO  DIGEST  FILE or FILE:TENSOR");
    std::optional<std::string> name = escaped ? unescape_text(line) : std::string(line);
    if (!name) return bad("a name with an invalid escape (\\\\ or \\xNN)");
    if (m.entries.empty() || name->size() < m.entries[shortest].tensor.size()) shortest = m.entries.size();
    m.entries.push_back({*algorithm, std::string(digest), std::move(*name)});
    line_numbers.push_back(line_no);
  }
  if (lines.failed()) return read_failed();
  if (m.entries.empty()) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "not a gguf-hash manifest: no digest lines");
  }
  // FILE is the shortest name when the others are FILE:TENSOR. A name FILE:TENSOR is a tensor's even
  // without a FILE line: alone, or beside other tensors' lines ("m.gguf:nope" is tensor "nope" of
  // m.gguf, not the digest of a file of that name).
  m.file = m.entries[shortest].tensor;
  const auto covers = [&](std::string_view file) {
    return std::ranges::all_of(m.entries, [&](const GgufHashEntry& e) {
      return e.tensor == file || (e.tensor.size() > file.size() + 1 && e.tensor.starts_with(file) && e.tensor[file.size()] == ':');
    });
  };
  if (const size_t colon = m.file.rfind(':');
      colon != std::string::npos && colon > 0 && (m.entries.size() == 1 || !covers(m.file))) {
    m.file.resize(colon);
  }
  for (size_t i = 0; i < m.entries.size(); ++i) {
    std::string& name = m.entries[i].tensor;
    if (name == m.file) {
      name.clear();
    } else if (name.size() > m.file.size() + 1 && name.starts_with(m.file) && name[m.file.size()] == ':') {
      name.erase(0, m.file.size() + 1);
    } else {
      line_no = line_numbers[i];
      return bad(fmt::format("'{}' is neither {} nor {}:TENSOR (a manifest covers one file)", clipped(name),
                             clipped(m.file), clipped(m.file)));
    }
  }
  return m;
}

}  // namespace

bool is_gguf_hash_manifest(std::string_view text) { return is_gguf_hash_lines(Lines(text)); }

bool is_gguf_hash_manifest(std::istream& in) { return is_gguf_hash_lines(Lines(in)); }

Expected<GgufHashManifest> parse_gguf_hash(std::string_view text) { return parse_gguf_hash_lines(Lines(text)); }

Expected<GgufHashManifest> parse_gguf_hash(std::istream& in) { return parse_gguf_hash_lines(Lines(in)); }

std::vector<DigestAlgorithm> gguf_hash_algorithms(const GgufHashManifest& manifest) {
  std::vector<DigestAlgorithm> out;
  for (const DigestAlgorithm a : kGgufHashOrder) {
    if (std::any_of(manifest.entries.begin(), manifest.entries.end(),
                    [&](const GgufHashEntry& e) { return e.algorithm == a; })) {
      out.push_back(a);
    }
  }
  return out;
}

bool has_gguf_hash_lines(const GgufHashManifest& manifest, std::span<const DigestAlgorithm> algorithms,
                         GgufHashLines lines) {
  return std::any_of(manifest.entries.begin(), manifest.entries.end(), [&](const GgufHashEntry& e) {
    return e.tensor.empty() == (lines == GgufHashLines::model) &&
           std::find(algorithms.begin(), algorithms.end(), e.algorithm) != algorithms.end();
  });
}

DigestAlgorithm strongest_gguf_hash_algorithm(const GgufHashManifest& manifest) {
  const auto have = gguf_hash_algorithms(manifest);
  for (const DigestAlgorithm a : {DigestAlgorithm::sha256, DigestAlgorithm::sha1, DigestAlgorithm::xxh64}) {
    if (wants(have, a)) return a;
  }
  return DigestAlgorithm::uuid;
}

void compare_gguf_hash(const GgufHashManifest& expected, const GgufHashManifest& actual,
                       const MismatchHandler& on_mismatch) {
  for (const DigestAlgorithm a : gguf_hash_algorithms(actual)) {
    const std::string_view algo = digest_algorithm_name(a);
    // The file's tensors by name (bounded by the file), and what the manifest says of each: the
    // first line wins, as gguf-hash reads a manifest. Names the file lacks are kept as views.
    std::map<std::string_view, size_t> have;
    for (size_t i = 0; i < actual.entries.size(); ++i) {
      const GgufHashEntry& e = actual.entries[i];
      if (e.algorithm == a && !e.tensor.empty()) have.emplace(e.tensor, i);
    }
    std::vector<std::optional<std::string_view>> want(actual.entries.size());
    std::vector<std::string_view> missing;
    std::optional<std::string_view> want_model;
    bool want_tensors = false;
    for (const GgufHashEntry& e : expected.entries) {
      if (e.algorithm != a) continue;
      if (e.tensor.empty()) {
        if (!want_model) want_model = e.digest;
        continue;
      }
      want_tensors = true;
      if (const auto it = have.find(e.tensor); it == have.end()) {
        missing.push_back(e.tensor);
      } else if (!want[it->second]) {
        want[it->second] = e.digest;
      }
    }
    if (want_tensors && !have.empty()) {
      for (size_t i = 0; i < actual.entries.size(); ++i) {
        const GgufHashEntry& e = actual.entries[i];
        if (e.algorithm != a || e.tensor.empty()) continue;
        if (!want[i]) {
          on_mismatch({"unexpected_tensor", e.tensor, fmt::format("the file has it, the manifest has no {} line for it", algo)});
        } else if (*want[i] != e.digest) {
          on_mismatch({"tensor", e.tensor, fmt::format("{} {}, the manifest says {}", algo, e.digest, *want[i])});
        }
      }
      std::sort(missing.begin(), missing.end());
      missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
      for (const std::string_view name : missing) {
        on_mismatch({"missing_tensor", std::string(name),
                     fmt::format("the manifest has a {} line for it, the file does not have it", algo)});
      }
    }
    if (want_model) {
      for (const GgufHashEntry& e : actual.entries) {
        if (e.algorithm != a || !e.tensor.empty() || e.digest == *want_model) continue;
        on_mismatch({"model", {}, fmt::format("{} of every tensor's data {}, the manifest says {}", algo, e.digest, *want_model)});
      }
    }
  }
}

std::vector<ManifestMismatch> compare_gguf_hash(const GgufHashManifest& expected, const GgufHashManifest& actual) {
  std::vector<ManifestMismatch> out;
  compare_gguf_hash(expected, actual, [&](ManifestMismatch m) { out.push_back(std::move(m)); });
  return out;
}

}  // namespace ggufkit
