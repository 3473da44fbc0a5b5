// The ternary formats of BitNet b1.58 and TriLM: 256 values of {-1, 0, 1} times one half scale.
// TQ1_0 packs five trits per byte (3^5 = 243 < 256) as a base-3 fraction of 256, TQ2_0 stores
// each trit + 1 in two bits.
#include <cmath>
#include <cstring>
#include <limits>

#include "format/blocks.h"
#include "quant/kernels.h"
#include "quant/simd.h"

namespace ggufkit::quant {
namespace {

constexpr int kBlockSize = 256;
// TQ1_0: 48 bytes of five trits (32 + 16 columns), 4 bytes of four trits, the fp16 scale.
constexpr int kTq1FiveTritBytes = (kBlockSize - 4 * kBlockSize / 64) / 5;
constexpr int kTq1FourTritBytes = kBlockSize / 64;
constexpr size_t kTq1BlockBytes = kTq1FiveTritBytes + kTq1FourTritBytes + 2;
// TQ2_0: 64 bytes of four 2-bit values, the fp16 scale.
constexpr int kTq2QuantBytes = kBlockSize / 4;
constexpr size_t kTq2BlockBytes = kTq2QuantBytes + 2;
static_assert(kTq1BlockBytes == sizeof(format::BlockTQ1_0) && kTq2BlockBytes == sizeof(format::BlockTQ2_0));

float read_half(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

void write_half(std::byte* p, float f) {
  const uint16_t h = fp32_to_fp16(f);
  std::memcpy(p, &h, 2);
}

// The block scale: the largest magnitude. The comparison is written so that a NaN replaces the
// running maximum and the next number replaces the NaN, as ggml's MAX macro does.
float ternary_scale(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < kBlockSize; ++j) {
    const float v = std::fabs(x[j]);
    amax = amax > v ? amax : v;
  }
  return amax;
}

// x / scale rounded to -1, 0 or 1, plus one. Kept as lroundf's long truncated to int: that is
// what ggml does with the out-of-range results of a zero or subnormal scale.
int trit_of(float x, float inverse_scale) {
  return static_cast<int>(std::lround(x * inverse_scale) + 1);
}

// Five trits t0..t4 as the byte ceil(256 * (t0 t1 t2 t3 t4)_3 / 243): the first trit is the most
// significant, so decoding multiplies by 3^n (mod 256) and takes the top of byte * 3.
uint8_t pack_trits(uint8_t base3) { return static_cast<uint8_t>((static_cast<uint16_t>(base3) * 256 + 242) / 243); }

int unpack_trit(uint8_t packed, int position) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const auto shifted = static_cast<uint8_t>(packed * kPow3[position]);
  return (static_cast<uint16_t>(shifted) * 3) >> 8;
}

// Packs `columns` bytes of five trits, trit n of byte m taken from x[m + n*columns].
void encode_five_trit_bytes(const float* x, int columns, float inverse_scale, std::byte* out) {
  for (int m = 0; m < columns; ++m) {
    uint8_t base3 = 0;
    for (int n = 0; n < 5; ++n) base3 = static_cast<uint8_t>(base3 * 3 + trit_of(x[m + n * columns], inverse_scale));
    out[m] = std::byte(pack_trits(base3));
  }
}

// One TQ1_0 block of 256 values, as ggml's quantize_row_tq1_0_ref.
void quantize_tq1_0_block(const float* x, std::byte* block) {
  const float scale = ternary_scale(x);
  const float inverse_scale = scale != 0.0f ? 1.0f / scale : 0.0f;
  write_half(block + kTq1FiveTritBytes + kTq1FourTritBytes, scale);
  // Elements 0..159: bytes 0..31; 160..239: bytes 32..47; 240..255: the four-trit bytes.
  encode_five_trit_bytes(x, 32, inverse_scale, block);
  encode_five_trit_bytes(x + 5 * 32, 16, inverse_scale, block + 32);
  const float* tail = x + 5 * 32 + 5 * 16;
  for (int j = 0; j < kTq1FourTritBytes; ++j) {
    uint8_t base3 = 0;
    for (int m = 0; m < 4; ++m) base3 = static_cast<uint8_t>(base3 * 3 + trit_of(tail[j + m * kTq1FourTritBytes], inverse_scale));
    // A fifth, zero trit in the least significant place keeps the decoder the same.
    block[kTq1FiveTritBytes + j] = std::byte(pack_trits(static_cast<uint8_t>(base3 * 3)));
  }
}

// One TQ2_0 block of 256 values, as ggml's quantize_row_tq2_0_ref.
void quantize_tq2_0_block(const float* x, std::byte* block) {
  const float scale = ternary_scale(x);
  const float inverse_scale = scale != 0.0f ? 1.0f / scale : 0.0f;
  write_half(block + kTq2QuantBytes, scale);
  // Each group of 32 bytes holds 128 elements: element m + 32*n in bits 2n..2n+1 of byte m.
  for (int group = 0; group < kTq2QuantBytes / 32; ++group) {
    const float* xg = x + group * 128;
    for (int m = 0; m < 32; ++m) {
      uint8_t packed = 0;
      for (int n = 0; n < 4; ++n) {
        packed = static_cast<uint8_t>(packed + ((trit_of(xg[m + n * 32], inverse_scale) & 3) << (2 * n)));
      }
      block[group * 32 + m] = std::byte(packed);
    }
  }
}

#if GGUFKIT_QUANT_X86
// The vector quantizers take a fast path for a block without NaN whose amax and 1 / amax are
// finite: every p = x * (1 / amax) then lies within 2^-21 of [-1, 1] (1 / amax is rounded, at
// worst to a subnormal), where lroundf(p) + 1 is 1 + (p >= 0.5) - (p <= -0.5). Other blocks (NaN, infinities, tiny scales whose inverse
// overflows, where lroundf's out-of-range results matter) go through the scalar block code.

// The largest magnitude of a block (exact: without NaN, max is order-independent), and whether
// the block is free of NaN.
GGUFKIT_TARGET_AVX2 bool ternary_scale_avx2(const float* x, float& amax) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 max0 = _mm256_setzero_ps(), max1 = _mm256_setzero_ps(), unordered = _mm256_setzero_ps();
  for (int j = 0; j < kBlockSize; j += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + j);
    const __m256 v1 = _mm256_loadu_ps(x + j + 8);
    max0 = _mm256_max_ps(max0, _mm256_andnot_ps(sign, v0));
    max1 = _mm256_max_ps(max1, _mm256_andnot_ps(sign, v1));
    unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q));
  }
  __m256 m = _mm256_max_ps(max0, max1);
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
  amax = _mm_cvtss_f32(m4);
  return _mm256_movemask_ps(unordered) == 0;
}

// The fast path's condition, and the inverse scale.
bool ternary_fast_path(bool no_nan, float amax, float& inverse_scale) {
  inverse_scale = amax != 0.0f ? 1.0f / amax : 0.0f;
  return no_nan && amax <= std::numeric_limits<float>::max() && inverse_scale <= std::numeric_limits<float>::max();
}

// lroundf(x[i] * inverse_scale) + 1 for 8 values, on the fast path.
GGUFKIT_TARGET_AVX2 __m256i trits8_avx2(const float* x, __m256 inverse_scale) {
  const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(x), inverse_scale);
  const __m256i up = _mm256_castps_si256(_mm256_cmp_ps(p, _mm256_set1_ps(0.5f), _CMP_GE_OQ));
  const __m256i down = _mm256_castps_si256(_mm256_cmp_ps(p, _mm256_set1_ps(-0.5f), _CMP_LE_OQ));
  return _mm256_add_epi32(_mm256_sub_epi32(_mm256_set1_epi32(1), up), down);
}

// The trits of x[0..15] as 16-bit lanes, in packs_epi32's order: x0-3, x8-11 | x4-7, x12-15.
GGUFKIT_TARGET_AVX2 __m256i trits16_avx2(const float* x, __m256 inverse_scale) {
  return _mm256_packs_epi32(trits8_avx2(x, inverse_scale), trits8_avx2(x + 8, inverse_scale));
}

GGUFKIT_TARGET_AVX2 __m256i times3_epi16(__m256i q) { return _mm256_add_epi16(q, _mm256_add_epi16(q, q)); }

// pack_trits on 16-bit lanes: (256 q + 242) / 243 = q + (13 q + 242) / 243, and for
// 13 q + 242 <= 3388 the division by 243 is a multiply by 4316 / 2^20 (checked for every q).
GGUFKIT_TARGET_AVX2 __m256i pack_trits_epi16(__m256i base3) {
  const __m256i w = _mm256_add_epi16(_mm256_mullo_epi16(base3, _mm256_set1_epi16(13)), _mm256_set1_epi16(242));
  return _mm256_add_epi16(base3, _mm256_srli_epi16(_mm256_mulhi_epu16(w, _mm256_set1_epi16(4316)), 4));
}
GGUFKIT_TARGET_AVX2 __m128i pack_trits_epi16(__m128i base3) {
  const __m128i w = _mm_add_epi16(_mm_mullo_epi16(base3, _mm_set1_epi16(13)), _mm_set1_epi16(242));
  return _mm_add_epi16(base3, _mm_srli_epi16(_mm_mulhi_epu16(w, _mm_set1_epi16(4316)), 4));
}

// 32 bytes in element order from two 16-bit vectors in trits16_avx2's order (elements 0..15 and
// 16..31): packus interleaves the four-element groups, the permutation puts them back.
GGUFKIT_TARGET_AVX2 __m256i bytes_in_order(__m256i first16, __m256i second16) {
  return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(first16, second16), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

GGUFKIT_TARGET_AVX2 void encode_tq1_0_block_avx2(const float* x, __m256 inverse_scale, std::byte* block) {
  // Bytes 0..31: byte m takes x[m + 32 n], n = 0..4, the first trit the most significant.
  __m256i first = _mm256_setzero_si256(), second = _mm256_setzero_si256();
  for (int n = 0; n < 5; ++n) {
    first = _mm256_add_epi16(times3_epi16(first), trits16_avx2(x + 32 * n, inverse_scale));
    second = _mm256_add_epi16(times3_epi16(second), trits16_avx2(x + 32 * n + 16, inverse_scale));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(block),
                      bytes_in_order(pack_trits_epi16(first), pack_trits_epi16(second)));
  // Bytes 32..47: byte m takes x[160 + m + 16 n].
  __m256i middle = _mm256_setzero_si256();
  for (int n = 0; n < 5; ++n) middle = _mm256_add_epi16(times3_epi16(middle), trits16_avx2(x + 160 + 16 * n, inverse_scale));
  middle = pack_trits_epi16(middle);
  // packus gives x0-3, x8-11, x4-7, x12-15; the shuffle swaps the middle two groups.
  const __m128i middle_bytes = _mm_packus_epi16(simd::low_half(middle), simd::high_half(middle));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(block + 32), _mm_shuffle_epi32(middle_bytes, _MM_SHUFFLE(3, 1, 2, 0)));
  // The four-trit bytes: byte j takes x[240 + j + 4 m], m = 0..3, then a zero trit. The 16-bit
  // lanes hold t0-3, t8-11 (low half) and t4-7, t12-15 (high half).
  const __m256i tail = trits16_avx2(x + 240, inverse_scale);
  const __m128i low = simd::low_half(tail), high = simd::high_half(tail);
  // pairs: lanes 0..3 are t[j] * 3 + t[4 + j], lanes 4..7 are t[8 + j] * 3 + t[12 + j].
  const __m128i pairs = _mm_add_epi16(_mm_mullo_epi16(low, _mm_set1_epi16(3)), high);
  const __m128i base3 = _mm_add_epi16(_mm_mullo_epi16(pairs, _mm_set1_epi16(27)),
                                      _mm_mullo_epi16(_mm_srli_si128(pairs, 8), _mm_set1_epi16(3)));
  const __m128i tail_bytes = _mm_packus_epi16(pack_trits_epi16(base3), base3);
  const auto four = static_cast<uint32_t>(_mm_cvtsi128_si32(tail_bytes));
  std::memcpy(block + kTq1FiveTritBytes, &four, 4);
}

GGUFKIT_TARGET_AVX2 void quantize_tq1_0_avx2(const float* src, std::byte* dst, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = src + b * kBlockSize;
    std::byte* block = dst + b * static_cast<int64_t>(kTq1BlockBytes);
    float amax = 0.0f, inverse_scale = 0.0f;
    const bool no_nan = ternary_scale_avx2(x, amax);
    if (!ternary_fast_path(no_nan, amax, inverse_scale)) {
      quantize_tq1_0_block(x, block);
      continue;
    }
    write_half(block + kTq1FiveTritBytes + kTq1FourTritBytes, amax);
    encode_tq1_0_block_avx2(x, _mm256_set1_ps(inverse_scale), block);
  }
}

GGUFKIT_TARGET_AVX2 void quantize_tq2_0_avx2(const float* src, std::byte* dst, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = src + b * kBlockSize;
    std::byte* block = dst + b * static_cast<int64_t>(kTq2BlockBytes);
    float amax = 0.0f, inverse_scale = 0.0f;
    const bool no_nan = ternary_scale_avx2(x, amax);
    if (!ternary_fast_path(no_nan, amax, inverse_scale)) {
      quantize_tq2_0_block(x, block);
      continue;
    }
    write_half(block + kTq2QuantBytes, amax);
    const __m256 vinverse = _mm256_set1_ps(inverse_scale);
    // Byte m of a group of 128 values: x[m + 32 n] in bits 2n..2n+1 (trits are 0..2).
    for (int group = 0; group < kTq2QuantBytes / 32; ++group) {
      const float* xg = x + group * 128;
      __m256i first = _mm256_setzero_si256(), second = _mm256_setzero_si256();
      for (int n = 0; n < 4; ++n) {
        const __m128i shift = _mm_cvtsi32_si128(2 * n);
        first = _mm256_or_si256(first, _mm256_sll_epi16(trits16_avx2(xg + 32 * n, vinverse), shift));
        second = _mm256_or_si256(second, _mm256_sll_epi16(trits16_avx2(xg + 32 * n + 16, vinverse), shift));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(block + group * 32), bytes_in_order(first, second));
    }
  }
}
#endif

void quantize_tq1_0(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  const int64_t blocks = nrows * n_per_row / kBlockSize;
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) return quantize_tq1_0_avx2(src, dst, blocks);
#endif
  for (int64_t b = 0; b < blocks; ++b) {
    quantize_tq1_0_block(src + b * kBlockSize, dst + b * static_cast<int64_t>(kTq1BlockBytes));
  }
}

void decode_trit_bytes(const std::byte* bytes, int columns, int trits, float scale, float*& y) {
  for (int n = 0; n < trits; ++n) {
    for (int m = 0; m < columns; ++m) {
      *y++ = static_cast<float>(unpack_trit(std::to_integer<uint8_t>(bytes[m]), n) - 1) * scale;
    }
  }
}

#if GGUFKIT_QUANT_X86
// Trit `position` of 16 packed bytes, as in unpack_trit, minus one, times scale into y[0..15].
GGUFKIT_TARGET_AVX2 void decode_16_trits_avx2(const std::byte* bytes, int position, __m256 scale, float* y) {
  static constexpr int16_t kPow3[5] = {1, 3, 9, 27, 81};
  const __m256i packed = _mm256_cvtepu8_epi16(simd::load16(bytes));
  const __m256i shifted = _mm256_and_si256(_mm256_mullo_epi16(packed, _mm256_set1_epi16(kPow3[position])),
                                           _mm256_set1_epi16(0xFF));
  const __m256i trit = _mm256_srli_epi16(_mm256_mullo_epi16(shifted, _mm256_set1_epi16(3)), 8);
  const __m256i level = _mm256_sub_epi16(trit, _mm256_set1_epi16(1));
  const __m256 low = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(simd::low_half(level)));
  const __m256 high = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(simd::high_half(level)));
  _mm256_storeu_ps(y, _mm256_mul_ps(low, scale));
  _mm256_storeu_ps(y + 8, _mm256_mul_ps(high, scale));
}

GGUFKIT_TARGET_AVX2 void dequantize_tq1_0_avx2(const std::byte* src, float* dst, int64_t n) {
  float* y = dst;
  for (int64_t b = 0; b < n / kBlockSize; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kTq1BlockBytes);
    const float scale = read_half(block + kTq1FiveTritBytes + kTq1FourTritBytes);
    const __m256 vscale = _mm256_set1_ps(scale);
    for (int t = 0; t < 5; ++t) {
      decode_16_trits_avx2(block, t, vscale, y + 32 * t);
      decode_16_trits_avx2(block + 16, t, vscale, y + 32 * t + 16);
    }
    for (int t = 0; t < 5; ++t) decode_16_trits_avx2(block + 32, t, vscale, y + 160 + 16 * t);
    y += 240;
    decode_trit_bytes(block + kTq1FiveTritBytes, kTq1FourTritBytes, 4, scale, y);
  }
}

GGUFKIT_TARGET_AVX2 void dequantize_tq2_0_avx2(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kBlockSize; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kTq2BlockBytes);
    const __m256 scale = _mm256_set1_ps(read_half(block + kTq2QuantBytes));
    float* y = dst + b * kBlockSize;
    for (int group = 0; group < kTq2QuantBytes / 32; ++group) {
      const __m256i bytes = simd::load32(block + group * 32);
      for (int pair = 0; pair < 4; ++pair) {
        const __m256i q = _mm256_sub_epi8(
            _mm256_and_si256(_mm256_srl_epi16(bytes, _mm_cvtsi32_si128(2 * pair)), _mm256_set1_epi8(3)),
            _mm256_set1_epi8(1));
        simd::store16_q_times_d(simd::low_half(q), scale, y);
        simd::store16_q_times_d(simd::high_half(q), scale, y + 16);
        y += 32;
      }
    }
  }
}
#endif

void dequantize_tq1_0(const std::byte* src, float* dst, int64_t n) {
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) return dequantize_tq1_0_avx2(src, dst, n);
#endif
  float* y = dst;
  for (int64_t b = 0; b < n / kBlockSize; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kTq1BlockBytes);
    const float scale = read_half(block + kTq1FiveTritBytes + kTq1FourTritBytes);
    decode_trit_bytes(block, 32, 5, scale, y);
    decode_trit_bytes(block + 32, 16, 5, scale, y);
    decode_trit_bytes(block + kTq1FiveTritBytes, kTq1FourTritBytes, 4, scale, y);
  }
}

void quantize_tq2_0(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  const int64_t blocks = nrows * n_per_row / kBlockSize;
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) return quantize_tq2_0_avx2(src, dst, blocks);
#endif
  for (int64_t b = 0; b < blocks; ++b) {
    quantize_tq2_0_block(src + b * kBlockSize, dst + b * static_cast<int64_t>(kTq2BlockBytes));
  }
}

void dequantize_tq2_0(const std::byte* src, float* dst, int64_t n) {
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) return dequantize_tq2_0_avx2(src, dst, n);
#endif
  float* y = dst;
  for (int64_t b = 0; b < n / kBlockSize; ++b) {
    const std::byte* block = src + b * static_cast<int64_t>(kTq2BlockBytes);
    const float scale = read_half(block + kTq2QuantBytes);
    for (int group = 0; group < kTq2QuantBytes / 32; ++group) {
      for (int pair = 0; pair < 4; ++pair) {
        for (int m = 0; m < 32; ++m) {
          const int q = (std::to_integer<uint8_t>(block[group * 32 + m]) >> (2 * pair)) & 3;
          *y++ = static_cast<float>(q - 1) * scale;
        }
      }
    }
  }
}

}  // namespace

void register_ternary_kernels(KernelTable& table) {
  entry(table, TensorType::TQ1_0) = {dequantize_tq1_0, quantize_tq1_0, false, false};
  entry(table, TensorType::TQ2_0) = {dequantize_tq2_0, quantize_tq2_0, false, false};
  state_block<format::BlockTQ1_0>(table, TensorType::TQ1_0);
  state_block<format::BlockTQ2_0>(table, TensorType::TQ2_0);
}

}  // namespace ggufkit::quant
