// Half and bfloat16 conversions, bit-identical to ggml's scalar ones (round to nearest even,
// NaN kept as a quiet NaN). Number formats of the file format, used by the kernels (quant/), the
// converter and extract.
#pragma once

#include <bit>
#include <cstdint>

namespace ggufkit::format {

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) {  // infinity, or NaN: payload kept and made quiet, as ggml's arithmetic does
    return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13) | (mant != 0 ? 0x400000u : 0u));
  }
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  // Zero and subnormals: mant * 2^-24, exact in float.
  const float magnitude = static_cast<float>(mant) * 0x1.0p-24f;
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return sign | 0x7E00u;     // NaN: a quiet NaN, payload dropped (as ggml)
  if (abs >= 0x477FF000u) return sign | 0x7C00u;    // rounds to or past 65520: infinity
  if (abs < 0x38800000u) {                          // below 2^-14: subnormal half or zero
    // Scale into the subnormal range; float addition rounds to nearest even for us.
    const float scaled = std::bit_cast<float>(abs) + 0.5f;  // 0.5 = 2^-1 fixes the exponent
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(scaled) - 0x3F000000u);
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  const uint32_t rounded = abs + 0x0FFFu + ((abs >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

inline float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 64u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace ggufkit::format
