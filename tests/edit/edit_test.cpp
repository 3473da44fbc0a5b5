// The metadata edit layer: how each edit is planned (unchanged, in place, rewrite), what it writes,
// and what it refuses. Every written file is re-read and its tensor bytes compared with the original's.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <optional>
#include <random>
#include <string>

#include "ggufkit/edit.h"
#include "ggufkit/writer.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

struct Model {
  fs::path path;
  std::vector<std::byte> data;  // the tensor's bytes
};

// A small model: general.name, `extra` keys, a 10 000-byte string when `big_string`, two tensors.
Model make_model(const fs::path& dir, const std::string& name, bool big_string = false, bool tensors = true) {
  GgufBuilder b;
  EXPECT_TRUE(b.set("general.architecture", MetadataValue::string("llama")));
  EXPECT_TRUE(b.set("general.name", MetadataValue::string(name)));
  EXPECT_TRUE(b.set("llama.context_length", MetadataValue::of(uint32_t{4096})));
  if (big_string) {
    EXPECT_TRUE(b.set("test.big", MetadataValue::string(std::string(10000, 'x'))));
  }
  EXPECT_TRUE(b.set("test.tail", MetadataValue::string("tail")));
  EXPECT_TRUE(b.set("test.tokens", MetadataValue::string_array(std::vector<std::string>{"a", "bb", "ccc"})));
  Model m;
  m.path = dir / (name + ".gguf");
  m.data.resize(4 * 64 * 3);
  std::mt19937 rng(7);
  for (auto& v : m.data) v = static_cast<std::byte>(rng());
  if (tensors) {
    const int64_t shape_a[] = {64, 2}, shape_b[] = {64};
    EXPECT_TRUE(b.add_tensor("a.weight", TensorType::F32, shape_a, std::span(m.data).first(4 * 128)));
    EXPECT_TRUE(b.add_tensor("b.weight", TensorType::F32, shape_b, std::span(m.data).subspan(4 * 128)));
  }
  EXPECT_TRUE(b.write_file(m.path));
  return m;
}

// The tensor bytes of a file, concatenated in file order.
std::vector<std::byte> tensor_bytes(const GgufFile& f) {
  std::vector<std::byte> out;
  for (const TensorInfo& t : f.tensors()) {
    const auto d = f.tensor_data(t);
    out.insert(out.end(), d.begin(), d.end());
  }
  return out;
}

std::string name_of(const GgufFile& f) { return std::string(f.get("general.name")->as_string().value_or("?")); }

EditPlan plan_or_die(const GgufFile& f, std::vector<MetadataChange> changes, EditOptions options = {}) {
  auto plan = plan_metadata_edit(f, changes, options);
  EXPECT_TRUE(plan) << plan.error().describe();
  return plan ? std::move(*plan) : EditPlan{};
}

class Edit : public ::testing::Test {
 protected:
  void SetUp() override { dir = temp_dir("edit-unit"); }
  void TearDown() override { fs::remove_all(dir); }
  // Plans `changes` on the file, applies them to `target` (default: the file) and re-opens the result.
  GgufFile apply(const fs::path& path, std::vector<MetadataChange> changes, std::optional<EditMode> expected,
                 fs::path target = {}) {
    auto f = GgufFile::open(path);
    EXPECT_TRUE(f);
    const EditPlan plan = plan_or_die(*f, std::move(changes));
    if (expected) {
      EXPECT_EQ(plan.mode, *expected) << plan.reason;
    }
    if (target.empty()) target = path;
    auto r = apply_metadata_edit(*f, path, plan, target);
    EXPECT_TRUE(r) << r.error().describe();
    auto out = GgufFile::open(target);
    EXPECT_TRUE(out) << out.error().describe();
    return std::move(*out);
  }
  fs::path dir;
};

TEST_F(Edit, SameLengthValueIsWrittenInPlaceAndTouchesOnlyItsBytes) {
  const Model m = make_model(dir, "abcd");
  const auto before = read_bytes(m.path);
  const GgufFile f = apply(m.path, {MetadataChange::set("general.name", MetadataValue::string("wxyz"))},
                           EditMode::in_place);
  EXPECT_EQ(name_of(f), "wxyz");
  const auto after = read_bytes(m.path);
  ASSERT_EQ(after.size(), before.size());
  size_t differing = 0;
  for (size_t i = 0; i < after.size(); ++i) differing += after[i] != before[i];
  EXPECT_EQ(differing, 4u);
  EXPECT_EQ(tensor_bytes(f), m.data);
}

TEST_F(Edit, GrowingIntoThePaddingIsInPlaceOneByteMoreIsARewrite) {
  const Model m = make_model(dir, "n");
  auto f = GgufFile::open(m.path);
  ASSERT_TRUE(f);
  const uint64_t slack = f->data_offset() - f->header_size();
  if (slack == 0) GTEST_SKIP() << "no padding to grow into";
  const std::string fits(1 + slack, 'n'), too_long(2 + slack, 'n');
  const EditPlan in_place = plan_or_die(*f, {MetadataChange::set("general.name", MetadataValue::string(fits))});
  EXPECT_EQ(in_place.mode, EditMode::in_place) << in_place.reason;
  EXPECT_EQ(in_place.new_data_offset, f->data_offset());
  const EditPlan rewrite = plan_or_die(*f, {MetadataChange::set("general.name", MetadataValue::string(too_long))});
  EXPECT_EQ(rewrite.mode, EditMode::rewrite);
  EXPECT_EQ(rewrite.new_data_offset, f->data_offset() + f->alignment());

  const GgufFile grown = apply(m.path, {MetadataChange::set("general.name", MetadataValue::string(too_long))},
                               EditMode::rewrite);
  EXPECT_EQ(name_of(grown), too_long);
  EXPECT_EQ(tensor_bytes(grown), m.data);
  EXPECT_EQ(grown.metadata().size(), 5u);
}

TEST_F(Edit, ShrinkingPastAnAlignmentUnitIsARewrite) {
  const Model m = make_model(dir, "shrink", /*big_string=*/true);
  const GgufFile f = apply(m.path, {MetadataChange::remove("test.big")}, EditMode::rewrite);
  EXPECT_EQ(f.find("test.big"), nullptr);
  EXPECT_EQ(f.metadata().size(), 5u);
  EXPECT_EQ(tensor_bytes(f), m.data);
  EXPECT_EQ(f.file_size(), f.data_offset() + 4 * 64 * 3);
}

TEST_F(Edit, ChangesFarApartAreRewrittenNotTornAcrossPages) {
  const Model m = make_model(dir, "pages", /*big_string=*/true);
  auto f = GgufFile::open(m.path);
  ASSERT_TRUE(f);
  // Each change alone fits one page...
  EXPECT_EQ(plan_or_die(*f, {MetadataChange::set("test.tail", MetadataValue::string("TAIL"))}).mode,
            EditMode::in_place);
  // ...both together span 10 KB.
  const EditPlan both = plan_or_die(*f, {MetadataChange::set("general.name", MetadataValue::string("PAGES")),
                                         MetadataChange::set("test.tail", MetadataValue::string("TAIL"))});
  EXPECT_EQ(both.mode, EditMode::rewrite);
  EXPECT_NE(both.reason.find("page"), std::string::npos) << both.reason;
  const GgufFile out = apply(m.path, {MetadataChange::set("general.name", MetadataValue::string("PAGES")),
                                      MetadataChange::set("test.tail", MetadataValue::string("TAIL"))},
                             EditMode::rewrite);
  EXPECT_EQ(name_of(out), "PAGES");
  EXPECT_EQ(out.get("test.tail")->as_string(), "TAIL");
  EXPECT_EQ(tensor_bytes(out), m.data);
}

TEST_F(Edit, ForcedRewriteGivesTheSameBytesAsInPlace) {
  const Model a = make_model(dir, "same");
  fs::copy_file(a.path, dir / "copy.gguf");
  auto f = GgufFile::open(a.path);
  ASSERT_TRUE(f);
  const std::vector changes{MetadataChange::set("general.name", MetadataValue::string("SAME"))};
  const EditPlan forced = plan_or_die(*f, changes, {.force_rewrite = true});
  EXPECT_EQ(forced.mode, EditMode::rewrite);
  ASSERT_TRUE(apply_metadata_edit(*f, a.path, forced, a.path));
  apply(dir / "copy.gguf", changes, EditMode::in_place);
  EXPECT_EQ(read_bytes(a.path), read_bytes(dir / "copy.gguf"));
}

TEST_F(Edit, NewKeysGoLastRenamesKeepTheirPlace) {
  const Model m = make_model(dir, "order");
  const GgufFile f = apply(m.path,
                           {MetadataChange::rename("llama.context_length", "llama.ctx"),
                            MetadataChange::set("z.new", MetadataValue::of(int8_t{-3}))},
                           std::nullopt);
  std::vector<std::string> keys;
  for (const KeyValue& kv : f.metadata()) keys.emplace_back(kv.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"general.architecture", "general.name", "llama.ctx", "test.tail",
                                            "test.tokens", "z.new"}));
  EXPECT_EQ(f.get("llama.ctx")->get<uint32_t>(), 4096u);
  EXPECT_EQ(f.get("z.new")->get<int8_t>(), -3);
}

TEST_F(Edit, PlanReportsEachTouchedKeyOnce) {
  const Model m = make_model(dir, "report");
  auto f = GgufFile::open(m.path);
  ASSERT_TRUE(f);
  const EditPlan plan = plan_or_die(*f, {MetadataChange::set("general.name", MetadataValue::string("x")),
                                         MetadataChange::set("general.name", MetadataValue::string("y")),
                                         MetadataChange::remove("test.tail"),
                                         MetadataChange::rename("test.tokens", "test.words")});
  ASSERT_EQ(plan.changes.size(), 4u);
  EXPECT_EQ(plan.changes[0].key, "general.name");
  EXPECT_EQ(plan.changes[0].before->view().as_string(), "report");
  EXPECT_EQ(plan.changes[0].after->view().as_string(), "y");
  EXPECT_EQ(plan.changes[1].key, "test.words");
  EXPECT_EQ(plan.changes[1].renamed_from, "test.tokens");
  EXPECT_FALSE(plan.changes[1].before);
  // Removed keys (and the old name of a renamed one) come last, without an "after".
  EXPECT_FALSE(plan.changes[2].after);
  EXPECT_FALSE(plan.changes[3].after);
}

TEST_F(Edit, SettingTheSameValueChangesNothing) {
  const Model m = make_model(dir, "same-value");
  const auto before = read_bytes(m.path);
  apply(m.path, {MetadataChange::set("general.name", MetadataValue::string("same-value"))}, EditMode::unchanged);
  EXPECT_EQ(read_bytes(m.path), before);
}

TEST_F(Edit, ChangingTheAlignmentLaysTheDataOutAgain) {
  const Model m = make_model(dir, "align");
  const GgufFile f = apply(m.path, {MetadataChange::set("general.alignment", MetadataValue::of(uint32_t{256}))},
                           EditMode::rewrite);
  EXPECT_EQ(f.alignment(), 256u);
  EXPECT_EQ(f.data_offset() % 256, 0u);
  for (const TensorInfo& t : f.tensors()) EXPECT_EQ(t.offset % 256, 0u) << t.name;
  EXPECT_EQ(tensor_bytes(f), m.data);
  auto g = GgufFile::open(m.path);
  ASSERT_TRUE(g);
  auto bad = plan_metadata_edit(*g, std::vector{MetadataChange::set("general.alignment", MetadataValue::of(uint32_t{48}))});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::bad_alignment);
  auto wrong_type = plan_metadata_edit(*g, std::vector{MetadataChange::set("general.alignment", MetadataValue::of(uint64_t{64}))});
  EXPECT_FALSE(wrong_type);
}

TEST_F(Edit, AnOutputPathLeavesTheSourceUntouched) {
  const Model m = make_model(dir, "source");
  const auto before = read_bytes(m.path);
  const GgufFile out = apply(m.path, {MetadataChange::set("general.name", MetadataValue::string("SOURCE"))},
                             EditMode::in_place, dir / "out.gguf");
  EXPECT_EQ(read_bytes(m.path), before);
  EXPECT_EQ(name_of(out), "SOURCE");
  EXPECT_EQ(tensor_bytes(out), m.data);
}

TEST_F(Edit, RefusalsLeaveTheFileAlone) {
  const Model m = make_model(dir, "refuse");
  const auto before = read_bytes(m.path);
  auto f = GgufFile::open(m.path);
  ASSERT_TRUE(f);
  auto missing = plan_metadata_edit(*f, std::vector{MetadataChange::remove("no.such.key")});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().subject, "no.such.key");
  EXPECT_FALSE(plan_metadata_edit(*f, std::vector{MetadataChange::rename("no.such.key", "x")}));
  auto onto = plan_metadata_edit(*f, std::vector{MetadataChange::rename("general.name", "test.tail")});
  ASSERT_FALSE(onto);
  EXPECT_NE(onto.error().message.find("exists"), std::string::npos);
  EXPECT_FALSE(plan_metadata_edit(*f, std::vector{MetadataChange::set("", MetadataValue::of(1u))}));
  EXPECT_FALSE(plan_metadata_edit(*f, std::vector{MetadataChange::set("k", MetadataValue{})}));

  // Read-only: refused for in place and for rewrite alike (even for root, who could write it).
  const EditPlan plan = plan_or_die(*f, {MetadataChange::set("general.name", MetadataValue::string("REFUSE"))});
  const EditPlan grow = plan_or_die(*f, {MetadataChange::set("general.name", MetadataValue::string(std::string(99, 'r')))});
  ASSERT_EQ(::chmod(m.path.c_str(), 0444), 0);
  auto r1 = apply_metadata_edit(*f, m.path, plan, m.path);
  auto r2 = apply_metadata_edit(*f, m.path, grow, m.path);
  ::chmod(m.path.c_str(), 0644);
  ASSERT_FALSE(r1);
  EXPECT_EQ(r1.error().code, ErrorCode::io_error);
  EXPECT_EQ(r1.error().message, "the file is read-only: not modified");
  EXPECT_EQ(r1.error().file, m.path.string());  // the file in its field, not pasted into the message
  EXPECT_EQ(r1.error().offset, std::nullopt);
  EXPECT_FALSE(r2);
  EXPECT_EQ(read_bytes(m.path), before);
  // A missing source.
  EXPECT_FALSE(apply_metadata_edit(*f, dir / "gone.gguf", plan, dir / "gone.gguf"));
}

TEST_F(Edit, AFileChangedSinceItWasReadIsNotWritten) {
  const Model m = make_model(dir, "changed");
  // The plan is made from the bytes as they were...
  const auto stale = read_bytes(m.path);
  auto stale_file = GgufFile::parse(stale);
  ASSERT_TRUE(stale_file);
  const EditPlan plan = plan_or_die(*stale_file, {MetadataChange::set("general.name", MetadataValue::string("chAnged"))});
  // ...then someone else changes the name (same length) on disk.
  auto bytes = stale;
  const std::string name = "changed";
  auto it = std::search(bytes.begin(), bytes.end(), reinterpret_cast<const std::byte*>(name.data()),
                        reinterpret_cast<const std::byte*>(name.data()) + name.size());
  ASSERT_NE(it, bytes.end());
  *it = std::byte{'C'};
  write_bytes(m.path, bytes);
  auto r = apply_metadata_edit(*stale_file, m.path, plan, m.path);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("changed since"), std::string::npos);
  EXPECT_EQ(read_bytes(m.path), bytes);
}

TEST_F(Edit, FilesWithoutTensorsKeepTheirPaddingChoice) {
  const Model m = make_model(dir, "vocab", false, /*tensors=*/false);
  auto f = GgufFile::open(m.path);
  ASSERT_TRUE(f);
  const bool padded = f->file_size() > f->header_size();
  const GgufFile same = apply(m.path, {MetadataChange::set("general.name", MetadataValue::string("VOCAB"))},
                              EditMode::in_place);
  EXPECT_EQ(name_of(same), "VOCAB");
  const GgufFile grown = apply(m.path, {MetadataChange::set("test.tail", MetadataValue::string(std::string(100, 't')))},
                               EditMode::rewrite);
  EXPECT_EQ(grown.file_size() > grown.header_size(), padded);
  if (padded) {
    EXPECT_EQ(grown.file_size() % 32, 0u);
  }
}

TEST(EditValues, ScalarsParseWithTheirRanges) {
  EXPECT_EQ(parse_scalar_value("255", ValueType::UInt8)->view().get<uint8_t>(), 255);
  EXPECT_FALSE(parse_scalar_value("256", ValueType::UInt8));
  EXPECT_FALSE(parse_scalar_value("-1", ValueType::UInt32));
  EXPECT_EQ(parse_scalar_value("-128", ValueType::Int8)->view().get<int8_t>(), -128);
  EXPECT_FALSE(parse_scalar_value("-129", ValueType::Int8));
  EXPECT_EQ(parse_scalar_value("0x10", ValueType::UInt16)->view().get<uint16_t>(), 16);
  EXPECT_EQ(parse_scalar_value("18446744073709551615", ValueType::UInt64)->view().get<uint64_t>(), UINT64_MAX);
  EXPECT_FALSE(parse_scalar_value("12abc", ValueType::Int32));
  EXPECT_FALSE(parse_scalar_value("", ValueType::Int32));
  EXPECT_EQ(parse_scalar_value("1e-5", ValueType::Float32)->view().get<float>(), 1e-5f);
  EXPECT_FALSE(parse_scalar_value("1e39", ValueType::Float32));
  EXPECT_EQ(parse_scalar_value("1e39", ValueType::Float64)->view().get<double>(), 1e39);
  EXPECT_TRUE(std::isinf(*parse_scalar_value("-inf", ValueType::Float32)->view().get<float>()));
  EXPECT_EQ(parse_scalar_value("true", ValueType::Bool)->view().get<bool>(), true);
  EXPECT_EQ(parse_scalar_value("0", ValueType::Bool)->view().get<bool>(), false);
  EXPECT_FALSE(parse_scalar_value("yes", ValueType::Bool));
  EXPECT_EQ(parse_scalar_value(" spaced\n", ValueType::String)->view().as_string(), " spaced\n");
}

TEST(EditValues, NewKeysGetTheTypeTheirTextSuggests) {
  EXPECT_EQ(infer_value_type("x", "123"), ValueType::UInt32);
  EXPECT_EQ(infer_value_type("x", "4294967296"), ValueType::UInt64);
  EXPECT_EQ(infer_value_type("x", "-5"), ValueType::Int32);
  EXPECT_EQ(infer_value_type("x", "-3000000000"), ValueType::Int64);
  EXPECT_EQ(infer_value_type("x", "1.5"), ValueType::Float32);
  EXPECT_EQ(infer_value_type("x", "1e-6"), ValueType::Float32);
  EXPECT_EQ(infer_value_type("x", "true"), ValueType::Bool);
  EXPECT_EQ(infer_value_type("x", "hello"), ValueType::String);
  EXPECT_EQ(infer_value_type("x", "1.2.3"), ValueType::String);
  EXPECT_EQ(infer_value_type("x", "eee"), ValueType::String);
  // Conventional string keys stay strings whatever they look like.
  EXPECT_EQ(infer_value_type("general.version", "1.0"), ValueType::String);
  EXPECT_EQ(infer_value_type("general.name", "7"), ValueType::String);
  EXPECT_EQ(infer_value_type("tokenizer.chat_template.tool_use", "1"), ValueType::String);
}

}  // namespace
