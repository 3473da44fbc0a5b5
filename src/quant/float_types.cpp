// Plain element types: floats and integers stored one per element.
#include <cstring>

#include "quant/kernels.h"
#include "quant/simd.h"

namespace ggufkit::quant {
namespace {

template <class T>
void widen(const std::byte* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    dst[i] = static_cast<float>(v);
  }
}

void f32_to_float(const std::byte* src, float* dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * 4); }

#if GGUFKIT_QUANT_X86
// F16C's conversion is exact and quiets a signaling NaN keeping its payload, as fp16_to_fp32 does.
GGUFKIT_TARGET_AVX2 int64_t f16_to_float_avx2(const std::byte* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i h0 = simd::load32(src + 2 * i);
    const __m256i h1 = simd::load32(src + 2 * i + 32);
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(simd::low_half(h0)));
    _mm256_storeu_ps(dst + i + 8, _mm256_cvtph_ps(simd::high_half(h0)));
    _mm256_storeu_ps(dst + i + 16, _mm256_cvtph_ps(simd::low_half(h1)));
    _mm256_storeu_ps(dst + i + 24, _mm256_cvtph_ps(simd::high_half(h1)));
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(simd::load16(src + 2 * i)));
  return i;
}
#endif


#if GGUFKIT_QUANT_X86
GGUFKIT_TARGET_AVX2 int64_t bf16_to_float_avx2(const std::byte* src, float* dst, int64_t n) {
  // A bf16 is the high half of its float: interleaving zero halves below the values widens them.
  // The 64-bit quarters are reordered first because the unpacks work within 128-bit lanes.
  const __m256i zero = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_permute4x64_epi64(simd::load32(src + 2 * i), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_unpacklo_epi16(zero, h));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 8), _mm256_unpackhi_epi16(zero, h));
  }
  return i;
}
#endif

#if !GGUFKIT_QUANT_X86
int64_t f16_to_float_avx2(const std::byte*, float*, int64_t) { return 0; }  // no vector kernel here
int64_t bf16_to_float_avx2(const std::byte*, float*, int64_t) { return 0; }
#endif

// 16-bit floats: the vector kernel (when the CPU has one) takes whole groups, the scalar
// conversion the rest.
template <float (*kWiden)(uint16_t), int64_t (*kVector)(const std::byte*, float*, int64_t)>
void halves_to_float(const std::byte* src, float* dst, int64_t n) {
  int64_t done = 0;
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) done = kVector(src, dst, n);
#endif
  for (int64_t i = done; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = kWiden(h);
  }
}

void f16_to_float(const std::byte* src, float* dst, int64_t n) { halves_to_float<fp16_to_fp32, f16_to_float_avx2>(src, dst, n); }
void bf16_to_float(const std::byte* src, float* dst, int64_t n) { halves_to_float<bf16_to_fp32, bf16_to_float_avx2>(src, dst, n); }

// Narrowing to 16-bit floats: the vector kernel (when the CPU has one) returns how many leading
// values it converted, the scalar conversion (ggml's) does the rest.
template <uint16_t (*kNarrow)(float)>
void narrow_scalar(const float* src, std::byte* dst, int64_t begin, int64_t n) {
  for (int64_t i = begin; i < n; ++i) {
    const uint16_t h = kNarrow(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

#if GGUFKIT_QUANT_X86
// F16C rounds to nearest even like ggml's scalar conversion, overflow and subnormals included;
// only NaN differs (F16C keeps the payload, ggml gives sign | 0x7E00), so groups holding a NaN go
// through the scalar code.
GGUFKIT_TARGET_AVX2 int64_t float_to_f16_avx2(const float* src, std::byte* dst, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 v0 = _mm256_loadu_ps(src + i), v1 = _mm256_loadu_ps(src + i + 8);
    const __m256 v2 = _mm256_loadu_ps(src + i + 16), v3 = _mm256_loadu_ps(src + i + 24);
    const __m256 nan = _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q), _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q));
    if (_mm256_movemask_ps(nan) != 0) {
      narrow_scalar<fp32_to_fp16>(src, dst, i, i + 32);
      continue;
    }
    const __m256i h01 = _mm256_set_m128i(_mm256_cvtps_ph(v1, kRound), _mm256_cvtps_ph(v0, kRound));
    const __m256i h23 = _mm256_set_m128i(_mm256_cvtps_ph(v3, kRound), _mm256_cvtps_ph(v2, kRound));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * i), h01);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * i + 32), h23);
  }
  return i;
}

// fp32_to_bf16 on eight lanes: round to nearest even by integer addition, NaN made quiet.
GGUFKIT_TARGET_AVX2 inline __m256i bf16_lanes(__m256i x) {
  const __m256i high = _mm256_srli_epi32(x, 16);
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)),
                                         _mm256_and_si256(high, _mm256_set1_epi32(1))),
                        16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)),
                                         _mm256_set1_epi32(0x7F800000));
  return _mm256_blendv_epi8(rounded, _mm256_or_si256(high, _mm256_set1_epi32(64)), nan);
}

GGUFKIT_TARGET_AVX2 int64_t float_to_bf16_avx2(const float* src, std::byte* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = bf16_lanes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    const __m256i b = bf16_lanes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 8)));
    // Lanes hold values below 2^16, so the unsigned saturation keeps them; packing interleaves
    // the 128-bit halves, the permutation restores the order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * i), packed);
  }
  return i;
}
#else
int64_t float_to_f16_avx2(const float*, std::byte*, int64_t) { return 0; }  // no vector kernel here
int64_t float_to_bf16_avx2(const float*, std::byte*, int64_t) { return 0; }
#endif

template <uint16_t (*kNarrow)(float), int64_t (*kVector)(const float*, std::byte*, int64_t)>
void float_to_halves(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  const int64_t n = nrows * n_per_row;
  int64_t done = 0;
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) done = kVector(src, dst, n);
#endif
  narrow_scalar<kNarrow>(src, dst, done, n);
}

void float_to_f16(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  float_to_halves<fp32_to_fp16, float_to_f16_avx2>(src, dst, nrows, n_per_row, imatrix);
}
void float_to_bf16(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  float_to_halves<fp32_to_bf16, float_to_bf16_avx2>(src, dst, nrows, n_per_row, imatrix);
}

void float_to_f32(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  std::memcpy(dst, src, static_cast<size_t>(nrows * n_per_row) * 4);
}

}  // namespace

void register_float_kernels(KernelTable& t) {
  entry(t, TensorType::F32) = {f32_to_float, float_to_f32};
  entry(t, TensorType::F16) = {f16_to_float, float_to_f16};
  entry(t, TensorType::BF16) = {bf16_to_float, float_to_bf16};
  entry(t, TensorType::F64).dequantize = widen<double>;
  entry(t, TensorType::I8).dequantize = widen<int8_t>;
  entry(t, TensorType::I16).dequantize = widen<int16_t>;
  entry(t, TensorType::I32).dequantize = widen<int32_t>;
  entry(t, TensorType::I64).dequantize = widen<int64_t>;
}

}  // namespace ggufkit::quant
