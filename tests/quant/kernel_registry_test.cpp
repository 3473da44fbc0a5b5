// The kernel registry against the type table: every supported type has a dequantize kernel, no
// removed id has kernels, and every quantized type's block, as its kernel family states it, is the
// one tensor_types.cpp gives. Registration order does not matter (kernel_table() merges one table
// per family); these are the facts that merge checks, asserted type by type.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ggufkit/quant.h"
#include "ggufkit/tensor_types.h"
#include "quant/kernels.h"

namespace ggufkit {
namespace {

TEST(KernelRegistry, AgreesWithTheTypeTable) {
  const quant::KernelTable& table = quant::kernel_table();
  std::set<std::string> stated, quantizable;
  for (const TypeTraits& traits : all_type_traits()) {
    SCOPED_TRACE(std::string(traits.name));
    const quant::TypeKernels& k = table[traits.id];
    if (traits.status != TypeStatus::supported) {
      EXPECT_EQ(k.dequantize, nullptr);
      EXPECT_EQ(k.quantize, nullptr);
      continue;
    }
    EXPECT_NE(k.dequantize, nullptr);
    if (k.quantize != nullptr) quantizable.insert(std::string(traits.name));
    if (k.block_bytes != 0) {
      stated.insert(std::string(traits.name));
      EXPECT_EQ(k.block_bytes, traits.block_bytes);
      EXPECT_EQ(k.block_size, traits.block_size);
    }
  }
  // Every quantized type states its block (the element types need none).
  const std::set<std::string> quantized = {
      "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q8_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_K",
      "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "iq1_m", "tq1_0",
      "tq2_0", "mxfp4", "nvfp4", "q1_0", "q2_0"};
  EXPECT_EQ(stated, quantized);
  const std::set<std::string> want_quantizable = {
      "f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K",
      "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "iq1_m", "tq1_0",
      "tq2_0", "mxfp4", "nvfp4", "q1_0", "q2_0"};
  EXPECT_EQ(quantizable, want_quantizable);
}

}  // namespace
}  // namespace ggufkit
