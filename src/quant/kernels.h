// The kernel table behind quant.h: one entry per ggml type id, filled by the kernel families
// (one source file each). Kernels get validated sizes: the public functions check everything.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "ggufkit/tensor_types.h"

namespace ggufkit::quant {

// Dequantizes n elements (a whole number of blocks) from src to dst.
using DequantizeFn = void (*)(const std::byte* src, float* dst, int64_t n);
// Quantizes nrows rows of n_per_row floats; imatrix is null or holds n_per_row weights.
using QuantizeFn = void (*)(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row,
                            const float* imatrix);

struct TypeKernels {
  DequantizeFn dequantize = nullptr;
  QuantizeFn quantize = nullptr;
  bool accepts_imatrix = false;
  bool requires_imatrix = false;
};

using KernelTable = std::array<TypeKernels, kTensorTypeIdLimit>;

inline TypeKernels& entry(KernelTable& table, TensorType type) { return table[static_cast<uint32_t>(type)]; }

// Each family registers its types.
void register_float_kernels(KernelTable& table);    // f32 f16 bf16 f64 i8 i16 i32 i64
void register_legacy_kernels(KernelTable& table);   // q4_0 q4_1 q5_0 q5_1 q8_0 q8_1 q1_0 q2_0
void register_kquant_kernels(KernelTable& table);   // q2_K q3_K q4_K q5_K q6_K q8_K
void register_iquant_kernels(KernelTable& table);   // iq1_s iq1_m iq2_* iq3_* iq4_nl iq4_xs
void register_fp4_kernels(KernelTable& table);      // mxfp4 nvfp4
void register_ternary_kernels(KernelTable& table);  // tq1_0 tq2_0
void register_iq3s_quantizer(KernelTable& table);   // iq3_s quantize (after register_iquant_kernels)
void register_iq2_quantizers(KernelTable& table);   // iq2_xxs iq2_xs iq2_s iq1_s iq1_m quantize (idem)
void register_iq3xxs_quantizer(KernelTable& table); // iq3_xxs quantize (idem)

const KernelTable& kernel_table();

}  // namespace ggufkit::quant
