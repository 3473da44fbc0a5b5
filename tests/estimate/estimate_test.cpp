// The architecture registry's derived hyperparameters and the estimate's arithmetic, on sparse files
// with real models' shapes (tests/estimate/model_fixtures.h), and every refusal: an architecture
// the registry lacks, missing, zero and wrong-typed keys, contexts llama.cpp refuses or that do not
// fit. The figures themselves are compared with llama.cpp in estimate_grid_test and the oracle tests.
#include "model_fixtures.h"
#include "test_support.h"

#include <ggufkit/arch.h>
#include <ggufkit/estimate.h>

#include <gtest/gtest.h>

namespace {

using ggufkit::ErrorCode;
using ggufkit::EstimateOptions;
using ggufkit::MetadataValue;
using ggufkit::test::grid_model;
using ggufkit::test::ModelShape;

std::filesystem::path write(const ggufkit::GgufBuilder& b, const std::string& name) {
  static const auto dir = ggufkit::test::temp_dir("estimate-unit");
  const auto path = dir / (name + ".gguf");
  ggufkit::test::write_sparse(b, path);
  return path;
}

std::filesystem::path write(const ModelShape& shape) {
  return write(ggufkit::test::sparse_model_builder(shape), shape.name);
}

ggufkit::arch::Hyperparameters derive(const std::filesystem::path& path, bool assume_dense = false) {
  auto file = ggufkit::GgufFile::open(path);
  EXPECT_TRUE(file) << file.error().describe();
  auto hp = ggufkit::arch::derive_hyperparameters(*file, {.assume_dense = assume_dense});
  EXPECT_TRUE(hp) << hp.error().describe();
  return *hp;
}

ggufkit::Error derive_error(const std::filesystem::path& path) {
  auto file = ggufkit::GgufFile::open(path);
  EXPECT_TRUE(file) << file.error().describe();
  auto hp = ggufkit::arch::derive_hyperparameters(*file);
  EXPECT_FALSE(hp);
  return hp ? ggufkit::Error{} : hp.error();
}

std::vector<uint32_t> swa_layers(const ggufkit::arch::Hyperparameters& hp) {
  std::vector<uint32_t> out;
  for (uint32_t il = 0; il < hp.layers.size(); ++il) {
    if (hp.layers[il].swa) out.push_back(il);
  }
  return out;
}

ModelShape tiny() {
  return {.name = "tiny", .arch = "llama", .n_vocab = 1000, .n_embd = 256, .n_layer = 2, .n_head = 4,
          .n_head_kv = 2, .n_ff = 512, .ctx_train = 2048};
}

TEST(ArchRegistry, EveryEntryIsFoundByItsNameOnce) {
  std::set<std::string_view> names;
  for (const auto& a : ggufkit::arch::architectures()) {
    EXPECT_TRUE(names.insert(a.name).second) << a.name;
    EXPECT_EQ(ggufkit::arch::find_architecture(a.name), &a);
  }
  EXPECT_GE(names.size(), 28u);
  EXPECT_EQ(ggufkit::arch::find_architecture("mamba3"), nullptr);
}

TEST(ArchDerive, Gemma3SlidesFiveLayersOfSix) {
  const auto hp = derive(write(grid_model("Gemma-3-27B")));
  EXPECT_EQ(hp.architecture, "gemma3");
  EXPECT_EQ(hp.swa_type, ggufkit::arch::SwaType::standard);
  EXPECT_EQ(hp.n_swa, 1024u);
  ASSERT_EQ(hp.layers.size(), 62u);
  std::vector<uint32_t> full;
  for (uint32_t il = 0; il < 62; ++il) {
    if (!hp.layers[il].swa) full.push_back(il);
  }
  EXPECT_EQ(full, (std::vector<uint32_t>{5, 11, 17, 23, 29, 35, 41, 47, 53, 59}));
  for (const auto& l : hp.layers) {
    EXPECT_EQ(l.head_k, 128u);
    EXPECT_EQ(l.n_embd_k_gqa(), 2048u);
    EXPECT_EQ(l.n_embd_v_gqa(), 2048u);
  }
  EXPECT_EQ(hp.n_vocab, 262208u);
}

TEST(ArchDerive, GptOssAlternatesAndCohere2SlidesThreeOfFour) {
  const auto oss = derive(write(grid_model("gpt-oss-20b")));
  EXPECT_EQ(oss.n_swa, 128u);
  std::vector<uint32_t> even;
  for (uint32_t il = 0; il < 24; il += 2) even.push_back(il);
  EXPECT_EQ(swa_layers(oss), even);
  EXPECT_EQ(oss.layers[0].n_embd_k_gqa(), 512u);  // 8 KV heads of 64
  const auto cohere = derive(write(grid_model("Command-R7B")));
  EXPECT_EQ(cohere.n_swa, 4096u);
  EXPECT_EQ(swa_layers(cohere).size(), 24u);
  EXPECT_FALSE(cohere.layers[3].swa);
  EXPECT_TRUE(cohere.layers[4].swa);
}

TEST(ArchDerive, Gemma2DefaultsItsWindowAndASlidingWindowPatternKeyOverridesThePeriod) {
  auto b = ggufkit::test::sparse_model_builder(grid_model("Gemma-2-9B"));
  b.remove("gemma2.attention.sliding_window");
  (void)b.set("gemma2.attention.sliding_window_pattern", MetadataValue::of<uint32_t>(3));
  const auto hp = derive(write(b, "gemma2-pattern"));
  EXPECT_EQ(hp.n_swa, 4096u);  // gemma 2's default
  EXPECT_TRUE(hp.layers[0].swa);
  EXPECT_TRUE(hp.layers[1].swa);
  EXPECT_FALSE(hp.layers[2].swa);
  // An array pattern is skipped, as llama.cpp's scalar get_key_or_arr skips it: the default period 2.
  (void)b.set("gemma2.attention.sliding_window_pattern", MetadataValue::array(std::vector<uint32_t>(42, 1)));
  const auto array = derive(write(b, "gemma2-array"));
  EXPECT_TRUE(array.layers[0].swa);
  EXPECT_FALSE(array.layers[1].swa);
}

TEST(ArchDerive, Gemma3WithoutAWindowHasNoSlidingLayers) {
  auto b = ggufkit::test::sparse_model_builder(grid_model("Gemma-3-27B"));
  b.remove("gemma3.attention.sliding_window");
  const auto hp = derive(write(b, "gemma3-dense"));
  EXPECT_EQ(hp.swa_type, ggufkit::arch::SwaType::none);
  EXPECT_TRUE(swa_layers(hp).empty());
}

TEST(ArchDerive, DeepSeekMlaCachesTheCompressedRowOnly) {
  const auto path = write(grid_model("DeepSeek-V2-Lite"));
  const auto hp = derive(path);
  EXPECT_TRUE(hp.mla);
  EXPECT_EQ(hp.layers[0].n_embd_k_gqa(), 576u);  // kv_lora_rank 512 + rope 64
  const auto e = ggufkit::estimate_memory(path, {.ctx_size = 4096});
  ASSERT_TRUE(e) << e.error().describe();
  ASSERT_EQ(e->caches.size(), 1u);
  EXPECT_FALSE(e->caches[0].has_v);
  EXPECT_EQ(e->caches[0].v_bytes, 0u);
  EXPECT_EQ(e->caches[0].k_bytes, 27ull * 576 * 2 * 4096);
  EXPECT_EQ(e->context_bytes, 27ull * 576 * 2 * 4096);
}

TEST(ArchDerive, PerLayerHeadCountArrays) {
  auto b = ggufkit::test::sparse_model_builder(tiny());
  (void)b.set("llama.attention.head_count_kv", MetadataValue::array(std::vector<int32_t>{2, 1}));
  const auto hp = derive(write(b, "per-layer"));
  EXPECT_EQ(hp.layers[0].n_embd_k_gqa(), 128u);
  EXPECT_EQ(hp.layers[1].n_embd_k_gqa(), 64u);
  const auto e = ggufkit::estimate_memory(write(b, "per-layer"), {.ctx_size = 256, .flash_attn = ggufkit::FlashAttention::off});
  ASSERT_TRUE(e);
  // V is transposed without flash attention: every layer's V row is the widest (n_embd_v_gqa_max).
  EXPECT_EQ(e->caches[0].k_bytes, (128u + 64u) * 2u * 256u);
  EXPECT_EQ(e->caches[0].v_bytes, (128u + 128u) * 2u * 256u);
}

TEST(Estimate, ContextArithmeticAsLlamaContext) {
  const auto path = write(grid_model("Llama-3.1-8B"));
  const uint64_t row = 32ull * 1024 * 2 * 2;  // K and V, f16, per cell over the 32 layers
  auto e = ggufkit::estimate_memory(path, {.ctx_size = 5000});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->n_ctx, 5120u);  // padded to 256
  EXPECT_EQ(e->n_batch, 2048u);
  EXPECT_EQ(e->context_bytes, row * 5120);
  EXPECT_EQ(e->output_bytes, 128256u * 4);
  e = ggufkit::estimate_memory(path, {.ctx_size = 4096, .parallel = 3});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->n_ctx_seq, 1536u);  // 4096 / 3 = 1365, padded to 256
  EXPECT_EQ(e->n_ctx, 4608u);
  EXPECT_EQ(e->caches[0].streams, 3u);
  EXPECT_EQ(e->context_bytes, row * 4608);
  EXPECT_EQ(e->output_bytes, 3u * 128256u * 4);
  e = ggufkit::estimate_memory(path, {.ctx_size = 100, .batch_size = 2048});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->n_batch, 100u);  // causal: the batch is at most the context
  EXPECT_EQ(e->n_ubatch, 100u);
  e = ggufkit::estimate_memory(path, {.ctx_size = 0});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->n_ctx, 131072u);  // the model's context_length
  EXPECT_EQ(e->total_bytes, e->model_bytes + e->context_bytes + e->output_bytes + e->compute_bytes);
}

TEST(Estimate, SlidingWindowCacheCellsAsLlamaKvCacheIswa) {
  const auto path = write(grid_model("Gemma-3-27B"));
  auto e = ggufkit::estimate_memory(path, {.ctx_size = 32768, .parallel = 2});
  ASSERT_TRUE(e);
  ASSERT_EQ(e->caches.size(), 2u);
  EXPECT_EQ(e->caches[0].cells, 16384u);
  EXPECT_EQ(e->caches[0].layers, 10u);
  EXPECT_EQ(e->caches[1].kind, ggufkit::CacheEstimate::Kind::kv_swa);
  EXPECT_EQ(e->caches[1].cells, 1536u);  // 1024 + ubatch 512, padded to 256
  EXPECT_EQ(e->caches[1].streams, 2u);
  EXPECT_EQ(e->caches[1].layers, 52u);
  e = ggufkit::estimate_memory(path, {.ctx_size = 32768, .parallel = 2, .kv_unified = true});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->caches[1].cells, 2560u);  // the window of both sequences + 512
  e = ggufkit::estimate_memory(path, {.ctx_size = 32768, .swa_full = true});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->caches[1].cells, 32768u);
}

TEST(EstimateRefuses, AnArchitectureTheRegistryLacksUnlessAssumedDense) {
  auto b = ggufkit::test::sparse_model_builder(tiny());
  (void)b.set("general.architecture", MetadataValue::string("mamba3"));
  for (const char* key : {"context_length", "embedding_length", "block_count", "feed_forward_length",
                          "attention.head_count", "attention.head_count_kv", "rope.freq_base",
                          "attention.layer_norm_rms_epsilon"}) {
    const auto* v = b.find(std::string("llama.") + key);
    ASSERT_NE(v, nullptr) << key;
    (void)b.set(std::string("mamba3.") + key, *v);
    b.remove(std::string("llama.") + key);
  }
  const auto path = write(b, "unknown");
  const auto error = ggufkit::estimate_memory(path);
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().code, ErrorCode::unknown_architecture);
  EXPECT_EQ(error.error().describe(),
            "'general.architecture': architecture 'mamba3' is not in the registry (--assume-dense estimates every "
            "layer as full attention)");
  const auto dense = ggufkit::estimate_memory(path, {.ctx_size = 256, .assume_dense = true});
  ASSERT_TRUE(dense) << dense.error().describe();
  EXPECT_TRUE(dense->assumed_dense);
  EXPECT_EQ(dense->context_bytes, 2u * 2u * 128u * 2u * 256u);
}

TEST(EstimateRefuses, MissingZeroAndWrongTypedKeys) {
  const auto with = [](auto change, const std::string& name) {
    auto b = ggufkit::test::sparse_model_builder(tiny());
    change(b);
    return derive_error(write(b, name));
  };
  auto e = with([](auto& b) { b.remove("llama.attention.head_count"); }, "no-heads");
  EXPECT_EQ(e.code, ErrorCode::bad_hyperparameter);
  EXPECT_EQ(e.describe(), "'llama.attention.head_count': is missing; an attention model needs it");
  e = with([](auto& b) { (void)b.set("llama.attention.head_count", MetadataValue::of<uint32_t>(0)); }, "zero-heads");
  EXPECT_EQ(e.describe(), "'llama.attention.head_count': is 0 for layer 0");
  e = with([](auto& b) { (void)b.set("llama.block_count", MetadataValue::string("32")); }, "string-layers");
  EXPECT_EQ(e.describe(), "'llama.block_count': is a string, llama.cpp reads a uint32");
  e = with([](auto& b) { (void)b.set("llama.block_count", MetadataValue::of<uint32_t>(0)); }, "zero-layers");
  EXPECT_EQ(e.describe(), "'llama.block_count': is 0; llama.cpp accepts 1 to 512");
  e = with([](auto& b) { b.remove("llama.context_length"); }, "no-context");
  EXPECT_EQ(e.describe(), "'llama.context_length': is missing; llama.cpp requires it");
  e = with([](auto& b) { b.remove("llama.attention.layer_norm_rms_epsilon"); }, "no-eps");
  EXPECT_EQ(e.describe(), "'llama.attention.layer_norm_rms_epsilon': is missing; llama.cpp requires it for this architecture");
  e = with([](auto& b) { (void)b.set("llama.attention.head_count_kv", MetadataValue::array(std::vector<uint32_t>{2, 2, 2})); },
           "bad-array");
  EXPECT_EQ(e.describe(), "'llama.attention.head_count_kv': has 3 elements, llama.cpp expects one per layer (2)");
  e = with([](auto& b) { (void)b.set("llama.attention.key_length", MetadataValue::of<float>(64.0f)); }, "float-key");
  EXPECT_EQ(e.describe(), "'llama.attention.key_length': is a float32, llama.cpp reads a uint32");
  e = with([](auto& b) { (void)b.set("llama.nextn_predict_layers", MetadataValue::of<uint32_t>(3)); }, "nextn");
  EXPECT_EQ(e.describe(), "'llama.nextn_predict_layers': is 3, above block_count 2");
  e = with([](auto& b) { b.remove("tokenizer.ggml.tokens"); }, "no-tokens");
  EXPECT_EQ(e.describe(), "'tokenizer.ggml.tokens': is missing or not an array of strings: the output buffer is sized by it");
}

TEST(EstimateRefuses, ContextsLlamaCppRefusesOrThatDoNotFit) {
  const auto path = write(tiny());
  const auto refused = [&](const EstimateOptions& o) {
    const auto e = ggufkit::estimate_memory(path, o);
    EXPECT_FALSE(e);
    return e ? std::string() : e.error().describe();
  };
  EXPECT_EQ(refused({.ctx_size = UINT32_MAX}), "a context of 4294967296 cells does not fit llama.cpp's 32-bit n_ctx");
  EXPECT_EQ(refused({.cache_type_v = ggufkit::TensorType::Q8_0, .flash_attn = ggufkit::FlashAttention::off}),
            "a quantized V cache requires flash attention");
  EXPECT_EQ(refused({.parallel = 257}), "--parallel 257 is above llama.cpp's 256");
  EXPECT_EQ(refused({.batch_size = 0, .ubatch_size = 0}), "the batch and ubatch sizes cannot both be 0");
  // q4_K's 256-element block does not divide the head size 64.
  EXPECT_EQ(refused({.cache_type_k = ggufkit::TensorType::Q4_K}),
            "K cache type q4_K with block size 256 does not divide the head size 64");
  const auto mla = write(grid_model("DeepSeek-V2-Lite"));
  const auto e = ggufkit::estimate_memory(mla, {.cache_type_v = ggufkit::TensorType::Q8_0});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().describe(), "this model (MLA) does not support different K (f16) and V (q8_0) cache types");
}

}  // namespace

namespace {

// Recurrent state (llama_memory_recurrent): per recurrent layer, an F32 conv row of
// (d_conv - 1) x (d_inner + 2 x groups x d_state) and an F32 state row of d_state x d_inner, per sequence.
TEST(EstimateRecurrent, Mamba2KeepsAStatePerSequenceAndNoKvCache) {
  const auto e = ggufkit::estimate_memory(write(grid_model("Mamba2-2.7B")), {.ctx_size = 32768, .parallel = 2});
  ASSERT_TRUE(e) << e.error().describe();
  ASSERT_EQ(e->caches.size(), 1u);
  const auto& r = e->caches[0];
  EXPECT_EQ(r.kind, ggufkit::CacheEstimate::Kind::recurrent);
  EXPECT_EQ(r.layers, 64u);
  EXPECT_EQ(r.cells, 2u);
  EXPECT_EQ(r.k_bytes, 64ull * 3 * (5120 + 2 * 128) * 4 * 2);
  EXPECT_EQ(r.v_bytes, 64ull * 128 * 5120 * 4 * 2);
  EXPECT_EQ(e->context_bytes, r.bytes());  // the context size does not matter
}

TEST(EstimateRecurrent, Qwen35AttendsEveryFourthLayerAndKeepsGatedDeltaNetStateInTheOthers) {
  const auto path = write(grid_model("Qwen3.5-hybrid"));
  const auto hp = derive(path);
  uint32_t attention = 0;
  for (uint32_t il = 0; il < hp.layers.size(); ++il) {
    EXPECT_EQ(hp.layers[il].recurrent, (il + 1) % 4 != 0) << il;
    attention += hp.layers[il].recurrent ? 0 : 1;
  }
  EXPECT_EQ(attention, 12u);
  const auto e = ggufkit::estimate_memory(path, {.ctx_size = 4096});
  ASSERT_TRUE(e);
  ASSERT_EQ(e->caches.size(), 2u);
  EXPECT_EQ(e->caches[0].layers, 12u);
  EXPECT_EQ(e->caches[0].k_bytes, 12ull * 2 * 256 * 2 * 4096);
  EXPECT_EQ(e->caches[1].layers, 36u);
  EXPECT_EQ(e->caches[1].v_bytes, 36ull * 128 * 4096 * 4);
}

}  // namespace

namespace {

// exaone4 slides only in its 64-layer model (llama.cpp decides by the layer count); olmo2 only
// with a window key (Olmo 3); both 3 layers of 4.
TEST(ArchDerive, Exaone4ByLayerCountAndOlmo2ByItsWindow) {
  const auto exaone = derive(write(grid_model("EXAONE-4.0-32B")));
  EXPECT_EQ(exaone.n_swa, 4096u);
  EXPECT_EQ(swa_layers(exaone).size(), 48u);
  EXPECT_FALSE(exaone.layers[3].swa);
  auto shape = grid_model("EXAONE-4.0-32B");
  shape.name = "exaone-30";
  shape.n_layer = 30;
  EXPECT_TRUE(swa_layers(derive(write(shape))).empty());
  const auto olmo = derive(write(grid_model("Olmo-3-7B")));
  EXPECT_EQ(swa_layers(olmo).size(), 24u);
  auto b = ggufkit::test::sparse_model_builder(grid_model("Olmo-3-7B"));
  b.remove("olmo2.attention.sliding_window");
  EXPECT_TRUE(swa_layers(derive(write(b, "olmo2-dense"))).empty());
}

}  // namespace

namespace {

// LFM2: the layers without KV heads keep a short-convolution state, n_embd x (l_cache - 1) F32.
TEST(EstimateRecurrent, Lfm2ShortConvolutionsInTheLayersWithoutKvHeads) {
  const auto e = ggufkit::estimate_memory(write(grid_model("LFM2-1.2B")), {.ctx_size = 4096});
  ASSERT_TRUE(e) << e.error().describe();
  ASSERT_EQ(e->caches.size(), 2u);
  EXPECT_EQ(e->caches[0].layers, 6u);
  EXPECT_EQ(e->caches[0].bytes(), 6ull * 4096 * 512 * 2 * 2);
  EXPECT_EQ(e->caches[1].layers, 10u);
  EXPECT_EQ(e->caches[1].k_bytes, 10ull * 2048 * 2 * 4);
  EXPECT_EQ(e->caches[1].v_bytes, 0u);
}

}  // namespace

namespace {

// Sizes from absurd keys overflow as values (shape_overflow), never as wrapped arithmetic.
TEST(EstimateRefuses, SizesBeyond64BitsAreShapeOverflow) {
  auto b = ggufkit::test::sparse_model_builder(tiny());
  (void)b.set("llama.attention.key_length", MetadataValue::of<uint32_t>(UINT32_MAX));
  (void)b.set("llama.attention.head_count_kv", MetadataValue::of<uint32_t>(UINT32_MAX));
  const auto e = ggufkit::estimate_memory(write(b, "huge-heads"), {.ctx_size = 1u << 30});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, ErrorCode::shape_overflow);
  EXPECT_EQ(e.error().describe(), "the K cache does not fit 64 bits");
}

}  // namespace
