// Our big-endian files checked without our reader: an independent big-endian decoder of the
// header compared with the little-endian original, llama.cpp's parser (which on a little-endian
// host must refuse them, and must accept the file converted back), and gguf-py's
// gguf_convert_endian.py when python3 has numpy and tqdm (byte for byte).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "ggufkit/endian.h"
#include "oracle_ggml.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

// Reads numbers of either byte order from raw bytes, byte by byte.
struct Cursor {
  const std::vector<std::byte>& b;
  size_t pos;
  bool big;
  uint64_t num(int width) {
    uint64_t v = 0;
    for (int i = 0; i < width; ++i) {
      const uint64_t byte = std::to_integer<uint64_t>(b.at(pos + static_cast<size_t>(i)));
      v |= big ? byte << (8 * (width - 1 - i)) : byte << (8 * i);
    }
    pos += static_cast<size_t>(width);
    return v;
  }
  std::string str() {
    const auto n = static_cast<size_t>(num(8));
    std::string s(reinterpret_cast<const char*>(b.data() + pos), n);
    pos += n;
    return s;
  }
};

int fixed_width(uint64_t type) {  // GGUF value type ids 0..12
  static const int widths[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return type < 13 ? widths[type] : -1;
}

// Walks one value in both files at once, asserting the same numbers and strings.
void compare_value(Cursor& le, Cursor& be, uint64_t type, const std::string& key) {
  const int w = fixed_width(type);
  ASSERT_GE(w, 0) << key;
  if (w > 0) {
    ASSERT_EQ(le.num(w), be.num(w)) << key;
  } else if (type == 8) {
    ASSERT_EQ(le.str(), be.str()) << key;
  } else {
    const uint64_t elem = le.num(4);
    ASSERT_EQ(elem, be.num(4)) << key;
    const uint64_t count = le.num(8);
    ASSERT_EQ(count, be.num(8)) << key;
    for (uint64_t i = 0; i < count; ++i) compare_value(le, be, elem, key);
  }
}

// The whole header, field by field, little-endian original against big-endian conversion.
void compare_headers(const std::vector<std::byte>& little, const std::vector<std::byte>& big) {
  Cursor le{little, 0, false}, be{big, 0, true};
  ASSERT_EQ(0, std::memcmp(little.data(), big.data(), 4));
  le.pos = be.pos = 4;
  ASSERT_EQ(le.num(4), be.num(4));  // version
  const uint64_t n_tensors = le.num(8);
  ASSERT_EQ(n_tensors, be.num(8));
  const uint64_t n_kv = le.num(8);
  ASSERT_EQ(n_kv, be.num(8));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = le.str();
    ASSERT_EQ(key, be.str());
    const uint64_t type = le.num(4);
    ASSERT_EQ(type, be.num(4)) << key;
    compare_value(le, be, type, key);
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const std::string name = le.str();
    ASSERT_EQ(name, be.str());
    const uint64_t n_dims = le.num(4);
    ASSERT_EQ(n_dims, be.num(4)) << name;
    for (uint64_t d = 0; d < n_dims; ++d) ASSERT_EQ(le.num(8), be.num(8)) << name;
    ASSERT_EQ(le.num(4), be.num(4)) << name;  // type
    ASSERT_EQ(le.num(8), be.num(8)) << name;  // offset
  }
  ASSERT_EQ(le.pos, be.pos);
  // The padding up to the data section is zeros in both.
  ASSERT_EQ(little.size(), big.size());
}

TEST(EndianOracle, BigEndianHeadersDecodeIndependentlyAndGgmlRejectsThem) {
  GGUFKIT_REQUIRE_SHARED();
  std::string why_not;
  const auto oracle = OracleGgml::load(&why_not);
  const auto dir = temp_dir("endian-oracle");
  std::vector<fs::path> files = corpus_files();
  files.push_back(sample_model());
  size_t checked = 0;
  for (const fs::path& path : files) {
    SCOPED_TRACE(path.string());
    auto le = GgufFile::open(path);
    ASSERT_TRUE(le);
    if (!plan_convert_endian(*le, ByteOrder::big).unsupported.empty()) continue;
    ConvertEndianOptions options;
    options.sync = false;
    ASSERT_TRUE(convert_endian(*le, dir / "be.gguf", ByteOrder::big, options));
    const auto little = read_bytes(path), big = read_bytes(dir / "be.gguf");
    compare_headers(little, big);
    // The data section: every f32 tensor's elements reversed byte by byte.
    auto be = GgufFile::open(dir / "be.gguf");
    ASSERT_TRUE(be);
    for (const TensorInfo& t : le->tensors()) {
      if (t.type != TensorType::F32) continue;
      const auto a = le->tensor_data(t), b = be->tensor_data(*be->find_tensor(t.name));
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i / 4 * 4 + 3 - i % 4]) << t.name;
    }
    if (oracle) {
      std::string log;
      if (!le->tensors().empty() || le->metadata().size() > 0) {
        EXPECT_FALSE(oracle->accepts((dir / "be.gguf").string(), &log)) << "ggml read a big-endian file";
      }
      ASSERT_TRUE(convert_endian(*be, dir / "back.gguf", ByteOrder::little, options));
      EXPECT_TRUE(oracle->accepts((dir / "back.gguf").string(), &log)) << log;
    }
    ++checked;
  }
  EXPECT_GE(checked, 20u);
  if (!oracle) GTEST_SKIP() << "headers checked; llama.cpp part skipped: " << why_not;
}

// gguf-py's converter works in place and asks for YES on stdin.
TEST(EndianOracle, SameBytesAsGgufPy) {
  const auto py = gguf_py();
  if (const auto* why = std::get_if<std::string>(&py)) GTEST_SKIP() << *why;
  const auto& gp = std::get<GgufPy>(py);
  const std::string python = gp.python;
  const fs::path script = gp.scripts / "gguf_convert_endian.py";
  std::vector<fs::path> files = {sample_model()};
  if (const auto shared = shared_dir()) {
    for (const char* name : {"q8_0", "q4_0", "q4_k_m", "q6_k", "f16", "bf16", "f32", "tq2_0", "q1_0", "mxfp4_moe"}) {
      files.push_back(*shared / "corpus" / "tiny-llama" / (std::string("tiny-llama-") + name + ".gguf"));
    }
  }
  const auto dir = temp_dir("endian-gguf-py");
  size_t compared = 0;
  for (const fs::path& path : files) {
    if (!fs::exists(path)) continue;
    SCOPED_TRACE(path.string());
    auto le = GgufFile::open(path);
    ASSERT_TRUE(le);
    ConvertEndianOptions options;
    options.sync = false;
    ASSERT_TRUE(convert_endian(*le, dir / "ours.gguf", ByteOrder::big, options));
    fs::copy_file(path, dir / "theirs.gguf", fs::copy_options::overwrite_existing);
    const std::string cmd = "echo YES | " + python + " " + script.string() + " " + (dir / "theirs.gguf").string() +
                            " big >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      ADD_FAILURE() << "gguf_convert_endian.py failed: " << cmd;
      continue;
    }
    EXPECT_EQ(read_bytes(dir / "ours.gguf"), read_bytes(dir / "theirs.gguf"));
    ++compared;
  }
  EXPECT_GE(compared, 1u);
}

}  // namespace
