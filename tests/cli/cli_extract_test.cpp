// gguf extract: .npy files whose header, shape (ggml's reversed) and values are right.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "ggufkit/quant.h"
#include "ggufkit/reader.h"
#include "npy_reader.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

GgufFile open_sample() {
  auto f = GgufFile::open(sample_model());
  if (!f) throw std::runtime_error(f.error().describe());
  return std::move(f).value();
}

std::vector<float> library_floats(const GgufFile& f, const TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  EXPECT_TRUE(dequantize(t.type, f.tensor_data(t), out));
  return out;
}

TEST(CliExtract, EveryTensorToADirectoryAsFloat32) {
  const auto dir = temp_dir("extract-all");
  const CommandResult r = run_gguf({"extract", sample_model().string(), "-o", (dir / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const GgufFile f = open_sample();
  size_t lines = 0;
  for (char c : r.out) lines += c == '\n';
  EXPECT_EQ(lines, f.tensors().size()) << "one output path per line on stdout";
  for (const TensorInfo& t : f.tensors()) {
    SCOPED_TRACE(std::string(t.name));
    const auto npy = parse_npy(read_bytes(dir / "out" / (std::string(t.name) + ".npy")));
    ASSERT_TRUE(npy);
    EXPECT_EQ(npy->descr, "<f4");
    EXPECT_FALSE(npy->fortran_order);
    std::vector<int64_t> reversed(t.shape().rbegin(), t.shape().rend());
    EXPECT_EQ(npy->shape, reversed);
    const std::vector<float> expected = library_floats(f, t);
    ASSERT_EQ(npy->data.size(), expected.size() * 4);
    EXPECT_EQ(std::memcmp(npy->data.data(), expected.data(), npy->data.size()), 0);
  }
  fs::remove_all(dir);
}

TEST(CliExtract, OneTensorToAFileAsFloat16AndRaw) {
  const auto dir = temp_dir("extract-one");
  const GgufFile f = open_sample();
  const TensorInfo& t = *f.find_tensor("blk.1.ffn_down.weight");

  CommandResult r = run_gguf({"extract", sample_model().string(), "blk.1.ffn_down.weight", "-o",
                              (dir / "down.npy").string(), "--type", "f16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto npy = parse_npy(read_bytes(dir / "down.npy"));
  ASSERT_TRUE(npy);
  EXPECT_EQ(npy->descr, "<f2");
  EXPECT_EQ(npy->shape, (std::vector<int64_t>{t.ne[1], t.ne[0]}));
  // An f16 tensor extracted as f16 gives back its stored bytes.
  const auto stored = f.tensor_data(t);
  ASSERT_EQ(npy->data.size(), stored.size());
  EXPECT_EQ(std::memcmp(npy->data.data(), stored.data(), stored.size()), 0);

  r = run_gguf({"extract", sample_model().string(), "blk.1.ffn_down.weight", "-o", (dir / "raw.npy").string(),
                "--type", "RAW"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  npy = parse_npy(read_bytes(dir / "raw.npy"));
  ASSERT_TRUE(npy);
  EXPECT_EQ(npy->descr, "<f2");  // a plain type keeps its own dtype
  EXPECT_EQ(npy->data.size(), stored.size());
  fs::remove_all(dir);
}

TEST(CliExtract, QuantizedRawIsRowsOfBytes) {
  GGUFKIT_REQUIRE_SHARED();
  const auto path = *shared_dir() / "corpus/tiny-llama/tiny-llama-q4_k_m.gguf";
  const auto dir = temp_dir("extract-raw");
  const CommandResult r = run_gguf({"extract", path.string(), "blk.0.attn_q.weight", "-o", (dir / "q.npy").string(),
                                    "--type", "raw"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto npy = parse_npy(read_bytes(dir / "q.npy"));
  ASSERT_TRUE(npy);
  EXPECT_EQ(npy->descr, "|u1");
  // 256 rows of 256 q4_K values: one 144-byte block per row (as gguf-py shapes it).
  EXPECT_EQ(npy->shape, (std::vector<int64_t>{256, 144}));
  fs::remove_all(dir);
}

TEST(CliExtract, Errors) {
  const auto dir = temp_dir("extract-errors");
  CommandResult r = run_gguf({"extract", sample_model().string(), "no.such.tensor", "-o", (dir / "x.npy").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no.such.tensor"), std::string::npos);
  EXPECT_TRUE(r.out.empty());
  r = run_gguf({"extract", sample_model().string(), "-o", (dir / "x").string(), "--type", "q4_0"});
  EXPECT_EQ(r.exit_code, 2);
  r = run_gguf({"extract", sample_model().string()});
  EXPECT_EQ(r.exit_code, 2) << "-o is required";
  r = run_gguf({"extract", (dir / "missing.gguf").string(), "-o", (dir / "x").string()});
  EXPECT_EQ(r.exit_code, 2);
  fs::remove_all(dir);
}

}  // namespace
