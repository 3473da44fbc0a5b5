// x86 AVX2 helpers for the dequantize kernels, chosen at run time (the library is built for the
// baseline x86-64, so these functions carry their own target attribute). Every helper does the
// same float operations, in the same order, as the scalar kernels: converting small integers to
// float is exact, and a product or a sum of two floats rounds the same in a vector lane.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GGUFKIT_QUANT_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define GGUFKIT_QUANT_X86 0
#endif

namespace ggufkit::quant::simd {

#if GGUFKIT_QUANT_X86

#define GGUFKIT_TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define GGUFKIT_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")))

// The instruction sets a kernel may use, in order. No FMA at any level: the kernels must not fuse.
enum class Isa { portable = 0, avx2 = 1, avx512 = 2 };

// The best level the CPU has (AVX2 needs F16C too; AVX-512 means F, BW, VL and DQ), capped by the
// environment variable GGUFKIT_QUANT_ISA (portable, avx2 or avx512) so that tests can check every
// level's kernels against ggml on one machine. GGUFKIT_QUANT_PORTABLE (any value) means portable.
inline Isa cpu_isa() {
  // F16C through CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
  if (!f16c || !__builtin_cpu_supports("avx2")) return Isa::portable;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return Isa::avx512;
  }
  return Isa::avx2;
}

inline Isa isa() {
  static const Isa chosen = [] {
    Isa level = cpu_isa();
    Isa cap = Isa::avx512;
    if (std::getenv("GGUFKIT_QUANT_PORTABLE") != nullptr) cap = Isa::portable;
    if (const char* env = std::getenv("GGUFKIT_QUANT_ISA")) {
      const std::string_view want(env);
      if (want == "portable") cap = Isa::portable;
      else if (want == "avx2") cap = Isa::avx2;
    }
    return level < cap ? level : cap;
  }();
  return chosen;
}

inline bool has_avx2() { return isa() >= Isa::avx2; }
inline bool has_avx512() { return isa() >= Isa::avx512; }

// Clears the upper halves of the vector registers after a kernel: a compiler does not always do it
// when a target-attributed function returns into baseline code, and dirty upper halves make later
// SSE code (ours, or the caller's) pay a transition penalty.
GGUFKIT_TARGET_AVX2 inline void clear_upper_halves() { _mm256_zeroupper(); }

// 16 signed bytes from p (any alignment).
GGUFKIT_TARGET_AVX2 inline __m128i load16(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
// 32 signed bytes from p (any alignment).
GGUFKIT_TARGET_AVX2 inline __m256i load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// The 8 low bytes of q as floats.
GGUFKIT_TARGET_AVX2 inline __m256 low8_to_float(__m128i q) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)); }
GGUFKIT_TARGET_AVX2 inline __m256 high8_to_float(__m128i q) { return low8_to_float(_mm_srli_si128(q, 8)); }

// y[i] = (float)q[i] * d for the 8 signed bytes at p.
GGUFKIT_TARGET_AVX2 inline void store8_q_times_d(const void* p, __m256 d, float* y) {
  const __m128i q = _mm_loadl_epi64(static_cast<const __m128i*>(p));
  _mm256_storeu_ps(y, _mm256_mul_ps(low8_to_float(q), d));
}
// y[i] = (float)q[i] * d for 16 signed bytes.
GGUFKIT_TARGET_AVX2 inline void store16_q_times_d(__m128i q, __m256 d, float* y) {
  _mm256_storeu_ps(y, _mm256_mul_ps(low8_to_float(q), d));
  _mm256_storeu_ps(y + 8, _mm256_mul_ps(high8_to_float(q), d));
}
// y[i] = d * (float)q[i] for 16 signed bytes (same bits as above; kept to mirror the scalar text).
GGUFKIT_TARGET_AVX2 inline void store16_d_times_q(__m128i q, __m256 d, float* y) { store16_q_times_d(q, d, y); }
// y[i] = (float)q[i] * d + m for 16 signed bytes.
GGUFKIT_TARGET_AVX2 inline void store16_q_times_d_plus_m(__m128i q, __m256 d, __m256 m, float* y) {
  _mm256_storeu_ps(y, _mm256_add_ps(_mm256_mul_ps(low8_to_float(q), d), m));
  _mm256_storeu_ps(y + 8, _mm256_add_ps(_mm256_mul_ps(high8_to_float(q), d), m));
}
// y[i] = d * (float)q[i] - m for 16 signed bytes.
GGUFKIT_TARGET_AVX2 inline void store16_d_times_q_minus_m(__m128i q, __m256 d, __m256 m, float* y) {
  _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(d, low8_to_float(q)), m));
  _mm256_storeu_ps(y + 8, _mm256_sub_ps(_mm256_mul_ps(d, high8_to_float(q)), m));
}

GGUFKIT_TARGET_AVX2 inline __m128i low_half(__m256i v) { return _mm256_castsi256_si128(v); }
GGUFKIT_TARGET_AVX2 inline __m128i high_half(__m256i v) { return _mm256_extracti128_si256(v, 1); }

// The low and high nibbles of 16 bytes.
GGUFKIT_TARGET_AVX2 inline __m128i low_nibbles(__m128i v) { return _mm_and_si128(v, _mm_set1_epi8(0x0F)); }
GGUFKIT_TARGET_AVX2 inline __m128i high_nibbles(__m128i v) {
  return _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F));
}
GGUFKIT_TARGET_AVX2 inline __m256i low_nibbles(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
GGUFKIT_TARGET_AVX2 inline __m256i high_nibbles(__m256i v) {
  return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
}

// Byte i is 0xFF when bit i of bits is set, 0 otherwise (32 bytes from 32 bits).
GGUFKIT_TARGET_AVX2 inline __m256i bits_to_byte_mask(uint32_t bits) {
  const __m256i broadcast = _mm256_set1_epi32(static_cast<int>(bits));
  // Byte i takes byte i/8 of the 32-bit word.
  const __m256i spread = _mm256_shuffle_epi8(
      broadcast, _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3,
                                  3, 3, 3, 3));
  const __m256i bit_of_byte = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit_of_byte), bit_of_byte);
}

#endif  // GGUFKIT_QUANT_X86

// Called after every kernel run (registry.cpp): see clear_upper_halves.
inline void leave_vector_code() {
#if GGUFKIT_QUANT_X86
  if (has_avx2()) clear_upper_halves();
#endif
}

}  // namespace ggufkit::quant::simd
