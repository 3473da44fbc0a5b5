#include "hash/xxh64.h"

#include <bit>
#include <cstring>

namespace ggufkit::digest {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kP3 = 0x165667B19E3779F9ull;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ull;

// Little-endian loads: the digest is defined on bytes, whatever the host.
uint64_t load64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint64_t load32(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint64_t round(uint64_t acc, uint64_t input) { return std::rotl(acc + input * kP2, 31) * kP1; }
uint64_t merge(uint64_t h, uint64_t lane) { return (h ^ round(0, lane)) * kP1 + kP4; }

}  // namespace

uint64_t xxh64(std::span<const std::byte> data, uint64_t seed) {
  const std::byte* p = data.data();
  const size_t n = data.size();
  size_t i = 0;
  uint64_t h;
  if (n >= 32) {
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    for (; i + 32 <= n; i += 32) {
      v1 = round(v1, load64(p + i));
      v2 = round(v2, load64(p + i + 8));
      v3 = round(v3, load64(p + i + 16));
      v4 = round(v4, load64(p + i + 24));
    }
    h = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
    h = merge(merge(merge(merge(h, v1), v2), v3), v4);
  } else {
    h = seed + kP5;
  }
  h += static_cast<uint64_t>(n);
  for (; i + 8 <= n; i += 8) h = std::rotl(h ^ round(0, load64(p + i)), 27) * kP1 + kP4;
  if (i + 4 <= n) {
    h = std::rotl(h ^ (load32(p + i) * kP1), 23) * kP2 + kP3;
    i += 4;
  }
  for (; i < n; ++i) h = std::rotl(h ^ (static_cast<uint8_t>(p[i]) * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

}  // namespace ggufkit::digest
