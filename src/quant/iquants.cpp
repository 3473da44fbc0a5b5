// The IQ ("importance") formats: lattice codebooks (IQ1/IQ2/IQ3, dequantize only here; IQ3_S
// quantize lives in iq3s_quantize.cpp) and the 4-bit non-linear IQ4_NL and IQ4_XS (both ways).
// Codebook entries pack 8 (or 4) small magnitudes into one integer, byte j being element j.
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "format/blocks.h"
#include "quant/kernels.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace ggufkit::quant {
namespace {

constexpr int kSuperBlock = 256;  // QK_K
constexpr float kIq1Delta = 0.125f;  // IQ1S_DELTA / IQ1M_DELTA: the grid shift of IQ1_S and IQ1_M

uint8_t byte_at(const std::byte* p, int i) { return std::to_integer<uint8_t>(p[i]); }

uint16_t read_u16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

uint32_t read_u32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

float read_half(const std::byte* p) { return fp16_to_fp32(read_u16(p)); }

void write_half(std::byte* p, float f) {
  const uint16_t h = fp32_to_fp16(f);
  std::memcpy(p, &h, 2);
}

// Byte j of a packed codebook entry (ggml reads the entry's memory, little-endian).
template <class Entry>
uint8_t grid_byte(Entry entry, int j) {
  return static_cast<uint8_t>(entry >> (8 * j));
}

// scale * magnitude, negated when the sign bit is set. ggml multiplies by +-1.0f, which its
// compiler turns into a negation: a NaN scale comes out with its sign flipped, as here (a real
// multiplication would keep the NaN's sign).
// The negation flips the sign bit without a branch: the signs are random, a branch mispredicts.
float signed_product(float scale, uint8_t magnitude, bool negative) {
  const float product = scale * static_cast<float>(magnitude);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(product) ^ (static_cast<uint32_t>(negative) << 31));
}

// Eight codebook elements with their sign byte (bit j negates element j).
template <class Entry>
void decode_signed_octet(Entry entry, uint8_t signs, float scale, float* y) {
  for (int j = 0; j < 8; ++j) y[j] = signed_product(scale, grid_byte(entry, j), (signs & tables::kmask_iq2xs[j]) != 0);
}

// Two four-element entries (IQ3 grids) sharing one sign byte.
void decode_signed_quads(uint32_t first, uint32_t second, uint8_t signs, float scale, float* y) {
  for (int j = 0; j < 4; ++j) {
    y[j] = signed_product(scale, grid_byte(first, j), (signs & tables::kmask_iq2xs[j]) != 0);
    y[j + 4] = signed_product(scale, grid_byte(second, j), (signs & tables::kmask_iq2xs[j + 4]) != 0);
  }
}

// The 4-bit scales of the IQ2 formats: d * (0.5 + s) / 4, kept in ggml's operation order.
float iq2_scale(float d, unsigned s) { return d * (0.5f + static_cast<float>(s)) * 0.25f; }

// ---------------------------------------------------------------------------------------------
// IQ2_XXS: fp16 d, then per 32 elements 8 bytes: four grid indices and a 32-bit word holding
// four 7-bit sign indices and a 4-bit scale.
constexpr size_t kIq2xxsBlockBytes = sizeof(format::BlockIQ2XXS);

void dequantize_iq2_xxs(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kIq2xxsBlockBytes);
    const float d = read_half(block);
    float* y = dst + b * kSuperBlock;
    for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
      const std::byte* group = block + 2 + 8 * ib;
      const uint32_t signs_and_scale = read_u32(group + 4);
      const float db = iq2_scale(d, signs_and_scale >> 28);
      for (int l = 0; l < 4; ++l) {
        const uint8_t signs = tables::ksigns_iq2xs[(signs_and_scale >> (7 * l)) & 127];
        decode_signed_octet(tables::iq2xxs_grid[byte_at(group, l)], signs, db, y);
        y += 8;
      }
    }
  }
}

// IQ2_XS: fp16 d, 32 uint16 (9-bit grid index, 7-bit sign index), 8 bytes of two 4-bit scales.
constexpr size_t kIq2xsBlockBytes = sizeof(format::BlockIQ2XS);

void dequantize_iq2_xs(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kIq2xsBlockBytes);
    const float d = read_half(block);
    const std::byte* scales = block + 2 + 64;
    float* y = dst + b * kSuperBlock;
    for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
      const float db[2] = {iq2_scale(d, byte_at(scales, ib) & 0xFu), iq2_scale(d, byte_at(scales, ib) >> 4)};
      for (int l = 0; l < 4; ++l) {
        const uint16_t q = read_u16(block + 2 + 2 * (4 * ib + l));
        decode_signed_octet(tables::iq2xs_grid[q & 511], tables::ksigns_iq2xs[q >> 9], db[l / 2], y);
        y += 8;
      }
    }
  }
}

// IQ2_S: fp16 d, 32 low index bytes, 32 sign bytes, 8 bytes of 2-bit index tops, 8 scale bytes.
constexpr size_t kIq2sBlockBytes = sizeof(format::BlockIQ2S);

void dequantize_iq2_s(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kIq2sBlockBytes);
    const float d = read_half(block);
    const std::byte* low = block + 2;
    const std::byte* signs = low + 32;
    const std::byte* high = low + 64;
    const std::byte* scales = high + 8;
    float* y = dst + b * kSuperBlock;
    for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
      const float db[2] = {iq2_scale(d, byte_at(scales, ib) & 0xFu), iq2_scale(d, byte_at(scales, ib) >> 4)};
      for (int l = 0; l < 4; ++l) {
        const int index = byte_at(low, 4 * ib + l) | ((byte_at(high, ib) << (8 - 2 * l)) & 0x300);
        decode_signed_octet(tables::iq2s_grid[index], byte_at(signs, 4 * ib + l), db[l / 2], y);
        y += 8;
      }
    }
  }
}

// IQ3_XXS: fp16 d, 64 grid index bytes, then per 32 elements a word of four 7-bit sign indices
// and a 4-bit scale.
constexpr size_t kIq3xxsBlockBytes = sizeof(format::BlockIQ3XXS);

void dequantize_iq3_xxs(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kIq3xxsBlockBytes);
    const float d = read_half(block);
    const std::byte* indices = block + 2;
    const std::byte* signs_and_scales = indices + 64;
    float* y = dst + b * kSuperBlock;
    for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
      const uint32_t word = read_u32(signs_and_scales + 4 * ib);
      const float db = d * (0.5f + static_cast<float>(word >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l) {
        const uint8_t signs = tables::ksigns_iq2xs[(word >> (7 * l)) & 127];
        decode_signed_quads(tables::iq3xxs_grid[byte_at(indices, 8 * ib + 2 * l)],
                            tables::iq3xxs_grid[byte_at(indices, 8 * ib + 2 * l + 1)], signs, db, y);
        y += 8;
      }
    }
  }
}

// IQ3_S: fp16 d, 64 low index bytes, 8 bytes of index top bits, 32 sign bytes, 4 bytes of two
// 4-bit scales (one per 32 elements, odd multiples 1..31 of d).
constexpr size_t kIq3sBlockBytes = sizeof(format::BlockIQ3S);

void dequantize_iq3_s(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kIq3sBlockBytes);
    const float d = read_half(block);
    const std::byte* low = block + 2;
    const std::byte* high = low + 64;
    const std::byte* signs = high + 8;
    const std::byte* scales = signs + 32;
    float* y = dst + b * kSuperBlock;
    for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
      const uint8_t scale_byte = byte_at(scales, ib / 2);
      const int scale_bits = ib % 2 == 0 ? scale_byte & 0xF : scale_byte >> 4;
      const float db = d * static_cast<float>(1 + 2 * scale_bits);
      const int top = byte_at(high, ib);
      for (int l = 0; l < 4; ++l) {
        const int first = byte_at(low, 8 * ib + 2 * l) | ((top << (8 - 2 * l)) & 256);
        const int second = byte_at(low, 8 * ib + 2 * l + 1) | ((top << (7 - 2 * l)) & 256);
        decode_signed_quads(tables::iq3s_grid[first], tables::iq3s_grid[second], byte_at(signs, 4 * ib + l), db, y);
        y += 8;
      }
    }
  }
}

// Eight IQ1 grid elements (-1, 0, 1) shifted by +-delta, times the sub-block scale.
void decode_iq1_octet(uint64_t entry, float scale, float delta, float* y) {
  for (int j = 0; j < 8; ++j) {
    const auto element = static_cast<int8_t>(grid_byte(entry, j));
    y[j] = scale * (static_cast<float>(element) + delta);
  }
}

// IQ1_S: fp16 d, 32 low index bytes, 8 uint16: four 3-bit index tops, a 3-bit scale, the delta sign.
constexpr size_t kIq1sBlockBytes = sizeof(format::BlockIQ1S);

#if GGUFKIT_QUANT_X86
// decode_iq1_octet: the grid entry's eight bytes are its eight signed elements, first in the low byte.
GGUFKIT_TARGET_AVX2 void decode_iq1_octet_avx2(uint64_t entry, __m256 scale, __m256 delta, float* y) {
  const __m256 element = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(static_cast<long long>(entry))));
  _mm256_storeu_ps(y, _mm256_mul_ps(scale, _mm256_add_ps(element, delta)));
}

GGUFKIT_TARGET_AVX2 void dequantize_iq1_s_avx2(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kIq1sBlockBytes);
    const float d = read_half(block);
    const std::byte* low = block + 2;
    const std::byte* high = low + 32;
    float* y = dst + b * kSuperBlock;
    for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
      const uint16_t h = read_u16(high + 2 * ib);
      const __m256 dl = _mm256_set1_ps(d * static_cast<float>(2 * ((h >> 12) & 7) + 1));
      const __m256 delta = _mm256_set1_ps((h & 0x8000) != 0 ? -kIq1Delta : kIq1Delta);
      for (int l = 0; l < 4; ++l) {
        const int index = byte_at(low, 4 * ib + l) | (((h >> (3 * l)) & 7) << 8);
        decode_iq1_octet_avx2(tables::iq1s_grid[index], dl, delta, y);
        y += 8;
      }
    }
  }
}
#endif

void dequantize_iq1_s(const std::byte* src, float* dst, int64_t n) {
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) return dequantize_iq1_s_avx2(src, dst, n);
#endif
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kIq1sBlockBytes);
    const float d = read_half(block);
    const std::byte* low = block + 2;
    const std::byte* high = low + 32;
    float* y = dst + b * kSuperBlock;
    for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
      const uint16_t h = read_u16(high + 2 * ib);
      const float dl = d * static_cast<float>(2 * ((h >> 12) & 7) + 1);
      const float delta = (h & 0x8000) != 0 ? -kIq1Delta : kIq1Delta;
      for (int l = 0; l < 4; ++l) {
        const int index = byte_at(low, 4 * ib + l) | (((h >> (3 * l)) & 7) << 8);
        decode_iq1_octet(tables::iq1s_grid[index], dl, delta, y);
        y += 8;
      }
    }
  }
}

// IQ1_M: 32 low index bytes, 16 bytes of two (3-bit index top, delta sign) nibbles, 8 bytes of
// 3-bit scales whose top nibbles of the four uint16 together form the fp16 super-block scale.
constexpr size_t kIq1mBlockBytes = sizeof(format::BlockIQ1M);

#if GGUFKIT_QUANT_X86
GGUFKIT_TARGET_AVX2 void dequantize_iq1_m_avx2(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kIq1mBlockBytes);
    const std::byte* low = block;
    const std::byte* high = low + 32;
    uint16_t sc[4];
    for (int k = 0; k < 4; ++k) sc[k] = read_u16(high + 16 + 2 * k);
    const auto scale_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) |
                                                  (sc[3] & 0xF000));
    const float d = fp16_to_fp32(scale_bits);
    float* y = dst + b * kSuperBlock;
    for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
      const int shift = 6 * (ib % 2);
      const __m256 dl[2] = {_mm256_set1_ps(d * static_cast<float>(2 * ((sc[ib / 2] >> shift) & 7) + 1)),
                            _mm256_set1_ps(d * static_cast<float>(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1))};
      for (int l = 0; l < 4; ++l) {
        const uint8_t h = byte_at(high, 2 * ib + l / 2);
        const int nibble = l % 2 == 0 ? h & 0xF : h >> 4;
        const int index = byte_at(low, 4 * ib + l) | ((nibble & 7) << 8);
        // The sign of the shift set without a branch (the signs are random, a branch mispredicts).
        const uint32_t delta_bits = std::bit_cast<uint32_t>(kIq1Delta) | (static_cast<uint32_t>(nibble & 8) << 28);
        const __m256 delta = _mm256_set1_ps(std::bit_cast<float>(delta_bits));
        decode_iq1_octet_avx2(tables::iq1s_grid[index], dl[l / 2], delta, y);
        y += 8;
      }
    }
  }
}
#endif

void dequantize_iq1_m(const std::byte* src, float* dst, int64_t n) {
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) return dequantize_iq1_m_avx2(src, dst, n);
#endif
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kIq1mBlockBytes);
    const std::byte* low = block;
    const std::byte* high = low + 32;
    uint16_t sc[4];
    for (int k = 0; k < 4; ++k) sc[k] = read_u16(high + 16 + 2 * k);
    const auto scale_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) |
                                                  (sc[3] & 0xF000));
    const float d = fp16_to_fp32(scale_bits);
    float* y = dst + b * kSuperBlock;
    for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
      const int shift = 6 * (ib % 2);
      const float dl[2] = {d * static_cast<float>(2 * ((sc[ib / 2] >> shift) & 7) + 1),
                           d * static_cast<float>(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1)};
      for (int l = 0; l < 4; ++l) {
        const uint8_t h = byte_at(high, 2 * ib + l / 2);
        const int nibble = l % 2 == 0 ? h & 0xF : h >> 4;
        const int index = byte_at(low, 4 * ib + l) | ((nibble & 7) << 8);
        const float delta = (nibble & 8) != 0 ? -kIq1Delta : kIq1Delta;
        decode_iq1_octet(tables::iq1s_grid[index], dl[l / 2], delta, y);
        y += 8;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// IQ4_NL (fp16 d, 16 bytes of nibbles per 32 elements) and IQ4_XS (per 256: fp16 d, 16 bits of
// scale tops, 4 bytes of scale nibbles, 128 bytes of nibbles; 6-bit scales offset by 32). The
// nibbles index kvalues_iq4nl; element j of a 32-group is in the low nibble of byte j, element
// j + 16 in its high nibble.
constexpr int kIq4Group = 32;
constexpr size_t kIq4nlBlockBytes = sizeof(format::BlockIQ4NL);
constexpr size_t kIq4xsBlockBytes = sizeof(format::BlockIQ4XS);

void decode_iq4_group(const std::byte* qs, float scale, float* y) {
  for (int j = 0; j < 16; ++j) {
    const uint8_t q = byte_at(qs, j);
    y[j] = scale * static_cast<float>(tables::kvalues_iq4nl[q & 0xF]);
    y[j + 16] = scale * static_cast<float>(tables::kvalues_iq4nl[q >> 4]);
  }
}

void dequantize_iq4_nl(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kIq4Group; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kIq4nlBlockBytes);
    decode_iq4_group(block + 2, read_half(block), dst + b * kIq4Group);
  }
}

void dequantize_iq4_xs(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kIq4xsBlockBytes);
    const float d = read_half(block);
    const uint16_t scales_high = read_u16(block + 2);
    for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
      const int low = (byte_at(block + 4, ib / 2) >> (4 * (ib % 2))) & 0xF;
      const int scale = low | (((scales_high >> (2 * ib)) & 3) << 4);
      decode_iq4_group(block + 8 + 16 * ib, d * static_cast<float>(scale - 32), dst + b * kSuperBlock + 32 * ib);
    }
  }
}

// ggml's round to nearest: adding 1.5 * 2^23 rounds to an integer in the mantissa (ties to even);
// values beyond +-2^22 wrap instead of saturating, as in ggml.
int nearest_int(float value) {
  const float shifted = value + 12582912.0f;
  const auto bits = std::bit_cast<int32_t>(shifted);
  return (bits & 0x007FFFFF) - 0x00400000;
}

// nearest_iq4_index as a count: the index of x is the number of edges e[k] with x >= e[k], where
// e[k] is the smallest float in (v[k], v[k+1]] that the binary search's final comparison
// (x - v[k] < v[k+1] - x) sends up to k + 1. Both rounded differences move monotonically with x,
// so each edge is one float, within a few ulps of the midpoint; a tie (x on the midpoint) goes up,
// as in ggml. The comparisons are "not less than", which NaN passes every time: 15, as in ggml.
constexpr float step_ulp(float x, bool toward_plus_infinity) {  // x finite and nonzero
  const auto bits = std::bit_cast<uint32_t>(x);
  return std::bit_cast<float>((x > 0) == toward_plus_infinity ? bits + 1 : bits - 1);
}

constexpr float iq4_edge(int k) {
  const auto lower = static_cast<float>(tables::kvalues_iq4nl[k]);
  const auto upper = static_cast<float>(tables::kvalues_iq4nl[k + 1]);
  auto goes_up = [&](float x) { return !(x - lower < upper - x); };
  float x = (lower + upper) / 2;  // a half-integer, never zero for this table
  if (goes_up(x)) {
    while (goes_up(step_ulp(x, false))) x = step_ulp(x, false);
  } else {
    do x = step_ulp(x, true);
    while (!goes_up(x));
  }
  return x;
}

constexpr std::array<float, 15> kIq4Edges = [] {
  std::array<float, 15> edges{};
  for (int k = 0; k < 15; ++k) edges[k] = iq4_edge(k);
  return edges;
}();
static_assert(kIq4Edges[7] > -10.0f && kIq4Edges[7] <= 1.0f && kIq4Edges[0] > -127.0f && kIq4Edges[14] <= 113.0f);

// Index of the kvalues_iq4nl entry nearest to x, as ggml's binary search finds it (a tie goes to
// the larger entry; NaN ends on the last index): the number of edges at or below x.
int nearest_iq4_index(float x) {
  int index = 0;
  for (const float edge : kIq4Edges) index += !(x < edge) ? 1 : 0;
  return index;
}

// Sums of weight * q * x and weight * q^2 for x quantized with 1/scale `inverse_scale`.
struct WeightedSums {
  float qx = 0;
  float q2 = 0;
};

WeightedSums weighted_sums(const float* x, const float* weight, float inverse_scale) {
  WeightedSums s;
  for (int j = 0; j < kIq4Group; ++j) {
    const float q = static_cast<float>(tables::kvalues_iq4nl[nearest_iq4_index(inverse_scale * x[j])]);
    s.qx += weight[j] * q * x[j];
    s.q2 += weight[j] * q * q;
  }
  return s;
}

constexpr float kGroupMaxEps = 1e-15f;
constexpr int kScaleTries = 7;  // ggml_quantize_chunk's IQ4 callers search 2*7+1 scales

// The least-squares scale of one 32-group, searched over scales that put the signed maximum near
// each end of the table: zero for a (near) zero group.
float best_group_scale(const float* x, const float* weight) {
  float amax = 0, max = 0;
  for (int j = 0; j < kIq4Group; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0;
  const auto lowest = static_cast<float>(tables::kvalues_iq4nl[0]);
  const WeightedSums first = weighted_sums(x, weight, 1 / (-max / lowest));
  float d = first.q2 > 0 ? first.qx / first.q2 : 0.f;
  float best = d * first.qx;
  for (int itry = -kScaleTries; itry <= kScaleTries; ++itry) {
    const WeightedSums s = weighted_sums(x, weight, static_cast<float>(itry + tables::kvalues_iq4nl[0]) / max);
    if (s.q2 > 0 && s.qx * s.qx > best * s.q2) {
      d = s.qx / s.q2;
      best = d * s.qx;
    }
  }
  return d;
}

// Group weights: the importance matrix times sqrt(sigma2 + x^2) (sigma2 = twice the mean square
// of the super-block), or x^2 without one.
void group_weights(const float* x, const float* importance, float sigma2, float* weight) {
  for (int j = 0; j < kIq4Group; ++j) {
    weight[j] = importance != nullptr ? importance[j] * std::sqrt(sigma2 + x[j] * x[j]) : x[j] * x[j];
  }
}

float twice_mean_square(const float* x, int n) {
  float sigma2 = 0;
  for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
  return sigma2 * (2.f / static_cast<float>(n));
}

void encode_iq4_group(const float* x, float inverse_scale, std::byte* qs) {
  for (int j = 0; j < 16; ++j) {
    const int low = nearest_iq4_index(inverse_scale * x[j]);
    const int high = nearest_iq4_index(inverse_scale * x[j + 16]);
    qs[j] = std::byte(static_cast<uint8_t>(low | (high << 4)));
  }
}

constexpr float iq4_value(int k) { return static_cast<float>(tables::kvalues_iq4nl[k]); }
constexpr float kIq4Lowest = iq4_value(0);

// The 16 inverse scales best_group_scale tries, in its order: 1 / (-max / lowest), then
// (itry + lowest) / max for itry = -kScaleTries..kScaleTries.
void candidate_inverse_scales(float max, float* inverse_scales) {
  inverse_scales[0] = 1 / (-max / kIq4Lowest);
  for (int itry = -kScaleTries; itry <= kScaleTries; ++itry) {
    inverse_scales[itry + kScaleTries + 1] = static_cast<float>(itry + tables::kvalues_iq4nl[0]) / max;
  }
}
static_assert(2 * kScaleTries + 2 == 16, "the vector kernels hold the 16 candidate scales in 16 lanes");

// best_group_scale's choice among the candidates' sums, in its order (lane 0 is the first).
float choose_scale(const float* sum_qx, const float* sum_q2) {
  float d = sum_q2[0] > 0 ? sum_qx[0] / sum_q2[0] : 0.f;
  float best = d * sum_qx[0];
  for (int t = 1; t < 16; ++t) {
    if (sum_q2[t] > 0 && sum_qx[t] * sum_qx[t] > best * sum_q2[t]) {
      d = sum_qx[t] / sum_q2[t];
      best = d * sum_qx[t];
    }
  }
  return d;
}

// The per-group work of both quantizers, chosen once per call by instruction set: the weights and
// the best scale of a 32-group (importance null without an importance matrix), and the nibbles of
// a group for a given 1/scale.
struct Iq4GroupKernels {
  float (*best_scale)(const float* x, const float* importance, float sigma2);
  void (*encode)(const float* x, float inverse_scale, std::byte* qs);
};

float best_group_scale_portable(const float* x, const float* importance, float sigma2) {
  float weight[kIq4Group];
  group_weights(x, importance, sigma2, weight);
  return best_group_scale(x, weight);
}

#if GGUFKIT_QUANT_X86
// The vector kernels do, lane by lane, the scalar code's float operations in its order: the scale
// search puts the 16 candidate scales of one group in lanes (each lane sums its own candidate over
// j = 0..31), the weights, the maximum and the encoding work element by element.
namespace iq4_simd {

GGUFKIT_TARGET_AVX2 inline __m256 abs8(__m256 v) {
  return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)));
}

// Weights of a group (group_weights) and its signed maximum as the scalar scan finds it: NaN never
// raises the running maximum, the first value of largest magnitude wins. False for a (near) zero
// group.
GGUFKIT_TARGET_AVX2 inline bool group_weights_and_max(const float* x, const float* importance, float sigma2,
                                                      float* weight, float* max) {
  const __m256 zero = _mm256_setzero_ps();
  __m256 running = zero;
  __m256 magnitude[4];
  for (int k = 0; k < 4; ++k) {
    const __m256 v = _mm256_loadu_ps(x + 8 * k);
    const __m256 square = _mm256_mul_ps(v, v);
    const __m256 w = importance == nullptr
                         ? square
                         : _mm256_mul_ps(_mm256_loadu_ps(importance + 8 * k),
                                         _mm256_sqrt_ps(_mm256_add_ps(_mm256_set1_ps(sigma2), square)));
    _mm256_storeu_ps(weight + 8 * k, w);
    magnitude[k] = abs8(v);
    running = _mm256_max_ps(magnitude[k], running);  // max_ps returns its second operand for NaN
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(running), _mm256_extractf128_ps(running, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  const float amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
  if (amax < kGroupMaxEps) return false;
  const __m256 target = _mm256_set1_ps(amax);
  uint32_t at = 0;
  for (int k = 0; k < 4; ++k) {
    at |= static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(magnitude[k], target, _CMP_EQ_OQ))) << (8 * k);
  }
  *max = x[__builtin_ctz(at)];
  return true;
}

// The level index of 8 lanes as a binary search over the edges: index = 2 * half + (upper ? 1 : 0).
struct Search8 {
  __m256i half;
  __m256 upper;
};

GGUFKIT_TARGET_AVX2 inline Search8 search8(__m256 x) {
  constexpr const std::array<float, 15>& e = kIq4Edges;
  const __m256 ge8 = _mm256_cmp_ps(x, _mm256_set1_ps(e[7]), _CMP_NLT_UQ);
  __m256i half = _mm256_and_si256(_mm256_castps_si256(ge8), _mm256_set1_epi32(4));
  const __m256 edge4 = _mm256_permutevar8x32_ps(_mm256_setr_ps(e[3], 0, 0, 0, e[11], 0, 0, 0), half);
  const __m256 ge4 = _mm256_cmp_ps(x, edge4, _CMP_NLT_UQ);
  half = _mm256_add_epi32(half, _mm256_and_si256(_mm256_castps_si256(ge4), _mm256_set1_epi32(2)));
  const __m256 edge2 = _mm256_permutevar8x32_ps(_mm256_setr_ps(e[1], 0, e[5], 0, e[9], 0, e[13], 0), half);
  const __m256 ge2 = _mm256_cmp_ps(x, edge2, _CMP_NLT_UQ);
  half = _mm256_add_epi32(half, _mm256_and_si256(_mm256_castps_si256(ge2), _mm256_set1_epi32(1)));
  const __m256 edge1 =
      _mm256_permutevar8x32_ps(_mm256_setr_ps(e[0], e[2], e[4], e[6], e[8], e[10], e[12], e[14]), half);
  return {half, _mm256_cmp_ps(x, edge1, _CMP_NLT_UQ)};
}

GGUFKIT_TARGET_AVX2 inline __m256 level8(const Search8& s) {
  const __m256 even = _mm256_setr_ps(iq4_value(0), iq4_value(2), iq4_value(4), iq4_value(6), iq4_value(8),
                                     iq4_value(10), iq4_value(12), iq4_value(14));
  const __m256 odd = _mm256_setr_ps(iq4_value(1), iq4_value(3), iq4_value(5), iq4_value(7), iq4_value(9),
                                    iq4_value(11), iq4_value(13), iq4_value(15));
  return _mm256_blendv_ps(_mm256_permutevar8x32_ps(even, s.half), _mm256_permutevar8x32_ps(odd, s.half), s.upper);
}

GGUFKIT_TARGET_AVX2 inline __m256i index8(const Search8& s) {
  return _mm256_sub_epi32(_mm256_add_epi32(s.half, s.half), _mm256_castps_si256(s.upper));
}

GGUFKIT_TARGET_AVX2 float best_scale_avx2(const float* x, const float* importance, float sigma2) {
  alignas(32) float weight[kIq4Group];
  float max = 0;
  if (!group_weights_and_max(x, importance, sigma2, weight, &max)) return 0;
  alignas(32) float inverse_scales[16];
  candidate_inverse_scales(max, inverse_scales);
  const __m256 inverse_low = _mm256_load_ps(inverse_scales), inverse_high = _mm256_load_ps(inverse_scales + 8);
  __m256 qx_low = _mm256_setzero_ps(), q2_low = qx_low, qx_high = qx_low, q2_high = qx_low;
  for (int j = 0; j < kIq4Group; ++j) {
    const __m256 xj = _mm256_set1_ps(x[j]), wj = _mm256_set1_ps(weight[j]);
    const __m256 q_low = level8(search8(_mm256_mul_ps(inverse_low, xj)));
    const __m256 q_high = level8(search8(_mm256_mul_ps(inverse_high, xj)));
    const __m256 wq_low = _mm256_mul_ps(wj, q_low), wq_high = _mm256_mul_ps(wj, q_high);
    qx_low = _mm256_add_ps(qx_low, _mm256_mul_ps(wq_low, xj));
    q2_low = _mm256_add_ps(q2_low, _mm256_mul_ps(wq_low, q_low));
    qx_high = _mm256_add_ps(qx_high, _mm256_mul_ps(wq_high, xj));
    q2_high = _mm256_add_ps(q2_high, _mm256_mul_ps(wq_high, q_high));
  }
  alignas(32) float sum_qx[16], sum_q2[16];
  _mm256_store_ps(sum_qx, qx_low);
  _mm256_store_ps(sum_qx + 8, qx_high);
  _mm256_store_ps(sum_q2, q2_low);
  _mm256_store_ps(sum_q2 + 8, q2_high);
  return choose_scale(sum_qx, sum_q2);
}

// Element j's index in the low nibble of byte j, element j + 16's in its high nibble.
GGUFKIT_TARGET_AVX2 inline void store_nibbles(__m256i i0, __m256i i1, __m256i i2, __m256i i3, std::byte* qs) {
  const __m256i low = _mm256_or_si256(i0, _mm256_slli_epi32(i2, 4));
  const __m256i high = _mm256_or_si256(i1, _mm256_slli_epi32(i3, 4));
  const __m256i words = _mm256_permute4x64_epi64(_mm256_packus_epi32(low, high), 0xD8);
  const __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), bytes);
}

GGUFKIT_TARGET_AVX2 void encode_avx2(const float* x, float inverse_scale, std::byte* qs) {
  const __m256 inverse = _mm256_set1_ps(inverse_scale);
  __m256i index[4];
  for (int k = 0; k < 4; ++k) index[k] = index8(search8(_mm256_mul_ps(inverse, _mm256_loadu_ps(x + 8 * k))));
  store_nibbles(index[0], index[1], index[2], index[3], qs);
}

// AVX-512: the 16 candidates in one vector, the search through 16-entry permutes and mask adds.
// GCC 12's AVX-512 headers start some results from an "undefined" register and warn about it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
GGUFKIT_TARGET_AVX512 inline __m512i index16(__m512 x) {
  constexpr const std::array<float, 15>& e = kIq4Edges;
  // Step tables: entry i is the edge to test when the index found so far is i.
  const __m512 step4 = _mm512_setr_ps(e[3], 0, 0, 0, 0, 0, 0, 0, e[11], 0, 0, 0, 0, 0, 0, 0);
  const __m512 step2 = _mm512_setr_ps(e[1], 0, 0, 0, e[5], 0, 0, 0, e[9], 0, 0, 0, e[13], 0, 0, 0);
  const __m512 step1 = _mm512_setr_ps(e[0], 0, e[2], 0, e[4], 0, e[6], 0, e[8], 0, e[10], 0, e[12], 0, e[14], 0);
  __m512i index = _mm512_maskz_mov_epi32(_mm512_cmp_ps_mask(x, _mm512_set1_ps(e[7]), _CMP_NLT_UQ),
                                         _mm512_set1_epi32(8));
  index = _mm512_mask_add_epi32(index, _mm512_cmp_ps_mask(x, _mm512_permutexvar_ps(index, step4), _CMP_NLT_UQ),
                                index, _mm512_set1_epi32(4));
  index = _mm512_mask_add_epi32(index, _mm512_cmp_ps_mask(x, _mm512_permutexvar_ps(index, step2), _CMP_NLT_UQ),
                                index, _mm512_set1_epi32(2));
  index = _mm512_mask_add_epi32(index, _mm512_cmp_ps_mask(x, _mm512_permutexvar_ps(index, step1), _CMP_NLT_UQ),
                                index, _mm512_set1_epi32(1));
  return index;
}

GGUFKIT_TARGET_AVX512 float best_scale_avx512(const float* x, const float* importance, float sigma2) {
  alignas(32) float weight[kIq4Group];
  float max = 0;
  if (!group_weights_and_max(x, importance, sigma2, weight, &max)) return 0;
  alignas(64) float inverse_scales[16];
  candidate_inverse_scales(max, inverse_scales);
  const __m512 inverse = _mm512_load_ps(inverse_scales);
  const __m512 levels = _mm512_setr_ps(iq4_value(0), iq4_value(1), iq4_value(2), iq4_value(3), iq4_value(4),
                                       iq4_value(5), iq4_value(6), iq4_value(7), iq4_value(8), iq4_value(9),
                                       iq4_value(10), iq4_value(11), iq4_value(12), iq4_value(13), iq4_value(14),
                                       iq4_value(15));
  __m512 qx = _mm512_setzero_ps(), q2 = qx;
  for (int j = 0; j < kIq4Group; ++j) {
    const __m512 xj = _mm512_set1_ps(x[j]);
    const __m512 q = _mm512_permutexvar_ps(index16(_mm512_mul_ps(inverse, xj)), levels);
    const __m512 wq = _mm512_mul_ps(_mm512_set1_ps(weight[j]), q);
    qx = _mm512_add_ps(qx, _mm512_mul_ps(wq, xj));
    q2 = _mm512_add_ps(q2, _mm512_mul_ps(wq, q));
  }
  alignas(64) float sum_qx[16], sum_q2[16];
  _mm512_store_ps(sum_qx, qx);
  _mm512_store_ps(sum_q2, q2);
  return choose_scale(sum_qx, sum_q2);
}

GGUFKIT_TARGET_AVX512 void encode_avx512(const float* x, float inverse_scale, std::byte* qs) {
  const __m512 inverse = _mm512_set1_ps(inverse_scale);
  const __m512i low = index16(_mm512_mul_ps(inverse, _mm512_loadu_ps(x)));
  const __m512i high = index16(_mm512_mul_ps(inverse, _mm512_loadu_ps(x + 16)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtepi32_epi8(_mm512_or_si512(low, _mm512_slli_epi32(high, 4))));
}
#pragma GCC diagnostic pop

}  // namespace iq4_simd
#endif  // GGUFKIT_QUANT_X86

Iq4GroupKernels iq4_group_kernels() {
#if GGUFKIT_QUANT_X86
  if (simd::has_avx512()) return {iq4_simd::best_scale_avx512, iq4_simd::encode_avx512};
  if (simd::has_avx2()) return {iq4_simd::best_scale_avx2, iq4_simd::encode_avx2};
#endif
  return {best_group_scale_portable, encode_iq4_group};
}

void quantize_iq4_nl(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  const int64_t blocks_per_row = n_per_row / kIq4Group;
  const Iq4GroupKernels kernels = iq4_group_kernels();
  for (int64_t row = 0; row < nrows; ++row) {
    for (int64_t ib = 0; ib < blocks_per_row; ++ib) {
      const float* x = src + row * n_per_row + ib * kIq4Group;
      std::byte* block = dst + (row * blocks_per_row + ib) * static_cast<int64_t>(kIq4nlBlockBytes);
      const float* importance = imatrix != nullptr ? imatrix + ib * kIq4Group : nullptr;
      const float scale =
          kernels.best_scale(x, importance, importance != nullptr ? twice_mean_square(x, kIq4Group) : 0.0f);
      write_half(block, scale);
      kernels.encode(x, scale != 0.0f ? 1 / scale : 0, block + 2);
    }
  }
}

// IQ4_XS: each group's best scale is then quantized to 6 bits of d = -(largest-magnitude scale)/32,
// and the group requantized with its rounded scale.
void quantize_iq4_xs(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  constexpr int kGroups = kSuperBlock / 32;
  const int64_t blocks_per_row = n_per_row / kSuperBlock;
  const Iq4GroupKernels kernels = iq4_group_kernels();
  for (int64_t row = 0; row < nrows; ++row) {
    for (int64_t ibl = 0; ibl < blocks_per_row; ++ibl) {
      const float* x = src + row * n_per_row + ibl * kSuperBlock;
      std::byte* block = dst + (row * blocks_per_row + ibl) * static_cast<int64_t>(kIq4xsBlockBytes);
      const float* importance = imatrix != nullptr ? imatrix + ibl * kSuperBlock : nullptr;
      const float sigma2 = importance != nullptr ? twice_mean_square(x, kSuperBlock) : 0.0f;
      float scales[kGroups];
      float max_scale = 0, amax_scale = 0;
      for (int ib = 0; ib < kGroups; ++ib) {
        scales[ib] = kernels.best_scale(x + 32 * ib, importance != nullptr ? importance + 32 * ib : nullptr, sigma2);
        if (std::fabs(scales[ib]) > amax_scale) {
          amax_scale = std::fabs(scales[ib]);
          max_scale = scales[ib];
        }
      }
      const float d = -max_scale / 32;
      write_half(block, d);
      const float inverse_d = d != 0.0f ? 1 / d : 0.f;
      uint16_t scales_high = 0;
      uint8_t scales_low[kGroups / 2] = {};
      for (int ib = 0; ib < kGroups; ++ib) {
        int l = nearest_int(inverse_d * scales[ib]);
        l = l < -32 ? -32 : (l > 31 ? 31 : l);
        const float dl = d * static_cast<float>(l);
        kernels.encode(x + 32 * ib, dl != 0.0f ? 1 / dl : 0.f, block + 8 + 16 * ib);
        l += 32;
        scales_low[ib / 2] = static_cast<uint8_t>(scales_low[ib / 2] | ((l & 0xF) << (4 * (ib % 2))));
        scales_high = static_cast<uint16_t>(scales_high | ((l >> 4) << (2 * ib)));
      }
      std::memcpy(block + 2, &scales_high, 2);
      std::memcpy(block + 4, scales_low, sizeof scales_low);
    }
  }
}

}  // namespace

void register_iquant_kernels(KernelTable& table) {
  entry(table, TensorType::IQ4_NL) = {dequantize_iq4_nl, quantize_iq4_nl, true, false};
  entry(table, TensorType::IQ4_XS) = {dequantize_iq4_xs, quantize_iq4_xs, true, false};
  entry(table, TensorType::IQ2_XXS) = {dequantize_iq2_xxs, nullptr, false, false};
  entry(table, TensorType::IQ2_XS) = {dequantize_iq2_xs, nullptr, false, false};
  entry(table, TensorType::IQ2_S) = {dequantize_iq2_s, nullptr, false, false};
  entry(table, TensorType::IQ3_XXS) = {dequantize_iq3_xxs, nullptr, false, false};
  entry(table, TensorType::IQ3_S) = {dequantize_iq3_s, nullptr, false, false};
  entry(table, TensorType::IQ1_S) = {dequantize_iq1_s, nullptr, false, false};
  entry(table, TensorType::IQ1_M) = {dequantize_iq1_m, nullptr, false, false};
  // After the kernels: the blocks they were written for, checked against the type table and
  // against the quantizers' files.
  state_block<format::BlockIQ4NL>(table, TensorType::IQ4_NL);
  state_block<format::BlockIQ4XS>(table, TensorType::IQ4_XS);
  state_block<format::BlockIQ2XXS>(table, TensorType::IQ2_XXS);
  state_block<format::BlockIQ2XS>(table, TensorType::IQ2_XS);
  state_block<format::BlockIQ2S>(table, TensorType::IQ2_S);
  state_block<format::BlockIQ3XXS>(table, TensorType::IQ3_XXS);
  state_block<format::BlockIQ3S>(table, TensorType::IQ3_S);
  state_block<format::BlockIQ1S>(table, TensorType::IQ1_S);
  state_block<format::BlockIQ1M>(table, TensorType::IQ1_M);
}

}  // namespace ggufkit::quant
