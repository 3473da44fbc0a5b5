// The 4-bit float formats: MXFP4 (blocks of 32 E2M1 values with a power-of-two E8M0 scale) and
// NVFP4 (blocks of 64 E2M1 values, one unsigned E4M3 scale per 16). Both store the E2M1 values as
// indices into kvalues_fp4, which holds twice the E2M1 value, so the scales are stored halved.
#include <bit>
#include <cmath>

#include "quant/kernels.h"
#include "quant/tables.h"

namespace ggufkit::quant {
namespace {

constexpr int kMxfp4BlockSize = 32;
constexpr size_t kMxfp4BlockBytes = 1 + kMxfp4BlockSize / 2;  // e8m0 scale, nibbles
constexpr int kNvfp4BlockSize = 64;
constexpr int kNvfp4SubBlockSize = 16;
constexpr int kNvfp4SubBlocks = kNvfp4BlockSize / kNvfp4SubBlockSize;
constexpr size_t kNvfp4BlockBytes = kNvfp4SubBlocks + kNvfp4BlockSize / 2;  // e4m3 scales, nibbles

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

void quantize_mxfp4(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  const int64_t blocks = nrows * n_per_row / kMxfp4BlockSize;
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = src + b * kMxfp4BlockSize;
    std::byte* block = dst + b * static_cast<int64_t>(kMxfp4BlockBytes);
    const float amax = absolute_max(x, kMxfp4BlockSize);
    // The power of two that puts amax in [4, 8) of the doubled table (its top value is 12 = 2 * 6).
    // Tiny blocks give a negative exponent, which wraps modulo 256 as in ggml.
    const uint8_t e = amax > 0.0f
                          ? static_cast<uint8_t>(truncate_like_x86(std::floor(std::log2(amax)) - 2 + 127))
                          : 0;
    block[0] = std::byte(e);
    encode_nibbles(x, kMxfp4BlockSize / 2, e8m0_to_fp32_half(e), block + 1);
  }
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

void quantize_nvfp4(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  const int64_t blocks = nrows * n_per_row / kNvfp4BlockSize;
  for (int64_t b = 0; b < blocks; ++b) {
    std::byte* block = dst + b * static_cast<int64_t>(kNvfp4BlockBytes);
    for (int s = 0; s < kNvfp4SubBlocks; ++s) {
      const float* x = src + b * kNvfp4BlockSize + s * kNvfp4SubBlockSize;
      // The scale maps the largest E2M1 magnitude, 6, onto amax.
      const uint8_t ue = fp32_to_ue4m3(absolute_max(x, kNvfp4SubBlockSize) / 6.0f);
      block[s] = std::byte(ue);
      encode_nibbles(x, kNvfp4SubBlockSize / 2, ue4m3_to_fp32_half(ue),
                     block + kNvfp4SubBlocks + s * (kNvfp4SubBlockSize / 2));
    }
  }
}

}  // namespace

void register_fp4_kernels(KernelTable& table) {
  entry(table, TensorType::MXFP4) = {dequantize_mxfp4, quantize_mxfp4, false, false};
  entry(table, TensorType::NVFP4) = {dequantize_nvfp4, quantize_nvfp4, false, false};
}

}  // namespace ggufkit::quant
