// gguf check's structure, metadata and compatibility passes on hand-made bytes (RawGguf): several
// problems in one file are all reported, each once, with the offset of the record concerned.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "ggufkit/check.h"
#include "ggufkit/reader.h"
#include "raw_gguf.h"
#include "test_support.h"

namespace ggufkit {
namespace {

using test::RawGguf;
namespace gt = test::gguf_type;
namespace tt = test::ggml_type;

std::vector<const Finding*> with_code(const CheckReport& r, std::string_view code) {
  std::vector<const Finding*> out;
  for (const Finding& f : r.findings) {
    if (f.code == code) out.push_back(&f);
  }
  return out;
}

std::string all_codes(const CheckReport& r) {
  std::string s;
  for (const Finding& f : r.findings) s += f.describe() + "\n";
  return s;
}

// A well-formed file: architecture, two f32 tensors of 8 values, alignment 32, zero padding.
RawGguf good_file(uint8_t padding_byte = 0) {
  RawGguf g;
  g.header(3, 2, 2);
  g.kv_string("general.architecture", "test-arch");
  g.kv_string("tokenizer.ggml.model", "none");
  g.tensor_info("a.weight", {8}, tt::kF32, 0);
  g.tensor_info("b.weight", {8}, tt::kF32, 32);
  g.pad_to(32, padding_byte);
  g.fill(32, 0x3f);
  g.fill(32, 0x40);
  return g;
}

TEST(CheckStructure, WellFormedFileHasNoStructureOrMetadataFindings) {
  const RawGguf g = good_file();
  const CheckReport r = check_bytes(g.span());
  EXPECT_TRUE(r.complete);
  for (const Finding& f : r.findings) {
    EXPECT_TRUE(f.code.rfind("structure.", 0) != 0 && f.code.rfind("metadata.", 0) != 0) << f.describe();
  }
  EXPECT_EQ(r.count(Severity::error), 0u) << all_codes(r);
}

TEST(CheckStructure, EveryRecoverableProblemIsReportedOnceWithItsOffset) {
  RawGguf g;
  g.header(3, 4, 3);
  g.kv_string("general.architecture", "test-arch");
  const uint64_t dup_at = g.size();
  g.kv_string("general.architecture", "again");
  const uint64_t align_at = g.size();
  g.kv_u32("general.alignment", 24);  // not a power of two: the reader goes on with 32
  const std::string long_name(70, 'x');
  const uint64_t long_at = g.size();
  g.tensor_info(long_name, {8}, tt::kF32, 0);
  const uint64_t unknown_at = g.size();
  g.tensor_info("unknown.weight", {8}, 200, 32);
  const uint64_t gap_at = g.size();
  g.tensor_info("gap.weight", {8}, tt::kF32, 96);  // expected 32 (the unknown one has size 0)
  g.tensor_info("gap.weight", {8}, tt::kF32, 128);  // a repeated name too
  g.pad_to(32);
  g.zeros(160);
  const CheckReport r = check_bytes(g.span());
  EXPECT_TRUE(r.complete) << all_codes(r);
  ASSERT_EQ(with_code(r, "structure.duplicate_key").size(), 1u) << all_codes(r);
  EXPECT_EQ(with_code(r, "structure.duplicate_key")[0]->offset, dup_at);
  ASSERT_EQ(with_code(r, "structure.bad_alignment").size(), 1u);
  EXPECT_EQ(with_code(r, "structure.bad_alignment")[0]->offset, align_at);
  ASSERT_EQ(with_code(r, "structure.tensor_name_too_long").size(), 1u);
  EXPECT_EQ(with_code(r, "structure.tensor_name_too_long")[0]->offset, long_at);
  ASSERT_EQ(with_code(r, "structure.unknown_tensor_type").size(), 1u);
  EXPECT_EQ(with_code(r, "structure.unknown_tensor_type")[0]->subject, "unknown.weight");
  EXPECT_GT(*with_code(r, "structure.unknown_tensor_type")[0]->offset, unknown_at);
  EXPECT_EQ(with_code(r, "structure.duplicate_tensor").size(), 1u);
  const auto offsets = with_code(r, "structure.bad_tensor_offset");
  ASSERT_GE(offsets.size(), 1u) << all_codes(r);
  EXPECT_EQ(offsets[0]->subject, "gap.weight");
  EXPECT_GT(*offsets[0]->offset, gap_at);
  EXPECT_FALSE(r.passed(false));
}

TEST(CheckStructure, AStructuralBreakStopsWithOneFinding) {
  RawGguf g = good_file();
  g.drop(g.size() - 40);  // cut inside the tensor infos
  const CheckReport r = check_bytes(g.span());
  EXPECT_FALSE(r.complete);
  ASSERT_EQ(r.count(Severity::error), 1u) << all_codes(r);
  EXPECT_EQ(r.findings.back().code, "structure.truncated");

  RawGguf bad;
  bad.magic("GGML").u32(3).i64(0).i64(0);
  const CheckReport m = check_bytes(bad.span());
  EXPECT_FALSE(m.complete);
  ASSERT_EQ(m.findings.size(), 1u);
  EXPECT_EQ(m.findings[0].code, "structure.bad_magic");
  EXPECT_EQ(m.findings[0].offset, 0u);
}

TEST(CheckStructure, WhatTheReaderAcceptsButShouldNotGoUnnoticed) {
  RawGguf g;
  g.header(3, 1, 5);
  g.kv_string("general.architecture", "test-arch");
  g.kv_string("tokenizer.ggml.model", "none");
  const uint64_t bool_at = g.size();
  g.kv_bool("some.flag", 2);
  const uint64_t utf8_at = g.size();
  g.kv_string("general.name", std::string("bad \xC3\x28 utf8"));
  const uint64_t arr_at = g.size();
  g.kv_string_array("some.list", {"ok", std::string("\xED\xA0\x80")});  // a surrogate
  g.tensor_info("a.weight", {8}, tt::kF32, 0);
  const uint64_t header_end = g.size();
  g.pad_to(32, 0xAA);  // non-zero padding
  g.fill(32, 0x3f);
  g.fill(5, 0x01);  // trailing bytes
  const CheckReport r = check_bytes(g.span());
  ASSERT_EQ(with_code(r, "structure.bad_bool").size(), 1u) << all_codes(r);
  EXPECT_EQ(with_code(r, "structure.bad_bool")[0]->offset, bool_at);
  const auto utf8 = with_code(r, "structure.invalid_utf8");
  ASSERT_EQ(utf8.size(), 2u) << all_codes(r);
  EXPECT_EQ(utf8[0]->offset, utf8_at);
  EXPECT_EQ(utf8[1]->offset, arr_at);
  ASSERT_EQ(with_code(r, "structure.nonzero_padding").size(), 1u) << all_codes(r);
  EXPECT_EQ(with_code(r, "structure.nonzero_padding")[0]->offset, header_end);
  ASSERT_EQ(with_code(r, "structure.trailing_bytes").size(), 1u) << all_codes(r);
  EXPECT_EQ(r.count(Severity::error), 0u) << all_codes(r);
  EXPECT_TRUE(r.passed(false));
  EXPECT_FALSE(r.passed(true));
}

TEST(CheckStructure, PaddingBetweenTensorsAndAfterTheLastIsChecked) {
  RawGguf g;
  g.header(3, 2, 1);
  g.kv_string("general.architecture", "test-arch");
  g.tensor_info("a.weight", {4}, tt::kF32, 0);  // 16 bytes, padded to 32
  g.tensor_info("b.weight", {4}, tt::kF32, 32);
  g.pad_to(32);
  g.fill(16, 0x3f).fill(16, 0x07);  // garbage in a's padding
  g.fill(16, 0x3f).fill(16, 0x00);
  const CheckReport r = check_bytes(g.span());
  const auto pads = with_code(r, "structure.nonzero_padding");
  ASSERT_EQ(pads.size(), 1u) << all_codes(r);
  EXPECT_EQ(pads[0]->subject, "b.weight");
  EXPECT_TRUE(with_code(r, "structure.trailing_bytes").empty()) << all_codes(r);
}

TEST(CheckStructure, ACutOffTensorIsNotTrailingBytes) {
  // b's data is cut off: what follows a's data is b's first bytes, not bytes appended to the file.
  RawGguf g;
  g.header(3, 2, 1);
  g.kv_string("general.architecture", "test-arch");
  g.tensor_info("a.weight", {4}, tt::kF32, 0);
  g.tensor_info("b.weight", {64}, tt::kF32, 32);
  g.pad_to(32);
  g.fill(16, 0x3f).fill(16, 0x00);
  g.fill(40, 0x3f);  // 40 of b's 256 bytes
  const CheckReport r = check_bytes(g.span());
  EXPECT_EQ(with_code(r, "structure.data_out_of_bounds").size(), 1u) << all_codes(r);
  EXPECT_TRUE(with_code(r, "structure.trailing_bytes").empty()) << all_codes(r);
}

TEST(CheckCompat, ForkTypeIdsAreNamed) {
  for (const int32_t id : {143, 43}) {
    RawGguf g;
    g.header(3, 1, 1);
    g.kv_string("general.architecture", "test-arch");
    g.tensor_info("fork.weight", {256}, id, 0);
    g.pad_to(32);
    const CheckReport r = check_bytes(g.span());
    const auto f = with_code(r, "compat.fork_type_id");
    ASSERT_EQ(f.size(), 1u) << all_codes(r);
    EXPECT_EQ(f[0]->severity, Severity::error);
    EXPECT_NE(f[0]->message.find(id == 143 ? "PTQ1_0" : "STQ1_0"), std::string::npos) << f[0]->message;
    EXPECT_TRUE(with_code(r, "structure.unknown_tensor_type").empty()) << "reported twice: " << all_codes(r);
  }
}

TEST(CheckCompat, TypeIdFortyTwoIsAmbiguous) {
  // Q2_0: 32 values per block. A proper Q2_0 tensor: info; one whose offsets do not fit: error.
  const auto q2_0 = find_type_traits(42);
  ASSERT_NE(q2_0, nullptr);
  const uint64_t bytes = 256 / q2_0->block_size * q2_0->block_bytes;
  for (const bool fits : {true, false}) {
    RawGguf g;
    g.header(3, 2, 2);
    g.kv_string("general.architecture", "test-arch");
    g.kv_u32("general.quantization_version", 2);
    g.tensor_info("a.weight", {256}, 42, 0);
    const uint64_t next = fits ? (bytes + 31) / 32 * 32 : (bytes + 31) / 32 * 32 + 32;  // a fork's bigger blocks
    g.tensor_info("b.weight", {256}, 42, next);
    g.pad_to(32);
    g.zeros(next + bytes + 32);
    const CheckReport r = check_bytes(g.span());
    const auto f = with_code(r, "compat.ambiguous_type_id");
    ASSERT_EQ(f.size(), 1u) << all_codes(r);
    EXPECT_EQ(f[0]->severity, fits ? Severity::info : Severity::error) << all_codes(r);
  }
}

TEST(CheckMetadata, RequiredKeysAndTheirTypes) {
  RawGguf g;
  g.header(3, 1, 2);
  const uint64_t ft_at = g.size();
  g.kv_string("general.file_type", "Q4_K_M");  // llama.cpp reads a uint32
  g.kv_u32("general.name", 5);                  // the spec says string
  g.tensor_info("a.weight", {32}, tt::kQ4_0, 0);
  g.pad_to(32);
  g.zeros(32);
  const CheckReport r = check_bytes(g.span());
  ASSERT_EQ(with_code(r, "metadata.missing_architecture").size(), 1u) << all_codes(r);
  EXPECT_EQ(with_code(r, "metadata.missing_architecture")[0]->severity, Severity::error);
  const auto types = with_code(r, "metadata.wrong_type");
  ASSERT_EQ(types.size(), 2u) << all_codes(r);
  EXPECT_EQ(types[0]->offset, ft_at);
  EXPECT_EQ(types[0]->severity, Severity::error);
  EXPECT_EQ(types[1]->severity, Severity::warning);
  ASSERT_EQ(with_code(r, "metadata.missing_quantization_version").size(), 1u) << all_codes(r);
}

TEST(CheckMetadata, FileTypeMustMatchTheTensors) {
  for (const bool matches : {true, false}) {
    RawGguf g;
    g.header(3, 2, 3);
    g.kv_string("general.architecture", "test-arch");
    g.kv_u32("general.quantization_version", 2);
    g.kv_u32("general.file_type", 15);  // Q4_K_M: q4_K must appear
    g.tensor_info("a.weight", {256, 2}, matches ? tt::kQ4_K : tt::kQ8_0, 0);
    g.tensor_info("n.weight", {256}, tt::kF32, 1024);
    g.pad_to(32);
    g.zeros(2048);
    const CheckReport r = check_bytes(g.span());
    EXPECT_EQ(with_code(r, "metadata.file_type_mismatch").size(), matches ? 0u : 1u) << all_codes(r);
  }
}

TEST(CheckStructure, MutatedFilesNeverStopTheCheck) {
  // Every single-byte change of a small file: check_bytes returns, a file the reader rejects has
  // at least one error, and every finding carries a code and a message.
  const RawGguf g = good_file();
  std::vector<std::byte> bytes = g.bytes();
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (const uint8_t v : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0x80}}) {
      const std::byte saved = bytes[i];
      bytes[i] = std::byte{v};
      const CheckReport r = check_bytes(bytes);
      const bool strict_ok = GgufFile::parse(bytes).has_value();
      if (!strict_ok) {
        EXPECT_GT(r.count(Severity::error), 0u) << "byte " << i;
      }
      for (const Finding& f : r.findings) {
        EXPECT_FALSE(f.code.empty());
        EXPECT_FALSE(f.message.empty());
      }
      bytes[i] = saved;
    }
  }
}

}  // namespace
}  // namespace ggufkit

namespace ggufkit {
namespace {

using test::RawGguf;
namespace tt = test::ggml_type;

// A small quantized model whose general.* keys are chosen by the caller.
CheckReport with_file_type_keys(uint32_t file_type, uint32_t quantization_version, int32_t tensor_type) {
  RawGguf g;
  g.header(3, 1, 4);
  g.kv_string("general.architecture", "test-arch");
  g.kv_string("tokenizer.ggml.model", "none");
  g.kv_u32("general.file_type", file_type);
  g.kv_u32("general.quantization_version", quantization_version);
  g.tensor_info("a.weight", {256, 2}, tensor_type, 0);
  g.pad_to(32);
  g.zeros(1024);
  return check_bytes(g.span());
}

size_t count_code(const CheckReport& r, std::string_view code) {
  size_t n = 0;
  for (const Finding& f : r.findings) n += f.code == code;
  return n;
}

TEST(CheckMetadata, FileTypeIdsAndQuantizationVersion) {
  // Consistent: Q8_0 file of q8_0 tensors, version 2.
  const CheckReport good = with_file_type_keys(7, 2, tt::kQ8_0);
  EXPECT_EQ(count_code(good, "metadata.unknown_file_type") + count_code(good, "metadata.removed_file_type") +
                count_code(good, "metadata.quantization_version") + count_code(good, "metadata.file_type_mismatch"),
            0u);
  EXPECT_EQ(count_code(with_file_type_keys(500, 2, tt::kQ8_0), "metadata.unknown_file_type"), 1u);
  EXPECT_EQ(count_code(with_file_type_keys(5, 2, tt::kQ8_0), "metadata.removed_file_type"), 1u);  // Q4_2
  EXPECT_EQ(count_code(with_file_type_keys(7, 1, tt::kQ8_0), "metadata.quantization_version"), 1u);
}

TEST(CheckCompat, TypeMixAndRecentTypes) {
  const CheckReport q8 = with_file_type_keys(7, 2, tt::kQ8_0);
  ASSERT_EQ(count_code(q8, "compat.types"), 1u);
  EXPECT_EQ(count_code(q8, "compat.recent_type"), 0u);
  for (const Finding& f : q8.findings) {
    if (f.code == "compat.types") {
      EXPECT_NE(f.message.find("q8_0 x1"), std::string::npos) << f.message;
    }
  }
  // MXFP4 (id 39): read by the llama.cpp we track, refused by engines built before it.
  const CheckReport mx = with_file_type_keys(38, 2, 39);
  ASSERT_EQ(count_code(mx, "compat.recent_type"), 1u);
  EXPECT_EQ(mx.count(Severity::error), 0u);
}

}  // namespace
}  // namespace ggufkit
