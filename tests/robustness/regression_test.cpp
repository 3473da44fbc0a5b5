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

namespace {

// Found by the fuzzer in gguf check's padding scan: zero-sized tensors whose offsets point far
// past the end of the file. Their data is "empty" without being out of bounds for the reader's
// size test, and the scan took the gap between two of them for padding inside the file. The reader reports the offset;
// check must report it too and never read outside the input.
TEST(Regression, CheckPaddingScanSkipsTensorsOutsideTheFile) {
  using namespace ggufkit;
  test::RawGguf g;
  g.header(3, 3, 1);
  g.kv_string("general.architecture", "test-arch");
  g.tensor_info("a", {8}, test::ggml_type::kF32, 0);
  g.tensor_info("empty", {0}, test::ggml_type::kF32, (uint64_t{1} << 40) + 8);  // misaligned too
  g.tensor_info("empty2", {0}, test::ggml_type::kF32, (uint64_t{1} << 40) + 64);
  g.pad_to(32);
  g.fill(32, 0x3f);
  const CheckReport r = check_bytes(g.span());
  bool offset_reported = false;
  for (const Finding& f : r.findings) offset_reported |= f.code == "structure.bad_tensor_offset" && f.subject == "empty";
  EXPECT_TRUE(offset_reported);
  robust::Findings findings;
  robust::parse_and_exercise(findings, g.span());
  EXPECT_TRUE(findings.ok()) << findings.report();
}

}  // namespace
