// The one place size arithmetic on untrusted numbers happens: every sum, product and alignment
// of a length, count or offset read from a file goes through these, and overflow is a value.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

namespace ggufkit::checked {

inline std::optional<uint64_t> add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Rounds v up to a multiple of alignment (a power of two, not zero).
inline std::optional<uint64_t> align_up(uint64_t v, uint64_t alignment) {
  const auto r = add(v, alignment - 1);
  if (!r) return std::nullopt;
  return *r & ~(alignment - 1);
}

inline bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Whether [offset, offset + length) lies inside a buffer of `size` bytes.
inline bool fits(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

}  // namespace ggufkit::checked
