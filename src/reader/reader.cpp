// The GGUF parser. One pass over the header validates every record; afterwards the views
// handed out by GgufFile never need to check anything again.

#include "ggufkit/reader.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "format/checked_math.h"
#include "format/encoder.h"

namespace ggufkit {

namespace {

constexpr uint64_t kHeaderBytes = 24;          // magic, version, tensor count, kv count
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;   // key length, 1-byte key, type, uint8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset
constexpr uint64_t kArrayHeaderBytes = 12;
// Only for estimating how much of a header is still to come (the keys' home is conventions.h).
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";
constexpr std::string_view kTokenTypesKey = "tokenizer.ggml.token_type";
constexpr std::string_view kTokenizerModelKey = "tokenizer.ggml.model";

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out += std::isprint(u) ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return out;
}

}  // namespace

class Parser {
 public:
  // `file_size` is the size of the whole file; when it is more than `bytes` holds, the bytes are
  // a prefix of it (a header being downloaded) and running out of them is not a truncation:
  // `needed()` then says how much of the file the parser wants.
  Parser(std::span<const std::byte> bytes, const OpenOptions& options, const MappedFile* mapping,
         std::optional<uint64_t> file_size = std::nullopt)
      : base_(bytes.data()), size_(bytes.size()), file_size_(file_size.value_or(bytes.size())),
        prefix_(file_size.has_value()), options_(options), mapping_(mapping) {}

  // After a failed run on a prefix: nonzero when the prefix ended before the header did, with
  // the bytes the parser needs at least and its estimate of the whole header.
  uint64_t needed() const { return needed_; }
  uint64_t estimate() const { return estimate_; }

  Expected<void> run(GgufFile& f) {
    f_ = &f;
    f.bytes_ = std::span<const std::byte>(base_, static_cast<size_t>(size_));
    f.file_size_ = file_size_;
    if (auto r = parse_header(f); !r) return r;
    if (auto r = parse_metadata(f); !r) return r;
    if (auto r = resolve_alignment(f); !r) return r;
    if (auto r = parse_tensor_infos(f); !r) return r;
    if (auto r = place_tensor_data(f); !r) return r;
    if (swap_) make_little_endian_header(f);
    if (prefix_) {
      // A header view: the bytes past the header are not kept, tensor data is not available.
      f.bytes_ = f.bytes_.first(static_cast<size_t>(std::min<uint64_t>(size_, f.header_size_)));
      f.header_only_ = true;
    }
    return {};
  }

 private:
  uint64_t remaining() const { return size_ - pos_; }
  bool keep_going() const { return static_cast<bool>(options_.on_problem); }

  // A problem after which the rest of the file can still be located: the error, unless the
  // caller's handler takes it and says to go on.
  Expected<void> recoverable(Error e) {
    if (!keep_going() || !options_.on_problem(e)) return e;
    return {};
  }

  // Big-endian files: every multi-byte field the parser meets is noted here (`count` fields of
  // `width` bytes from `offset`), so the header can be copied and swapped once it is validated.
  struct SwapRun {
    uint64_t offset;
    uint32_t width;
    uint64_t count;
  };
  void note_swap(uint64_t offset, uint32_t width, uint64_t count = 1) {
    if (swap_ && width > 1 && count > 0) swaps_.push_back(SwapRun{offset, width, count});
  }

  // The validated header region, swapped to little-endian; every view is moved onto it.
  void make_little_endian_header(GgufFile& f) {
    f.byte_order_ = ByteOrder::big;
    f.swapped_header_.assign(base_, base_ + f.header_size_);
    std::byte* copy = f.swapped_header_.data();
    for (const SwapRun& run : swaps_) format::byte_swap_run(copy + run.offset, run.width, run.count);
    const auto moved = [&](const void* p) { return copy + (static_cast<const std::byte*>(p) - base_); };
    for (KeyValue& kv : f.kvs_) {
      kv.key = std::string_view(reinterpret_cast<const char*>(moved(kv.key.data())), kv.key.size());
      const auto enc = kv.value.encoded();
      kv.value = ValueView(kv.value.type(), std::span<const std::byte>(moved(enc.data()), enc.size()));
    }
    for (TensorInfo& t : f.tensors_) {
      t.name = std::string_view(reinterpret_cast<const char*>(moved(t.name.data())), t.name.size());
    }
    swaps_.clear();
    swaps_.shrink_to_fit();
  }

  // The cold path of every bounds check. On a prefix whose file holds the record, it notes how far
  // the parser must read (needed_, estimate_) instead; the error it returns then only unwinds.
  Error truncated(uint64_t at, uint64_t need, std::string_view what, std::string subject = {}) {
    const auto end = checked::add(at, need);
    if (prefix_ && end && *end <= file_size_ && *end > size_) {
      note_needed(*end, subject);
      return make_error(ErrorCode::truncated, at, std::move(subject), "the prefix ends before the header");
    }
    return make_error(ErrorCode::truncated, at, std::move(subject),
                      fmt::format("{} needs {} bytes but the file ends after {} (file size {})", what, need,
                                  file_size_ - std::min(at, file_size_), file_size_));
  }

  // Where a string array's elements start and how far the walk got: set on the cold path before
  // `truncated`, for the estimate.
  struct ArrayProgress {
    uint64_t start = 0, done = 0, count = 0;
  };

  // The estimate of the whole header from what was parsed: the record that did not fit; the rest
  // of a string array at the average size of its last quarter seen and an eighth more (BPE vocabularies and merges
  // are sorted by rank, and later entries are longer); for a vocabulary still being read, its
  // token types (an int32 each) and, when the tokenizer has merges (gpt2, gemma4), about one merge
  // per token a byte longer than a token; the keys left at 64 bytes each; the tensor infos at the
  // average size seen (80 bytes before the first one).
  void note_needed(uint64_t end, const std::string& key) {
    needed_ = end;
    uint64_t est = end;
    if (array_.count > 0) {
      const uint64_t recent_from = array_.done - array_.done / 4;
      uint64_t at = array_.start, recent_at = array_.start;
      for (uint64_t i = 0; i < array_.done; ++i) {
        if (i == recent_from) recent_at = at;
        const uint64_t len = detail::load_u64(base_ + at);
        at += 8 + (swap_ ? format::byte_swap(len) : len);
      }
      const uint64_t recent = array_.done - recent_from;
      const uint64_t average = recent > 0 ? (at - recent_at) / recent : 16;
      // An eighth more for the rest: the longest entries come last.
      est = std::max(est, at + (array_.count - array_.done) * average * 9 / 8);
      if (key == kTokensKey && f_ != nullptr) {
        if (!seen(kTokenTypesKey)) est += 64 + array_.count * 4;
        if (merges_expected()) est += 64 + array_.count * (average + 1);
      }
    }
    if (in_tensors_) {
      const uint64_t average = tensors_done_ > 0 ? (pos_ - tensors_start_) / tensors_done_ : 80;
      est += (n_tensors_ - tensors_done_) * average;
    } else {
      if (n_kv_ > kvs_done_ + 1) est += (n_kv_ - kvs_done_ - 1) * 64;
      est += n_tensors_ * 80;
    }
    estimate_ = std::min(std::max(est, end), file_size_);
    array_ = {};
  }

  // The keys are in file order and not yet indexed while the metadata is parsed.
  bool merges_expected() const {
    if (seen(kMergesKey)) return false;
    for (const KeyValue& kv : f_->kvs_) {
      if (kv.key != kTokenizerModelKey) continue;
      const auto model = kv.value.as_string();
      return model == std::optional<std::string_view>("gpt2") || model == std::optional<std::string_view>("gemma4");
    }
    return false;
  }
  bool seen(std::string_view key) const {
    return std::any_of(f_->kvs_.begin(), f_->kvs_.end(), [&](const KeyValue& kv) { return kv.key == key; });
  }

  // Header pages are mapped ahead of the parser in growing batches: one madvise instead of a
  // page fault per 4 KiB (twice as fast on large vocabularies), and never the tensor data.
  // Batches grow from 1 MiB to 8 MiB, so at most 8 MiB past the header is mapped early.
  void prefetch_to(uint64_t end) {
    if (end <= prefetched_ || mapping_ == nullptr) return;
    constexpr uint64_t kMinBatch = uint64_t{1} << 20, kMaxBatch = uint64_t{8} << 20;
    if (end - prefetched_ > kMaxBatch) prefetched_ = end - kMinBatch;  // skip over a long value
    const uint64_t batch = std::max(end - prefetched_, std::clamp(prefetched_, kMinBatch, kMaxBatch));
    mapping_->prefetch(prefetched_, batch);
    prefetched_ += batch;
  }

  template <class T>
  T take() {  // caller has checked that sizeof(T) bytes remain
    prefetch_to(pos_ + sizeof(T));
    T v = detail::load<T>(base_ + pos_);
    if (swap_) {
      v = format::byte_swap(v);
      note_swap(pos_, sizeof(T));
    }
    pos_ += sizeof(T);
    return v;
  }

  template <class T>
  Expected<T> read(std::string_view what, const std::string& subject = {}) {
    if (remaining() < sizeof(T)) return truncated(pos_, sizeof(T), what, subject);
    return take<T>();
  }

  // A length-prefixed string; returns a view into the file.
  Expected<std::string_view> read_string(std::string_view what, const std::string& subject = {}) {
    const uint64_t at = pos_;
    auto len = read<uint64_t>(what, subject);
    if (!len) return std::move(len).error();
    if (*len > kMaxStringLength) {
      return make_error(ErrorCode::string_too_long, at, subject,
                        fmt::format("{} claims {} bytes, more than the {} byte limit", what, *len, kMaxStringLength));
    }
    if (*len > remaining()) return truncated(at + 8, *len, what, subject);
    prefetch_to(pos_ + *len);
    std::string_view s(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(*len));
    pos_ += *len;
    return s;
  }

  Expected<void> parse_header(GgufFile& f) {
    if (size_ < 4) return truncated(0, 4, "the GGUF magic");
    const std::string_view magic(reinterpret_cast<const char*>(base_), 4);
    if (magic != std::string_view(kGgufMagic, 4)) {
      return make_error(ErrorCode::bad_magic, 0, {},
                        fmt::format("not a GGUF file: starts with '{}', expected 'GGUF'", printable(magic)));
    }
    pos_ = 4;
    auto version = read<uint32_t>("the version");
    if (!version) return std::move(version).error();
    uint32_t v = *version;
    if (v == 0) return make_error(ErrorCode::unsupported_version, 4, {}, "GGUF version 0 does not exist");
    if ((v & 0xFFFFu) == 0) {
      // As llama.cpp and gguf-py decide: a version whose low half is zero is a byte-swapped one.
      const uint32_t swapped = format::byte_swap(v);
      if (swapped < 1 || swapped > kGgufVersionLatest) {
        return make_error(ErrorCode::unsupported_version, 4, {},
                          fmt::format("version {:#x} is not a GGUF version (byte-swapped or corrupt)", v));
      }
      // A big-endian file: from here on every integer is read swapped.
      swap_ = true;
      note_swap(4, 4);
      v = swapped;
    }
    if (v == 1) {
      return make_error(ErrorCode::unsupported_version, 4, {},
                        "GGUF v1 is no longer supported (llama.cpp refuses it too); re-convert the model");
    }
    if (v > kGgufVersionLatest) {
      return make_error(ErrorCode::unsupported_version, 4, {},
                        fmt::format("GGUF version {} is newer than the latest known version {}", v,
                                    kGgufVersionLatest));
    }
    f.version_ = v;
    if (size_ < kHeaderBytes) return truncated(8, 16, "the tensor and key/value counts");
    const auto n_tensors = take<int64_t>();
    const auto n_kv = take<int64_t>();
    if (auto r = check_count(n_tensors, kMinTensorInfoBytes, 8, "tensors"); !r) return r;
    if (auto r = check_count(n_kv, kMinKvBytes, 16, "metadata entries"); !r) return r;
    n_tensors_ = static_cast<uint64_t>(n_tensors);
    n_kv_ = static_cast<uint64_t>(n_kv);
    return {};
  }

  // A count must fit in the bytes that follow the header. A plausible count that does not fit is
  // most likely a cut-off download; a negative or absurd one is corruption.
  Expected<void> check_count(int64_t count, uint64_t min_record_bytes, uint64_t at, std::string_view what) {
    if (count < 0 || static_cast<uint64_t>(count) > kMaxHeaderCount) {
      return make_error(ErrorCode::bad_count, at, {},
                        fmt::format("the header announces {} {}, which is impossible", count, what));
    }
    if (static_cast<uint64_t>(count) > remaining() / min_record_bytes) {
      if (prefix_ && static_cast<uint64_t>(count) <= (file_size_ - pos_) / min_record_bytes) {
        return truncated(pos_, static_cast<uint64_t>(count) * min_record_bytes, what);
      }
      return make_error(ErrorCode::truncated, at, {},
                        fmt::format("the header announces {} {}, which need at least {} bytes, but the file ends "
                                    "{} bytes later (file size {}): is it truncated?",
                                    count, what, static_cast<uint64_t>(count) * min_record_bytes, file_size_ - pos_, file_size_));
    }
    return {};
  }

  // Validates the value at pos_ and moves past it.
  Expected<void> skip_value(ValueType type, uint32_t depth, const std::string& key) {
    const uint64_t at = pos_;
    if (is_fixed_size(type)) {
      const uint64_t n = value_type_size(type);
      if (remaining() < n) return truncated(at, n, fmt::format("a {} value", value_type_name(type)), key);
      note_swap(pos_, static_cast<uint32_t>(n));
      pos_ += n;
      return {};
    }
    if (type == ValueType::String) {
      auto s = read_string("a string value", key);
      if (!s) return std::move(s).error();
      return {};
    }
    // Array: element type, count, elements.
    if (remaining() < kArrayHeaderBytes) return truncated(at, kArrayHeaderBytes, "an array header", key);
    const uint32_t elem_id = take<uint32_t>();
    const uint64_t count = take<uint64_t>();
    if (elem_id >= kValueTypeIdLimit) {
      return make_error(ErrorCode::bad_value_type, at, key,
                        fmt::format("array element type {} is not a GGUF value type (0..12)", elem_id));
    }
    const auto elem = static_cast<ValueType>(elem_id);
    if (count > kMaxArrayElements) {
      return make_error(ErrorCode::array_too_long, at + 4, key,
                        fmt::format("array claims {} elements, more than the limit of {}", count, kMaxArrayElements));
    }
    if (is_fixed_size(elem)) {
      const auto bytes = checked::mul(count, value_type_size(elem));  // count <= 2^30: cannot overflow
      if (!bytes || *bytes > remaining()) {
        return truncated(at + kArrayHeaderBytes, bytes.value_or(std::numeric_limits<uint64_t>::max()),
                         fmt::format("an array of {} {} values", count, value_type_name(elem)), key);
      }
      note_swap(pos_, value_type_size(elem), count);
      pos_ += *bytes;
      return {};
    }
    if (elem == ValueType::String) {
      // Each string needs at least its 8-byte length: reject impossible counts before the loop.
      const uint64_t start = pos_;
      if (count > remaining() / 8) {
        array_ = {start, 0, count};
        return truncated(pos_, count * 8, fmt::format("an array of {} strings", count), key);
      }
      for (uint64_t i = 0; i < count; ++i) {
        if (remaining() < 8) {
          array_ = {start, i, count};
          return truncated(pos_, 8, fmt::format("string {} of the array", i), key);
        }
        prefetch_to(pos_ + 8);
        uint64_t len = detail::load_u64(base_ + pos_);
        if (swap_) {
          len = format::byte_swap(len);
          note_swap(pos_, 8);
        }
        if (len > kMaxStringLength) {
          return make_error(ErrorCode::string_too_long, pos_, key,
                            fmt::format("string {} of the array claims {} bytes, more than the {} byte limit", i,
                                        len, kMaxStringLength));
        }
        if (len > remaining() - 8) {
          array_ = {start, i, count};
          return truncated(pos_ + 8, len, fmt::format("string {} of the array", i), key);
        }
        pos_ += 8 + len;
        prefetch_to(pos_);
      }
      return {};
    }
    // Arrays of arrays.
    if (depth + 1 >= options_.max_array_depth) {
      return make_error(ErrorCode::array_too_deep, at, key,
                        fmt::format("arrays nested more than {} deep", options_.max_array_depth));
    }
    if (count > remaining() / kArrayHeaderBytes) {
      return truncated(pos_, count * kArrayHeaderBytes, fmt::format("an array of {} arrays", count), key);
    }
    for (uint64_t i = 0; i < count; ++i) {
      if (auto r = skip_value(ValueType::Array, depth + 1, key); !r) return r;
    }
    return {};
  }

  Expected<void> parse_metadata(GgufFile& f) {
    f.kvs_.reserve(static_cast<size_t>(n_kv_));  // bounded by the file size (checked in the header)
    for (uint64_t i = 0; i < n_kv_; ++i) {
      kvs_done_ = i;
      const uint64_t at = pos_;
      auto key = read_string(fmt::format("the key of key/value pair {}", i));
      if (!key) return std::move(key).error();
      if (key->empty()) {
        auto r = recoverable(make_error(ErrorCode::empty_key, at, {}, fmt::format("key/value pair {} has an empty key", i)));
        if (!r) return r;
      }
      const std::string key_name(*key);
      const uint64_t type_at = pos_;
      auto type_id = read<uint32_t>("the value type", key_name);
      if (!type_id) return std::move(type_id).error();
      if (*type_id >= kValueTypeIdLimit) {
        return make_error(ErrorCode::bad_value_type, type_at, key_name,
                          fmt::format("value type {} is not a GGUF value type (0..12)", *type_id));
      }
      const auto type = static_cast<ValueType>(*type_id);
      const uint64_t value_at = pos_;
      if (auto r = skip_value(type, 0, key_name); !r) return r;
      f.kvs_.push_back(KeyValue{
          *key, ValueView(type, std::span<const std::byte>(base_ + value_at, static_cast<size_t>(pos_ - value_at))),
          at});
    }
    f.kv_by_key_.resize(f.kvs_.size());
    std::iota(f.kv_by_key_.begin(), f.kv_by_key_.end(), size_t{0});
    std::stable_sort(f.kv_by_key_.begin(), f.kv_by_key_.end(),
                     [&](size_t a, size_t b) { return f.kvs_[a].key < f.kvs_[b].key; });
    for (size_t dup : duplicates(f.kv_by_key_, [&](size_t i) { return f.kvs_[i].key; })) {
      const KeyValue& kv = f.kvs_[dup];
      auto r = recoverable(make_error(ErrorCode::duplicate_key, kv.offset, std::string(kv.key),
                                      fmt::format("key/value pair {} repeats an earlier key", dup)));
      if (!r) return r;
    }
    return {};
  }

  // The entries (in file order) whose name an earlier entry already has. `sorted` is stably
  // sorted by name, so within a run of equal names the first is the original.
  template <class NameOf>
  static std::vector<size_t> duplicates(const std::vector<size_t>& sorted, NameOf name_of) {
    std::vector<size_t> found;
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (name_of(sorted[i]) == name_of(sorted[i - 1])) found.push_back(sorted[i]);
    }
    std::sort(found.begin(), found.end());
    return found;
  }

  static std::vector<size_t> duplicate_c_names(const std::vector<TensorInfo>& tensors) {
    const auto c_name = [&](size_t i) {
      const std::string_view n = tensors[i].name;
      return n.substr(0, n.find('\0'));
    };
    bool any_nul = false;
    for (const TensorInfo& t : tensors) any_nul |= t.name.find('\0') != std::string_view::npos;
    if (!any_nul) return {};
    std::vector<size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return c_name(a) < c_name(b); });
    // Names equal as written are reported already; only those equal up to a NUL are new.
    std::vector<size_t> found;
    for (size_t i = 1; i < order.size(); ++i) {
      if (c_name(order[i]) == c_name(order[i - 1]) && tensors[order[i]].name != tensors[order[i - 1]].name) {
        found.push_back(order[i]);
      }
    }
    std::sort(found.begin(), found.end());
    return found;
  }

  Expected<void> resolve_alignment(GgufFile& f) {
    const KeyValue* kv = f.find(keys::kAlignment);
    if (kv == nullptr) return {};
    if (kv->value.type() != ValueType::UInt32) {
      return recoverable(make_error(ErrorCode::bad_alignment, kv->offset, std::string(kv->key),
                        fmt::format("general.alignment must be a uint32, not {}", value_type_name(kv->value.type()))));
    }
    const uint32_t a = swap_ ? format::byte_swap(*kv->value.get<uint32_t>()) : *kv->value.get<uint32_t>();
    if (!checked::is_power_of_two(a)) {
      return recoverable(make_error(ErrorCode::bad_alignment, kv->offset, std::string(kv->key),
                                    fmt::format("alignment {} is not a power of two", a)));
    }
    f.alignment_ = a;
    return {};
  }

  Expected<void> parse_tensor_infos(GgufFile& f) {
    f.tensors_.reserve(static_cast<size_t>(n_tensors_));  // bounded by the file size
    in_tensors_ = true;
    tensors_start_ = pos_;
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      tensors_done_ = i;
      TensorInfo t;
      t.info_offset = pos_;
      auto name = read_string(fmt::format("the name of tensor {}", i));
      if (!name) return std::move(name).error();
      t.name = *name;
      const std::string subject(*name);
      if (name->size() > kMaxTensorNameBytes) {
        auto r = recoverable(make_error(ErrorCode::tensor_name_too_long, t.info_offset, subject,
                                        fmt::format("tensor name is {} bytes; llama.cpp allows at most {}",
                                                    name->size(), kMaxTensorNameBytes)));
        if (!r) return r;
      }
      bool bad_shape = false;  // only when collecting problems: the tensor gets shape [0]
      bool bad_size = false;   // only when collecting problems: the tensor gets size 0
      const uint64_t dims_at = pos_;
      auto n_dims = read<uint32_t>("the dimension count", subject);
      if (!n_dims) return std::move(n_dims).error();
      if (*n_dims > kMaxDimensions) {
        return make_error(ErrorCode::bad_dimension_count, dims_at, subject,
                          fmt::format("{} dimensions; at most {} are allowed", *n_dims, kMaxDimensions));
      }
      t.n_dims = *n_dims;
      for (uint32_t d = 0; d < t.n_dims; ++d) {
        const uint64_t ne_at = pos_;
        auto ne = read<int64_t>("a dimension", subject);
        if (!ne) return std::move(ne).error();
        if (*ne < 0) {
          auto r = recoverable(
              make_error(ErrorCode::bad_shape, ne_at, subject, fmt::format("dimension {} is negative ({})", d, *ne)));
          if (!r) return r;
          bad_shape = true;
          continue;
        }
        t.ne[d] = *ne;
      }
      if (!bad_shape) {
        if (auto r = check_shape(t, dims_at, subject); !r) {
          if (auto kept = recoverable(std::move(r).error()); !kept) return kept;
          bad_shape = true;
        }
      }
      if (bad_shape) t.ne = {0, 1, 1, 1};
      const uint64_t type_at = pos_;
      auto type_id = read<int32_t>("the tensor type", subject);
      if (!type_id) return std::move(type_id).error();
      const TypeTraits* traits = *type_id >= 0 ? find_type_traits(static_cast<uint32_t>(*type_id)) : nullptr;
      t.type = static_cast<TensorType>(static_cast<uint32_t>(*type_id));
      if (traits == nullptr) {
        auto r = recoverable(make_error(ErrorCode::unknown_tensor_type, type_at, subject,
                                        fmt::format("tensor type id {} is unknown (ggml defines 0..{})", *type_id,
                                                    kTensorTypeIdLimit - 1)));
        if (!r) return r;
        bad_size = true;
      } else if (traits->status == TypeStatus::removed) {
        auto r = recoverable(make_error(ErrorCode::removed_tensor_type, type_at, subject,
                                        fmt::format("tensor type id {} ({}) is no longer supported: {}", *type_id,
                                                    traits->name, traits->note)));
        if (!r) return r;
        bad_size = true;
      } else if (t.ne[0] % traits->block_size != 0) {
        auto r = recoverable(make_error(ErrorCode::block_size_mismatch, dims_at, subject,
                                        fmt::format("first dimension {} is not a multiple of {}'s block size {}",
                                                    t.ne[0], traits->name, traits->block_size)));
        if (!r) return r;
        bad_size = true;
      }
      if (!bad_size) {
        const auto blocks = static_cast<uint64_t>(t.n_elements()) / traits->block_size;
        const auto bytes = checked::mul(blocks, traits->block_bytes);
        if (!bytes || *bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          auto r = recoverable(
              make_error(ErrorCode::shape_overflow, dims_at, subject, "the tensor's size in bytes overflows"));
          if (!r) return r;
        } else {
          t.size = *bytes;
        }
      }
      auto offset = read<uint64_t>("the data offset", subject);
      if (!offset) return std::move(offset).error();
      t.offset = *offset;
      f.tensors_.push_back(t);
    }
    f.tensor_by_name_.resize(f.tensors_.size());
    std::iota(f.tensor_by_name_.begin(), f.tensor_by_name_.end(), size_t{0});
    std::stable_sort(f.tensor_by_name_.begin(), f.tensor_by_name_.end(),
                     [&](size_t a, size_t b) { return f.tensors_[a].name < f.tensors_[b].name; });
    for (size_t dup : duplicates(f.tensor_by_name_, [&](size_t i) { return f.tensors_[i].name; })) {
      const TensorInfo& t = f.tensors_[dup];
      auto r = recoverable(make_error(ErrorCode::duplicate_tensor, t.info_offset, std::string(t.name),
                                      fmt::format("tensor {} repeats an earlier tensor's name", dup)));
      if (!r) return r;
    }
    // llama.cpp keeps names as C strings: "a\0x" and "a\0y" are both "a" to it, so duplicates.
    for (size_t dup : duplicate_c_names(f.tensors_)) {
      const TensorInfo& t = f.tensors_[dup];
      auto r = recoverable(make_error(ErrorCode::duplicate_tensor, t.info_offset, std::string(t.name),
                                      fmt::format("tensor {} has the same name as an earlier one up to a NUL byte, "
                                                  "which llama.cpp treats as the end of a name", dup)));
      if (!r) return r;
    }
    f.header_size_ = pos_;
    return {};
  }

  // The element count must be representable: the same test as llama.cpp, which also keeps
  // zero-sized dimensions from being used as divisors.
  static Expected<void> check_shape(const TensorInfo& t, uint64_t at, const std::string& subject) {
    const auto& ne = t.ne;
    if (ne[0] == 0 || ne[1] == 0 || ne[2] == 0 || ne[3] == 0) return {};
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    if (kMax / ne[1] <= ne[0] || kMax / ne[2] <= ne[0] * ne[1] || kMax / ne[3] <= ne[0] * ne[1] * ne[2]) {
      return make_error(ErrorCode::shape_overflow, at, subject,
                        fmt::format("shape [{}, {}, {}, {}] has too many elements", ne[0], ne[1], ne[2], ne[3]));
    }
    return {};
  }

  Expected<void> place_tensor_data(GgufFile& f) {
    f.data_offset_ = f.header_size_;
    if (f.tensors_.empty()) return {};
    const auto data_offset = checked::align_up(f.header_size_, f.alignment_);
    // A metadata-only file: not a byte of tensor data, the file ending where the data would start
    // (llama.cpp's only_meta output). One cut before the padding llama.cpp refuses ("failed to seek
    // to beginning of data section"), and so does the branch below.
    const bool no_data = data_offset && file_size_ == *data_offset &&
                         std::any_of(f.tensors_.begin(), f.tensors_.end(), [](const TensorInfo& t) { return t.size > 0; });
    if (no_data && options_.allow_metadata_only) {
      f.metadata_only_ = true;
    } else if (no_data) {
      f.data_offset_ = *data_offset;  // the end of the file
      return recoverable(make_error(
          ErrorCode::data_out_of_bounds, f.header_size_, {},
          fmt::format("the file ends where the tensor data would start: it is metadata-only ({} tensor infos without "
                      "their data, as gguf_write_to_file writes with only_meta); this needs the tensors' data",
                      f.tensors_.size())));
    } else if (!data_offset || *data_offset > file_size_) {
      f.data_offset_ = file_size_;  // so that no tensor's data is inside the file
      return recoverable(make_error(ErrorCode::data_out_of_bounds, f.header_size_, {},
                                    fmt::format("the data section would start past the end of the file ({} bytes)",
                                                file_size_)));
    }
    f.data_offset_ = *data_offset;
    uint64_t expected = 0;
    for (const TensorInfo& t : f.tensors_) {
      const std::string subject(t.name);
      const uint64_t offset_field = t.info_offset + 8 + t.name.size() + 4 + 8 * uint64_t{t.n_dims} + 4;
      if (t.offset % f.alignment_ != 0) {
        auto r = recoverable(make_error(ErrorCode::bad_tensor_offset, offset_field, subject,
                                        fmt::format("data offset {} is not a multiple of the alignment {}", t.offset,
                                                    f.alignment_)));
        if (!r) return r;
      } else if (t.offset != expected) {
        const char* how = t.offset < expected ? "overlaps the previous tensor or is out of order"
                                              : "leaves a gap after the previous tensor";
        auto r = recoverable(make_error(ErrorCode::bad_tensor_offset, offset_field, subject,
                                        fmt::format("data offset {} {} (expected {})", t.offset, how, expected)));
        if (!r) return r;
      }
      const auto start = checked::add(f.data_offset_, t.offset);
      if (!f.metadata_only_ && (!start || !checked::fits(*start, t.size, file_size_))) {
        auto r = recoverable(make_error(ErrorCode::data_out_of_bounds, offset_field, subject,
                                        fmt::format("data [{}, +{}) runs past the end of the file ({} bytes)",
                                                    start.value_or(std::numeric_limits<uint64_t>::max()), t.size,
                                                    file_size_)));
        if (!r) return r;
      }
      // The next tensor is expected right after this one, wherever this one is: each tensor is
      // judged against its predecessor, so one misplaced tensor is reported once.
      const auto padded = checked::align_up(t.size, f.alignment_);
      const auto next = padded ? checked::add(t.offset, *padded) : std::nullopt;
      if (!next) {
        return make_error(ErrorCode::shape_overflow, offset_field, subject, "the data section size overflows");
      }
      expected = *next;
    }
    return {};
  }

  const std::byte* base_;
  uint64_t size_;       // the bytes in memory
  uint64_t file_size_;  // the whole file's size: size_ unless parsing a prefix
  bool prefix_;
  GgufFile* f_ = nullptr;
  uint64_t needed_ = 0, estimate_ = 0;
  ArrayProgress array_;
  bool in_tensors_ = false;
  uint64_t kvs_done_ = 0, tensors_done_ = 0, tensors_start_ = 0;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  OpenOptions options_;
  const MappedFile* mapping_;
  uint64_t prefetched_ = 0;
  bool swap_ = false;
  std::vector<SwapRun> swaps_;
};

Expected<GgufFile> GgufFile::parse(std::span<const std::byte> bytes, const OpenOptions& options,
                                   std::shared_ptr<const void> owner) {
  GgufFile f;
  Parser parser(bytes, options, nullptr);
  if (auto r = parser.run(f); !r) return std::move(r).error();
  f.owner_ = std::move(owner);
  return f;
}

Expected<GgufFile> GgufFile::open(const std::filesystem::path& path, const OpenOptions& options) {
  auto mapping = MappedFile::open(path);
  if (!mapping) return std::move(mapping).error();
  auto owned = std::make_unique<MappedFile>(std::move(mapping).value());
  GgufFile f;
  Parser parser(owned->bytes(), options, owned.get());
  if (auto r = parser.run(f); !r) return std::move(r).error();
  f.mapping_ = std::move(owned);
  f.path_ = path;
  return f;
}

Expected<PrefixParse> GgufFile::parse_prefix(std::span<const std::byte> prefix, uint64_t file_size,
                                             const OpenOptions& options, std::shared_ptr<const void> owner) {
  if (prefix.size() > file_size) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {},
                      fmt::format("a prefix of {} bytes of a file of {} bytes", prefix.size(), file_size));
  }
  GgufFile f;
  Parser parser(prefix, options, nullptr, file_size);
  if (auto r = parser.run(f); !r) {
    if (parser.needed() > prefix.size()) return PrefixParse{std::nullopt, parser.needed(), parser.estimate()};
    return std::move(r).error();
  }
  f.owner_ = std::move(owner);
  return PrefixParse{std::move(f), 0, 0};
}

int GgufFile::fd() const { return mapping_ ? mapping_->fd() : -1; }

bool GgufFile::header_padded() const {
  if (!tensors_.empty()) return true;
  const auto padded = checked::align_up(header_size_, alignment_);
  return padded && file_size() == *padded && file_size() != header_size_;
}

const KeyValue* GgufFile::find(std::string_view key) const {
  auto it = std::lower_bound(kv_by_key_.begin(), kv_by_key_.end(), key,
                             [&](size_t i, std::string_view k) { return kvs_[i].key < k; });
  return it != kv_by_key_.end() && kvs_[*it].key == key ? &kvs_[*it] : nullptr;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = std::lower_bound(tensor_by_name_.begin(), tensor_by_name_.end(), name,
                             [&](size_t i, std::string_view n) { return tensors_[i].name < n; });
  return it != tensor_by_name_.end() && tensors_[*it].name == name ? &tensors_[*it] : nullptr;
}

uint64_t GgufFile::tensor_bytes() const {
  uint64_t total = 0;
  for (const TensorInfo& t : tensors_) total += t.size;
  return total;
}

}  // namespace ggufkit
