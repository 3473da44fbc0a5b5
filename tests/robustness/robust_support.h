// Test-side helpers of the robustness tests: an independent map of a GGUF file's fields and
// regions, a buffer whose tail ASan treats as freed, and the slowest-parse clock.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exercise.h"

namespace ggufkit::robust {

// ---- An independent walk over a valid file ----
//
// Written from the GGUF layout, not from the reader, so that the tests can say where a cut or a
// flipped bit lands without asking the code under test.

enum class FieldKind : uint8_t {
  version, tensor_count, kv_count,
  key_length, value_type, string_length, array_element_type, array_count, scalar,
  name_length, n_dims, dimension, tensor_type, tensor_offset,
};

struct Field {
  uint64_t offset;
  uint32_t width;   // 1, 2, 4 or 8 bytes
  FieldKind kind;
};

struct GgufLayout {
  uint64_t n_tensors = 0;
  uint64_t n_kv = 0;
  uint64_t metadata_end = 0;       // where the tensor infos start
  uint64_t tensor_infos_end = 0;   // the header's end, before padding
  uint64_t data_offset = 0;
  uint64_t min_file_size = 0;      // the end of the last tensor's bytes (the header's end without tensors)
  uint32_t alignment = 32;
  std::vector<Field> fields;       // every length, count, type id, shape, offset and scalar, in file order
};

class LayoutWalker {
 public:
  explicit LayoutWalker(std::span<const std::byte> b) : b_(b) {}

  std::optional<GgufLayout> walk() {
    GgufLayout l;
    if (b_.size() < 24 || std::memcmp(b_.data(), "GGUF", 4) != 0) return std::nullopt;
    pos_ = 4;
    field(l, 4, FieldKind::version);
    l.n_tensors = field(l, 8, FieldKind::tensor_count);
    l.n_kv = field(l, 8, FieldKind::kv_count);
    for (uint64_t i = 0; i < l.n_kv && ok_; ++i) {
      const uint64_t key_len = field(l, 8, FieldKind::key_length);
      const std::string key = text(key_len);
      const uint64_t type = field(l, 4, FieldKind::value_type);
      if (key == "general.alignment" && type == 4 && need(4)) l.alignment = static_cast<uint32_t>(peek(4));
      value(l, type, 0);
    }
    l.metadata_end = pos_;
    for (uint64_t i = 0; i < l.n_tensors && ok_; ++i) {
      skip(field(l, 8, FieldKind::name_length));
      const uint64_t n_dims = field(l, 4, FieldKind::n_dims);
      for (uint64_t d = 0; d < n_dims && d < 4; ++d) field(l, 8, FieldKind::dimension);
      field(l, 4, FieldKind::tensor_type);
      field(l, 8, FieldKind::tensor_offset);
    }
    l.tensor_infos_end = pos_;
    if (!ok_ || l.alignment == 0) return std::nullopt;
    l.data_offset = l.n_tensors == 0 ? pos_ : (pos_ + l.alignment - 1) / l.alignment * l.alignment;
    l.min_file_size = l.data_offset;
    return l;
  }

 private:
  bool need(uint64_t n) {
    ok_ = ok_ && n <= b_.size() - pos_;
    return ok_;
  }
  uint64_t peek(uint32_t width) const {
    uint64_t v = 0;
    for (uint32_t i = 0; i < width; ++i) v |= static_cast<uint64_t>(b_[static_cast<size_t>(pos_) + i]) << (8 * i);
    return v;
  }
  uint64_t field(GgufLayout& l, uint32_t width, FieldKind kind) {
    if (!need(width)) return 0;
    const uint64_t v = peek(width);
    l.fields.push_back(Field{pos_, width, kind});
    pos_ += width;
    return v;
  }
  void skip(uint64_t n) {
    if (need(n)) pos_ += n;
  }
  std::string text(uint64_t n) {
    if (!need(n)) return {};
    std::string s(reinterpret_cast<const char*>(b_.data()) + pos_, static_cast<size_t>(n));
    pos_ += n;
    return s;
  }
  void value(GgufLayout& l, uint64_t type, int depth) {
    static constexpr uint32_t kSizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (!ok_ || type > 12 || depth > 8) {
      ok_ = false;
      return;
    }
    if (type == 8) {
      skip(field(l, 8, FieldKind::string_length));
    } else if (type == 9) {
      const uint64_t elem = field(l, 4, FieldKind::array_element_type);
      const uint64_t count = field(l, 8, FieldKind::array_count);
      if (elem <= 12 && kSizes[elem] != 0) {
        // Fixed-size elements: record the first few as scalars, skip the rest.
        for (uint64_t i = 0; i < count && i < 4 && ok_; ++i) field(l, kSizes[elem], FieldKind::scalar);
        if (count > 4) skip((count - 4) * kSizes[elem]);
      } else {
        for (uint64_t i = 0; i < count && ok_; ++i) value(l, elem, depth + 1);
      }
    } else {
      field(l, kSizes[type], FieldKind::scalar);
    }
  }

  std::span<const std::byte> b_;
  uint64_t pos_ = 0;
  bool ok_ = true;
};

// The layout of a file the reader accepts; the end of its last tensor comes from the reader's
// tensor sizes (the walker does not compute sizes of quantized types).
inline std::optional<GgufLayout> layout_of(std::span<const std::byte> bytes, const GgufFile& parsed) {
  auto l = LayoutWalker(bytes).walk();
  if (!l) return l;
  for (const TensorInfo& t : parsed.tensors()) {
    l->min_file_size = std::max(l->min_file_size, l->data_offset + t.offset + t.size);
  }
  return l;
}

// ---- A buffer that shrinks from the end ----
//
// Holds a whole file; shrink_to(n) makes the bytes from n on unreadable to ASan (poisoned), so a
// parse of the first n bytes that reads one byte too far is reported exactly as a read past the
// end of an n-byte allocation would be, without copying the prefix for every cut. Cuts must come
// in decreasing order. Without ASan it is a plain buffer.
class ShrinkingBuffer {
 public:
  explicit ShrinkingBuffer(std::span<const std::byte> whole)
      : data_(new std::byte[whole.size()]), size_(whole.size()), visible_(whole.size()) {
    if (!whole.empty()) std::memcpy(data_.get(), whole.data(), whole.size());
  }
  ShrinkingBuffer(const ShrinkingBuffer&) = delete;
  ShrinkingBuffer& operator=(const ShrinkingBuffer&) = delete;
  ~ShrinkingBuffer() {
#if defined(GGUFKIT_ROBUST_ASAN)
    ASAN_UNPOISON_MEMORY_REGION(data_.get(), size_);
#endif
  }

  std::span<const std::byte> shrink_to(size_t n) {
    n = std::min(n, visible_);
#if defined(GGUFKIT_ROBUST_ASAN)
    // Everything past visible_ is already poisoned, so ASan can poison [n, visible_) exactly.
    if (n < visible_) ASAN_POISON_MEMORY_REGION(data_.get() + n, visible_ - n);
#endif
    visible_ = n;
    return {data_.get(), n};
  }

 private:
  std::unique_ptr<std::byte[]> data_;
  size_t size_;
  size_t visible_;
};

// ---- How much each test does ----
//
// The release build runs everything the tests promise. The sanitizer build (Debug, -O0, ASan and
// UBSan) runs the library 20 to 40 times slower, so it takes an evenly spread sample of the same
// cuts and damaged copies, keeping every cut at a record boundary: the release run finds wrong
// answers, the sanitizer run finds bad reads, and a bad read at one cut in a region shows up at
// its neighbours too.
struct Budget {
  uint64_t sample_data_cut_stride;  // cuts in the sample's tensor data: every Nth byte
  uint64_t corpus_leading_bytes;    // every byte of the first N bytes of a corpus file...
  uint64_t corpus_leading_stride;   // ...then every Nth byte up to 64 KiB
  uint64_t corpus_tail_bytes;       // every byte of the header's last N bytes...
  uint64_t corpus_tail_parse_bytes; // ...but no more cuts there than N bytes of parsing allow
  uint64_t corpus_spread_cuts;      // cuts spread evenly over the whole file
  int sample_bit_flips;             // damaged copies of the sample
  int sample_overwrites;
  uint64_t sample_field_stride;     // sample fields overwritten with boundary values: every Nth
  int corpus_mutations;             // damaged copies of each corpus target, per kind of damage
};

#if defined(GGUFKIT_ROBUST_ASAN)
inline constexpr bool kSanitized = true;
inline constexpr Budget kBudget{29, 8192, 53, 384, uint64_t{320} << 20, 250, 2000, 500, 3, 70};
#else
inline constexpr bool kSanitized = false;
inline constexpr Budget kBudget{1, 65536, 1, 4096, uint64_t{2} << 30, 2000, 20000, 5000, 1, 1000};
#endif

// ---- The hang guard ----

class SlowestClock {
 public:
  template <class F>
  auto time(F&& f) {
    const auto start = std::chrono::steady_clock::now();
    auto result = f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    slowest_ = std::max(slowest_, s);
    ++count_;
    return result;
  }
  double slowest_seconds() const { return slowest_; }
  uint64_t count() const { return count_; }

 private:
  double slowest_ = 0.0;
  uint64_t count_ = 0;
};

// Generous: the slowest parse of these inputs takes milliseconds even under ASan; anything near
// this bound is a quadratic blow-up or a loop that runs on far past the bytes.
inline constexpr double kSlowestParseSeconds = 2.0;

}  // namespace ggufkit::robust
