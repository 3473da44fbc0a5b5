// The kernel table behind quant.h: one entry per ggml type id, filled by the kernel families
// (one source file each). Kernels get validated sizes: the public functions check everything.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "format/fp16.h"
#include "ggufkit/tensor_types.h"

namespace ggufkit::quant {

// The half and bfloat16 conversions every kernel uses (format/fp16.h).
using format::bf16_to_fp32;
using format::fp16_to_fp32;
using format::fp32_to_bf16;
using format::fp32_to_fp16;

// Dequantizes n elements (a whole number of blocks) from src to dst.
using DequantizeFn = void (*)(const std::byte* src, float* dst, int64_t n);
// Quantizes nrows rows of n_per_row floats; imatrix is null or holds n_per_row weights.
using QuantizeFn = void (*)(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row,
                            const float* imatrix);

struct TypeKernels {
  DequantizeFn dequantize = nullptr;
  QuantizeFn quantize = nullptr;
  bool accepts_imatrix = false;   // with quantize
  bool requires_imatrix = false;  // with quantize
  // The block the kernels were written for, when the family states it (0: not stated).
  uint32_t block_size = 0;
  uint32_t block_bytes = 0;
};

using KernelTable = std::array<TypeKernels, kTensorTypeIdLimit>;

inline TypeKernels& entry(KernelTable& table, TensorType type) { return table[static_cast<uint32_t>(type)]; }

// States the block struct a family's kernels read and write (Block::kElements values in
// sizeof(Block) bytes), for the check against the type table.
template <class Block>
void state_block(KernelTable& table, TensorType type) {
  entry(table, type).block_size = Block::kElements;
  entry(table, type).block_bytes = sizeof(Block);
}

// Each family registers its types into a table of its own; kernel_table() merges them, refusing a
// kernel registered twice (so the order of the families does not matter) and checking every entry
// against the type table (format/tensor_types.cpp): the type exists and is supported, every
// supported type can be dequantized, and the block a family states (state_block) is the table's.
void register_float_kernels(KernelTable& table);    // f32 f16 bf16 f64 i8 i16 i32 i64
void register_legacy_kernels(KernelTable& table);   // q4_0 q4_1 q5_0 q5_1 q8_0 q8_1 q1_0 q2_0
void register_kquant_kernels(KernelTable& table);   // q2_K q3_K q4_K q5_K q6_K q8_K
void register_iquant_kernels(KernelTable& table);   // iq1_s iq1_m iq2_* iq3_* iq4_nl iq4_xs
void register_fp4_kernels(KernelTable& table);      // mxfp4 nvfp4
void register_ternary_kernels(KernelTable& table);  // tq1_0 tq2_0
void register_iq3s_quantizer(KernelTable& table);   // iq3_s quantize
void register_iq2_quantizers(KernelTable& table);   // iq2_xxs iq2_xs iq2_s iq1_s iq1_m quantize
void register_iq3xxs_quantizer(KernelTable& table); // iq3_xxs quantize

const KernelTable& kernel_table();

}  // namespace ggufkit::quant
