// diff_files on small files built with GgufBuilder: every kind of difference, what is not a
// difference (layout), array element reports, and the data figures against a plain computation.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "diff_helpers.h"

namespace ggufkit {
namespace {

using test::build;
using test::BuiltFile;

const std::vector<int64_t> kShape{64, 4};

// A small model: a few keys, a vocabulary, three tensors.
GgufBuilder base_model() {
  GgufBuilder b;
  EXPECT_TRUE(b.set("general.architecture", MetadataValue::string("llama")));
  EXPECT_TRUE(b.set("general.name", MetadataValue::string("tiny")));
  EXPECT_TRUE(b.set("llama.context_length", MetadataValue::of(uint32_t{2048})));
  EXPECT_TRUE(b.set("llama.rope.freq_base", MetadataValue::of(10000.0f)));
  std::vector<std::string> tokens;
  for (int i = 0; i < 1000; ++i) tokens.push_back("tok" + std::to_string(i));
  EXPECT_TRUE(b.set("tokenizer.ggml.tokens", MetadataValue::string_array(tokens)));
  std::vector<float> scores(10000);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  EXPECT_TRUE(b.set("tokenizer.ggml.scores", MetadataValue::array(scores)));
  EXPECT_TRUE(b.add_tensor("token_embd.weight", TensorType::F32, kShape, test::float_bytes(test::wave(256))));
  EXPECT_TRUE(b.add_tensor("blk.0.attn_q.weight", TensorType::F32, kShape, test::float_bytes(test::wave(256, 1.0f))));
  EXPECT_TRUE(b.add_tensor("output_norm.weight", TensorType::F32, std::vector<int64_t>{64},
                           test::float_bytes(test::wave(64, 2.0f))));
  return b;
}

DiffOptions with_data() {
  DiffOptions o;
  o.data = true;
  return o;
}

DiffResult diff(const BuiltFile& a, const BuiltFile& b, const DiffOptions& o = {}) {
  auto r = diff_files(*a, *b, o);
  EXPECT_TRUE(r) << r.error().describe();
  return std::move(r).value();
}

const MetadataDiff* find_key(const DiffResult& r, std::string_view key) {
  for (const auto& m : r.metadata) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

TEST(Diff, AFileEqualsItselfAndACopy) {
  const BuiltFile a = build(base_model());
  const BuiltFile b = build(base_model());
  for (const BuiltFile* other : {&a, &b}) {
    const DiffResult r = diff(a, *other, with_data());
    EXPECT_TRUE(r.identical());
    EXPECT_FALSE(r.layout.differs());
    EXPECT_EQ(r.counts.keys_a, 6u);
    EXPECT_EQ(r.counts.keys_b, 6u);
    EXPECT_EQ(r.counts.tensors_a, 3u);
    EXPECT_EQ(r.counts.data_compared, 3u);
    EXPECT_EQ(r.counts.data_bytes_equal, 3u);
  }
}

TEST(Diff, KeysAddedRemovedChangedSortedByKey) {
  GgufBuilder mb = base_model();
  mb.remove("general.name");
  ASSERT_TRUE(mb.set("general.author", MetadataValue::string("someone")));
  ASSERT_TRUE(mb.set("llama.context_length", MetadataValue::of(uint32_t{4096})));
  ASSERT_TRUE(mb.set("llama.rope.freq_base", MetadataValue::of(10000.0)));  // float32 -> float64
  const BuiltFile a = build(base_model());
  const BuiltFile b = build(mb);
  const DiffResult r = diff(a, b);
  EXPECT_FALSE(r.identical());
  ASSERT_EQ(r.metadata.size(), 4u);
  EXPECT_TRUE(std::is_sorted(r.metadata.begin(), r.metadata.end(),
                             [](const MetadataDiff& x, const MetadataDiff& y) { return x.key < y.key; }));

  const MetadataDiff* added = find_key(r, "general.author");
  ASSERT_NE(added, nullptr);
  EXPECT_EQ(added->change, Change::added);
  EXPECT_FALSE(added->a);
  EXPECT_EQ(added->b->as_string(), "someone");

  const MetadataDiff* removed = find_key(r, "general.name");
  ASSERT_NE(removed, nullptr);
  EXPECT_EQ(removed->change, Change::removed);
  EXPECT_EQ(removed->a->as_string(), "tiny");
  EXPECT_FALSE(removed->b);

  const MetadataDiff* changed = find_key(r, "llama.context_length");
  ASSERT_NE(changed, nullptr);
  EXPECT_EQ(changed->change, Change::changed);
  EXPECT_FALSE(changed->type_changed);
  EXPECT_EQ(changed->a->get<uint32_t>(), 2048u);
  EXPECT_EQ(changed->b->get<uint32_t>(), 4096u);

  const MetadataDiff* retyped = find_key(r, "llama.rope.freq_base");
  ASSERT_NE(retyped, nullptr);
  EXPECT_TRUE(retyped->type_changed);
  EXPECT_EQ(retyped->a->type(), ValueType::Float32);
  EXPECT_EQ(retyped->b->type(), ValueType::Float64);
  EXPECT_TRUE(r.tensors.empty());
}

TEST(Diff, SameNumberDifferentIntegerTypeIsATypeChange) {
  GgufBuilder mb = base_model();
  ASSERT_TRUE(mb.set("llama.context_length", MetadataValue::of(uint64_t{2048})));
  const BuiltFile fa = build(base_model());
  const BuiltFile fb = build(mb);
  const DiffResult r = diff(fa, fb);
  ASSERT_EQ(r.metadata.size(), 1u);
  EXPECT_TRUE(r.metadata[0].type_changed);
}

TEST(Diff, OneTokenOfAVocabularySaysWhichIndex) {
  GgufBuilder mb = base_model();
  std::vector<std::string> tokens;
  for (int i = 0; i < 1000; ++i) tokens.push_back("tok" + std::to_string(i));
  tokens[437] = "changed";
  ASSERT_TRUE(mb.set("tokenizer.ggml.tokens", MetadataValue::string_array(tokens)));
  const BuiltFile fa = build(base_model());
  const BuiltFile fb = build(mb);
  const DiffResult r = diff(fa, fb);
  ASSERT_EQ(r.metadata.size(), 1u);
  const MetadataDiff& m = r.metadata[0];
  EXPECT_EQ(m.key, "tokenizer.ggml.tokens");
  EXPECT_FALSE(m.type_changed);
  ASSERT_TRUE(m.elements);
  EXPECT_EQ(m.elements->length_a, 1000u);
  EXPECT_EQ(m.elements->length_b, 1000u);
  EXPECT_EQ(m.elements->differing, 1u);
  ASSERT_EQ(m.elements->shown.size(), 1u);
  EXPECT_EQ(m.elements->shown[0].index, 437u);
  EXPECT_EQ(m.elements->shown[0].a->as_string(), "tok437");
  EXPECT_EQ(m.elements->shown[0].b->as_string(), "changed");
}

TEST(Diff, ManyDifferingElementsCountedAllShownFirstFew) {
  std::vector<std::string> tokens;
  for (int i = 0; i < 1000; ++i) tokens.push_back("tok" + std::to_string(i));
  const std::vector<size_t> changed{3, 50, 51, 400, 401, 402, 998};
  for (size_t i : changed) tokens[i] += "!";
  GgufBuilder mb = base_model();
  ASSERT_TRUE(mb.set("tokenizer.ggml.tokens", MetadataValue::string_array(tokens)));
  DiffOptions o;
  o.max_shown_elements = 5;
  const BuiltFile fa = build(base_model());
  const BuiltFile fb = build(mb);
  const DiffResult r = diff(fa, fb, o);
  ASSERT_EQ(r.metadata.size(), 1u);
  const ArrayDiff& d = *r.metadata[0].elements;
  EXPECT_EQ(d.differing, changed.size());
  ASSERT_EQ(d.shown.size(), 5u);
  for (size_t k = 0; k < 5; ++k) EXPECT_EQ(d.shown[k].index, changed[k]);
}

TEST(Diff, FixedSizeArrayDifferenceFarIn) {
  std::vector<float> scores(10000);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  scores[9001] = 0.5f;
  scores[5000] = 1.0f;
  scores[0] = 0.0f;  // the stored value is -0.0: equal as floats, not as bytes, and bytes are what count
  GgufBuilder mb = base_model();
  ASSERT_TRUE(mb.set("tokenizer.ggml.scores", MetadataValue::array(scores)));
  const BuiltFile fa = build(base_model());
  const BuiltFile fb = build(mb);
  const DiffResult r = diff(fa, fb);
  ASSERT_EQ(r.metadata.size(), 1u);
  const ArrayDiff& d = *r.metadata[0].elements;
  EXPECT_EQ(d.differing, 3u);
  ASSERT_EQ(d.shown.size(), 3u);
  EXPECT_EQ(d.shown[0].index, 0u);
  EXPECT_EQ(d.shown[1].index, 5000u);
  EXPECT_EQ(d.shown[2].index, 9001u);
  EXPECT_EQ(d.shown[2].a->get<float>(), -9001.0f);
  EXPECT_EQ(d.shown[2].b->get<float>(), 0.5f);
}

TEST(Diff, ArrayLengthChangeShowsTheTail) {
  std::vector<std::string> tokens;
  for (int i = 0; i < 1003; ++i) tokens.push_back("tok" + std::to_string(i));
  GgufBuilder mb = base_model();
  ASSERT_TRUE(mb.set("tokenizer.ggml.tokens", MetadataValue::string_array(tokens)));
  const BuiltFile a = build(base_model());
  const BuiltFile b = build(mb);
  DiffResult r = diff(a, b);
  ASSERT_EQ(r.metadata.size(), 1u);
  const ArrayDiff& d = *r.metadata[0].elements;
  EXPECT_EQ(d.length_a, 1000u);
  EXPECT_EQ(d.length_b, 1003u);
  EXPECT_EQ(d.differing, 0u);
  ASSERT_EQ(d.shown.size(), 3u);
  EXPECT_EQ(d.shown[0].index, 1000u);
  EXPECT_FALSE(d.shown[0].a);
  EXPECT_EQ(d.shown[0].b->as_string(), "tok1000");
  // And the other way round: removed from the end.
  r = diff(b, a);
  const ArrayDiff& back = *r.metadata[0].elements;
  ASSERT_EQ(back.shown.size(), 3u);
  EXPECT_EQ(back.shown[2].index, 1002u);
  EXPECT_EQ(back.shown[2].a->as_string(), "tok1002");
  EXPECT_FALSE(back.shown[2].b);
}

TEST(Diff, ArrayElementTypeChangeIsATypeChange) {
  std::vector<int32_t> ints(10000);
  for (size_t i = 0; i < ints.size(); ++i) ints[i] = -static_cast<int32_t>(i);
  GgufBuilder mb = base_model();
  ASSERT_TRUE(mb.set("tokenizer.ggml.scores", MetadataValue::array(ints)));
  const BuiltFile fa = build(base_model());
  const BuiltFile fb = build(mb);
  const DiffResult r = diff(fa, fb);
  ASSERT_EQ(r.metadata.size(), 1u);
  EXPECT_TRUE(r.metadata[0].type_changed);
  EXPECT_FALSE(r.metadata[0].elements);
}

TEST(Diff, NestedArraysComparedPerElement) {
  const auto nested = [](int32_t changed_value) {
    std::vector<MetadataValue> inner;
    for (int32_t i = 0; i < 4; ++i) {
      std::vector<int32_t> v{i, i + 1, i == 2 ? changed_value : i + 2};
      inner.push_back(MetadataValue::array(v));
    }
    auto m = MetadataValue::array_of(ValueType::Array, inner);
    EXPECT_TRUE(m);
    return std::move(m).value();
  };
  GgufBuilder ma = base_model(), mb = base_model();
  ASSERT_TRUE(ma.set("test.nested", nested(4)));
  ASSERT_TRUE(mb.set("test.nested", nested(99)));
  const BuiltFile fa = build(ma);
  const BuiltFile fb = build(mb);
  const DiffResult r = diff(fa, fb);
  ASSERT_EQ(r.metadata.size(), 1u);
  const ArrayDiff& d = *r.metadata[0].elements;
  EXPECT_EQ(d.differing, 1u);
  ASSERT_EQ(d.shown.size(), 1u);
  EXPECT_EQ(d.shown[0].index, 2u);
  EXPECT_EQ(d.shown[0].b->as_array()->get<int32_t>(2), 99);
}

TEST(Diff, TensorsAddedRemovedRetypedReshapedSortedByName) {
  GgufBuilder ma = base_model();
  ASSERT_TRUE(ma.add_tensor("zz.removed", TensorType::F32, std::vector<int64_t>{32}, test::float_bytes(test::wave(32))));
  ASSERT_TRUE(ma.add_tensor("aa.retyped", TensorType::F32, std::vector<int64_t>{32}, test::float_bytes(test::wave(32))));
  ASSERT_TRUE(ma.add_tensor("mm.reshaped", TensorType::F32, std::vector<int64_t>{32, 2}, test::float_bytes(test::wave(64))));
  GgufBuilder mb = base_model();
  ASSERT_TRUE(mb.add_tensor("bb.added", TensorType::F32, std::vector<int64_t>{32}, test::float_bytes(test::wave(32))));
  ASSERT_TRUE(mb.add_tensor("aa.retyped", TensorType::F16, std::vector<int64_t>{32},
                            test::encode_as(TensorType::F16, test::wave(32), 32)));
  ASSERT_TRUE(mb.add_tensor("mm.reshaped", TensorType::F32, std::vector<int64_t>{64}, test::float_bytes(test::wave(64))));
  const BuiltFile a = build(ma);
  const BuiltFile b = build(mb);
  const DiffResult r = diff(a, b, with_data());
  ASSERT_EQ(r.tensors.size(), 4u);
  EXPECT_EQ(r.tensors[0].name, "aa.retyped");
  EXPECT_EQ(r.tensors[0].change, Change::changed);
  EXPECT_TRUE(r.tensors[0].type_changed);
  EXPECT_FALSE(r.tensors[0].shape_changed);
  EXPECT_EQ(r.tensors[1].name, "bb.added");
  EXPECT_EQ(r.tensors[1].change, Change::added);
  EXPECT_EQ(r.tensors[1].a, nullptr);
  EXPECT_EQ(r.tensors[1].b, b->find_tensor("bb.added"));
  EXPECT_EQ(r.tensors[2].name, "mm.reshaped");
  EXPECT_TRUE(r.tensors[2].shape_changed);
  EXPECT_FALSE(r.tensors[2].type_changed);
  EXPECT_EQ(r.tensors[3].name, "zz.removed");
  EXPECT_EQ(r.tensors[3].change, Change::removed);
  // Data: the retyped tensor is compared after dequantizing (f16 of these values differs from f32);
  // the reshaped one has other dimensions and is not compared.
  EXPECT_EQ(r.counts.data_compared, 4u);  // 3 base tensors + aa.retyped
  EXPECT_EQ(r.counts.data_bytes_equal, 3u);
  ASSERT_EQ(r.data.size(), 1u);
  EXPECT_EQ(r.data[0].name, "aa.retyped");
  ASSERT_TRUE(r.data[0].values);
  const auto ref = test::reference_figures(test::dequantized(*a, *a->find_tensor("aa.retyped")),
                                           test::dequantized(*b, *b->find_tensor("aa.retyped")));
  test::expect_figures_match(*r.data[0].values, ref);
  EXPECT_GT(ref.differing, 0u);
  EXPECT_GT(r.data[0].values->cosine, 0.99999);
}

TEST(Diff, SameElementsUnderMoreDimensionsAreAShapeChangeButDataCompared) {
  const BuiltFile a = build(base_model());
  // output_norm.weight [64] -> [64, 1], same bytes.
  GgufBuilder rebuilt;
  for (const KeyValue& kv : a->metadata()) ASSERT_TRUE(rebuilt.set(kv.key, MetadataValue::copy_of(kv.value)));
  for (const TensorInfo& t : a->tensors()) {
    std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    if (t.name == "output_norm.weight") shape.push_back(1);
    ASSERT_TRUE(rebuilt.add_tensor(t.name, t.type, shape, a->tensor_data(t)));
  }
  const BuiltFile b = build(rebuilt);
  const DiffResult r = diff(a, b, with_data());
  ASSERT_EQ(r.tensors.size(), 1u);
  EXPECT_TRUE(r.tensors[0].shape_changed);
  EXPECT_EQ(r.counts.data_compared, 3u);
  EXPECT_EQ(r.counts.data_bytes_equal, 3u);
}

TEST(Diff, RealignedFileWithSameTensorsIsEqual) {
  const BuiltFile a = build(base_model());
  GgufBuilder mb = base_model();
  ASSERT_TRUE(mb.set_alignment(64));
  const BuiltFile b = build(mb);
  ASSERT_EQ(b->alignment(), 64u);
  const DiffResult r = diff(a, b, with_data());
  EXPECT_TRUE(r.identical());
  EXPECT_TRUE(r.layout.differs());
  EXPECT_EQ(r.layout.alignment_a, 32u);
  EXPECT_EQ(r.layout.alignment_b, 64u);
  EXPECT_EQ(r.counts.data_bytes_equal, 3u);
  EXPECT_EQ(r.counts.keys_b, r.counts.keys_a) << "general.alignment is layout, not a key compared";
}

TEST(Diff, ExplicitDefaultAlignmentIsNoDifferenceAtAll) {
  GgufBuilder mb = base_model();
  ASSERT_TRUE(mb.set_alignment(32));
  const BuiltFile fa = build(base_model());
  const BuiltFile fb = build(mb);
  const DiffResult r = diff(fa, fb, with_data());
  EXPECT_TRUE(r.identical());
  EXPECT_FALSE(r.layout.differs());
}

TEST(Diff, VersionAndOrderAreLayout) {
  const BuiltFile a = build(base_model());
  // Version 2, keys and tensors in reverse order.
  GgufBuilder rebuilt;
  ASSERT_TRUE(rebuilt.set_version(2));
  const auto kvs = a->metadata();
  for (auto it = kvs.rbegin(); it != kvs.rend(); ++it) ASSERT_TRUE(rebuilt.set(it->key, MetadataValue::copy_of(it->value)));
  const auto ts = a->tensors();
  for (auto it = ts.rbegin(); it != ts.rend(); ++it) ASSERT_TRUE(rebuilt.add_tensor(it->name, it->type, it->shape(), a->tensor_data(*it)));
  const BuiltFile b = build(rebuilt);
  const DiffResult r = diff(a, b, with_data());
  EXPECT_TRUE(r.identical());
  EXPECT_EQ(r.layout.version_a, 3u);
  EXPECT_EQ(r.layout.version_b, 2u);
  EXPECT_TRUE(r.layout.metadata_order_differs);
  EXPECT_TRUE(r.layout.tensor_order_differs);
  EXPECT_EQ(r.counts.data_bytes_equal, 3u);
}

TEST(Diff, TensorBytesOnlyComparedWithData) {
  const BuiltFile a = build(base_model());
  std::vector<float> changed = test::wave(256, 1.0f);
  changed[77] += 0.25f;
  GgufBuilder b2;
  for (const KeyValue& kv : a->metadata()) ASSERT_TRUE(b2.set(kv.key, MetadataValue::copy_of(kv.value)));
  for (const TensorInfo& t : a->tensors()) {
    if (t.name == "blk.0.attn_q.weight") {
      ASSERT_TRUE(b2.add_tensor(t.name, t.type, t.shape(), test::float_bytes(changed)));
    } else {
      ASSERT_TRUE(b2.add_tensor(t.name, t.type, t.shape(), a->tensor_data(t)));
    }
  }
  const BuiltFile b = build(b2);
  EXPECT_TRUE(diff(a, b).identical()) << "without data, only the directory is compared";
  const DiffResult r = diff(a, b, with_data());
  EXPECT_FALSE(r.identical());
  ASSERT_EQ(r.data.size(), 1u);
  const ValueStats& s = *r.data[0].values;
  EXPECT_EQ(s.elements, 256u);
  EXPECT_EQ(s.differing, 1u);
  const double d = static_cast<double>(changed[77]) - static_cast<double>(test::wave(256, 1.0f)[77]);
  EXPECT_DOUBLE_EQ(s.max_abs_diff, std::fabs(d));
  EXPECT_DOUBLE_EQ(s.rmse, std::fabs(d) / 16.0);  // sqrt(d^2 / 256)
  test::expect_figures_match(s, test::reference_figures(test::dequantized(*a, *a->find_tensor(r.data[0].name)),
                                                         test::dequantized(*b, *b->find_tensor(r.data[0].name))));
}

TEST(Diff, QuantizedAgainstFloatFiguresMatchAPlainComputation) {
  const std::vector<int64_t> shape{256, 64};
  const std::vector<float> values = test::wave(256 * 64, 0.3f);
  for (TensorType type : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K}) {
    SCOPED_TRACE(std::string(type_name(type)));
    GgufBuilder ma, mb;
    ASSERT_TRUE(ma.add_tensor("w", TensorType::F32, shape, test::float_bytes(values)));
    ASSERT_TRUE(mb.add_tensor("w", type, shape, test::encode_as(type, values, 256)));
    const BuiltFile a = build(ma);
    const BuiltFile b = build(mb);
    DiffOptions o = with_data();
    o.segment_elements = 1000;  // rounded up to whole blocks: many segments, a short last one
    o.threads = Threads{3};
    const DiffResult r = diff(a, b, o);
    ASSERT_EQ(r.data.size(), 1u);
    ASSERT_TRUE(r.data[0].values);
    const ValueStats& s = *r.data[0].values;
    EXPECT_EQ(s.elements, values.size());
    test::expect_figures_match(s, test::reference_figures(test::dequantized(*a, a->tensors()[0]),
                                                           test::dequantized(*b, b->tensors()[0])));
    EXPECT_GT(s.cosine, 0.9);
    EXPECT_LT(s.cosine, 1.0);
    // The figures do not depend on the number of threads.
    o.threads = Threads{1};
    const DiffResult one = diff(a, b, o);
    EXPECT_EQ(one.data[0].values->rmse, s.rmse);
    EXPECT_EQ(one.data[0].values->cosine, s.cosine);
  }
}

TEST(Diff, FloatAndFloat16OfTheSameValuesAreEqualValues) {
  // Values f16 holds exactly: the types (and bytes) differ, the values do not.
  std::vector<float> values(128);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(static_cast<int>(i) - 64) / 8.0f;
  GgufBuilder ma, mb;
  ASSERT_TRUE(ma.add_tensor("w", TensorType::F32, std::vector<int64_t>{128}, test::float_bytes(values)));
  ASSERT_TRUE(mb.add_tensor("w", TensorType::F16, std::vector<int64_t>{128}, test::encode_as(TensorType::F16, values, 128)));
  const BuiltFile fa = build(ma);
  const BuiltFile fb = build(mb);
  const DiffResult r = diff(fa, fb, with_data());
  ASSERT_EQ(r.tensors.size(), 1u);
  EXPECT_TRUE(r.tensors[0].type_changed);
  ASSERT_EQ(r.data.size(), 1u);
  const ValueStats& s = *r.data[0].values;
  EXPECT_EQ(s.differing, 0u);
  EXPECT_EQ(s.max_abs_diff, 0.0);
  EXPECT_EQ(s.rmse, 0.0);
  EXPECT_DOUBLE_EQ(s.cosine, 1.0);
}

TEST(Diff, IntegerTensorsThatCannotBeDequantizedSayWhy) {
  std::vector<int32_t> ia(16, 1), ib(16, 1);
  ib[3] = 7;
  const auto bytes = [](const std::vector<int32_t>& v) {
    std::vector<std::byte> out(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  };
  GgufBuilder ma, mb;
  ASSERT_TRUE(ma.add_tensor("ids", TensorType::I32, std::vector<int64_t>{16}, bytes(ia)));
  ASSERT_TRUE(mb.add_tensor("ids", TensorType::I32, std::vector<int64_t>{16}, bytes(ib)));
  const BuiltFile fa = build(ma);
  const BuiltFile fb = build(mb);
  const DiffResult r = diff(fa, fb, with_data());
  ASSERT_EQ(r.data.size(), 1u);
  if (quant_capabilities(TensorType::I32).dequantize) {
    ASSERT_TRUE(r.data[0].values);
    EXPECT_EQ(r.data[0].values->differing, 1u);
  } else {
    EXPECT_FALSE(r.data[0].values);
    EXPECT_NE(r.data[0].note.find("i32"), std::string::npos) << r.data[0].note;
  }
}

TEST(CompareValues, EdgeCases) {
  const std::vector<float> zeros(8, 0.0f), ones(8, 1.0f);
  EXPECT_EQ(compare_values(zeros, zeros).cosine, 1.0);
  EXPECT_EQ(compare_values(zeros, ones).cosine, 0.0);
  EXPECT_EQ(compare_values(zeros, ones).max_abs_diff, 1.0);
  EXPECT_EQ(compare_values(zeros, ones).rmse, 1.0);
  std::vector<float> neg(8, -1.0f);
  EXPECT_DOUBLE_EQ(compare_values(ones, neg).cosine, -1.0);
  std::vector<float> with_nan = ones;
  with_nan[2] = std::numeric_limits<float>::quiet_NaN();
  with_nan[5] = std::numeric_limits<float>::infinity();
  const ValueStats s = compare_values(ones, with_nan);
  EXPECT_EQ(s.non_finite, 2u);
  EXPECT_EQ(s.differing, 2u);
  EXPECT_EQ(s.max_abs_diff, 0.0);
  EXPECT_DOUBLE_EQ(s.cosine, 1.0);
  EXPECT_EQ(compare_values(with_nan, with_nan).differing, 1u) << "NaN never equals";
}

TEST(DiffArrays, DifferentElementTypesAreNotCompared) {
  const MetadataValue x = MetadataValue::array(std::vector<int32_t>{1, 2});
  const MetadataValue y = MetadataValue::array(std::vector<uint32_t>{1, 2});
  EXPECT_FALSE(diff_arrays(*x.view().as_array(), *y.view().as_array(), 5));
  const auto same = diff_arrays(*x.view().as_array(), *x.view().as_array(), 5);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->differing, 0u);
  EXPECT_TRUE(same->shown.empty());
}

TEST(Diff, ProgressIsReportedPerComparedTensor) {
  const BuiltFile a = build(base_model());
  DiffOptions o = with_data();
  std::vector<std::pair<size_t, size_t>> calls;
  o.progress = [&](size_t done, size_t all) { calls.emplace_back(done, all); };
  (void)diff(a, a, o);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls.back(), std::make_pair(size_t{3}, size_t{3}));
}

}  // namespace
}  // namespace ggufkit
