// Big-endian files in every verb that writes or compares tensor data. The property, on corpus
// files of several types: V(BE(X)) == BE(V(X)) byte for byte, where BE is convert_endian(.., big)
// and V is an edit (set, rm, rename; in place and by rewrite), split (each shard), merge of
// big-endian shards, quantize (q4_0, q4_K --pure, with threads); and diff --data finds X and BE(X)
// equal. Shards of mixed byte order are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ggufkit/diff.h"
#include "ggufkit/edit.h"
#include "ggufkit/endian.h"
#include "ggufkit/quantize.h"
#include "ggufkit/split.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

// q4_K_M and q4_K_S mix k-quant types; the rest cover one type each (and f16 for quantize).
const char* const kQuantizedFiles[] = {"q4_k_m", "q4_k_s", "q8_0", "f16", "iq4_xs", "q5_0"};
const char* const kFloatFiles[] = {"f16", "f32", "bf16"};

fs::path corpus_file(std::string_view name) {
  return *shared_dir() / "corpus" / "tiny-llama" / ("tiny-llama-" + std::string(name) + ".gguf");
}

GgufFile open_file(const fs::path& path) {
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f) << path << ": " << f.error().describe();
  return std::move(f).value();
}

// Writes `in` big-endian to `out` and returns `out`.
fs::path big_endian_copy(const fs::path& in, const fs::path& out) {
  const GgufFile f = open_file(in);
  EXPECT_EQ(f.byte_order(), ByteOrder::little) << in;
  ConvertEndianOptions options;
  options.sync = false;
  const auto r = convert_endian(f, out, ByteOrder::big, options);
  EXPECT_TRUE(r) << r.error().describe();
  return out;
}

// BE(produced little-endian file) must be the file the verb produced from the big-endian input.
void expect_commutes(const fs::path& le_result, const fs::path& be_result, const fs::path& scratch) {
  EXPECT_EQ(open_file(be_result).byte_order(), ByteOrder::big) << be_result;
  big_endian_copy(le_result, scratch);
  EXPECT_TRUE(read_bytes(scratch) == read_bytes(be_result)) << le_result << " converted differs from " << be_result;
}

// ---- Edits ----

struct EditCase {
  std::string label;
  std::vector<MetadataChange> changes;
  bool force_rewrite = false;
};

std::vector<EditCase> edit_cases(const GgufFile& f) {
  const auto stored = f.get("general.name");
  const std::string name(stored ? stored->get<std::string_view>().value_or("model") : "model");
  std::string same_length = name;
  for (char& c : same_length) c = c == 'x' ? 'y' : 'x';
  std::vector<EditCase> cases;
  // Same-length string and a new scalar appended: the header keeps its size class, in place.
  cases.push_back({"set in place", {MetadataChange::set("general.name", MetadataValue::string(same_length))}});
  cases.push_back({"set u32", {MetadataChange::set("test.count", MetadataValue::of<uint32_t>(0x01020304))}});
  cases.push_back({"set f32 array", {MetadataChange::set("test.scales", MetadataValue::array(std::vector<float>{1.5f, -2.25f, 3e-8f}))}});
  cases.push_back({"rm", {MetadataChange::remove("general.name")}});
  cases.push_back({"rename", {MetadataChange::rename("general.architecture", "general.arch_renamed")}});
  cases.push_back({"rename by rewrite", {MetadataChange::rename("general.name", "general.title")}, true});
  cases.push_back({"set by rewrite", {MetadataChange::set("general.name", MetadataValue::string(same_length))}, true});
  // A long value: the header grows past the data offset, the data section moves.
  cases.push_back({"grow", {MetadataChange::set("test.long", MetadataValue::string(std::string(5000, 'z')))}});
  // general.alignment changes: the tensors are laid out again.
  cases.push_back({"realign", {MetadataChange::set("general.alignment", MetadataValue::of<uint32_t>(64))}});
  return cases;
}

// Plans and applies `c` to `path` in place (or rewritten over itself); returns the mode used.
EditMode edit_in_place(const fs::path& path, const EditCase& c) {
  const GgufFile f = open_file(path);
  EditOptions options;
  options.force_rewrite = c.force_rewrite;
  auto plan = plan_metadata_edit(f, c.changes, options);
  EXPECT_TRUE(plan) << plan.error().describe();
  if (!plan) return EditMode::unchanged;
  ApplyOptions apply;
  apply.sync = false;
  const auto r = apply_metadata_edit(f, path, *plan, path, apply);
  EXPECT_TRUE(r) << r.error().describe();
  return plan->mode;
}

TEST(EndianVerbs, EditsCommuteWithConversion) {
  GGUFKIT_REQUIRE_SHARED();
  const auto dir = temp_dir("endian-verbs-edit");
  std::vector<fs::path> inputs;
  for (const char* name : kQuantizedFiles) inputs.push_back(corpus_file(name));
  size_t in_place = 0, rewritten = 0;
  for (const fs::path& input : inputs) {
    const GgufFile original = open_file(input);
    for (const EditCase& c : edit_cases(original)) {
      SCOPED_TRACE(input.filename().string() + ": " + c.label);
      const fs::path le = dir / "le.gguf", be = dir / "be.gguf";
      fs::remove(le);
      fs::copy_file(input, le);
      fs::permissions(le, fs::perms::owner_write, fs::perm_options::add);
      big_endian_copy(input, be);
      const EditMode le_mode = edit_in_place(le, c);
      const EditMode be_mode = edit_in_place(be, c);
      EXPECT_EQ(le_mode, be_mode);
      (be_mode == EditMode::in_place ? in_place : rewritten) += 1;
      expect_commutes(le, be, dir / "expected.gguf");
      // The big-endian result reads back with the edit made and every tensor's data unchanged.
      const GgufFile edited = open_file(be);
      for (const TensorInfo& t : edited.tensors()) {
        std::vector<std::byte> native(static_cast<size_t>(t.size));
        ASSERT_TRUE(copy_tensor_native(edited, t, 0, native));
        ASSERT_TRUE(std::ranges::equal(native, original.tensor_data(*original.find_tensor(t.name)))) << t.name;
      }
    }
  }
  EXPECT_GE(in_place, std::size(kQuantizedFiles));
  EXPECT_GE(rewritten, std::size(kQuantizedFiles));
}

TEST(EndianVerbs, EditsOfVocabularyHeadersCommute) {
  // Vocabularies: large string, float and int arrays in the header, every one re-encoded.
  GGUFKIT_REQUIRE_SHARED();
  const auto dir = temp_dir("endian-verbs-vocab");
  size_t edited = 0;
  for (const fs::path& input : corpus_files()) {
    if (input.parent_path().filename() == "tiny-llama" || edited >= 3) continue;
    SCOPED_TRACE(input.filename().string());
    const fs::path le = dir / "le.gguf", be = dir / "be.gguf";
    fs::remove(le);
    fs::copy_file(input, le);
    fs::permissions(le, fs::perms::owner_write, fs::perm_options::add);
    big_endian_copy(input, be);
    const EditCase c{"set", {MetadataChange::set("test.flag", MetadataValue::of(true)),
                             MetadataChange::rename("general.architecture", "general.arch2")}};
    EXPECT_EQ(edit_in_place(le, c), edit_in_place(be, c));
    expect_commutes(le, be, dir / "expected.gguf");
    ++edited;
  }
  EXPECT_GE(edited, 1u);
}

// ---- Split and merge ----

std::vector<std::string> split_into(const fs::path& input, const fs::path& prefix, uint64_t max_tensors) {
  const GgufFile f = open_file(input);
  SplitLimits limits;
  limits.max_tensors = max_tensors;
  auto plan = plan_split(f, prefix.string(), limits);
  EXPECT_TRUE(plan) << plan.error().describe();
  if (!plan) return {};
  SplitWriteOptions options;
  options.sync = false;
  const auto r = write_split(f, *plan, options);
  EXPECT_TRUE(r) << r.error().describe();
  std::vector<std::string> paths;
  for (const ShardPlan& s : plan->shards) {
    EXPECT_EQ(fs::file_size(s.path), s.file_bytes) << s.path;
    paths.push_back(s.path);
  }
  return paths;
}

fs::path merge_into(const fs::path& first_shard, const fs::path& out) {
  auto model = SplitModel::open(first_shard);
  EXPECT_TRUE(model) << model.error().describe();
  WriteOptions options;
  options.sync = false;
  const auto r = write_merged(*model, out, options);
  EXPECT_TRUE(r) << r.error().describe();
  return out;
}

TEST(EndianVerbs, SplitAndMergeCommuteWithConversion) {
  GGUFKIT_REQUIRE_SHARED();
  const auto dir = temp_dir("endian-verbs-split");
  for (const char* name : kQuantizedFiles) {
    SCOPED_TRACE(name);
    const fs::path input = corpus_file(name);
    const fs::path be = big_endian_copy(input, dir / "be.gguf");
    const auto le_shards = split_into(input, dir / "le", 7);
    const auto be_shards = split_into(be, dir / "be", 7);
    ASSERT_EQ(le_shards.size(), be_shards.size());
    ASSERT_GE(be_shards.size(), 3u);
    for (size_t i = 0; i < be_shards.size(); ++i) expect_commutes(le_shards[i], be_shards[i], dir / "expected.gguf");

    // Merging the big-endian shards: BE(merge(LE shards)), and the big-endian input itself.
    const fs::path le_merged = merge_into(le_shards.front(), dir / "le-merged.gguf");
    const fs::path be_merged = merge_into(be_shards.front(), dir / "be-merged.gguf");
    expect_commutes(le_merged, be_merged, dir / "expected.gguf");
    EXPECT_TRUE(read_bytes(be_merged) == read_bytes(be));

    // The big-endian split model's data equals the little-endian file's.
    auto split_be = SplitModel::open(be_shards.front());
    auto whole_le = SplitModel::open(input);
    ASSERT_TRUE(split_be && whole_le);
    DiffOptions diff;
    diff.data = true;
    auto d = diff_models(*whole_le, *split_be, diff);
    ASSERT_TRUE(d) << d.error().describe();
    EXPECT_TRUE(d->identical());
    EXPECT_EQ(d->counts.data_bytes_equal, open_file(input).tensors().size());
  }
}

TEST(EndianVerbs, ShardsOfMixedByteOrderAreRefused) {
  GGUFKIT_REQUIRE_SHARED();
  const auto dir = temp_dir("endian-verbs-mixed");
  const fs::path be = big_endian_copy(corpus_file("f16"), dir / "be.gguf");
  const auto shards = split_into(be, dir / "m", 10);
  ASSERT_GE(shards.size(), 2u);
  // The second shard back to little-endian.
  {
    const GgufFile second = open_file(shards[1]);
    ConvertEndianOptions options;
    options.sync = false;
    ASSERT_TRUE(convert_endian(second, dir / "le-shard.gguf", ByteOrder::little, options));
  }
  fs::rename(dir / "le-shard.gguf", shards[1]);
  auto model = SplitModel::open(shards.front());
  ASSERT_TRUE(model) << model.error().describe();
  const auto order = model->byte_order();
  ASSERT_FALSE(order);
  EXPECT_NE(order.error().message.find("mixed byte order"), std::string::npos) << order.error().message;
  const auto merged = write_merged(*model, dir / "merged.gguf");
  ASSERT_FALSE(merged);
  EXPECT_NE(merged.error().message.find("mixed byte order"), std::string::npos) << merged.error().message;
  EXPECT_FALSE(fs::exists(dir / "merged.gguf"));
  QuantizeOptions options;
  options.file_type = 2;
  EXPECT_FALSE(plan_quantize(*model, options));
  // Comparing data reads each shard in its own order: still equal to the original.
  auto original = SplitModel::open(corpus_file("f16"));
  ASSERT_TRUE(original);
  DiffOptions diff;
  diff.data = true;
  auto d = diff_models(*original, *model, diff);
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_TRUE(d->data.empty());
}

// ---- Quantize ----

TEST(EndianVerbs, QuantizeCommutesWithConversion) {
  GGUFKIT_REQUIRE_SHARED();
  const auto dir = temp_dir("endian-verbs-quantize");
  for (const char* name : kFloatFiles) {
    const fs::path input = corpus_file(name);
    const fs::path be = big_endian_copy(input, dir / "be.gguf");
    for (const TensorType type : {TensorType::Q4_0, TensorType::Q4_K}) {
      for (const unsigned threads : {1u, 3u}) {
        SCOPED_TRACE(fmt::format("{} -> {}, {} threads", name, type_name(type), threads));
        QuantizeOptions options;
        options.file_type = *file_type_for_type(type);
        options.pure = true;
        options.threads = Threads{threads};
        options.sync = false;
        const GgufFile le_file = open_file(input), be_file = open_file(be);
        const auto r_le = quantize_model(le_file, dir / "q-le.gguf", options);
        ASSERT_TRUE(r_le) << r_le.error().describe();
        const auto r_be = quantize_model(be_file, dir / "q-be.gguf", options);
        ASSERT_TRUE(r_be) << r_be.error().describe();
        expect_commutes(dir / "q-le.gguf", dir / "q-be.gguf", dir / "expected.gguf");
        // Something was converted (not only copied).
        const GgufFile out = open_file(dir / "q-be.gguf");
        EXPECT_TRUE(std::ranges::any_of(out.tensors(), [&](const TensorInfo& t) { return t.type == type; }));
      }
    }
  }
}

TEST(EndianVerbs, QuantizeOfASplitBigEndianModelEqualsTheWholeFile) {
  GGUFKIT_REQUIRE_SHARED();
  const auto dir = temp_dir("endian-verbs-quantize-split");
  const fs::path be = big_endian_copy(corpus_file("f16"), dir / "be.gguf");
  const auto shards = split_into(be, dir / "s", 9);
  auto model = SplitModel::open(shards.front());
  ASSERT_TRUE(model) << model.error().describe();
  QuantizeOptions options;
  options.file_type = *file_type_for_type(TensorType::Q4_0);
  options.threads = Threads{2};
  options.sync = false;
  ASSERT_TRUE(quantize_model(*model, dir / "from-shards.gguf", options));
  ASSERT_TRUE(quantize_model(open_file(be), dir / "from-file.gguf", options));
  EXPECT_TRUE(read_bytes(dir / "from-shards.gguf") == read_bytes(dir / "from-file.gguf"));
  EXPECT_EQ(open_file(dir / "from-shards.gguf").byte_order(), ByteOrder::big);
}

// ---- diff --data ----

TEST(EndianVerbs, DiffDataFindsAFileAndItsConversionEqual) {
  GGUFKIT_REQUIRE_SHARED();
  const auto dir = temp_dir("endian-verbs-diff");
  DiffOptions options;
  options.data = true;
  options.threads = Threads{2};
  for (const char* name : kQuantizedFiles) {
    SCOPED_TRACE(name);
    const fs::path input = corpus_file(name);
    const fs::path be = big_endian_copy(input, dir / "be.gguf");
    const GgufFile le_file = open_file(input), be_file = open_file(be);
    for (const auto& [a, b] : {std::pair{&le_file, &be_file}, {&be_file, &le_file}, {&be_file, &be_file}}) {
      auto d = diff_files(*a, *b, options);
      ASSERT_TRUE(d) << d.error().describe();
      EXPECT_TRUE(d->identical());
      EXPECT_EQ(d->counts.data_compared, le_file.tensors().size());
      EXPECT_EQ(d->counts.data_bytes_equal, le_file.tensors().size());
    }
  }
}

TEST(EndianVerbs, DiffDataFiguresDoNotDependOnByteOrder) {
  // q8_0 against f16: every tensor's values differ a little; the figures are the same whichever
  // side is big-endian.
  GGUFKIT_REQUIRE_SHARED();
  const auto dir = temp_dir("endian-verbs-diff-values");
  const fs::path q8 = corpus_file("q8_0"), f16 = corpus_file("f16");
  const fs::path q8_be = big_endian_copy(q8, dir / "q8-be.gguf"), f16_be = big_endian_copy(f16, dir / "f16-be.gguf");
  DiffOptions options;
  options.data = true;
  options.segment_elements = 1000;  // many segments, cut across blocks
  // (A result holds views into its files: they stay open.)
  const GgufFile q8_file = open_file(q8), f16_file = open_file(f16);
  const auto reference = diff_files(q8_file, f16_file, options);
  ASSERT_TRUE(reference) << reference.error().describe();
  ASSERT_FALSE(reference->data.empty());
  for (const auto& [a, b] : {std::pair{q8_be, f16}, {q8, f16_be}, {q8_be, f16_be}}) {
    SCOPED_TRACE(a.filename().string() + " vs " + b.filename().string());
    const GgufFile fa = open_file(a), fb = open_file(b);
    const auto d = diff_files(fa, fb, options);
    ASSERT_TRUE(d) << d.error().describe();
    ASSERT_EQ(d->data.size(), reference->data.size());
    for (size_t i = 0; i < d->data.size(); ++i) {
      const DataDiff& x = d->data[i];
      const DataDiff& y = reference->data[i];
      EXPECT_EQ(x.name, y.name);
      ASSERT_TRUE(x.values && y.values) << x.name;
      EXPECT_EQ(x.values->elements, y.values->elements) << x.name;
      EXPECT_EQ(x.values->differing, y.values->differing) << x.name;
      EXPECT_EQ(x.values->max_abs_diff, y.values->max_abs_diff) << x.name;
      EXPECT_EQ(x.values->rmse, y.values->rmse) << x.name;
      EXPECT_EQ(x.values->cosine, y.values->cosine) << x.name;
    }
  }
}

}  // namespace
