// The k-quants: super-blocks of 256 values split into sub-blocks of 16 or 32, each with its own
// quantized scale (and for q2_K/q4_K/q5_K a min), under one or two fp16 super-block scales.
// Without an importance matrix ggml uses its _ref quantizers (make_qkx2_quants, make_q3_quants,
// make_qx_quants with x² weights); with one, the _impl ones (make_qkx3_quants, make_qp_quants,
// make_qx_quants with imatrix-derived weights). Both end by requantizing every value against the
// scales as stored, so the levels agree with what a reader decodes.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "quant/fp16.h"
#include "quant/kernels.h"
#include "quant/search.h"
#include "quant/simd.h"

namespace ggufkit::quant {
namespace {

constexpr int kSuperBlock = 256;

struct BlockQ2K {
  static constexpr int kElements = kSuperBlock;
  uint8_t scales[16];  // per 16 values: scale in the low nibble, min in the high one
  uint8_t qs[64];      // 2-bit levels (see pack_2bit)
  uint16_t d, dmin;
};
struct BlockQ3K {
  static constexpr int kElements = kSuperBlock;
  uint8_t hmask[32];   // third bit of value e: bit e/32 of hmask[e%32]
  uint8_t qs[64];      // low 2 bits (see pack_2bit)
  uint8_t scales[12];  // 16 six-bit scales, offset by 32 (see set_q3k_scale)
  uint16_t d;
};
struct BlockQ4K {
  static constexpr int kElements = kSuperBlock;
  uint16_t d, dmin;
  uint8_t scales[12];  // 8 six-bit scales and mins (see set_scale_min_k4)
  uint8_t qs[128];     // value e: nibble (e/32)%2 of qs[(e/64)*32 + e%32]
};
struct BlockQ5K {
  static constexpr int kElements = kSuperBlock;
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];  // fifth bit of value e: bit e/32 of qh[e%32]
  uint8_t qs[128];
};
struct BlockQ6K {
  static constexpr int kElements = kSuperBlock;
  uint8_t ql[128];  // low 4 bits (see pack_q6k)
  uint8_t qh[64];   // high 2 bits
  int8_t scales[16];
  uint16_t d;
};
struct BlockQ8K {
  static constexpr int kElements = kSuperBlock;
  float d;
  int8_t qs[256];
  int16_t bsums[16];  // sums of 16 quants, for dot products
};
static_assert(sizeof(BlockQ2K) == 84 && sizeof(BlockQ3K) == 110 && sizeof(BlockQ4K) == 144 &&
              sizeof(BlockQ5K) == 176 && sizeof(BlockQ6K) == 210 && sizeof(BlockQ8K) == 292);

float half(uint16_t h) { return fp16_to_fp32(h); }
uint16_t to_half(float f) { return fp32_to_fp16(f); }
int clamp_int(int value, int lo, int hi) { return value < lo ? lo : value > hi ? hi : value; }
uint8_t as_byte(int value) { return static_cast<uint8_t>(value); }

// ---- bit layouts

// 2-bit levels of q2_K/q3_K: value e sits at bits 2*((e%128)/32) of qs[(e/128)*32 + e%32].
template <class Level>
void pack_2bit(const Level* levels, uint8_t* qs) {
  for (int chunk = 0; chunk < kSuperBlock; chunk += 128) {
    for (int l = 0; l < 32; ++l) {
      const Level* L = levels + chunk + l;
      qs[chunk / 4 + l] = as_byte(L[0] | (L[32] << 2) | (L[64] << 4) | (L[96] << 6));
    }
  }
}

// q3_K's 6-bit sub-block scales: low nibbles in scales[0..7] (j and j+8 share a byte), the two
// high bits of scale j at bits 2*(j/4) of scales[8 + j%4]. The target bytes must start zeroed.
void set_q3k_scale(uint8_t* scales, int j, int level) {
  if (j < 8) {
    scales[j] = as_byte(level & 0xF);
  } else {
    scales[j - 8] = as_byte(scales[j - 8] | ((level & 0xF) << 4));
  }
  scales[8 + j % 4] = as_byte(scales[8 + j % 4] | ((level >> 4) << (2 * (j / 4))));
}
int q3k_scale(const uint8_t* scales, int j) {
  const int low = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// q4_K/q5_K's 6-bit scale and min of sub-block j: sub-blocks 0-3 in the low 6 bits of bytes j and
// j+4, sub-blocks 4-7 as nibbles of byte j+4 plus the top bits of bytes j-4 and j.
void set_scale_min_k4(uint8_t* scales, int j, uint8_t scale, uint8_t min) {
  if (j < 4) {
    scales[j] = scale;
    scales[j + 4] = min;
  } else {
    scales[j + 4] = as_byte((scale & 0xF) | ((min & 0xF) << 4));
    scales[j - 4] = as_byte(scales[j - 4] | ((scale >> 4) << 6));
    scales[j] = as_byte(scales[j] | ((min >> 4) << 6));
  }
}
struct ScaleMin {
  int scale, min;
};
ScaleMin scale_min_k4(const uint8_t* scales, int j) {
  if (j < 4) return {scales[j] & 63, scales[j + 4] & 63};
  return {(scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4), (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4)};
}

// q6_K: value e = 128c + 32g + l has its low nibble in ql[64c + l + 32(g%2)] (high nibble when
// g >= 2) and its high 2 bits at bits 2g of qh[32c + l].
void pack_q6k(const int8_t* levels, BlockQ6K& b) {
  for (int c = 0; c < 2; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int8_t* L = levels + 128 * c + l;
      b.ql[64 * c + l] = as_byte((L[0] & 0xF) | ((L[64] & 0xF) << 4));
      b.ql[64 * c + l + 32] = as_byte((L[32] & 0xF) | ((L[96] & 0xF) << 4));
      b.qh[32 * c + l] = as_byte((L[0] >> 4) | ((L[32] >> 4) << 2) | ((L[64] >> 4) << 4) | ((L[96] >> 4) << 6));
    }
  }
}

// ---- dequantize, AVX2 (same operations per value as the scalar kernels below)

#if GGUFKIT_QUANT_X86
// The AVX2 kernels read each block in place (a copy to the stack costs more than the decoding).
#define GGUFKIT_FIELD(field) (reinterpret_cast<const uint8_t*>(block) + offsetof(B, field))
float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return half(h);
}

GGUFKIT_TARGET_AVX2 void dequantize_q2_K_avx2(const std::byte* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i) {
    using B = BlockQ2K;
    const std::byte* block = src + i * static_cast<int64_t>(sizeof(B));
    float* y = dst + i * kSuperBlock;
    const float d = half_at(GGUFKIT_FIELD(d)), min = half_at(GGUFKIT_FIELD(dmin));
    for (int g = 0; g < 8; ++g) {  // 32 values: the 2-bit field g%4 of qs[32*(g/4) ...]
      const __m256i q = _mm256_and_si256(_mm256_srl_epi16(simd::load32(GGUFKIT_FIELD(qs) + 32 * (g / 4)), _mm_cvtsi32_si128(2 * (g % 4))),
                                         _mm256_set1_epi8(3));
      for (int h = 0; h < 2; ++h) {
        const uint8_t sc = GGUFKIT_FIELD(scales)[2 * g + h];
        const __m256 dl = _mm256_set1_ps(d * static_cast<float>(sc & 0xF));
        const __m256 ml = _mm256_set1_ps(min * static_cast<float>(sc >> 4));
        simd::store16_d_times_q_minus_m(h == 0 ? simd::low_half(q) : simd::high_half(q), dl, ml, y + 32 * g + 16 * h);
      }
    }
  }
}

GGUFKIT_TARGET_AVX2 void dequantize_q3_K_avx2(const std::byte* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i) {
    using B = BlockQ3K;
    const std::byte* block = src + i * static_cast<int64_t>(sizeof(B));
    float* y = dst + i * kSuperBlock;
    const float d = half_at(GGUFKIT_FIELD(d));
    const __m256i hmask = simd::load32(GGUFKIT_FIELD(hmask));
    for (int g = 0; g < 8; ++g) {
      const __m256i low2 = _mm256_and_si256(
          _mm256_srl_epi16(simd::load32(GGUFKIT_FIELD(qs) + 32 * (g / 4)), _mm_cvtsi32_si128(2 * (g % 4))), _mm256_set1_epi8(3));
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << g));
      const __m256i high_set = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), bit);
      const __m256i q = _mm256_sub_epi8(low2, _mm256_andnot_si256(high_set, _mm256_set1_epi8(4)));
      for (int h = 0; h < 2; ++h) {
        const __m256 dl = _mm256_set1_ps(d * static_cast<float>(q3k_scale(GGUFKIT_FIELD(scales), 2 * g + h)));
        simd::store16_d_times_q(h == 0 ? simd::low_half(q) : simd::high_half(q), dl, y + 32 * g + 16 * h);
      }
    }
  }
}

template <class Block>
GGUFKIT_TARGET_AVX2 void dequantize_q45_K_avx2(const std::byte* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i) {
    using B = Block;
    const std::byte* block = src + i * static_cast<int64_t>(sizeof(B));
    float* y = dst + i * kSuperBlock;
    const float d = half_at(GGUFKIT_FIELD(d)), min = half_at(GGUFKIT_FIELD(dmin));
    for (int chunk = 0; chunk < 4; ++chunk) {  // sub-blocks 2*chunk (low nibbles) and 2*chunk+1
      const __m256i qs = simd::load32(GGUFKIT_FIELD(qs) + 32 * chunk);
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * chunk + h;
        __m256i q = h == 0 ? simd::low_nibbles(qs) : simd::high_nibbles(qs);
        if constexpr (std::is_same_v<Block, BlockQ5K>) {
          const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << j));
          const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(simd::load32(GGUFKIT_FIELD(qh)), bit), bit);
          q = _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(16)));
        }
        const ScaleMin sm = scale_min_k4(GGUFKIT_FIELD(scales), j);
        const __m256 dl = _mm256_set1_ps(d * static_cast<float>(sm.scale));
        const __m256 ml = _mm256_set1_ps(min * static_cast<float>(sm.min));
        simd::store16_d_times_q_minus_m(simd::low_half(q), dl, ml, y + 32 * j);
        simd::store16_d_times_q_minus_m(simd::high_half(q), dl, ml, y + 32 * j + 16);
      }
    }
  }
}

GGUFKIT_TARGET_AVX2 void dequantize_q6_K_avx2(const std::byte* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i) {
    using B = BlockQ6K;
    const std::byte* block = src + i * static_cast<int64_t>(sizeof(B));
    float* y = dst + i * kSuperBlock;
    const float d = half_at(GGUFKIT_FIELD(d));
    const __m256i three = _mm256_set1_epi8(3);
    for (int c = 0; c < 2; ++c) {
      const __m256i ql_a = simd::load32(GGUFKIT_FIELD(ql) + 64 * c), ql_b = simd::load32(GGUFKIT_FIELD(ql) + 64 * c + 32);
      const __m256i qh = simd::load32(GGUFKIT_FIELD(qh) + 32 * c);
      for (int g = 0; g < 4; ++g) {  // values 128c + 32g + l
        const __m256i ql = g % 2 == 0 ? ql_a : ql_b;
        const __m256i low = g < 2 ? simd::low_nibbles(ql) : simd::high_nibbles(ql);
        const __m256i high = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * g)), three);
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(high, 4)), _mm256_set1_epi8(32));
        const int e = 128 * c + 32 * g;
        for (int h = 0; h < 2; ++h) {
          const __m256 dl = _mm256_set1_ps(d * static_cast<float>(static_cast<int8_t>(GGUFKIT_FIELD(scales)[e / 16 + h])));
          simd::store16_d_times_q(h == 0 ? simd::low_half(q) : simd::high_half(q), dl, y + e + 16 * h);
        }
      }
    }
  }
}

GGUFKIT_TARGET_AVX2 void dequantize_q8_K_avx2(const std::byte* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kSuperBlock; ++i) {
    const std::byte* block = src + i * static_cast<int64_t>(sizeof(BlockQ8K));
    float d;
    std::memcpy(&d, block + offsetof(BlockQ8K, d), sizeof d);
    const __m256 vd = _mm256_set1_ps(d);
    const std::byte* qs = block + offsetof(BlockQ8K, qs);
    for (int k = 0; k < kSuperBlock; k += 16) simd::store16_q_times_d(simd::load16(qs + k), vd, dst + i * kSuperBlock + k);
  }
}

#undef GGUFKIT_FIELD

#define GGUFKIT_DISPATCH_AVX2(name) \
  if (simd::has_avx2()) return name##_avx2(src, dst, n);
#else
#define GGUFKIT_DISPATCH_AVX2(name)
#endif

// ---- dequantize

// The portable kernels decode the levels of 32 values into a small array, then scale them in a
// loop the compiler can vectorize; the float operations are those of the per-value formula.

void dequantize_q2_K(const std::byte* src, float* dst, int64_t n) {
  GGUFKIT_DISPATCH_AVX2(dequantize_q2_K)
  decode_blocks<BlockQ2K>(src, dst, n, [](const BlockQ2K& b, float* y) {
    const float d = half(b.d), min = half(b.dmin);
    for (int g = 0; g < 8; ++g) {  // values 32g..32g+31: bits 2*(g%4) of qs[32*(g/4) + l]
      uint8_t level[32];
      for (int l = 0; l < 32; ++l) level[l] = (b.qs[32 * (g / 4) + l] >> (2 * (g % 4))) & 3;
      for (int h = 0; h < 2; ++h) {
        const uint8_t sc = b.scales[2 * g + h];
        const float dl = d * static_cast<float>(sc & 0xF);
        const float ml = min * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) y[32 * g + 16 * h + l] = dl * static_cast<float>(level[16 * h + l]) - ml;
      }
    }
  });
}

void dequantize_q3_K(const std::byte* src, float* dst, int64_t n) {
  GGUFKIT_DISPATCH_AVX2(dequantize_q3_K)
  decode_blocks<BlockQ3K>(src, dst, n, [](const BlockQ3K& b, float* y) {
    const float d = half(b.d);
    for (int g = 0; g < 8; ++g) {  // values 32g..32g+31; their third bit is bit g of hmask[l]
      int8_t level[32];
      for (int l = 0; l < 32; ++l) {
        const int low = (b.qs[32 * (g / 4) + l] >> (2 * (g % 4))) & 3;
        level[l] = static_cast<int8_t>(low - ((b.hmask[l] >> g) & 1 ? 0 : 4));
      }
      for (int h = 0; h < 2; ++h) {
        const float dl = d * static_cast<float>(q3k_scale(b.scales, 2 * g + h));
        for (int l = 0; l < 16; ++l) y[32 * g + 16 * h + l] = dl * static_cast<float>(level[16 * h + l]);
      }
    }
  });
}

template <class Block>
void dequantize_q45_K(const std::byte* src, float* dst, int64_t n) {
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) return dequantize_q45_K_avx2<Block>(src, dst, n);
#endif
  decode_blocks<Block>(src, dst, n, [](const Block& b, float* y) {
    const float d = half(b.d), min = half(b.dmin);
    for (int j = 0; j < 8; ++j) {  // sub-block j: nibble j%2 of qs[32*(j/2) + l], fifth bit j of qh[l]
      uint8_t level[32];
      for (int l = 0; l < 32; ++l) level[l] = (b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
      if constexpr (std::is_same_v<Block, BlockQ5K>) {
        for (int l = 0; l < 32; ++l) level[l] = as_byte(level[l] | (((b.qh[l] >> j) & 1) << 4));
      }
      const ScaleMin sm = scale_min_k4(b.scales, j);
      const float dl = d * static_cast<float>(sm.scale);
      const float ml = min * static_cast<float>(sm.min);
      for (int l = 0; l < 32; ++l) y[32 * j + l] = dl * static_cast<float>(level[l]) - ml;
    }
  });
}

void dequantize_q6_K(const std::byte* src, float* dst, int64_t n) {
  GGUFKIT_DISPATCH_AVX2(dequantize_q6_K)
  decode_blocks<BlockQ6K>(src, dst, n, [](const BlockQ6K& b, float* y) {
    const float d = half(b.d);
    for (int e0 = 0; e0 < kSuperBlock; e0 += 32) {  // 32 values at a time (layout: see pack_q6k)
      const int c = e0 / 128, g = (e0 % 128) / 32;
      const uint8_t* ql = b.ql + 64 * c + 32 * (g % 2);
      const uint8_t* qh = b.qh + 32 * c;
      int8_t level[32];
      for (int l = 0; l < 32; ++l) {
        const int low = (ql[l] >> (4 * (g / 2))) & 0xF;
        const int high = (qh[l] >> (2 * g)) & 3;
        level[l] = static_cast<int8_t>((low | (high << 4)) - 32);
      }
      for (int h = 0; h < 2; ++h) {
        const float dl = d * static_cast<float>(b.scales[e0 / 16 + h]);
        for (int l = 0; l < 16; ++l) y[e0 + 16 * h + l] = dl * static_cast<float>(level[16 * h + l]);
      }
    }
  });
}

void dequantize_q8_K(const std::byte* src, float* dst, int64_t n) {
  GGUFKIT_DISPATCH_AVX2(dequantize_q8_K)
  decode_blocks<BlockQ8K>(src, dst, n, [](const BlockQ8K& b, float* y) {
    for (int e = 0; e < kSuperBlock; ++e) y[e] = b.d * static_cast<float>(b.qs[e]);
  });
}

// ---- quantize: shared steps

// Requantizes sub-blocks of `group` values against their stored affine scale: level =
// round((x + m) / d) in [0, nmax]. Sub-blocks whose scale is zero keep the levels of the search.
template <class ScaleOf>
void requantize_affine(const float* x, int group, int nmax, uint8_t* levels, ScaleOf scale_of) {
  for (int j = 0; j < kSuperBlock / group; ++j) {
    const auto [d, m] = scale_of(j);
    if (d == 0) continue;
    for (int i = 0; i < group; ++i) {
      levels[group * j + i] = as_byte(clamp_int(nearest_int((x[group * j + i] + m) / d), 0, nmax));
    }
  }
}

// The weights of the imatrix paths: imatrix * sqrt(sigma2 + x²).
void imatrix_weights(const float* x, const float* qw, float sigma2, int n, float* weights) {
  for (int l = 0; l < n; ++l) weights[l] = qw[l] * std::sqrt(sigma2 + x[l] * x[l]);
}
float sum_of(const float* v, int n) {
  float s = 0;
  for (int l = 0; l < n; ++l) s += v[l];
  return s;
}
float sum_of_squares(const float* x, int n) {
  float s = 0;
  for (int l = 0; l < n; ++l) s += x[l] * x[l];
  return s;
}

// ---- q2_K

void q2k_requantize_and_pack(const float* x, uint8_t* levels, BlockQ2K& b) {
  const float d = half(b.d), dmin = half(b.dmin);
  requantize_affine(x, 16, 3, levels, [&](int j) {
    return std::pair{d * static_cast<float>(b.scales[j] & 0xF), dmin * static_cast<float>(b.scales[j] >> 4)};
  });
  pack_2bit(levels, b.qs);
}

void encode_q2_K(const float* x, BlockQ2K& b) {
  uint8_t levels[kSuperBlock];
  float scales[16], mins[16], weights[16];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    const AffineFit fit = make_qkx2_quants(16, 3, x + 16 * j, weights, levels + 16 * j, -0.5f, 0.1f, 15, true);
    scales[j] = fit.scale;
    mins[j] = fit.offset;
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  // Sub-block scales and mins as 4-bit fractions of the largest.
  if (max_scale > 0) {
    const float iscale = 15.f / max_scale;
    for (int j = 0; j < 16; ++j) b.scales[j] = as_byte(nearest_int(iscale * scales[j]));
    b.d = to_half(max_scale / 15.f);
  } else {
    b.d = to_half(0.f);
  }
  if (max_min > 0) {
    const float iscale = 15.f / max_min;
    for (int j = 0; j < 16; ++j) b.scales[j] = as_byte(b.scales[j] | (nearest_int(iscale * mins[j]) << 4));
    b.dmin = to_half(max_min / 15.f);
  } else {
    b.dmin = to_half(0.f);
  }
  q2k_requantize_and_pack(x, levels, b);
}

void encode_q2_K_weighted(const float* x, const float* qw, BlockQ2K& b) {
  uint8_t levels[kSuperBlock], scale_levels[16], min_levels[16];
  float scales[16], mins[16], weights[16], weight_sums[16];
  const float sigma2 = sum_of_squares(x, kSuperBlock) / kSuperBlock;
  for (int j = 0; j < 16; ++j) {
    imatrix_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weights);
    weight_sums[j] = sum_of(weights, 16);
    const AffineFit fit = make_qkx3_quants(16, 3, x + 16 * j, weights, levels + 16 * j, -0.9f, 0.05f, 36, false);
    scales[j] = fit.scale;
    mins[j] = fit.offset;
  }
  b.d = to_half(make_qp_quants(16, 15, scales, scale_levels, weight_sums));
  b.dmin = to_half(make_qp_quants(16, 15, mins, min_levels, weight_sums));
  for (int j = 0; j < 16; ++j) b.scales[j] = as_byte(scale_levels[j] | (min_levels[j] << 4));
  q2k_requantize_and_pack(x, levels, b);
}

// ---- q3_K

void q3k_requantize_and_pack(const float* x, int8_t* levels, BlockQ3K& b) {
  const float d_all = half(b.d);
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * static_cast<float>(q3k_scale(b.scales, j));
    if (d == 0) continue;
    for (int i = 0; i < 16; ++i) {
      levels[16 * j + i] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * j + i] / d), -4, 3) + 4);
    }
  }
  // The third bit goes to hmask, the low two to qs.
  for (int e = 0; e < kSuperBlock; ++e) {
    if (levels[e] > 3) {
      b.hmask[e % 32] = as_byte(b.hmask[e % 32] | (1 << (e / 32)));
      levels[e] = static_cast<int8_t>(levels[e] - 4);
    }
  }
  pack_2bit(levels, b.qs);
}

void encode_q3_K(const float* x, BlockQ3K& b) {
  int8_t levels[kSuperBlock];
  float scales[16];
  float max_scale = 0, amax = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = make_q3_quants(16, 4, x + 16 * j, levels + 16 * j, true);
    if (std::fabs(scales[j]) > amax) {
      amax = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  if (max_scale != 0) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < 16; ++j) {
      // ggml narrows the rounded scale to int8 before clamping it.
      const auto l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
      set_q3k_scale(b.scales, j, clamp_int(l, -32, 31) + 32);
    }
    b.d = to_half(1 / iscale);
  } else {
    b.d = to_half(0.f);
  }
  q3k_requantize_and_pack(x, levels, b);
}

void encode_q3_K_weighted(const float* x, const float* qw, BlockQ3K& b) {
  int8_t levels[kSuperBlock], scale_levels[16];
  float scales[16], weights[16], weight_sums[16];
  const float sigma2 = 2 * sum_of_squares(x, kSuperBlock) / kSuperBlock;
  for (int j = 0; j < 16; ++j) {
    imatrix_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weights);
    weight_sums[j] = sum_of(weights, 16);
    scales[j] = make_qx_quants(16, 4, x + 16 * j, levels + 16 * j, 1, weights);
  }
  const float d_block = make_qx_quants(16, 32, scales, scale_levels, 1, weight_sums);
  for (int j = 0; j < 16; ++j) set_q3k_scale(b.scales, j, scale_levels[j]);
  b.d = to_half(d_block);
  q3k_requantize_and_pack(x, levels, b);
}

// ---- q4_K and q5_K: the same scales, 4- or 5-bit levels

template <class Block>
constexpr int kLevelMax = std::is_same_v<Block, BlockQ5K> ? 31 : 15;

template <class Block>
void q45k_requantize_and_pack(const float* x, uint8_t* levels, Block& b) {
  const float d = half(b.d), dmin = half(b.dmin);
  requantize_affine(x, 32, kLevelMax<Block>, levels, [&](int j) {
    const ScaleMin sm = scale_min_k4(b.scales, j);
    return std::pair{d * static_cast<float>(sm.scale), dmin * static_cast<float>(sm.min)};
  });
  for (int chunk = 0; chunk < kSuperBlock / 64; ++chunk) {
    for (int l = 0; l < 32; ++l) {
      int low = levels[64 * chunk + l], high = levels[64 * chunk + l + 32];
      if constexpr (std::is_same_v<Block, BlockQ5K>) {
        if (low > 15) {
          low -= 16;
          b.qh[l] = as_byte(b.qh[l] | (1 << (2 * chunk)));
        }
        if (high > 15) {
          high -= 16;
          b.qh[l] = as_byte(b.qh[l] | (2 << (2 * chunk)));
        }
      }
      b.qs[32 * chunk + l] = as_byte(low | (high << 4));
    }
  }
}

template <class Block>
void encode_q45_K(const float* x, Block& b) {
  constexpr bool kFive = std::is_same_v<Block, BlockQ5K>;
  uint8_t levels[kSuperBlock];
  float scales[8], mins[8], weights[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    const float av_x = std::sqrt(sum_of_squares(xs, 32) / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    const AffineFit fit = kFive ? make_qkx2_quants(32, 31, xs, weights, levels + 32 * j, -0.5f, 0.1f, 15, false)
                                : make_qkx2_quants(32, 15, xs, weights, levels + 32 * j, -1.f, 0.1f, 20, false);
    scales[j] = fit.scale;
    mins[j] = fit.offset;
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  // Sub-block scales and mins as 6-bit fractions of the largest.
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = std::min<uint8_t>(63, as_byte(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, as_byte(nearest_int(inv_min * mins[j])));
    set_scale_min_k4(b.scales, j, ls, lm);
  }
  b.d = to_half(max_scale / 63.f);
  b.dmin = to_half(max_min / 63.f);
  q45k_requantize_and_pack(x, levels, b);
}

template <class Block>
void encode_q45_K_weighted(const float* x, const float* qw, Block& b) {
  constexpr bool kFive = std::is_same_v<Block, BlockQ5K>;
  uint8_t levels[kSuperBlock], scale_levels[8], min_levels[8];
  float scales[8], mins[8], weights[32], weight_sums[8];
  const float sigma2 = 2 * sum_of_squares(x, kSuperBlock) / kSuperBlock;
  for (int j = 0; j < 8; ++j) {
    imatrix_weights(x + 32 * j, qw + 32 * j, sigma2, 32, weights);
    weight_sums[j] = sum_of(weights, 32);
    const AffineFit fit =
        make_qkx3_quants(32, kLevelMax<Block>, x + 32 * j, weights, levels + 32 * j, -0.9f, 0.05f, 36, false);
    scales[j] = fit.scale;
    mins[j] = fit.offset;
  }
  const float d_block = make_qp_quants(8, 63, scales, scale_levels, weight_sums);
  const float m_block = make_qp_quants(8, 63, mins, min_levels, weight_sums);
  for (int j = 0; j < 8; ++j) {
    // Only ggml's q5_K clamps here; a wrapped negative level reaches q4_K's packing as is.
    const uint8_t ls = kFive ? std::min<uint8_t>(63, scale_levels[j]) : scale_levels[j];
    const uint8_t lm = kFive ? std::min<uint8_t>(63, min_levels[j]) : min_levels[j];
    set_scale_min_k4(b.scales, j, ls, lm);
  }
  b.d = to_half(d_block);
  b.dmin = to_half(m_block);
  q45k_requantize_and_pack(x, levels, b);
}

// ---- q6_K: the reference and imatrix paths differ only in make_qx_quants' weights

void encode_q6_K_with(const float* x, const float* qw, BlockQ6K& b) {
  int8_t levels[kSuperBlock];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = make_qx_quants(16, 32, x + 16 * j, levels + 16 * j, 1, qw ? qw + 16 * j : nullptr);
    if (std::fabs(scales[j]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    b = BlockQ6K{};
    b.d = to_half(0.f);
    return;
  }
  const float iscale = -128.f / max_scale;
  b.d = to_half(1 / iscale);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
  const float d_all = half(b.d);
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * static_cast<float>(b.scales[j]);
    if (d == 0) continue;
    for (int i = 0; i < 16; ++i) {
      levels[16 * j + i] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
    }
  }
  pack_q6k(levels, b);
}

void encode_q6_K(const float* x, BlockQ6K& b) { encode_q6_K_with(x, nullptr, b); }
void encode_q6_K_weighted(const float* x, const float* qw, BlockQ6K& b) { encode_q6_K_with(x, qw, b); }

// ggml's quantize_qX_K: the whole input through the _ref quantizer without an importance matrix,
// row by row through the _impl one with it (the imatrix indexes a row's columns).
template <class Block, void (*Encode)(const float*, Block&), void (*EncodeWeighted)(const float*, const float*, Block&)>
void quantize_kquant(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  if (imatrix == nullptr) {
    encode_blocks<Block>(src, dst, nrows * n_per_row, Encode);
    return;
  }
  const int64_t blocks_per_row = n_per_row / kSuperBlock;
  for (int64_t row = 0; row < nrows; ++row) {
    for (int64_t i = 0; i < blocks_per_row; ++i) {
      Block b{};
      EncodeWeighted(src + row * n_per_row + i * kSuperBlock, imatrix + i * kSuperBlock, b);
      store_block(dst, row * blocks_per_row + i, b);
    }
  }
}

}  // namespace

void register_kquant_kernels(KernelTable& t) {
  entry(t, TensorType::Q6_K) = {dequantize_q6_K, quantize_kquant<BlockQ6K, encode_q6_K, encode_q6_K_weighted>, true};
  entry(t, TensorType::Q4_K) = {dequantize_q45_K<BlockQ4K>,
                                quantize_kquant<BlockQ4K, encode_q45_K<BlockQ4K>, encode_q45_K_weighted<BlockQ4K>>,
                                true};
  entry(t, TensorType::Q5_K) = {dequantize_q45_K<BlockQ5K>,
                                quantize_kquant<BlockQ5K, encode_q45_K<BlockQ5K>, encode_q45_K_weighted<BlockQ5K>>,
                                true};
  entry(t, TensorType::Q3_K) = {dequantize_q3_K, quantize_kquant<BlockQ3K, encode_q3_K, encode_q3_K_weighted>, true};
  entry(t, TensorType::Q2_K) = {dequantize_q2_K, quantize_kquant<BlockQ2K, encode_q2_K, encode_q2_K_weighted>, true};
  entry(t, TensorType::Q8_K).dequantize = dequantize_q8_K;
}

}  // namespace ggufkit::quant
