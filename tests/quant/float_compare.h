// Bit-for-bit comparison of float arrays for the kernel tests, reporting the first differences.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace ggufkit::test {

inline std::string float_bits(float f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a (0x%08x)", static_cast<double>(f), std::bit_cast<uint32_t>(f));
  return buf;
}

inline ::testing::AssertionResult same_floats(const std::vector<float>& ours, const std::vector<float>& theirs) {
  if (ours.size() != theirs.size()) return ::testing::AssertionFailure() << "sizes differ";
  size_t diffs = 0;
  std::string first;
  for (size_t i = 0; i < ours.size(); ++i) {
    if (std::bit_cast<uint32_t>(ours[i]) == std::bit_cast<uint32_t>(theirs[i])) continue;
    if (diffs++ < 3) first += "\n  [" + std::to_string(i) + "] ours " + float_bits(ours[i]) + " ggml " + float_bits(theirs[i]);
  }
  if (diffs == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << diffs << " of " << ours.size() << " values differ:" << first;
}

}  // namespace ggufkit::test
