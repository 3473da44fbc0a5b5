// gguf diff on the shared corpus: tiny-llama in its quantized types against each other and against
// f32, figures checked against a plain whole-tensor computation; real vocabularies with one token
// changed.
#include <gtest/gtest.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "diff_helpers.h"
#include "test_support.h"

namespace ggufkit {
namespace {

namespace fs = std::filesystem;

fs::path tiny(std::string_view type) {
  return *test::shared_dir() / "corpus/tiny-llama" / ("tiny-llama-" + std::string(type) + ".gguf");
}

GgufFile open_file(const fs::path& p) {
  auto f = GgufFile::open(p);
  if (!f) throw std::runtime_error(f.error().describe());
  return std::move(f).value();
}

DiffResult diff_with_data(const GgufFile& a, const GgufFile& b) {
  DiffOptions o;
  o.data = true;
  o.threads = Threads{2};
  auto r = diff_files(a, b, o);
  if (!r) throw std::runtime_error(r.error().describe());
  return std::move(r).value();
}

// Every data figure against the plain computation over the whole dequantized tensors.
void check_figures(const GgufFile& a, const GgufFile& b, const DiffResult& r) {
  for (const DataDiff& d : r.data) {
    SCOPED_TRACE(std::string(d.name));
    ASSERT_TRUE(d.values) << d.note;
    const auto ref = test::reference_figures(test::dequantized(a, *d.a), test::dequantized(b, *d.b));
    test::expect_figures_match(*d.values, ref);
    EXPECT_EQ(d.values->elements, static_cast<uint64_t>(d.a->n_elements()));
  }
}

const MetadataDiff* find_key(const DiffResult& r, std::string_view key) {
  for (const auto& m : r.metadata) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

TEST(DiffCorpus, Q4_0AgainstQ8_0) {
  GGUFKIT_REQUIRE_SHARED();
  const GgufFile a = open_file(tiny("q4_0"));
  const GgufFile b = open_file(tiny("q8_0"));
  const DiffResult r = diff_with_data(a, b);
  EXPECT_FALSE(r.identical());
  const MetadataDiff* ft = find_key(r, "general.file_type");
  ASSERT_NE(ft, nullptr);
  EXPECT_EQ(ft->a->as_uint(), 2u);  // MOSTLY_Q4_0
  EXPECT_EQ(ft->b->as_uint(), 7u);  // MOSTLY_Q8_0
  // Same tensors with the same shapes; only types differ.
  EXPECT_EQ(r.counts.tensors_a, r.counts.tensors_b);
  size_t retyped = 0;
  for (const TensorDiff& t : r.tensors) {
    EXPECT_EQ(t.change, Change::changed) << t.name;
    EXPECT_FALSE(t.shape_changed) << t.name;
    retyped += t.type_changed;
  }
  EXPECT_GT(retyped, 0u);
  EXPECT_EQ(r.counts.data_compared, a.tensors().size());
  EXPECT_EQ(r.data.size() + r.counts.data_bytes_equal, r.counts.data_compared);
  check_figures(a, b, r);
  for (const DataDiff& d : r.data) {
    // Two quantizations of the same weights: close, not equal.
    EXPECT_GT(d.values->cosine, 0.98) << d.name;
    EXPECT_LT(d.values->cosine, 1.0) << d.name;
    EXPECT_GT(d.values->rmse, 0.0) << d.name;
  }
}

TEST(DiffCorpus, F16AgainstF32) {
  GGUFKIT_REQUIRE_SHARED();
  const GgufFile a = open_file(tiny("f16"));
  const GgufFile b = open_file(tiny("f32"));
  const DiffResult r = diff_with_data(a, b);
  EXPECT_FALSE(r.identical());
  EXPECT_NE(find_key(r, "general.file_type"), nullptr);
  bool f16_to_f32 = false;
  for (const TensorDiff& t : r.tensors) {
    EXPECT_TRUE(t.type_changed) << t.name;
    f16_to_f32 |= t.a->type == TensorType::F16 && t.b->type == TensorType::F32;
  }
  EXPECT_TRUE(f16_to_f32);
  check_figures(a, b, r);
  for (const DataDiff& d : r.data) {
    EXPECT_GT(d.values->cosine, 0.99999) << d.name;
    EXPECT_LT(d.values->max_abs_diff, 1e-2) << d.name;
  }
}

TEST(DiffCorpus, EveryTypeAgainstF32GivesSaneFigures) {
  GGUFKIT_REQUIRE_SHARED();
  const GgufFile reference = open_file(tiny("f32"));
  for (const fs::path& p : test::corpus_files()) {
    if (p.parent_path().filename() != "tiny-llama") continue;
    SCOPED_TRACE(p.filename().string());
    const GgufFile other = open_file(p);
    const DiffResult r = diff_with_data(other, reference);
    EXPECT_EQ(r.counts.data_compared, reference.tensors().size());
    for (const DataDiff& d : r.data) {
      ASSERT_TRUE(d.values) << d.name << ": " << d.note;
      EXPECT_GT(d.values->cosine, 0.5) << d.name;
      EXPECT_LE(d.values->cosine, 1.0) << d.name;
      EXPECT_EQ(d.values->non_finite, 0u) << d.name;
    }
  }
}

TEST(DiffCorpus, AFileAgainstItselfThroughTheCli) {
  GGUFKIT_REQUIRE_SHARED();
  const auto r = test::run_gguf({"diff", tiny("q4_k_m").string(), tiny("q4_k_m").string(), "--data"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("summary: identical")) << r.out;
}

TEST(DiffCorpus, CliJsonQ4_0AgainstQ8_0) {
  GGUFKIT_REQUIRE_SHARED();
  const auto r = test::run_gguf({"diff", tiny("q4_0").string(), tiny("q8_0").string(), "--data", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const GgufFile a = open_file(tiny("q4_0"));
  const GgufFile b = open_file(tiny("q8_0"));
  const DiffResult lib = diff_with_data(a, b);
  ASSERT_EQ(j["data"].size(), lib.data.size());
  for (size_t i = 0; i < lib.data.size(); ++i) {
    EXPECT_EQ(j["data"][i]["name"], std::string(lib.data[i].name));
    EXPECT_EQ(j["data"][i]["values"]["cosine"].get<double>(), lib.data[i].values->cosine);
  }
}

// A real vocabulary with one token changed: the diff names the index, and only that one.
TEST(DiffCorpus, VocabularyWithOneTokenChanged) {
  GGUFKIT_REQUIRE_SHARED();
  const fs::path source = *test::shared_dir() / "corpus/vocab/ggml-vocab-qwen2.gguf";
  const GgufFile a = open_file(source);
  const auto tokens = a.get("tokenizer.ggml.tokens")->as_array();
  ASSERT_TRUE(tokens);
  ASSERT_GT(tokens->size(), 100000u);
  std::vector<std::string> changed;
  for (std::string_view t : tokens->strings()) changed.emplace_back(t);
  changed[100000] += "!";
  GgufBuilder builder = GgufBuilder::from_file(a);
  ASSERT_TRUE(builder.set("tokenizer.ggml.tokens", MetadataValue::string_array(changed)));
  const auto dir = test::temp_dir("diff-vocab");
  const fs::path modified = dir / "modified.gguf";
  WriteOptions wo = builder.suggested_options();
  wo.sync = false;
  ASSERT_TRUE(builder.write_file(modified, wo));
  const GgufFile b = open_file(modified);

  const auto start = std::chrono::steady_clock::now();
  auto r = diff_files(a, b);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r);
  ASSERT_EQ(r->metadata.size(), 1u);
  const ArrayDiff& d = *r->metadata[0].elements;
  EXPECT_EQ(d.differing, 1u);
  ASSERT_EQ(d.shown.size(), 1u);
  EXPECT_EQ(d.shown[0].index, 100000u);
  EXPECT_EQ(d.shown[0].b->as_string(), changed[100000]);
  RecordProperty("diff_ms", std::to_string(ms));

  const auto cli = test::run_gguf({"diff", source.string(), modified.string()});
  EXPECT_EQ(cli.exit_code, 1) << cli.err;
  EXPECT_NE(cli.out.find("1 of " + std::to_string(tokens->size()) + " element differs: [100000] "), std::string::npos)
      << cli.out;
  EXPECT_LT(cli.out.size(), 1000u) << "the vocabulary is not printed";
  fs::remove_all(dir);
}

// Two different real vocabularies: every reported index really differs, the count is exact.
TEST(DiffCorpus, TwoVocabulariesCountMatchesAPlainLoop) {
  GGUFKIT_REQUIRE_SHARED();
  const GgufFile a = open_file(*test::shared_dir() / "corpus/vocab/ggml-vocab-llama-spm.gguf");
  const GgufFile b = open_file(*test::shared_dir() / "corpus/vocab/ggml-vocab-phi-3.gguf");
  const auto r = diff_files(a, b);
  ASSERT_TRUE(r);
  const auto ta = a.get("tokenizer.ggml.tokens")->as_array();
  const auto tb = b.get("tokenizer.ggml.tokens")->as_array();
  std::vector<std::string_view> va(ta->strings().begin(), ta->strings().end());
  std::vector<std::string_view> vb(tb->strings().begin(), tb->strings().end());
  uint64_t differing = 0;
  std::vector<uint64_t> first;
  for (size_t i = 0; i < std::min(va.size(), vb.size()); ++i) {
    if (va[i] != vb[i]) {
      if (first.size() < 5) first.push_back(i);
      ++differing;
    }
  }
  const MetadataDiff* m = find_key(*r, "tokenizer.ggml.tokens");
  if (differing == 0 && va.size() == vb.size()) {
    EXPECT_EQ(m, nullptr);
    return;
  }
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->elements);
  EXPECT_EQ(m->elements->differing, differing);
  for (size_t k = 0; k < first.size(); ++k) EXPECT_EQ(m->elements->shown[k].index, first[k]);
}

}  // namespace
}  // namespace ggufkit
