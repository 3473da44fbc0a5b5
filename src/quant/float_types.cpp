// Plain element types: floats and integers stored one per element.
#include <cstring>

#include "quant/fp16.h"
#include "quant/kernels.h"

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

void f16_to_float(const std::byte* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = fp16_to_fp32(h);
  }
}

void bf16_to_float(const std::byte* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = bf16_to_fp32(h);
  }
}

void float_to_f16(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  const int64_t n = nrows * n_per_row;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp32_to_fp16(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

void float_to_bf16(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  const int64_t n = nrows * n_per_row;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp32_to_bf16(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
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
