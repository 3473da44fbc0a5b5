// The legacy block formats: one fp16 scale (and for the _1 types an fp16 min) per block of 32
// (q1_0: 128, q2_0: 64) values. Without an importance matrix ggml rounds against the block's
// extreme value; with one, q4_0/q4_1/q5_0/q5_1 search the scale with make_qx_quants or
// make_qkx3_quants instead. The no-imatrix encoders have AVX2 versions (chosen at registration by
// simd::isa()) that give the scalar code's bytes.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "format/blocks.h"
#include "quant/kernels.h"
#include "quant/search.h"
#include "quant/simd.h"

namespace ggufkit::quant {
namespace {

// The block structs (format/blocks.h).
using format::BlockQ1_0;
using format::BlockQ2_0;
using format::BlockQ4_0;
using format::BlockQ4_1;
using format::BlockQ5_0;
using format::BlockQ5_1;
using format::BlockQ8_0;
using format::BlockQ8_1;

float half(uint16_t h) { return fp16_to_fp32(h); }
uint16_t to_half(float f) { return fp32_to_fp16(f); }

// ggml's reference quantizers cast floats to (u)int8 directly. Its x86 build converts to int32
// with truncation (NaN and out-of-range values give INT32_MIN) and keeps the low byte; we do the
// same without the undefined behaviour.
int32_t truncate_to_int32(float f) {
  if (!(f >= -2147483648.0f && f < 2147483648.0f)) return INT32_MIN;
  return static_cast<int32_t>(f);
}
int8_t truncate_to_int8(float f) { return static_cast<int8_t>(static_cast<uint8_t>(truncate_to_int32(f) & 0xFF)); }
uint8_t truncate_to_uint8(float f) { return static_cast<uint8_t>(truncate_to_int32(f) & 0xFF); }

// The value of largest magnitude in the block (the first one on ties), 0 for an all-zero block.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

struct MinMax {
  float min = FLT_MAX;
  float max = -FLT_MAX;
};
MinMax min_max(const float* x, int n) {
  MinMax r;
  for (int j = 0; j < n; ++j) {
    if (x[j] < r.min) r.min = x[j];
    if (x[j] > r.max) r.max = x[j];
  }
  return r;
}

uint8_t pack_nibbles(int low, int high) { return static_cast<uint8_t>(low | (high << 4)); }

// Splits 5-bit levels (element j and j+16 of a block) into the nibbles and the qh bit mask.
template <class Block, class Level>
void pack_5bit(const Level* levels, Block& b) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const auto l0 = static_cast<uint8_t>(levels[j]);
    const auto l1 = static_cast<uint8_t>(levels[j + 16]);
    b.qs[j] = pack_nibbles(l0 & 0x0F, l1 & 0x0F);
    qh |= ((l0 & 0x10u) >> 4) << j;
    qh |= ((l1 & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(b.qh, &qh, sizeof qh);
}

// The 5-bit level of element j (and of j + 16 through `high`).
template <class Block>
int level_5bit(const Block& b, uint32_t qh, int j, bool high) {
  const int nibble = high ? b.qs[j] >> 4 : b.qs[j] & 0x0F;
  const int bit = static_cast<int>((qh >> (j + (high ? 16 : 0))) & 1u);
  return nibble | (bit << 4);
}

// ---- dequantize, AVX2 (same operations per value as the scalar kernels below)

#if GGUFKIT_QUANT_X86
// Runs decode(block, y) on each block with AVX2 enabled.
// The block is read in place (a copy to the stack costs more than the decoding).
template <class Block, void (*Decode)(const std::byte*, float*)>
GGUFKIT_TARGET_AVX2 void decode_blocks_avx2(const std::byte* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / Block::kElements; ++i) {
    Decode(src + i * static_cast<int64_t>(sizeof(Block)), dst + i * Block::kElements);
  }
}

// Field addresses and fp16 fields of a block at `block`.
#define GGUFKIT_FIELD(Block, field) (block + offsetof(Block, field))
float half_at(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return half(h);
}

GGUFKIT_TARGET_AVX2 void decode_q4_0_avx2(const std::byte* block, float* y) {
  using B = BlockQ4_0;
  const __m256 d = _mm256_set1_ps(half_at(GGUFKIT_FIELD(B, d)));
  const __m128i qs = simd::load16(GGUFKIT_FIELD(B, qs));
  const __m128i eight = _mm_set1_epi8(8);
  simd::store16_q_times_d(_mm_sub_epi8(simd::low_nibbles(qs), eight), d, y);
  simd::store16_q_times_d(_mm_sub_epi8(simd::high_nibbles(qs), eight), d, y + 16);
}

GGUFKIT_TARGET_AVX2 void decode_q4_1_avx2(const std::byte* block, float* y) {
  using B = BlockQ4_1;
  const __m256 d = _mm256_set1_ps(half_at(GGUFKIT_FIELD(B, d))), m = _mm256_set1_ps(half_at(GGUFKIT_FIELD(B, m)));
  const __m128i qs = simd::load16(GGUFKIT_FIELD(B, qs));
  simd::store16_q_times_d_plus_m(simd::low_nibbles(qs), d, m, y);
  simd::store16_q_times_d_plus_m(simd::high_nibbles(qs), d, m, y + 16);
}

// The 32 five-bit levels of a q5 block as bytes: nibbles of qs (elements 0-15 low, 16-31 high)
// plus 16 where the qh bit is set.
template <class B>
GGUFKIT_TARGET_AVX2 __m256i levels_5bit(const std::byte* block) {
  uint32_t qh;
  std::memcpy(&qh, GGUFKIT_FIELD(B, qh), sizeof qh);
  const __m128i qs = simd::load16(GGUFKIT_FIELD(B, qs));
  const __m256i nibbles = _mm256_set_m128i(simd::high_nibbles(qs), simd::low_nibbles(qs));
  return _mm256_or_si256(nibbles, _mm256_and_si256(simd::bits_to_byte_mask(qh), _mm256_set1_epi8(16)));
}

GGUFKIT_TARGET_AVX2 void decode_q5_0_avx2(const std::byte* block, float* y) {
  using B = BlockQ5_0;
  const __m256 d = _mm256_set1_ps(half_at(GGUFKIT_FIELD(B, d)));
  const __m256i q = _mm256_sub_epi8(levels_5bit<B>(block), _mm256_set1_epi8(16));
  simd::store16_q_times_d(simd::low_half(q), d, y);
  simd::store16_q_times_d(simd::high_half(q), d, y + 16);
}

GGUFKIT_TARGET_AVX2 void decode_q5_1_avx2(const std::byte* block, float* y) {
  using B = BlockQ5_1;
  const __m256 d = _mm256_set1_ps(half_at(GGUFKIT_FIELD(B, d))), m = _mm256_set1_ps(half_at(GGUFKIT_FIELD(B, m)));
  const __m256i q = levels_5bit<B>(block);
  simd::store16_q_times_d_plus_m(simd::low_half(q), d, m, y);
  simd::store16_q_times_d_plus_m(simd::high_half(q), d, m, y + 16);
}

GGUFKIT_TARGET_AVX2 void decode_q8_0_avx2(const std::byte* block, float* y) {
  using B = BlockQ8_0;
  const __m256 d = _mm256_set1_ps(half_at(GGUFKIT_FIELD(B, d)));
  for (int k = 0; k < 32; k += 8) simd::store8_q_times_d(GGUFKIT_FIELD(B, qs) + k, d, y + k);
}

GGUFKIT_TARGET_AVX2 void decode_q8_1_avx2(const std::byte* block, float* y) {
  using B = BlockQ8_1;
  const __m256 d = _mm256_set1_ps(half_at(GGUFKIT_FIELD(B, d)));
  for (int k = 0; k < 32; k += 8) simd::store8_q_times_d(GGUFKIT_FIELD(B, qs) + k, d, y + k);
}

GGUFKIT_TARGET_AVX2 void decode_q1_0_avx2(const std::byte* block, float* y) {
  using B = BlockQ1_0;
  const float dd = half_at(GGUFKIT_FIELD(B, d));
  const __m256 d = _mm256_set1_ps(dd), neg_d = _mm256_set1_ps(-dd);
  for (int k = 0; k < 4; ++k) {
    uint32_t bits;
    std::memcpy(&bits, GGUFKIT_FIELD(B, qs) + 4 * k, sizeof bits);
    const __m256i set = simd::bits_to_byte_mask(bits);  // byte j: element 32k + j is +d
    for (int part = 0; part < 4; ++part) {
      const __m128i bytes = part < 2 ? simd::low_half(set) : simd::high_half(set);
      const __m256i lanes = _mm256_cvtepi8_epi32(part % 2 == 0 ? bytes : _mm_srli_si128(bytes, 8));
      _mm256_storeu_ps(y + 32 * k + 8 * part, _mm256_blendv_ps(neg_d, d, _mm256_castsi256_ps(lanes)));
    }
  }
}

GGUFKIT_TARGET_AVX2 void decode_q2_0_avx2(const std::byte* block, float* y) {
  using B = BlockQ2_0;
  const __m256 d = _mm256_set1_ps(half_at(GGUFKIT_FIELD(B, d)));
  // Element j at bits 2*(j%4) of qs[j/4]: spread each byte's four codes over four lanes.
  const __m128i qs = simd::load16(GGUFKIT_FIELD(B, qs));
  const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  for (int k = 0; k < 8; ++k) {
    const __m256i bytes = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(
        qs, _mm_setr_epi8(static_cast<char>(2 * k), static_cast<char>(2 * k), static_cast<char>(2 * k),
                          static_cast<char>(2 * k), static_cast<char>(2 * k + 1), static_cast<char>(2 * k + 1),
                          static_cast<char>(2 * k + 1), static_cast<char>(2 * k + 1), 0, 0, 0, 0, 0, 0, 0, 0)));
    const __m256i code = _mm256_and_si256(_mm256_srlv_epi32(bytes, shifts), _mm256_set1_epi32(3));
    const __m256 level = _mm256_cvtepi32_ps(_mm256_sub_epi32(code, _mm256_set1_epi32(1)));
    _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(level, d));
  }
}

#undef GGUFKIT_FIELD

#define GGUFKIT_DISPATCH_AVX2(Block, name) \
  if (simd::has_avx2()) return decode_blocks_avx2<Block, name##_avx2>(src, dst, n);
#else
#define GGUFKIT_DISPATCH_AVX2(Block, name)
#endif

// ---- dequantize

void dequantize_q4_0(const std::byte* src, float* dst, int64_t n) {
  GGUFKIT_DISPATCH_AVX2(BlockQ4_0, decode_q4_0)
  decode_blocks<BlockQ4_0>(src, dst, n, [](const BlockQ4_0& b, float* y) {
    const float d = half(b.d);
    int8_t level[32];
    for (int j = 0; j < 16; ++j) {
      level[j] = static_cast<int8_t>((b.qs[j] & 0x0F) - 8);
      level[j + 16] = static_cast<int8_t>((b.qs[j] >> 4) - 8);
    }
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(level[j]) * d;
  });
}

void dequantize_q4_1(const std::byte* src, float* dst, int64_t n) {
  GGUFKIT_DISPATCH_AVX2(BlockQ4_1, decode_q4_1)
  decode_blocks<BlockQ4_1>(src, dst, n, [](const BlockQ4_1& b, float* y) {
    const float d = half(b.d), m = half(b.m);
    uint8_t level[32];
    for (int j = 0; j < 16; ++j) {
      level[j] = b.qs[j] & 0x0F;
      level[j + 16] = b.qs[j] >> 4;
    }
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(level[j]) * d + m;
  });
}

void dequantize_q5_0(const std::byte* src, float* dst, int64_t n) {
  GGUFKIT_DISPATCH_AVX2(BlockQ5_0, decode_q5_0)
  decode_blocks<BlockQ5_0>(src, dst, n, [](const BlockQ5_0& b, float* y) {
    const float d = half(b.d);
    uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof qh);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(level_5bit(b, qh, j, false) - 16) * d;
      y[j + 16] = static_cast<float>(level_5bit(b, qh, j, true) - 16) * d;
    }
  });
}

void dequantize_q5_1(const std::byte* src, float* dst, int64_t n) {
  GGUFKIT_DISPATCH_AVX2(BlockQ5_1, decode_q5_1)
  decode_blocks<BlockQ5_1>(src, dst, n, [](const BlockQ5_1& b, float* y) {
    const float d = half(b.d), m = half(b.m);
    uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof qh);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(level_5bit(b, qh, j, false)) * d + m;
      y[j + 16] = static_cast<float>(level_5bit(b, qh, j, true)) * d + m;
    }
  });
}

template <class Block>
void dequantize_q8(const std::byte* src, float* dst, int64_t n) {
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) {
    if constexpr (std::is_same_v<Block, BlockQ8_0>) return decode_blocks_avx2<BlockQ8_0, decode_q8_0_avx2>(src, dst, n);
    if constexpr (std::is_same_v<Block, BlockQ8_1>) return decode_blocks_avx2<BlockQ8_1, decode_q8_1_avx2>(src, dst, n);
  }
#endif
  // In place: copying each block first costs more than the loop.
  for (int64_t i = 0; i < n / 32; ++i) {
    const std::byte* block = src + i * static_cast<int64_t>(sizeof(Block));
    uint16_t h;
    std::memcpy(&h, block + offsetof(Block, d), sizeof h);
    const float d = half(h);
    int8_t qs[32];
    std::memcpy(qs, block + offsetof(Block, qs), sizeof qs);
    float* y = dst + 32 * i;
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
  }
}

void dequantize_q1_0(const std::byte* src, float* dst, int64_t n) {
  GGUFKIT_DISPATCH_AVX2(BlockQ1_0, decode_q1_0)
  decode_blocks<BlockQ1_0>(src, dst, n, [](const BlockQ1_0& b, float* y) {
    const float d = half(b.d);
    const float neg_d = -d;
    for (int j = 0; j < 128; ++j) y[j] = (b.qs[j / 8] >> (j % 8)) & 1 ? d : neg_d;
  });
}

void dequantize_q2_0(const std::byte* src, float* dst, int64_t n) {
  GGUFKIT_DISPATCH_AVX2(BlockQ2_0, decode_q2_0)
  decode_blocks<BlockQ2_0>(src, dst, n, [](const BlockQ2_0& b, float* y) {
    const float d = half(b.d);
    for (int j = 0; j < 64; ++j) {
      const int code = (b.qs[j / 4] >> (2 * (j % 4))) & 3;
      y[j] = static_cast<float>(code - 1) * d;
    }
  });
}

// ---- quantize without an importance matrix (ggml's _ref quantizers)

void encode_q4_0(const float* x, BlockQ4_0& b) {
  const float d = signed_absmax(x, 32) / -8;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = to_half(d);
  for (int j = 0; j < 16; ++j) {
    const auto l0 = static_cast<uint8_t>(std::min<int>(15, truncate_to_int8(x[j] * id + 8.5f)));
    const auto l1 = static_cast<uint8_t>(std::min<int>(15, truncate_to_int8(x[j + 16] * id + 8.5f)));
    b.qs[j] = pack_nibbles(l0, l1);
  }
}

void encode_q4_1(const float* x, BlockQ4_1& b) {
  const MinMax r = min_max(x, 32);
  const float d = (r.max - r.min) / 15;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = to_half(d);
  b.m = to_half(r.min);
  for (int j = 0; j < 16; ++j) {
    const auto l0 = static_cast<uint8_t>(std::min<int>(15, truncate_to_int8((x[j] - r.min) * id + 0.5f)));
    const auto l1 = static_cast<uint8_t>(std::min<int>(15, truncate_to_int8((x[j + 16] - r.min) * id + 0.5f)));
    b.qs[j] = pack_nibbles(l0, l1);
  }
}

void encode_q5_0(const float* x, BlockQ5_0& b) {
  const float d = signed_absmax(x, 32) / -16;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = to_half(d);
  uint8_t levels[32];
  for (int j = 0; j < 32; ++j) levels[j] = static_cast<uint8_t>(std::min<int>(31, truncate_to_int8(x[j] * id + 16.5f)));
  pack_5bit(levels, b);
}

void encode_q5_1(const float* x, BlockQ5_1& b) {
  const MinMax r = min_max(x, 32);
  const float d = (r.max - r.min) / 31;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = to_half(d);
  b.m = to_half(r.min);
  uint8_t levels[32];
  for (int j = 0; j < 32; ++j) levels[j] = truncate_to_uint8((x[j] - r.min) * id + 0.5f);
  pack_5bit(levels, b);
}

void encode_q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = amax > std::fabs(x[j]) ? amax : std::fabs(x[j]);
  const float d = amax / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = to_half(d);
  for (int j = 0; j < 32; ++j) b.qs[j] = truncate_to_int8(std::round(x[j] * id));
}

// One bit per value (its sign), scaled by the mean magnitude.
void encode_q1_0(const float* x, BlockQ1_0& b) {
  float sum_abs = 0.0f;
  for (int j = 0; j < 128; ++j) sum_abs += std::fabs(x[j]);
  b.d = to_half(sum_abs / 128);
  for (int j = 0; j < 128; ++j) {
    if (x[j] >= 0.0f) b.qs[j / 8] = static_cast<uint8_t>(b.qs[j / 8] | (1 << (j % 8)));
  }
}

// Levels -1, 0, 1, 2 times the block's largest magnitude.
void encode_q2_0(const float* x, BlockQ2_0& b) {
  float amax = 0.0f;
  for (int j = 0; j < 64; ++j) {
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]);
  }
  const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
  b.d = to_half(amax);
  for (int j = 0; j < 64; ++j) {
    int code = truncate_to_int32(std::round(x[j] * id)) + 1;
    code = code < 0 ? 0 : code > 3 ? 3 : code;
    b.qs[j / 4] = static_cast<uint8_t>(b.qs[j / 4] | (code << (2 * (j % 4))));
  }
}

// ---- quantize without an importance matrix, AVX2
//
// Inside a block only order-independent work is vectorised: the extremes (NaN skipped as the
// scalar comparisons skip it; which of equal values the scalar keeps is worked out afterwards)
// and the element-wise scale, offset, truncation and rounding, each lane doing the scalar's
// float operations in its order. q1_0's sum of magnitudes is a sequential float sum, so there
// each lane sums its own block (eight blocks at a time). The AVX-512 level uses these too: a
// 16-lane version measured no faster (the per-block scalar steps dominate).

#if GGUFKIT_QUANT_X86
namespace encode_simd {

using EncodeBlockFn = void (*)(const float* x, std::byte* out);

GGUFKIT_TARGET_AVX2 inline __m256 abs8(__m256 v) {
  return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)));
}

// The largest / smallest lane of a NaN-free vector (a zero's sign is left open).
GGUFKIT_TARGET_AVX2 inline float horizontal_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
GGUFKIT_TARGET_AVX2 inline float horizontal_min(__m256 v) {
  __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_min_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_min_ss(m, _mm_movehdup_ps(m)));
}

// Bit j set when lane j%8 of v[j/8] passes the comparison mask.
GGUFKIT_TARGET_AVX2 inline uint32_t mask32(__m256 m0, __m256 m1, __m256 m2, __m256 m3) {
  return static_cast<uint32_t>(_mm256_movemask_ps(m0)) | static_cast<uint32_t>(_mm256_movemask_ps(m1)) << 8 |
         static_cast<uint32_t>(_mm256_movemask_ps(m2)) << 16 | static_cast<uint32_t>(_mm256_movemask_ps(m3)) << 24;
}

// fp32_to_fp16 through F16C: its rounding is ggml's; only NaN differs (F16C keeps the payload,
// ggml makes the canonical quiet NaN).
GGUFKIT_TARGET_AVX2 inline uint16_t half_of(float f) {
  if (f != f) return to_half(f);
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
GGUFKIT_TARGET_AVX2 inline void put_half(std::byte* p, float f) {
  const uint16_t h = half_of(f);
  std::memcpy(p, &h, sizeof h);
}

// The low byte of each int32 lane of a, b, c, d, in that order (the truncation to (u)int8 of the
// scalar code: no saturation).
GGUFKIT_TARGET_AVX2 inline __m256i low_bytes(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ff = _mm256_set1_epi32(0xFF);
  const __m256i ab = _mm256_packus_epi32(_mm256_and_si256(a, ff), _mm256_and_si256(b, ff));
  const __m256i cd = _mm256_packus_epi32(_mm256_and_si256(c, ff), _mm256_and_si256(d, ff));
  return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// truncate_to_int32(std::round(v)): adding the float just below one half, with v's sign, rounds
// half away from zero exactly (also where the sum crosses a binade); NaN, inf and huge values go
// through unchanged and truncate to INT32_MIN as in the scalar code.
GGUFKIT_TARGET_AVX2 inline __m256i round_away_to_int(__m256 v) {
  const __m256 sign = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN)));
  const __m256 below_half = _mm256_or_ps(sign, _mm256_set1_ps(0.49999997f));
  return _mm256_cvttps_epi32(_mm256_add_ps(v, below_half));
}

// 32 levels (bytes) -> 16 bytes: element j in the low nibble of byte j, element j+16 in the high one.
GGUFKIT_TARGET_AVX2 inline __m128i pack_nibble_halves(__m256i levels) {
  const __m128i lo = _mm256_castsi256_si128(levels), hi = _mm256_extracti128_si256(levels, 1);
  return _mm_or_si128(lo, _mm_and_si128(_mm_slli_epi16(hi, 4), _mm_set1_epi8(static_cast<char>(0xF0))));
}
// As above for 5-bit levels: the nibbles masked, the fifth bits gathered into qh.
GGUFKIT_TARGET_AVX2 inline void pack_5bit_levels(__m256i levels, std::byte* qs, std::byte* qh) {
  const __m128i nib = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm256_castsi256_si128(levels), hi = _mm256_extracti128_si256(levels, 1);
  const __m128i packed = _mm_or_si128(_mm_and_si128(lo, nib), _mm_slli_epi16(_mm_and_si128(hi, nib), 4));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), packed);
  const auto bits = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_slli_epi16(levels, 3)));
  std::memcpy(qh, &bits, sizeof bits);
}

struct Block32 {
  __m256 v[4];
};
GGUFKIT_TARGET_AVX2 inline Block32 load32(const float* x) {
  return {{_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8), _mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24)}};
}

// signed_absmax: NaN never raises the running maximum; the value kept is the first of largest
// magnitude; an all-zero (or all-NaN) block gives +0.
GGUFKIT_TARGET_AVX2 inline float signed_absmax32(const float* x, const Block32& b) {
  const __m256 zero = _mm256_setzero_ps();
  __m256 a[4];
  for (int k = 0; k < 4; ++k) a[k] = abs8(b.v[k]);
  // max_ps(a, m) returns m when a is NaN.
  const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_max_ps(a[0], zero), _mm256_max_ps(a[1], zero)),
                                 _mm256_max_ps(_mm256_max_ps(a[2], zero), _mm256_max_ps(a[3], zero)));
  const float amax = horizontal_max(m);
  if (amax == 0.0f) return 0.0f;
  const __m256 am = _mm256_set1_ps(amax);
  const uint32_t at = mask32(_mm256_cmp_ps(a[0], am, _CMP_EQ_OQ), _mm256_cmp_ps(a[1], am, _CMP_EQ_OQ),
                             _mm256_cmp_ps(a[2], am, _CMP_EQ_OQ), _mm256_cmp_ps(a[3], am, _CMP_EQ_OQ));
  return x[__builtin_ctz(at)];
}

// min_max: NaN skipped; of equal extremes (only zeros differ in bits) the first one is kept.
GGUFKIT_TARGET_AVX2 inline MinMax min_max32(const float* x, const Block32& b) {
  const __m256 big = _mm256_set1_ps(FLT_MAX), small = _mm256_set1_ps(-FLT_MAX);
  // min_ps(v, m) / max_ps(v, m) return m when v is NaN.
  const __m256 lo = _mm256_min_ps(_mm256_min_ps(_mm256_min_ps(b.v[0], big), _mm256_min_ps(b.v[1], big)),
                                  _mm256_min_ps(_mm256_min_ps(b.v[2], big), _mm256_min_ps(b.v[3], big)));
  const __m256 hi = _mm256_max_ps(_mm256_max_ps(_mm256_max_ps(b.v[0], small), _mm256_max_ps(b.v[1], small)),
                                  _mm256_max_ps(_mm256_max_ps(b.v[2], small), _mm256_max_ps(b.v[3], small)));
  MinMax r{horizontal_min(lo), horizontal_max(hi)};
  if (r.min == 0.0f || r.max == 0.0f) {
    const __m256 zero = _mm256_setzero_ps();
    const uint32_t zeros = mask32(_mm256_cmp_ps(b.v[0], zero, _CMP_EQ_OQ), _mm256_cmp_ps(b.v[1], zero, _CMP_EQ_OQ),
                                  _mm256_cmp_ps(b.v[2], zero, _CMP_EQ_OQ), _mm256_cmp_ps(b.v[3], zero, _CMP_EQ_OQ));
    const float first_zero = x[__builtin_ctz(zeros)];
    if (r.min == 0.0f) r.min = first_zero;
    if (r.max == 0.0f) r.max = first_zero;
  }
  return r;
}

// truncate_to_int32(v * id + add) for the block's 32 values, then their low bytes.
GGUFKIT_TARGET_AVX2 inline __m256i scaled_bytes(const Block32& b, float id, float add) {
  const __m256 vid = _mm256_set1_ps(id), vadd = _mm256_set1_ps(add);
  __m256i q[4];
  for (int k = 0; k < 4; ++k) q[k] = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(b.v[k], vid), vadd));
  return low_bytes(q[0], q[1], q[2], q[3]);
}
// truncate_to_int32((v - min) * id + add), then the low bytes.
GGUFKIT_TARGET_AVX2 inline __m256i shifted_scaled_bytes(const Block32& b, float min, float id, float add) {
  const __m256 vmin = _mm256_set1_ps(min), vid = _mm256_set1_ps(id), vadd = _mm256_set1_ps(add);
  __m256i q[4];
  for (int k = 0; k < 4; ++k) {
    q[k] = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(b.v[k], vmin), vid), vadd));
  }
  return low_bytes(q[0], q[1], q[2], q[3]);
}

GGUFKIT_TARGET_AVX2 inline void encode_q4_0_avx2(const float* x, std::byte* out) {
  const Block32 b = load32(x);
  const float d = signed_absmax32(x, b) / -8;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_half(out + offsetof(BlockQ4_0, d), d);
  // (uint8_t)min(15, (int8_t)...): a signed byte minimum.
  const __m256i levels = _mm256_min_epi8(scaled_bytes(b, id, 8.5f), _mm256_set1_epi8(15));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + offsetof(BlockQ4_0, qs)), pack_nibble_halves(levels));
}

GGUFKIT_TARGET_AVX2 inline void encode_q4_1_avx2(const float* x, std::byte* out) {
  const Block32 b = load32(x);
  const MinMax r = min_max32(x, b);
  const float d = (r.max - r.min) / 15;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_half(out + offsetof(BlockQ4_1, d), d);
  put_half(out + offsetof(BlockQ4_1, m), r.min);
  const __m256i levels = _mm256_min_epi8(shifted_scaled_bytes(b, r.min, id, 0.5f), _mm256_set1_epi8(15));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + offsetof(BlockQ4_1, qs)), pack_nibble_halves(levels));
}

GGUFKIT_TARGET_AVX2 inline void encode_q5_0_avx2(const float* x, std::byte* out) {
  const Block32 b = load32(x);
  const float d = signed_absmax32(x, b) / -16;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_half(out + offsetof(BlockQ5_0, d), d);
  const __m256i levels = _mm256_min_epi8(scaled_bytes(b, id, 16.5f), _mm256_set1_epi8(31));
  pack_5bit_levels(levels, out + offsetof(BlockQ5_0, qs), out + offsetof(BlockQ5_0, qh));
}

GGUFKIT_TARGET_AVX2 inline void encode_q5_1_avx2(const float* x, std::byte* out) {
  const Block32 b = load32(x);
  const MinMax r = min_max32(x, b);
  const float d = (r.max - r.min) / 31;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_half(out + offsetof(BlockQ5_1, d), d);
  put_half(out + offsetof(BlockQ5_1, m), r.min);
  const __m256i levels = shifted_scaled_bytes(b, r.min, id, 0.5f);
  pack_5bit_levels(levels, out + offsetof(BlockQ5_1, qs), out + offsetof(BlockQ5_1, qh));
}

GGUFKIT_TARGET_AVX2 inline void encode_q8_0_avx2(const float* x, std::byte* out) {
  const Block32 b = load32(x);
  // ggml's MAX(amax, fabsf(v)) takes a NaN and drops it at the next value: order-dependent, so
  // blocks holding NaN take the scalar code.
  const __m256 nan = _mm256_or_ps(_mm256_cmp_ps(b.v[0], b.v[1], _CMP_UNORD_Q), _mm256_cmp_ps(b.v[2], b.v[3], _CMP_UNORD_Q));
  if (_mm256_movemask_ps(nan) != 0) {
    BlockQ8_0 block{};
    encode_q8_0(x, block);
    std::memcpy(out, &block, sizeof block);
    return;
  }
  const __m256 m = _mm256_max_ps(_mm256_max_ps(abs8(b.v[0]), abs8(b.v[1])), _mm256_max_ps(abs8(b.v[2]), abs8(b.v[3])));
  const float d = horizontal_max(m) / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_half(out + offsetof(BlockQ8_0, d), d);
  const __m256 vid = _mm256_set1_ps(id);
  __m256i q[4];
  for (int k = 0; k < 4; ++k) q[k] = round_away_to_int(_mm256_mul_ps(b.v[k], vid));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + offsetof(BlockQ8_0, qs)), low_bytes(q[0], q[1], q[2], q[3]));
}

GGUFKIT_TARGET_AVX2 inline void encode_q2_0_avx2(const float* x, std::byte* out) {
  const Block32 b0 = load32(x), b1 = load32(x + 32);
  const __m256 zero = _mm256_setzero_ps();
  __m256 m = zero;
  // max_ps(a, m) returns m when a is NaN, as `a > amax` skips it.
  for (int k = 0; k < 4; ++k) m = _mm256_max_ps(_mm256_max_ps(abs8(b0.v[k]), zero), m);
  for (int k = 0; k < 4; ++k) m = _mm256_max_ps(_mm256_max_ps(abs8(b1.v[k]), zero), m);
  const float amax = horizontal_max(m);
  const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
  put_half(out + offsetof(BlockQ2_0, d), amax);
  const __m256 vid = _mm256_set1_ps(id);
  const __m256i one = _mm256_set1_epi32(1), three = _mm256_set1_epi32(3);
  __m256i codes[8];
  for (int k = 0; k < 8; ++k) {
    const __m256 v = k < 4 ? b0.v[k] : b1.v[k - 4];
    const __m256i code = _mm256_add_epi32(round_away_to_int(_mm256_mul_ps(v, vid)), one);
    codes[k] = _mm256_min_epi32(_mm256_max_epi32(code, _mm256_setzero_si256()), three);
  }
  // Codes 0..3 as bytes (elements 0-31, 32-63), then four per byte: c0 + 4c1 + 16c2 + 64c3.
  const __m256i lo = low_bytes(codes[0], codes[1], codes[2], codes[3]);
  const __m256i hi = low_bytes(codes[4], codes[5], codes[6], codes[7]);
  const __m256i weights2 = _mm256_set1_epi16(0x0401), weights4 = _mm256_set1_epi32(0x00100001);
  const __m256i lo4 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, weights2), weights4);
  const __m256i hi4 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, weights2), weights4);
  // 16 dwords each < 256 -> 16 bytes in order.
  const __m256i words = _mm256_packus_epi32(lo4, hi4);  // lane 0: lo4[0..3] hi4[0..3], lane 1: lo4[4..7] hi4[4..7]
  const __m256i bytes = _mm256_packus_epi16(words, words);
  const __m256i ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + offsetof(BlockQ2_0, qs)), _mm256_castsi256_si128(ordered));
}

template <class Block, EncodeBlockFn EncodeBlock>
GGUFKIT_TARGET_AVX2 void encode_all_avx2(const float* src, std::byte* dst, int64_t n) {
  for (int64_t i = 0; i < n / Block::kElements; ++i) {
    EncodeBlock(src + i * Block::kElements, dst + i * static_cast<int64_t>(sizeof(Block)));
  }
}

// Transposes eight rows of eight floats.
GGUFKIT_TARGET_AVX2 inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// q1_0, eight blocks at once: lane b sums block b's magnitudes in element order.
GGUFKIT_TARGET_AVX2 void encode_q1_0_avx2(const float* src, std::byte* dst, int64_t n) {
  constexpr int kE = BlockQ1_0::kElements;
  const int64_t blocks = n / kE;
  int64_t i = 0;
  for (; i + 8 <= blocks; i += 8) {
    const float* x = src + i * kE;
    __m256 sum = _mm256_setzero_ps();
    alignas(32) uint8_t signs[8][16];
    for (int c = 0; c < kE / 8; ++c) {
      __m256 r[8];
      for (int b = 0; b < 8; ++b) {
        r[b] = _mm256_loadu_ps(x + b * kE + 8 * c);
        signs[b][c] = static_cast<uint8_t>(_mm256_movemask_ps(_mm256_cmp_ps(r[b], _mm256_setzero_ps(), _CMP_GE_OQ)));
      }
      transpose8(r);
      for (int j = 0; j < 8; ++j) sum = _mm256_add_ps(sum, abs8(r[j]));
    }
    alignas(32) float d[8];
    _mm256_store_ps(d, _mm256_div_ps(sum, _mm256_set1_ps(static_cast<float>(kE))));
    for (int b = 0; b < 8; ++b) {
      std::byte* out = dst + (i + b) * static_cast<int64_t>(sizeof(BlockQ1_0));
      put_half(out + offsetof(BlockQ1_0, d), d[b]);
      std::memcpy(out + offsetof(BlockQ1_0, qs), signs[b], 16);
    }
  }
  for (; i < blocks; ++i) {
    BlockQ1_0 block{};
    encode_q1_0(src + i * kE, block);
    store_block(dst, i, block);
  }
}

}  // namespace encode_simd
#endif  // GGUFKIT_QUANT_X86

// Encodes n values (whole blocks; rows are contiguous, so a run of rows is one run of blocks).
using EncodeAllFn = void (*)(const float* src, std::byte* dst, int64_t n);

template <class Block, void (*Encode)(const float*, Block&)>
void encode_all_portable(const float* src, std::byte* dst, int64_t n) {
  encode_blocks<Block>(src, dst, n, Encode);
}

template <EncodeAllFn EncodeAll>
void quantize_plain(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  EncodeAll(src, dst, nrows * n_per_row);
}

// ---- quantize with an importance matrix

// ggml weighs each value by imatrix * sqrt(sigma2 + x²), sigma2 the mean square of its row, then
// searches each block's scale with those weights.
template <class Block, class EncodeWeighted>
void quantize_rows_weighted(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row,
                            const float* imatrix, EncodeWeighted encode) {
  const int64_t blocks_per_row = n_per_row / Block::kElements;
  for (int64_t row = 0; row < nrows; ++row) {
    const float* x = src + row * n_per_row;
    std::byte* row_dst = dst + row * blocks_per_row * static_cast<int64_t>(sizeof(Block));
    float sum_x2 = 0;
    for (int64_t j = 0; j < n_per_row; ++j) sum_x2 += x[j] * x[j];
    const float sigma2 = sum_x2 / static_cast<float>(n_per_row);
    for (int64_t ib = 0; ib < blocks_per_row; ++ib) {
      const float* xb = x + ib * Block::kElements;
      const float* qw = imatrix + ib * Block::kElements;
      float weight[Block::kElements];
      for (int j = 0; j < Block::kElements; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
      Block b{};
      encode(xb, weight, b);
      store_block(row_dst, ib, b);
    }
  }
}

template <class Block, EncodeAllFn EncodeAll, void (*EncodeWeighted)(const float*, const float*, Block&)>
void quantize_with_optional_imatrix(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row,
                                    const float* imatrix) {
  if (imatrix == nullptr) {
    EncodeAll(src, dst, nrows * n_per_row);
  } else {
    quantize_rows_weighted<Block>(src, dst, nrows, n_per_row, imatrix, EncodeWeighted);
  }
}

void encode_q4_0_weighted(const float* x, const float* weight, BlockQ4_0& b) {
  int8_t levels[32];
  b.d = to_half(make_qx_quants(32, 8, x, levels, 1, weight));
  for (int j = 0; j < 16; ++j) b.qs[j] = pack_nibbles(levels[j], levels[j + 16]);
}

void encode_q5_0_weighted(const float* x, const float* weight, BlockQ5_0& b) {
  int8_t levels[32];
  b.d = to_half(make_qx_quants(32, 16, x, levels, 1, weight));
  pack_5bit(levels, b);
}

void encode_q4_1_weighted(const float* x, const float* weight, BlockQ4_1& b) {
  uint8_t levels[32];
  const AffineFit fit = make_qkx3_quants(32, 15, x, weight, levels, -0.9f, 0.05f, 36, false);
  b.d = to_half(fit.scale);
  b.m = to_half(-fit.offset);
  for (int j = 0; j < 16; ++j) b.qs[j] = pack_nibbles(levels[j], levels[j + 16]);
}

void encode_q5_1_weighted(const float* x, const float* weight, BlockQ5_1& b) {
  uint8_t levels[32];
  const AffineFit fit = make_qkx3_quants(32, 31, x, weight, levels, -0.9f, 0.05f, 36, false);
  b.d = to_half(fit.scale);
  b.m = to_half(-fit.offset);
  pack_5bit(levels, b);
}

// Whether the vector encoders may run (simd::isa(), capped by GGUFKIT_QUANT_ISA).
bool use_avx2_encoders() {
#if GGUFKIT_QUANT_X86
  return simd::has_avx2();
#else
  return false;
#endif
}

// quantize_plain / quantize_with_optional_imatrix with the vector encoder when the CPU has it.
template <class Block, void (*Encode)(const float*, Block&), EncodeAllFn Avx2>
QuantizeFn plain_quantizer() {
  return use_avx2_encoders() ? quantize_plain<Avx2> : quantize_plain<encode_all_portable<Block, Encode>>;
}
template <class Block, void (*Encode)(const float*, Block&), EncodeAllFn Avx2,
          void (*EncodeWeighted)(const float*, const float*, Block&)>
QuantizeFn imatrix_quantizer() {
  return use_avx2_encoders() ? quantize_with_optional_imatrix<Block, Avx2, EncodeWeighted>
                             : quantize_with_optional_imatrix<Block, encode_all_portable<Block, Encode>, EncodeWeighted>;
}

#if GGUFKIT_QUANT_X86
#define GGUFKIT_AVX2_ENCODER(Block, name) encode_simd::encode_all_avx2<Block, encode_simd::name##_avx2>
#define GGUFKIT_AVX2_ENCODER_Q1_0 encode_simd::encode_q1_0_avx2
#else
#define GGUFKIT_AVX2_ENCODER(Block, name) (encode_all_portable<Block, name>)
#define GGUFKIT_AVX2_ENCODER_Q1_0 (encode_all_portable<BlockQ1_0, encode_q1_0>)
#endif

}  // namespace

void register_legacy_kernels(KernelTable& t) {
  entry(t, TensorType::Q8_0) = {dequantize_q8<BlockQ8_0>,
                                plain_quantizer<BlockQ8_0, encode_q8_0, GGUFKIT_AVX2_ENCODER(BlockQ8_0, encode_q8_0)>()};
  entry(t, TensorType::Q8_1).dequantize = dequantize_q8<BlockQ8_1>;
  entry(t, TensorType::Q4_0) = {
      dequantize_q4_0,
      imatrix_quantizer<BlockQ4_0, encode_q4_0, GGUFKIT_AVX2_ENCODER(BlockQ4_0, encode_q4_0), encode_q4_0_weighted>(),
      true};
  entry(t, TensorType::Q4_1) = {
      dequantize_q4_1,
      imatrix_quantizer<BlockQ4_1, encode_q4_1, GGUFKIT_AVX2_ENCODER(BlockQ4_1, encode_q4_1), encode_q4_1_weighted>(),
      true};
  entry(t, TensorType::Q5_0) = {
      dequantize_q5_0,
      imatrix_quantizer<BlockQ5_0, encode_q5_0, GGUFKIT_AVX2_ENCODER(BlockQ5_0, encode_q5_0), encode_q5_0_weighted>(),
      true};
  entry(t, TensorType::Q5_1) = {
      dequantize_q5_1,
      imatrix_quantizer<BlockQ5_1, encode_q5_1, GGUFKIT_AVX2_ENCODER(BlockQ5_1, encode_q5_1), encode_q5_1_weighted>(),
      true};
  // ggml's quantize_q1_0 / quantize_q2_0 take an importance matrix but do not use it.
  entry(t, TensorType::Q1_0) = {dequantize_q1_0, plain_quantizer<BlockQ1_0, encode_q1_0, GGUFKIT_AVX2_ENCODER_Q1_0>()};
  entry(t, TensorType::Q2_0) = {dequantize_q2_0,
                                plain_quantizer<BlockQ2_0, encode_q2_0, GGUFKIT_AVX2_ENCODER(BlockQ2_0, encode_q2_0)>()};
  // After the kernels: the blocks they were written for, checked against the type table.
  state_block<BlockQ4_0>(t, TensorType::Q4_0);
  state_block<BlockQ4_1>(t, TensorType::Q4_1);
  state_block<BlockQ5_0>(t, TensorType::Q5_0);
  state_block<BlockQ5_1>(t, TensorType::Q5_1);
  state_block<BlockQ8_0>(t, TensorType::Q8_0);
  state_block<BlockQ8_1>(t, TensorType::Q8_1);
  state_block<BlockQ1_0>(t, TensorType::Q1_0);
  state_block<BlockQ2_0>(t, TensorType::Q2_0);
}

#undef GGUFKIT_AVX2_ENCODER
#undef GGUFKIT_AVX2_ENCODER_Q1_0

}  // namespace ggufkit::quant
