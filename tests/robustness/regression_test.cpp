// Inputs the fuzzer or the damaged copies found interesting, kept as small fixtures built byte by
// byte (raw_gguf.h shares nothing with ggufkit's writer).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "exercise.h"
#include "raw_gguf.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::robust;
using test::RawGguf;
namespace ggml_type = test::ggml_type;

// A tensor with a zero dimension has no elements, whatever the other dimensions say: llama.cpp
// accepts it (its element-count check only applies to non-empty tensors) and so must we. The
// leading dimensions multiply past INT64_MAX before the zero is reached, which must not be
// computed as a signed product (undefined behaviour; UBSan stops the sanitizer build here).
TEST(Regression, ZeroSizedTensorWithHugeLeadingDimensions) {
  for (const auto& ne : {std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 20, int64_t{1} << 10, 0},
                         std::vector<int64_t>{int64_t{1} << 62, 4, 0}}) {
    RawGguf g;
    g.header(3, /*n_tensors=*/1, /*n_kv=*/0);
    g.str("empty").u32(static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) g.i64(d);
    g.i32(ggml_type::kF32).u64(0);
    g.pad_to(32);
    const std::vector<std::byte> bytes = g.bytes();

    const auto f = GgufFile::parse(bytes);
    ASSERT_TRUE(f) << f.error().describe();
    ASSERT_EQ(f->tensors().size(), 1u);
    const TensorInfo& t = f->tensors()[0];
    EXPECT_EQ(t.size, 0u);
    EXPECT_EQ(t.n_elements(), 0);
    EXPECT_EQ(summarize(*f).parameters, 0u);
    Findings findings;
    exercise_file(findings, *f, bytes);
    EXPECT_TRUE(findings.ok()) << findings.report();
  }
}

// The same zero-element tensor, but with the zero first: nothing overflows and it is accepted.
TEST(Regression, ZeroSizedTensorWithZeroFirst) {
  RawGguf g;
  g.header(3, 1, 0);
  g.tensor_info("empty", {0, int64_t{1} << 62, 4}, ggml_type::kF32, 0);
  g.pad_to(32);
  const std::vector<std::byte> bytes = g.bytes();
  const auto f = GgufFile::parse(bytes);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->tensors()[0].size, 0u);
  Findings findings;
  exercise_file(findings, *f, bytes);
  EXPECT_TRUE(findings.ok()) << findings.report();
}

}  // namespace
