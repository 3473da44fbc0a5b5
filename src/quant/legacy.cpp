// The legacy block formats: one fp16 scale (and for the _1 types an fp16 min) per block of 32
// (q1_0: 128, q2_0: 64) values. Without an importance matrix ggml rounds against the block's
// extreme value; with one, q4_0/q4_1/q5_0/q5_1 search the scale with make_qx_quants or
// make_qkx3_quants instead.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "quant/fp16.h"
#include "quant/kernels.h"
#include "quant/search.h"
#include "quant/simd.h"

namespace ggufkit::quant {
namespace {

struct BlockQ4_0 {
  static constexpr int kElements = 32;
  uint16_t d;
  uint8_t qs[16];  // element j in the low nibble of qs[j], element j+16 in the high one
};
struct BlockQ4_1 {
  static constexpr int kElements = 32;
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  static constexpr int kElements = 32;
  uint16_t d;
  uint8_t qh[4];  // bit j: the fifth bit of element j
  uint8_t qs[16];
};
struct BlockQ5_1 {
  static constexpr int kElements = 32;
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {
  static constexpr int kElements = 32;
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ8_1 {
  static constexpr int kElements = 32;
  uint16_t d, s;  // s = d * sum(qs), used by dot products only
  int8_t qs[32];
};
struct BlockQ1_0 {
  static constexpr int kElements = 128;
  uint16_t d;
  uint8_t qs[16];  // bit j: element j is +d (set) or -d
};
struct BlockQ2_0 {
  static constexpr int kElements = 64;
  uint16_t d;
  uint8_t qs[16];  // 2-bit codes, element j at bits 2*(j%4) of qs[j/4]: code - 1 in {-1, 0, 1, 2}
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36 &&
              sizeof(BlockQ1_0) == 18 && sizeof(BlockQ2_0) == 18);

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

template <class Block, void (*Encode)(const float*, Block&)>
void quantize_plain(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  encode_blocks<Block>(src, dst, nrows * n_per_row, Encode);
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

template <class Block, void (*Encode)(const float*, Block&), void (*EncodeWeighted)(const float*, const float*, Block&)>
void quantize_with_optional_imatrix(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row,
                                    const float* imatrix) {
  if (imatrix == nullptr) {
    encode_blocks<Block>(src, dst, nrows * n_per_row, Encode);
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

}  // namespace

void register_legacy_kernels(KernelTable& t) {
  entry(t, TensorType::Q8_0) = {dequantize_q8<BlockQ8_0>, quantize_plain<BlockQ8_0, encode_q8_0>};
  entry(t, TensorType::Q8_1).dequantize = dequantize_q8<BlockQ8_1>;
  entry(t, TensorType::Q4_0) = {dequantize_q4_0,
                                quantize_with_optional_imatrix<BlockQ4_0, encode_q4_0, encode_q4_0_weighted>, true};
  entry(t, TensorType::Q4_1) = {dequantize_q4_1,
                                quantize_with_optional_imatrix<BlockQ4_1, encode_q4_1, encode_q4_1_weighted>, true};
  entry(t, TensorType::Q5_0) = {dequantize_q5_0,
                                quantize_with_optional_imatrix<BlockQ5_0, encode_q5_0, encode_q5_0_weighted>, true};
  entry(t, TensorType::Q5_1) = {dequantize_q5_1,
                                quantize_with_optional_imatrix<BlockQ5_1, encode_q5_1, encode_q5_1_weighted>, true};
  // ggml's quantize_q1_0 / quantize_q2_0 take an importance matrix but do not use it.
  entry(t, TensorType::Q1_0) = {dequantize_q1_0, quantize_plain<BlockQ1_0, encode_q1_0>};
  entry(t, TensorType::Q2_0) = {dequantize_q2_0, quantize_plain<BlockQ2_0, encode_q2_0>};
}

}  // namespace ggufkit::quant
