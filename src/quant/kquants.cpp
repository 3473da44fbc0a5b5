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

#include "format/blocks.h"
#include "quant/kernels.h"
#include "quant/search.h"
#include "quant/simd.h"

namespace ggufkit::quant {
namespace {

// The block structs (format/blocks.h).
using format::BlockQ2K;
using format::BlockQ3K;
using format::BlockQ4K;
using format::BlockQ5K;
using format::BlockQ6K;
using format::BlockQ8K;
using format::kSuperBlock;

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

// ---- requantize, AVX2

#if GGUFKIT_QUANT_X86
template <bool kAddMin, class Level>
GGUFKIT_TARGET_AVX2 void requantize_values_avx2(const float* x, float d, float m, int lo, int hi, int bias, int n,
                                                Level* levels) {
  const __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m), magic = _mm256_set1_ps(12582912.f);
  const __m256i mantissa = _mm256_set1_epi32(0x007fffff), offset = _mm256_set1_epi32(0x00400000);
  const __m256i vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi), vbias = _mm256_set1_epi32(bias);
  for (int i = 0; i < n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    if constexpr (kAddMin) v = _mm256_add_ps(v, vm);
    v = _mm256_div_ps(v, vd);
    const __m256i bits = _mm256_castps_si256(_mm256_add_ps(v, magic));
    __m256i l = _mm256_sub_epi32(_mm256_and_si256(bits, mantissa), offset);
    l = _mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(l, vlo), vhi), vbias);
    // The levels fit a byte (0..63), so the saturating packs keep them as they are.
    const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(l), _mm256_extracti128_si256(l, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(levels + i), _mm_packus_epi16(words, words));
  }
}
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

// levels[i] = clamp(nearest_int(x[i] / d), lo, hi) + bias for n values (a multiple of 8), with
// x[i] + m in place of x[i] when kAddMin: the scalar formula per lane, the division exact.
template <bool kAddMin, class Level>
void requantize_values(const float* x, float d, float m, int lo, int hi, int bias, int n, Level* levels) {
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) return requantize_values_avx2<kAddMin>(x, d, m, lo, hi, bias, n, levels);
#endif
  for (int i = 0; i < n; ++i) {
    const float v = kAddMin ? x[i] + m : x[i];
    levels[i] = static_cast<Level>(clamp_int(nearest_int(v / d), lo, hi) + bias);
  }
}

// Requantizes sub-blocks of `group` values against their stored affine scale: level =
// round((x + m) / d) in [0, nmax]. Sub-blocks whose scale is zero keep the levels of the search.
template <class ScaleOf>
void requantize_affine(const float* x, int group, int nmax, uint8_t* levels, ScaleOf scale_of) {
  for (int j = 0; j < kSuperBlock / group; ++j) {
    const auto [d, m] = scale_of(j);
    if (d == 0) continue;
    requantize_values<true>(x + group * j, d, m, 0, nmax, 0, group, levels + group * j);
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

// ---- the reference path: sub-block searches, then the rest of each super-block's encoding

// Super-blocks per call of the lane searches: q4_K/q5_K have 8 sub-blocks, so AVX-512's 16 lanes
// take two super-blocks.
inline constexpr int kLaneBatchBlocks = 2;

// Calls search(groups, first_group) over `total` sub-blocks (a multiple of 8), 16 lanes at a time
// when the CPU has AVX-512, else 8.
template <class Search>
void for_lane_batches(int total, Search search) {
  int g = 0;
  if (search_lanes() == 16) {
    for (; g + 16 <= total; g += 16) search(16, g);
  }
  for (; g < total; g += 8) search(8, g);
}

// A type's reference quantizer as Search(x, levels, scales, mins) for one super-block,
// SearchLanes(x, blocks, ...) for up to kLaneBatchBlocks consecutive ones (kGroups sub-blocks
// each), and Finish(x, levels, scales, mins, block) for one.
template <class Block, class Level, int kGroups, void (*Search)(const float*, Level*, float*, float*),
          void (*SearchLanes)(const float*, int, Level*, float*, float*),
          void (*Finish)(const float*, Level*, const float*, const float*, Block&)>
void encode_reference(const float* src, std::byte* dst, int64_t n) {
  const int64_t blocks = n / kSuperBlock;
  Level levels[kLaneBatchBlocks * kSuperBlock];
  float scales[kLaneBatchBlocks * kGroups], mins[kLaneBatchBlocks * kGroups];
  if (search_lanes() == 0) {
    for (int64_t i = 0; i < blocks; ++i) {
      const float* x = src + i * kSuperBlock;
      Block b{};
      Search(x, levels, scales, mins);
      Finish(x, levels, scales, mins, b);
      store_block(dst, i, b);
    }
    return;
  }
  for (int64_t i = 0; i < blocks; i += kLaneBatchBlocks) {
    const int batch = static_cast<int>(std::min<int64_t>(kLaneBatchBlocks, blocks - i));
    const float* x = src + i * kSuperBlock;
    SearchLanes(x, batch, levels, scales, mins);
    for (int k = 0; k < batch; ++k) {
      Block b{};
      Finish(x + k * kSuperBlock, levels + k * kSuperBlock, scales + k * kGroups, mins + k * kGroups, b);
      store_block(dst, i + k, b);
    }
  }
}

// ---- q2_K

void q2k_requantize_and_pack(const float* x, uint8_t* levels, BlockQ2K& b) {
  const float d = half(b.d), dmin = half(b.dmin);
  requantize_affine(x, 16, 3, levels, [&](int j) {
    return std::pair{d * static_cast<float>(b.scales[j] & 0xF), dmin * static_cast<float>(b.scales[j] >> 4)};
  });
  pack_2bit(levels, b.qs);
}

// The reference path in two steps: the sub-block searches (scalar, or many super-blocks at once in
// vector lanes), then the rest of the encoding from their results.
void q2k_search(const float* x, uint8_t* levels, float* scales, float* mins) {
  float weights[16];
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    const AffineFit fit = make_qkx2_quants(16, 3, x + 16 * j, weights, levels + 16 * j, -0.5f, 0.1f, 15, true);
    scales[j] = fit.scale;
    mins[j] = fit.offset;
  }
}

void q2k_search_lanes(const float* x, int blocks, uint8_t* levels, float* scales, float* mins) {
  float weights[kLaneBatchBlocks * kSuperBlock];
  for (int k = 0; k < blocks * kSuperBlock; ++k) weights[k] = std::fabs(x[k]);
  AffineFit fits[kLaneBatchBlocks * 16];
  for_lane_batches(blocks * 16, [&](int groups, int g) {
    make_qkx2_quants_lanes(groups, 16, 3, x + 16 * g, weights + 16 * g, levels + 16 * g, -0.5f, 0.1f, 15, true,
                           fits + g);
  });
  for (int g = 0; g < blocks * 16; ++g) {
    scales[g] = fits[g].scale;
    mins[g] = fits[g].offset;
  }
}

void q2k_finish(const float* x, uint8_t* levels, const float* scales, const float* mins, BlockQ2K& b) {
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 16; ++j) {
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
  float scales[16], mins[16], weights[kSuperBlock], weight_sums[16];
  const float sigma2 = sum_of_squares(x, kSuperBlock) / kSuperBlock;
  for (int j = 0; j < 16; ++j) {
    imatrix_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weights + 16 * j);
    weight_sums[j] = sum_of(weights + 16 * j, 16);
  }
  AffineFit fits[16];
  if (search_lanes() != 0) {
    for (int g = 0; g < 16; g += 8) {
      make_qkx3_quants_lanes(8, 16, 3, x + 16 * g, weights + 16 * g, levels + 16 * g, -0.9f, 0.05f, 36, false, fits + g);
    }
  } else {
    for (int j = 0; j < 16; ++j) {
      fits[j] = make_qkx3_quants(16, 3, x + 16 * j, weights + 16 * j, levels + 16 * j, -0.9f, 0.05f, 36, false);
    }
  }
  for (int j = 0; j < 16; ++j) {
    scales[j] = fits[j].scale;
    mins[j] = fits[j].offset;
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
    requantize_values<false>(x + 16 * j, d, 0.f, -4, 3, 4, 16, levels + 16 * j);
  }
  // The third bit goes to hmask, the low two to qs (without branches: the bit is a coin toss).
  for (int e = 0; e < kSuperBlock; ++e) {
    const int high = levels[e] > 3 ? 1 : 0;
    b.hmask[e % 32] = as_byte(b.hmask[e % 32] | (high << (e / 32)));
    levels[e] = static_cast<int8_t>(levels[e] - 4 * high);
  }
  pack_2bit(levels, b.qs);
}

void q3k_search(const float* x, int8_t* levels, float* scales, float*) {
  for (int j = 0; j < 16; ++j) scales[j] = make_q3_quants(16, 4, x + 16 * j, levels + 16 * j, true);
}

void q3k_search_lanes(const float* x, int blocks, int8_t* levels, float* scales, float*) {
  // 16 lanes a call: two vectors of 8 whose passes overlap.
  for (int g = 0; g < blocks * 16; g += 16) make_q3_quants_lanes(16, 16, 4, x + 16 * g, levels + 16 * g, scales + g);
}

void q3k_finish(const float* x, int8_t* levels, const float* scales, const float*, BlockQ3K& b) {
  float max_scale = 0, amax = 0;
  for (int j = 0; j < 16; ++j) {
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
  float scales[16], weights[kSuperBlock], weight_sums[16];
  const float sigma2 = 2 * sum_of_squares(x, kSuperBlock) / kSuperBlock;
  for (int j = 0; j < 16; ++j) {
    imatrix_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weights + 16 * j);
    weight_sums[j] = sum_of(weights + 16 * j, 16);
  }
  if (search_lanes() != 0) {
    for (int g = 0; g < 16; g += 8) make_qx_quants_lanes(8, 16, 4, x + 16 * g, levels + 16 * g, weights + 16 * g, scales + g);
  } else {
    for (int j = 0; j < 16; ++j) scales[j] = make_qx_quants(16, 4, x + 16 * j, levels + 16 * j, 1, weights + 16 * j);
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

// The reference weights of a sub-block: its rms plus |x|.
void q45k_weights(const float* xs, float* weights) {
  const float av_x = std::sqrt(sum_of_squares(xs, 32) / 32);
  for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
}

template <class Block>
void q45k_search(const float* x, uint8_t* levels, float* scales, float* mins) {
  constexpr bool kFive = std::is_same_v<Block, BlockQ5K>;
  float weights[32];
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    q45k_weights(xs, weights);
    const AffineFit fit = kFive ? make_qkx2_quants(32, 31, xs, weights, levels + 32 * j, -0.5f, 0.1f, 15, false)
                                : make_qkx2_quants(32, 15, xs, weights, levels + 32 * j, -1.f, 0.1f, 20, false);
    scales[j] = fit.scale;
    mins[j] = fit.offset;
  }
}

template <class Block>
void q45k_search_lanes(const float* x, int blocks, uint8_t* levels, float* scales, float* mins) {
  constexpr bool kFive = std::is_same_v<Block, BlockQ5K>;
  float weights[kLaneBatchBlocks * kSuperBlock];
  for (int g = 0; g < blocks * 8; ++g) q45k_weights(x + 32 * g, weights + 32 * g);
  AffineFit fits[kLaneBatchBlocks * 8];
  for_lane_batches(blocks * 8, [&](int groups, int g) {
    make_qkx2_quants_lanes(groups, 32, kLevelMax<Block>, x + 32 * g, weights + 32 * g, levels + 32 * g,
                           kFive ? -0.5f : -1.f, 0.1f, kFive ? 15 : 20, false, fits + g);
  });
  for (int g = 0; g < blocks * 8; ++g) {
    scales[g] = fits[g].scale;
    mins[g] = fits[g].offset;
  }
}

template <class Block>
void q45k_finish(const float* x, uint8_t* levels, const float* scales, const float* mins, Block& b) {
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
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
  float scales[8], mins[8], weights[kSuperBlock], weight_sums[8];
  const float sigma2 = 2 * sum_of_squares(x, kSuperBlock) / kSuperBlock;
  for (int j = 0; j < 8; ++j) {
    imatrix_weights(x + 32 * j, qw + 32 * j, sigma2, 32, weights + 32 * j);
    weight_sums[j] = sum_of(weights + 32 * j, 32);
  }
  AffineFit fits[8];
  if (search_lanes() != 0) {
    make_qkx3_quants_lanes(8, 32, kLevelMax<Block>, x, weights, levels, -0.9f, 0.05f, 36, false, fits);
  } else {
    for (int j = 0; j < 8; ++j) {
      fits[j] = make_qkx3_quants(32, kLevelMax<Block>, x + 32 * j, weights + 32 * j, levels + 32 * j, -0.9f, 0.05f,
                                 36, false);
    }
  }
  for (int j = 0; j < 8; ++j) {
    scales[j] = fits[j].scale;
    mins[j] = fits[j].offset;
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

void q6k_search(const float* x, int8_t* levels, float* scales, float*) {
  for (int j = 0; j < 16; ++j) scales[j] = make_qx_quants(16, 32, x + 16 * j, levels + 16 * j, 1, nullptr);
}

void q6k_search_lanes(const float* x, int blocks, int8_t* levels, float* scales, float*) {
  for_lane_batches(blocks * 16, [&](int groups, int g) {
    make_qx_quants_lanes(groups, 16, 32, x + 16 * g, levels + 16 * g, nullptr, scales + g);
  });
}

void q6k_finish(const float* x, int8_t* levels, const float* scales, const float*, BlockQ6K& b) {
  float max_scale = 0, max_abs_scale = 0;
  for (int j = 0; j < 16; ++j) {
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
    requantize_values<false>(x + 16 * j, d, 0.f, -32, 31, 32, 16, levels + 16 * j);
  }
  pack_q6k(levels, b);
}

void encode_q6_K_weighted(const float* x, const float* qw, BlockQ6K& b) {
  int8_t levels[kSuperBlock];
  float scales[16];
  if (search_lanes() != 0) {
    for (int g = 0; g < 16; g += 8) make_qx_quants_lanes(8, 16, 32, x + 16 * g, levels + 16 * g, qw + 16 * g, scales + g);
  } else {
    for (int j = 0; j < 16; ++j) scales[j] = make_qx_quants(16, 32, x + 16 * j, levels + 16 * j, 1, qw + 16 * j);
  }
  q6k_finish(x, levels, scales, nullptr, b);
}

// ggml's quantize_qX_K: the whole input through the _ref quantizer without an importance matrix,
// row by row through the _impl one with it (the imatrix indexes a row's columns).
template <class Block, void (*EncodeReference)(const float*, std::byte*, int64_t),
          void (*EncodeWeighted)(const float*, const float*, Block&)>
void quantize_kquant(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  if (imatrix == nullptr) {
    EncodeReference(src, dst, nrows * n_per_row);
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
  constexpr auto q2 = encode_reference<BlockQ2K, uint8_t, 16, q2k_search, q2k_search_lanes, q2k_finish>;
  constexpr auto q3 = encode_reference<BlockQ3K, int8_t, 16, q3k_search, q3k_search_lanes, q3k_finish>;
  constexpr auto q4 = encode_reference<BlockQ4K, uint8_t, 8, q45k_search<BlockQ4K>, q45k_search_lanes<BlockQ4K>,
                                       q45k_finish<BlockQ4K>>;
  constexpr auto q5 = encode_reference<BlockQ5K, uint8_t, 8, q45k_search<BlockQ5K>, q45k_search_lanes<BlockQ5K>,
                                       q45k_finish<BlockQ5K>>;
  constexpr auto q6 = encode_reference<BlockQ6K, int8_t, 16, q6k_search, q6k_search_lanes, q6k_finish>;
  entry(t, TensorType::Q6_K) = {dequantize_q6_K, quantize_kquant<BlockQ6K, q6, encode_q6_K_weighted>, true};
  entry(t, TensorType::Q4_K) = {dequantize_q45_K<BlockQ4K>,
                                quantize_kquant<BlockQ4K, q4, encode_q45_K_weighted<BlockQ4K>>, true};
  entry(t, TensorType::Q5_K) = {dequantize_q45_K<BlockQ5K>,
                                quantize_kquant<BlockQ5K, q5, encode_q45_K_weighted<BlockQ5K>>, true};
  entry(t, TensorType::Q3_K) = {dequantize_q3_K, quantize_kquant<BlockQ3K, q3, encode_q3_K_weighted>, true};
  entry(t, TensorType::Q2_K) = {dequantize_q2_K, quantize_kquant<BlockQ2K, q2, encode_q2_K_weighted>, true};
  entry(t, TensorType::Q8_K).dequantize = dequantize_q8_K;
  // After the kernels: the blocks they were written for, checked against the type table.
  state_block<BlockQ2K>(t, TensorType::Q2_K);
  state_block<BlockQ3K>(t, TensorType::Q3_K);
  state_block<BlockQ4K>(t, TensorType::Q4_K);
  state_block<BlockQ5K>(t, TensorType::Q5_K);
  state_block<BlockQ6K>(t, TensorType::Q6_K);
  state_block<BlockQ8K>(t, TensorType::Q8_K);
}

}  // namespace ggufkit::quant
