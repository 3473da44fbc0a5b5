// Importance matrix files: llama-imatrix's GGUF form and its legacy .dat form, turned into the
// per-weight values llama-quantize hands to the quantizers.
#include "ggufkit/imatrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "ggufkit/endian.h"
#include "ggufkit/mapped_file.h"
#include "ggufkit/reader.h"

namespace ggufkit {
namespace {

constexpr std::string_view kSumsSuffix = ".in_sum2";
constexpr std::string_view kCountsSuffix = ".counts";

// ---- GGUF form ----

Expected<uint32_t> required_u32(const GgufFile& file, std::string_view key) {
  const KeyValue* kv = file.find(key);
  if (kv == nullptr) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, std::string(key),
                      "missing imatrix metadata: llama-quantize refuses a GGUF importance matrix without it");
  }
  const auto value = kv->value.get<uint32_t>();
  if (!value) {
    return make_error(ErrorCode::invalid_argument, kv->offset, std::string(key),
                      fmt::format("must be a uint32, not {}", value_type_name(kv->value.type())));
  }
  return *value;
}

Expected<std::vector<float>> f32_tensor_values(const GgufFile& file, const TensorInfo& tensor) {
  if (tensor.type != TensorType::F32) {
    return make_error(ErrorCode::invalid_argument, tensor.info_offset, std::string(tensor.name),
                      fmt::format("importance matrix tensors must be F32, not {}", type_traits(tensor.type).name));
  }
  std::vector<float> values(static_cast<size_t>(tensor.n_elements()));
  if (auto r = copy_tensor_native(file, tensor, 0, std::as_writable_bytes(std::span(values))); !r) {
    return std::move(r).error();
  }
  return values;
}

struct SumsAndCounts {
  const TensorInfo* sums = nullptr;
  const TensorInfo* counts = nullptr;
};

// values = sums / count for each expert's slice of ne0 sums; 1 where the count rounds to 0.
Expected<std::vector<float>> normalised_values(const GgufFile& file, const std::string& name,
                                               const SumsAndCounts& pair) {
  auto sums = f32_tensor_values(file, *pair.sums);
  if (!sums) return std::move(sums).error();
  auto counts = f32_tensor_values(file, *pair.counts);
  if (!counts) return std::move(counts).error();
  const uint64_t offset = pair.sums->info_offset;
  if (sums->empty()) {
    return make_error(ErrorCode::invalid_argument, offset, std::string(pair.sums->name), "no values");
  }
  if (counts->empty() || sums->size() % counts->size() != 0) {
    return make_error(ErrorCode::invalid_argument, pair.counts->info_offset, std::string(pair.counts->name),
                      fmt::format("{} counts do not divide the {} sums of '{}' into experts", counts->size(),
                                  sums->size(), name));
  }
  const size_t per_expert = sums->size() / counts->size();
  std::vector<float> values(sums->size());
  for (size_t expert = 0; expert < counts->size(); ++expert) {
    const float raw = (*counts)[expert];
    // lround is only defined for counts a long holds; 2^62 is far beyond any real token count.
    if (!std::isfinite(raw) || raw < 0.0f || raw > 0x1p62f) {
      return make_error(ErrorCode::invalid_argument, pair.counts->info_offset, std::string(pair.counts->name),
                        fmt::format("count {} of expert {} is not a finite non-negative number", raw, expert));
    }
    // As llama.cpp: the count is rounded to an integer, then divided by as a float.
    const auto count = static_cast<float>(std::lround(raw));
    float* out = values.data() + expert * per_expert;
    const float* in = sums->data() + expert * per_expert;
    for (size_t i = 0; i < per_expert; ++i) out[i] = count > 0.0f ? in[i] / count : 1.0f;
  }
  return values;
}

Expected<ImportanceMatrix> parse_gguf_form(std::span<const std::byte> bytes) {
  auto opened = GgufFile::parse(bytes);
  if (!opened) return std::move(opened).error();
  const GgufFile& file = *opened;
  if (file.tensors().empty()) {
    return make_error(ErrorCode::bad_count, std::nullopt, {}, "the importance matrix holds no tensors");
  }

  ImportanceMatrix matrix;
  if (file.find(kImatrixDatasetsKey) == nullptr) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, std::string(kImatrixDatasetsKey),
                      "missing imatrix metadata: llama-quantize refuses a GGUF importance matrix without it");
  }
  auto chunk_count = required_u32(file, kImatrixChunkCountKey);
  if (!chunk_count) return std::move(chunk_count).error();
  auto chunk_size = required_u32(file, kImatrixChunkSizeKey);
  if (!chunk_size) return std::move(chunk_size).error();
  matrix.chunk_count = *chunk_count;
  matrix.chunk_size = *chunk_size;
  if (const auto datasets = file.get(kImatrixDatasetsKey)->as_array()) {
    for (const std::string_view dataset : datasets->strings()) matrix.datasets.emplace_back(dataset);
  }

  // std::map: the entries come out sorted by name.
  std::map<std::string, SumsAndCounts, std::less<>> pairs;
  for (const TensorInfo& tensor : file.tensors()) {
    const std::string_view name = tensor.name;
    if (name.ends_with(kSumsSuffix)) {
      pairs[std::string(name.substr(0, name.size() - kSumsSuffix.size()))].sums = &tensor;
    } else if (name.ends_with(kCountsSuffix)) {
      pairs[std::string(name.substr(0, name.size() - kCountsSuffix.size()))].counts = &tensor;
    }
  }
  for (const auto& [name, pair] : pairs) {
    if (pair.sums == nullptr || pair.counts == nullptr) {
      const TensorInfo* present = pair.sums != nullptr ? pair.sums : pair.counts;
      return make_error(ErrorCode::invalid_argument, present->info_offset, std::string(present->name),
                        fmt::format("'{}' has {} but no {} tensor", name,
                                    pair.sums != nullptr ? kSumsSuffix : kCountsSuffix,
                                    pair.sums != nullptr ? kCountsSuffix : kSumsSuffix));
    }
    auto values = normalised_values(file, name, pair);
    if (!values) return std::move(values).error();
    matrix.entries.push_back({name, std::move(values).value()});
  }
  if (matrix.entries.empty()) {
    return make_error(ErrorCode::bad_count, std::nullopt, {}, "the importance matrix holds no .in_sum2/.counts tensors");
  }
  return matrix;
}

// ---- legacy .dat form ----

// A cursor over untrusted bytes: every read checks what is left first.
class LegacyReader {
 public:
  explicit LegacyReader(std::span<const std::byte> bytes) : bytes_(bytes) {}

  uint64_t offset() const { return offset_; }
  uint64_t left() const { return bytes_.size() - offset_; }

  Expected<int32_t> int32(std::string_view subject, std::string_view what) {
    if (left() < sizeof(int32_t)) return truncated(subject, what, sizeof(int32_t));
    int32_t v;
    std::memcpy(&v, bytes_.data() + offset_, sizeof v);
    offset_ += sizeof v;
    return v;
  }
  // A length read just before: refused when negative or longer than what is left, before anything
  // is allocated for it.
  Expected<std::span<const std::byte>> sized(int32_t length, std::string_view subject, std::string_view what) {
    if (length < 0) {
      return make_error(ErrorCode::bad_count, offset_ - sizeof(int32_t), std::string(subject),
                        fmt::format("negative {} length {}", what, length));
    }
    return take(static_cast<uint64_t>(length), subject, what);
  }
  Expected<std::span<const std::byte>> take(uint64_t length, std::string_view subject, std::string_view what) {
    if (length > left()) return truncated(subject, what, length);
    const auto out = bytes_.subspan(offset_, static_cast<size_t>(length));
    offset_ += length;
    return out;
  }

  Error truncated(std::string_view subject, std::string_view what, uint64_t needed) const {
    return make_error(ErrorCode::truncated, offset_, std::string(subject),
                      fmt::format("{} needs {} bytes, {} left", what, needed, left()));
  }

 private:
  std::span<const std::byte> bytes_;
  uint64_t offset_ = 0;
};

// As llama.cpp, which reads names into C strings: a name ends at its first NUL.
std::string c_string(std::span<const std::byte> bytes) {
  const auto* chars = reinterpret_cast<const char*>(bytes.data());
  return std::string(chars, ::strnlen(chars, bytes.size()));
}

// The smallest entry: name length, empty name, ncall, nval, one value.
constexpr uint64_t kMinLegacyEntryBytes = 4 + 4 + 4 + 4;

Expected<ImportanceMatrix> parse_legacy_form(std::span<const std::byte> bytes) {
  LegacyReader in(bytes);
  auto n_entries = in.int32({}, "the entry count");
  if (!n_entries) return std::move(n_entries).error();
  if (*n_entries < 1 || static_cast<uint64_t>(*n_entries) > in.left() / kMinLegacyEntryBytes) {
    return make_error(ErrorCode::bad_count, 0, {},  // the entry count is the file's first field
                      fmt::format("{} entries in a legacy importance matrix of {} bytes", *n_entries, bytes.size()));
  }

  // Later entries of the same name replace earlier ones, as in llama.cpp's map.
  std::map<std::string, std::vector<float>, std::less<>> entries;
  for (int32_t index = 0; index < *n_entries; ++index) {
    const std::string entry_subject = fmt::format("entry {}", index);
    auto name_length = in.int32(entry_subject, "the name length");
    if (!name_length) return std::move(name_length).error();
    auto name_bytes = in.sized(*name_length, entry_subject, "the name");
    if (!name_bytes) return std::move(name_bytes).error();
    std::string name = c_string(*name_bytes);
    const std::string subject = fmt::format("entry {} '{}'", index, name);

    auto ncall = in.int32(subject, "the call count");
    if (!ncall) return std::move(ncall).error();
    auto nval = in.int32(subject, "the value count");
    if (!nval) return std::move(nval).error();
    if (*nval < 1) {
      return make_error(ErrorCode::bad_count, in.offset() - sizeof(int32_t), subject,
                        fmt::format("value count {} is not positive", *nval));
    }
    auto sums = in.take(uint64_t{sizeof(float)} * static_cast<uint64_t>(*nval), subject,
                        fmt::format("{} values", *nval));
    if (!sums) return std::move(sums).error();

    std::vector<float> values(static_cast<size_t>(*nval));
    std::memcpy(values.data(), sums->data(), sums->size());
    // The file holds sums already divided by the count and multiplied by ncall: divide by ncall.
    if (*ncall > 0) {
      const auto divisor = static_cast<float>(*ncall);
      for (float& v : values) v /= divisor;
    }
    entries.insert_or_assign(std::move(name), std::move(values));
  }

  ImportanceMatrix matrix;
  matrix.legacy = true;
  // The optional trailer: chunk count, then the dataset's name.
  if (in.left() > 0) {
    auto chunks = in.int32("trailer", "the chunk count");
    if (!chunks) return std::move(chunks).error();
    if (*chunks < 0) {
      return make_error(ErrorCode::bad_count, in.offset() - sizeof(int32_t), "trailer",
                        fmt::format("negative chunk count {}", *chunks));
    }
    matrix.chunk_count = static_cast<uint32_t>(*chunks);
    if (in.left() > 0) {
      auto dataset_length = in.int32("trailer", "the dataset name length");
      if (!dataset_length) return std::move(dataset_length).error();
      auto dataset = in.sized(*dataset_length, "trailer", "the dataset name");
      if (!dataset) return std::move(dataset).error();
      if (!dataset->empty()) matrix.datasets.push_back(c_string(*dataset));
    }
  }

  matrix.entries.reserve(entries.size());
  for (auto& [name, values] : entries) matrix.entries.push_back({name, std::move(values)});
  return matrix;
}

}  // namespace

const ImportanceEntry* ImportanceMatrix::find(std::string_view name) const {
  const auto it = std::ranges::lower_bound(entries, name, {}, &ImportanceEntry::name);
  return it != entries.end() && it->name == name ? &*it : nullptr;
}

Expected<ImportanceMatrix> parse_importance_matrix(std::span<const std::byte> bytes) {
  if (bytes.size() >= sizeof kGgufMagic && std::memcmp(bytes.data(), kGgufMagic, sizeof kGgufMagic) == 0) {
    return parse_gguf_form(bytes);
  }
  return parse_legacy_form(bytes);
}

Expected<ImportanceMatrix> load_importance_matrix(const std::filesystem::path& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return std::move(mapped).error();
  return parse_importance_matrix(mapped->bytes());
}

void exclude_importance_entries(ImportanceMatrix& matrix, std::span<const std::string> parts) {
  std::erase_if(matrix.entries, [&](const ImportanceEntry& e) {
    return std::ranges::any_of(parts, [&](const std::string& part) { return e.name.find(part) != std::string::npos; });
  });
}

void include_importance_entries(ImportanceMatrix& matrix, std::span<const std::string> parts) {
  if (parts.empty()) return;  // the option not given
  std::erase_if(matrix.entries, [&](const ImportanceEntry& e) {
    return std::ranges::none_of(parts, [&](const std::string& part) { return e.name.find(part) != std::string::npos; });
  });
}

}  // namespace ggufkit
