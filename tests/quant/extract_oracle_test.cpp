// `gguf extract` of every tiny-llama file of the corpus against ggml's to_float of the same bytes.
#include <gtest/gtest.h>

#include <cstring>

#include "ggufkit/quant.h"
#include "ggufkit/reader.h"
#include "npy_reader.h"
#include "quant_oracle.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

TEST(ExtractOracle, EveryTinyLlamaTensorMatchesGgml) {
  GGUFKIT_REQUIRE_SHARED();
  REQUIRE_QUANT_ORACLE(oracle);
  const auto dir = temp_dir("extract-oracle");
  std::string not_covered;
  size_t compared = 0;
  for (const auto& path : corpus_files()) {
    if (path.parent_path().filename() != "tiny-llama") continue;
    SCOPED_TRACE(path.filename().string());
    auto file = GgufFile::open(path);
    ASSERT_TRUE(file) << file.error().describe();
    const auto out = dir / path.stem();
    // Name the tensors whose types have kernels (all of them once every kernel exists).
    std::vector<std::string> args = {"extract", path.string(), "-o", out.string() + "/"};
    std::vector<const TensorInfo*> chosen;
    for (const TensorInfo& t : file->tensors()) {
      if (quant_capabilities(t.type).dequantize) {
        args.emplace_back(t.name);
        chosen.push_back(&t);
      } else {
        not_covered += " " + std::string(type_name(t.type));
      }
    }
    if (chosen.empty()) continue;
    const CommandResult r = run_gguf(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const TensorInfo* tp : chosen) {
      const TensorInfo& t = *tp;
      SCOPED_TRACE(std::string(t.name));
      const auto npy = parse_npy(read_bytes(out / (std::string(t.name) + ".npy")));
      ASSERT_TRUE(npy);
      const auto bytes = file->tensor_data(t);
      std::vector<float> expected(static_cast<size_t>(t.n_elements()));
      if (t.type == TensorType::F32) {
        std::memcpy(expected.data(), bytes.data(), bytes.size());
      } else {
        const auto to_float = oracle->to_float(static_cast<uint32_t>(t.type));
        ASSERT_NE(to_float, nullptr);
        to_float(bytes.data(), expected.data(), t.n_elements());
      }
      ASSERT_EQ(npy->data.size(), expected.size() * 4);
      EXPECT_EQ(std::memcmp(npy->data.data(), expected.data(), npy->data.size()), 0) << "values differ from ggml's";
      ++compared;
    }
    fs::remove_all(out);
  }
  fs::remove_all(dir);
  EXPECT_GT(compared, 0u);
  if (!not_covered.empty()) std::printf("tensor types without a dequantize kernel yet:%s\n", not_covered.c_str());
}

}  // namespace
