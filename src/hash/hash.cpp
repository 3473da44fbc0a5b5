// gguf hash: digests of files and tensors, manifests, verification.
#include "ggufkit/hash.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <map>
#include <thread>

#include "hash/sha256.h"
#include "hash/xxh64.h"

namespace ggufkit {

std::string_view digest_algorithm_name(DigestAlgorithm algorithm) {
  return algorithm == DigestAlgorithm::sha256 ? "sha256" : "xxh64";
}

std::optional<DigestAlgorithm> parse_digest_algorithm(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "xxh64" || lower == "xxhash64") return DigestAlgorithm::xxh64;
  if (lower == "sha256" || lower == "sha-256") return DigestAlgorithm::sha256;
  return std::nullopt;
}

std::string digest_hex(DigestAlgorithm algorithm, std::span<const std::byte> data) {
  if (algorithm == DigestAlgorithm::xxh64) return fmt::format("{:016x}", digest::xxh64(data));
  digest::Sha256 sha;
  sha.update(data);
  std::string out;
  for (const uint8_t b : sha.finish()) out += fmt::format("{:02x}", b);
  return out;
}

Manifest hash_model(const SplitModel& model, DigestAlgorithm algorithm, Threads threads) {
  Manifest m;
  m.algorithm = algorithm;
  const auto shards = model.shards();
  const auto tensors = model.tensors();
  m.files.resize(shards.size());
  m.tensors.resize(tensors.size());
  // Jobs: the whole files first (the longest), then the tensors; workers take the next job.
  const size_t jobs = shards.size() + tensors.size();
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t j = next++; j < jobs; j = next++) {
      if (j < shards.size()) {
        const auto bytes = shards[j].bytes();
        m.files[j] = {model.paths()[j].filename().string(), bytes.size(), digest_hex(algorithm, bytes)};
      } else {
        const ModelTensor& t = tensors[j - shards.size()];
        m.tensors[j - shards.size()] = {std::string(t.info->name), t.data.size(), digest_hex(algorithm, t.data)};
      }
    }
  };
  unsigned n = thread_count(threads);
  n = static_cast<unsigned>(std::min<size_t>(n, std::max<size_t>(jobs, 1)));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return m;
}

namespace {

std::string escaped(std::string_view name) {
  std::string out;
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<std::string> unescaped(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '\\') {
      out += '\\';
      ++i;
    } else if (i + 3 < text.size() && text[i + 1] == 'x' && std::isxdigit(static_cast<unsigned char>(text[i + 2])) &&
               std::isxdigit(static_cast<unsigned char>(text[i + 3]))) {
      out += static_cast<char>(std::stoi(std::string(text.substr(i + 2, 2)), nullptr, 16));
      i += 3;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace

std::string format_manifest(const Manifest& manifest) {
  std::string out = "# gguf hash manifest: kind digest bytes name (verify with gguf hash FILE --check THIS)\n";
  out += fmt::format("algorithm {}\n", digest_algorithm_name(manifest.algorithm));
  for (const ManifestEntry& e : manifest.files) out += fmt::format("file {} {} {}\n", e.digest, e.bytes, escaped(e.name));
  for (const ManifestEntry& e : manifest.tensors) {
    out += fmt::format("tensor {} {} {}\n", e.digest, e.bytes, escaped(e.name));
  }
  return out;
}

Expected<Manifest> parse_manifest(std::string_view text) {
  Manifest m;
  bool have_algorithm = false;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
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
      if (!a) return bad(fmt::format("unknown algorithm '{}' (xxh64 or sha256)", line.substr(sp1 + 1)));
      m.algorithm = *a;
      have_algorithm = true;
      continue;
    }
    if (kind != "file" && kind != "tensor") return bad(fmt::format("unknown entry kind '{}'", kind));
    if (!have_algorithm) return bad("an entry before the 'algorithm' line");
    const size_t sp2 = line.find(' ', sp1 + 1);
    const size_t sp3 = sp2 == std::string_view::npos ? sp2 : line.find(' ', sp2 + 1);
    if (sp3 == std::string_view::npos) return bad("expected KIND DIGEST BYTES NAME");
    ManifestEntry e;
    e.digest = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
    const size_t digits = m.algorithm == DigestAlgorithm::xxh64 ? 16 : 64;
    if (e.digest.size() != digits || !std::all_of(e.digest.begin(), e.digest.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
        })) {
      return bad(fmt::format("'{}' is not a {} digest ({} lower-case hex digits)", e.digest,
                             digest_algorithm_name(m.algorithm), digits));
    }
    const std::string_view bytes = line.substr(sp2 + 1, sp3 - sp2 - 1);
    if (bytes.empty() || bytes.size() > 19 ||
        !std::all_of(bytes.begin(), bytes.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      return bad(fmt::format("'{}' is not a byte count", bytes));
    }
    e.bytes = std::stoull(std::string(bytes));
    auto name = unescaped(line.substr(sp3 + 1));
    if (!name) return bad("a name with an invalid escape (\\\\ or \\xNN)");
    e.name = std::move(*name);
    (kind == "file" ? m.files : m.tensors).push_back(std::move(e));
  }
  if (!have_algorithm) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "not a gguf hash manifest: no 'algorithm' line");
  }
  return m;
}

std::vector<ManifestMismatch> compare_manifests(const Manifest& expected, const Manifest& actual) {
  std::vector<ManifestMismatch> out;
  std::map<std::string_view, const ManifestEntry*> have;
  for (const ManifestEntry& e : actual.tensors) have.emplace(e.name, &e);
  std::map<std::string_view, bool> wanted;
  bool every_tensor_matches = true;
  for (const ManifestEntry& e : expected.tensors) {
    wanted.emplace(e.name, true);
    const auto it = have.find(e.name);
    if (it == have.end()) {
      out.push_back({"missing_tensor", e.name, "the manifest lists it, the model does not have it"});
      every_tensor_matches = false;
    } else if (it->second->digest != e.digest || it->second->bytes != e.bytes) {
      out.push_back({"tensor", e.name,
                     fmt::format("{} bytes with digest {}, the manifest says {} bytes with digest {}", it->second->bytes,
                                 it->second->digest, e.bytes, e.digest)});
      every_tensor_matches = false;
    }
  }
  for (const ManifestEntry& e : actual.tensors) {
    if (!wanted.contains(e.name)) {
      out.push_back({"unexpected_tensor", e.name, "the model has it, the manifest does not list it"});
      every_tensor_matches = false;
    }
  }
  if (expected.files.size() != actual.files.size()) {
    out.push_back({"file_count", {},
                   fmt::format("the model has {} file(s), the manifest lists {}", actual.files.size(),
                               expected.files.size())});
  } else {
    for (size_t i = 0; i < expected.files.size(); ++i) {
      const ManifestEntry& e = expected.files[i];
      const ManifestEntry& a = actual.files[i];
      if (e.digest == a.digest && e.bytes == a.bytes) continue;
      out.push_back({"file", a.name,
                     fmt::format("{} bytes with digest {}, the manifest says {} ({} bytes, digest {}){}", a.bytes,
                                 a.digest, e.name, e.bytes, e.digest,
                                 every_tensor_matches ? ": every tensor matches, so the metadata or padding differs" : "")});
    }
  }
  return out;
}

}  // namespace ggufkit
