// The 4-bit float formats: MXFP4 (blocks of 32 E2M1 values with a power-of-two E8M0 scale) and
// NVFP4 (blocks of 64 E2M1 values, one unsigned E4M3 scale per 16). Both store the E2M1 values as
// indices into kvalues_fp4, which holds twice the E2M1 value, so the scales are stored halved.
#include <array>
#include <bit>
#include <cmath>
#include <limits>

#include "format/blocks.h"
#include "quant/kernels.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace ggufkit::quant {
namespace {

constexpr int kMxfp4BlockSize = 32;
constexpr size_t kMxfp4BlockBytes = 1 + kMxfp4BlockSize / 2;  // e8m0 scale, nibbles
constexpr int kNvfp4BlockSize = 64;
constexpr int kNvfp4SubBlockSize = 16;
constexpr int kNvfp4SubBlocks = kNvfp4BlockSize / kNvfp4SubBlockSize;
constexpr size_t kNvfp4BlockBytes = kNvfp4SubBlocks + kNvfp4BlockSize / 2;  // e4m3 scales, nibbles
static_assert(kMxfp4BlockBytes == sizeof(format::BlockMXFP4) && kNvfp4BlockBytes == sizeof(format::BlockNVFP4) &&
              kMxfp4BlockSize == format::BlockMXFP4::kElements && kNvfp4BlockSize == format::BlockNVFP4::kElements);

// Half of 2^(e - 127): the E8M0 scale pre-divided by the 2 the doubled E2M1 table carries.
// e = 0 and 1 give the subnormals 2^-128 and 2^-127.
float e8m0_to_fp32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  return std::bit_cast<float>(bits);
}

// Half the value of an unsigned E4M3 byte (bias 7, 3 mantissa bits; the top bit is ignored).
// 0x7F, which E4M3 uses for NaN, reads as zero.
float ue4m3_to_fp32_half(uint8_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  const int exponent = (x >> 3) & 0xF;
  const int mantissa = x & 0x7;
  const float value = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                    : std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
  return value * 0.5f;
}

// Encodes a positive float as unsigned E4M3: clamped to 448, mantissa rounded half up on the
// first dropped bit (not to nearest even), exponent overflow saturating at 0x7E; zero, negatives
// and NaN give 0.
uint8_t fp32_to_ue4m3(float x) {
  if (!(x > 0.0f)) return 0;
  if (x > 448.0f) x = 448.0f;
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  int exponent = static_cast<int>((bits >> 23) & 0xFF) - 127 + 7;
  if (exponent <= 0) {  // subnormal E4M3: mantissa * 2^-9
    int mantissa = static_cast<int>(x * 512.0f + 0.5f);
    if (mantissa > 7) mantissa = 7;
    return mantissa < 1 ? 0 : static_cast<uint8_t>(mantissa);
  }
  if (exponent >= 15) return 0x7E;
  int mantissa = static_cast<int>((bits >> 20) & 0x7) + static_cast<int>((bits >> 19) & 1);
  if (mantissa > 7) {
    mantissa = 0;
    if (++exponent >= 15) return 0x7E;
  }
  return static_cast<uint8_t>((exponent << 3) | mantissa);
}

// The float -> integer conversion x86 performs (cvttss2si): truncation, and INT32_MIN for NaN and
// out-of-range values, which ggml's float -> uint8_t cast relies on for tiny blocks.
int32_t truncate_like_x86(float v) {
  if (!(v >= -2147483648.0f && v < 2147483648.0f)) return INT32_MIN;
  return static_cast<int32_t>(v);
}

// The E2M1 index whose scaled value is nearest to x; the first index wins ties (so +0 over -0).
uint8_t nearest_fp4_index(float x, float scale) {
  uint8_t best = 0;
  float best_error = std::fabs(static_cast<float>(tables::kvalues_fp4[0]) * scale - x);
  for (uint8_t i = 1; i < 16; ++i) {
    const float error = std::fabs(static_cast<float>(tables::kvalues_fp4[i]) * scale - x);
    if (error < best_error) {
      best = i;
      best_error = error;
    }
  }
  return best;
}

// Largest magnitude; NaNs never win the comparison.
float absolute_max(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
  }
  return amax;
}

// One group of 2*half values: element j in the low nibble of byte j, element j + half in its high one.
void encode_nibbles(const float* x, int half, float scale, std::byte* qs) {
  for (int j = 0; j < half; ++j) {
    const uint8_t low = nearest_fp4_index(x[j], scale);
    const uint8_t high = nearest_fp4_index(x[half + j], scale);
    qs[j] = std::byte(static_cast<uint8_t>(low | (high << 4)));
  }
}

void decode_nibbles(const std::byte* qs, int half, float scale, float* y) {
  for (int j = 0; j < half; ++j) {
    const auto byte = std::to_integer<uint8_t>(qs[j]);
    y[j] = static_cast<float>(tables::kvalues_fp4[byte & 0x0F]) * scale;
    y[j + half] = static_cast<float>(tables::kvalues_fp4[byte >> 4]) * scale;
  }
}

void dequantize_mxfp4(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kMxfp4BlockSize; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kMxfp4BlockBytes);
    const float scale = e8m0_to_fp32_half(std::to_integer<uint8_t>(block[0]));
    decode_nibbles(block + 1, kMxfp4BlockSize / 2, scale, dst + b * kMxfp4BlockSize);
  }
}

// The E8M0 exponent of a block: the power of two that puts amax in [4, 8) of the doubled table
// (its top value is 12 = 2 * 6). Tiny blocks give a negative exponent, which wraps modulo 256 as
// in ggml.
uint8_t mxfp4_exponent(float amax) {
  return amax > 0.0f ? static_cast<uint8_t>(truncate_like_x86(std::floor(std::log2(amax)) - 2 + 127)) : 0;
}

void quantize_mxfp4_block(const float* x, std::byte* block) {
  const uint8_t e = mxfp4_exponent(absolute_max(x, kMxfp4BlockSize));
  block[0] = std::byte(e);
  encode_nibbles(x, kMxfp4BlockSize / 2, e8m0_to_fp32_half(e), block + 1);
}

void dequantize_nvfp4(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kNvfp4BlockSize; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kNvfp4BlockBytes);
    for (int s = 0; s < kNvfp4SubBlocks; ++s) {
      const float scale = ue4m3_to_fp32_half(std::to_integer<uint8_t>(block[s]));
      decode_nibbles(block + kNvfp4SubBlocks + s * (kNvfp4SubBlockSize / 2), kNvfp4SubBlockSize / 2, scale,
                     dst + b * kNvfp4BlockSize + s * kNvfp4SubBlockSize);
    }
  }
}

void quantize_nvfp4_sub_block(const float* x, std::byte* scale, std::byte* qs) {
  // The scale maps the largest E2M1 magnitude, 6, onto amax.
  const uint8_t ue = fp32_to_ue4m3(absolute_max(x, kNvfp4SubBlockSize) / 6.0f);
  *scale = std::byte(ue);
  encode_nibbles(x, kNvfp4SubBlockSize / 2, ue4m3_to_fp32_half(ue), qs);
}

#if GGUFKIT_QUANT_X86
// The vector quantizers replace the nearest-level search by comparisons with the midpoints
// between levels. For a >= 0 and levels 0 = L0 < L1 < ... < L7 (the E2M1 values times d, exact
// products), the errors |L_i - a| as ggml rounds them form a valley, and the search keeps the
// first minimum, so its index counts the i >= 1 with err_i < err_{i-1}. That holds exactly when
// a > (L_{i-1} + L_i) / 2: near the midpoint both differences are exact (Sterbenz; for i = 1 the
// other side stays above d / 2), and away from it the errors differ by at least d, more than
// rounding can hide while a < 2^20 d. The midpoints m_i * d are exact too. For x < 0 the
// negative levels (indices 9..15) give the errors the positive ones give for |x|, the positive
// levels give errors >= |x|, the error of index 0, and index 8 (a second zero) ties with index 0
// and loses: index(x) = r + 8 when x < 0 and r > 0, else r. NaN gives r = 0.
// The levels must not overflow: with e = 253 (amax just under 2^128, where log2f rounds up to
// 128) 8 d and 12 d are infinite and ggml never picks them. Such blocks, and blocks with
// amax >= 2^20 d (infinities, clamped scales), take the scalar search; d = 0 (a zero E4M3
// scale) makes every error |x|, so every index 0.
constexpr float kMidpointsOverD[7] = {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f};
constexpr float kFastPathRange = 1048576.0f;  // 2^20

struct Midpoints {
  __m256 at[7];
};

GGUFKIT_TARGET_AVX2 Midpoints midpoints_avx2(float d) {
  Midpoints m;
  for (int i = 0; i < 7; ++i) m.at[i] = _mm256_set1_ps(kMidpointsOverD[i] * d);
  return m;
}

// The E2M1 index of 8 values, as nearest_fp4_index, on the fast path.
GGUFKIT_TARGET_AVX2 __m256i fp4_indices8_avx2(const float* x, const Midpoints& m) {
  const __m256 v = _mm256_loadu_ps(x);
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
  __m256i r = _mm256_setzero_si256();
  for (int i = 0; i < 7; ++i) r = _mm256_sub_epi32(r, _mm256_castps_si256(_mm256_cmp_ps(a, m.at[i], _CMP_GT_OQ)));
  const __m256i negative = _mm256_srai_epi32(_mm256_castps_si256(v), 31);
  const __m256i negative_level = _mm256_and_si256(negative, _mm256_cmpgt_epi32(r, _mm256_setzero_si256()));
  return _mm256_add_epi32(r, _mm256_and_si256(negative_level, _mm256_set1_epi32(8)));
}

// max(|x[0..7]|, start), ignoring NaN as ggml's "if (amax < |v|)" does: max_ps returns its second
// operand when the first is NaN.
GGUFKIT_TARGET_AVX2 __m256 abs_max8_avx2(const float* x, __m256 start) {
  return _mm256_max_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x)), start);
}

GGUFKIT_TARGET_AVX2 float horizontal_max_avx2(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}

// floor(log2f(amax)) from the exponent bits when amax is normal and its mantissa is not within
// 2^-11 of a power of two (there log2f is at least 3e-4 from an integer, far more than its
// error); log2f itself otherwise, so that the result is log2f's wherever it is close.
uint8_t mxfp4_exponent_fast(float amax) {
  const uint32_t bits = std::bit_cast<uint32_t>(amax);
  const uint32_t biased = bits >> 23;  // amax >= 0
  const uint32_t mantissa = bits & 0x7FFFFF;
  if (biased >= 1 && biased <= 254 && mantissa >= 0x1000 && mantissa <= 0x7FF000) {
    return static_cast<uint8_t>(static_cast<int>(biased) - 127 - 2 + 127);
  }
  return mxfp4_exponent(amax);
}

GGUFKIT_TARGET_AVX2 void quantize_mxfp4_avx2(const float* src, std::byte* dst, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = src + b * kMxfp4BlockSize;
    std::byte* block = dst + b * static_cast<int64_t>(kMxfp4BlockBytes);
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < kMxfp4BlockSize; j += 8) m = abs_max8_avx2(x + j, m);
    const float amax = horizontal_max_avx2(m);
    const uint8_t e = mxfp4_exponent_fast(amax);
    const float d = e8m0_to_fp32_half(e);
    if (!(amax < kFastPathRange * d && 12.0f * d <= std::numeric_limits<float>::max())) {
      quantize_mxfp4_block(x, block);
      continue;
    }
    block[0] = std::byte(e);
    const Midpoints mid = midpoints_avx2(d);
    // Byte j: x[j] in the low nibble, x[16 + j] in the high one.
    const __m256i low0 = fp4_indices8_avx2(x, mid), low1 = fp4_indices8_avx2(x + 8, mid);
    const __m256i high0 = fp4_indices8_avx2(x + 16, mid), high1 = fp4_indices8_avx2(x + 24, mid);
    const __m256i bytes0 = _mm256_or_si256(low0, _mm256_slli_epi32(high0, 4));
    const __m256i bytes1 = _mm256_or_si256(low1, _mm256_slli_epi32(high1, 4));
    // packs interleaves groups of four (0-3, 8-11 | 4-7, 12-15); the 64-bit permutation undoes it.
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(bytes0, bytes1), _MM_SHUFFLE(3, 1, 2, 0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(block + 1), _mm_packus_epi16(simd::low_half(words), simd::high_half(words)));
  }
}

// Half the value of every E4M3 byte, from the scalar decoder.
const float* ue4m3_half_table() {
  static const auto table = [] {
    std::array<float, 256> values{};
    for (int i = 0; i < 256; ++i) values[static_cast<size_t>(i)] = ue4m3_to_fp32_half(static_cast<uint8_t>(i));
    return values;
  }();
  return table.data();
}

GGUFKIT_TARGET_AVX2 void quantize_nvfp4_avx2(const float* src, std::byte* dst, int64_t blocks) {
  const float* half_scale = ue4m3_half_table();
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = src + b * kNvfp4BlockSize;
    std::byte* block = dst + b * static_cast<int64_t>(kNvfp4BlockBytes);
    // The four sub-block maxima at once: each sub-block's two vectors, then a transposing reduction.
    __m256 m[kNvfp4SubBlocks];
    for (int s = 0; s < kNvfp4SubBlocks; ++s) {
      m[s] = abs_max8_avx2(x + 16 * s + 8, abs_max8_avx2(x + 16 * s, _mm256_setzero_ps()));
    }
    const __m256 t0 = _mm256_max_ps(_mm256_unpacklo_ps(m[0], m[1]), _mm256_unpackhi_ps(m[0], m[1]));
    const __m256 t1 = _mm256_max_ps(_mm256_unpacklo_ps(m[2], m[3]), _mm256_unpackhi_ps(m[2], m[3]));
    const __m256 u = _mm256_max_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t1))),
                                   _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t1))));
    const __m128 amax4 = _mm_max_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
    alignas(16) float amax[4], sixth[4];
    _mm_store_ps(amax, amax4);
    _mm_store_ps(sixth, _mm_div_ps(amax4, _mm_set1_ps(6.0f)));
    __m256i packed[kNvfp4SubBlocks];
    for (int s = 0; s < kNvfp4SubBlocks; ++s) {
      const uint8_t ue = fp32_to_ue4m3(sixth[s]);
      block[s] = std::byte(ue);
      const float d = half_scale[ue];
      const float* xs = x + 16 * s;
      if (d == 0.0f) {
        packed[s] = _mm256_setzero_si256();
      } else if (amax[s] < kFastPathRange * d) {
        const Midpoints mid = midpoints_avx2(d);
        packed[s] = _mm256_or_si256(fp4_indices8_avx2(xs, mid), _mm256_slli_epi32(fp4_indices8_avx2(xs + 8, mid), 4));
      } else {
        alignas(32) int32_t bytes[8];
        for (int j = 0; j < 8; ++j) bytes[j] = nearest_fp4_index(xs[j], d) | (nearest_fp4_index(xs[8 + j], d) << 4);
        packed[s] = _mm256_load_si256(reinterpret_cast<const __m256i*>(bytes));
      }
    }
    // Sub-block s's 8 bytes in order: packs and packus interleave groups of four, the
    // permutation undoes it.
    const __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(packed[0], packed[1]), _mm256_packs_epi32(packed[2], packed[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(block + kNvfp4SubBlocks),
                        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
}
#endif

void quantize_mxfp4(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  const int64_t blocks = nrows * n_per_row / kMxfp4BlockSize;
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) return quantize_mxfp4_avx2(src, dst, blocks);
#endif
  for (int64_t b = 0; b < blocks; ++b) {
    quantize_mxfp4_block(src + b * kMxfp4BlockSize, dst + b * static_cast<int64_t>(kMxfp4BlockBytes));
  }
}

void quantize_nvfp4(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  const int64_t blocks = nrows * n_per_row / kNvfp4BlockSize;
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) return quantize_nvfp4_avx2(src, dst, blocks);
#endif
  for (int64_t b = 0; b < blocks; ++b) {
    std::byte* block = dst + b * static_cast<int64_t>(kNvfp4BlockBytes);
    for (int s = 0; s < kNvfp4SubBlocks; ++s) {
      quantize_nvfp4_sub_block(src + b * kNvfp4BlockSize + s * kNvfp4SubBlockSize, block + s,
                               block + kNvfp4SubBlocks + s * (kNvfp4SubBlockSize / 2));
    }
  }
}

}  // namespace

void register_fp4_kernels(KernelTable& table) {
  entry(table, TensorType::MXFP4) = {dequantize_mxfp4, quantize_mxfp4, false, false};
  entry(table, TensorType::NVFP4) = {dequantize_nvfp4, quantize_nvfp4, false, false};
  state_block<format::BlockMXFP4>(table, TensorType::MXFP4);
  state_block<format::BlockNVFP4>(table, TensorType::NVFP4);
}

}  // namespace ggufkit::quant
