// The ternary formats of BitNet b1.58 and TriLM: 256 values of {-1, 0, 1} times one half scale.
// TQ1_0 packs five trits per byte (3^5 = 243 < 256) as a base-3 fraction of 256, TQ2_0 stores
// each trit + 1 in two bits.
#include <cmath>
#include <cstring>

#include "quant/fp16.h"
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

void quantize_tq1_0(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  const int64_t blocks = nrows * n_per_row / kBlockSize;
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = src + b * kBlockSize;
    std::byte* block = dst + b * static_cast<int64_t>(kTq1BlockBytes);
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
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = src + b * kBlockSize;
    std::byte* block = dst + b * static_cast<int64_t>(kTq2BlockBytes);
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
}

}  // namespace ggufkit::quant
