// Byte comparisons of ggufkit's quantizer output with ggml's, shared by the kernel tests.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "ggufkit/quant.h"
#include "ggufkit/tensor_types.h"
#include "quant_oracle.h"

namespace ggufkit::test {

// Equal bytes; otherwise how many differ and where the first three are (byte, block, offset).
inline ::testing::AssertionResult same_bytes(const std::vector<std::byte>& ours, const std::vector<std::byte>& theirs,
                                             size_t block_bytes) {
  if (ours.size() != theirs.size()) return ::testing::AssertionFailure() << "sizes differ";
  size_t diffs = 0;
  std::string first;
  for (size_t i = 0; i < ours.size(); ++i) {
    if (ours[i] != theirs[i] && diffs++ < 3) {
      first += "\n  byte " + std::to_string(i) + " (block " + std::to_string(i / block_bytes) + ", offset " +
               std::to_string(i % block_bytes) + "): ours " + std::to_string(int(ours[i])) + " ggml " +
               std::to_string(int(theirs[i]));
    }
  }
  if (diffs == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << diffs << " of " << ours.size() << " bytes differ:" << first;
}

// Quantizes src (rows of n_per_row) with ggufkit and with ggml and compares the bytes.
inline void expect_like_ggml(const QuantOracle& oracle, TensorType type, const std::vector<float>& src,
                             int64_t n_per_row, const std::vector<float>& imatrix, const std::string& what) {
  const TypeTraits& t = type_traits(type);
  const auto nrows = static_cast<int64_t>(src.size()) / n_per_row;
  const size_t bytes = static_cast<size_t>(nrows) * static_cast<size_t>(*row_size(type, n_per_row));
  std::vector<std::byte> ours(bytes, std::byte{0x5A}), theirs(bytes, std::byte{0xA5});
  ASSERT_TRUE(quantize(type, src, ours, n_per_row, imatrix)) << t.name << " " << what;
  oracle.quantize_chunk(static_cast<uint32_t>(type), src.data(), theirs.data(), nrows, n_per_row,
                        imatrix.empty() ? nullptr : imatrix.data());
  EXPECT_TRUE(same_bytes(ours, theirs, t.block_bytes)) << t.name << " " << what;
}

}  // namespace ggufkit::test
