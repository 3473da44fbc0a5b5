// gguf convert on tiny Hugging Face checkpoints written here (config.json + safetensors, single
// file or index + shards), one per architecture: names, shapes, types, metadata values, the Q/K
// row permutation (checked against LlamaModel.permute's formula), tied embeddings, rope scaling,
// input dtypes, q8_0 bytes against ggufkit::quantize, refusals, and the CLI.
// The tokenizer is switched off (ConvertOptions::tokenizer, --no-tokenizer) except where its
// absence is the point.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "convert/model_name.h"
#include "family_checkpoint.h"
#include "sentencepiece_fixtures.h"
#include "ggufkit/convert.h"
#include "ggufkit/quant.h"
#include "ggufkit/reader.h"
#include "test_support.h"

namespace ggufkit {
namespace {

using json = nlohmann::json;

// A checkpoint tensor: values are stored in `dtype` ("F32", "F16", "BF16", "I32").
struct HfTensor {
  std::string name;
  std::vector<int64_t> shape;  // outermost first
  std::vector<float> values;
};

// Values exact in f16 and bf16 (multiples of 1/64 in [-1, 1]), different per tensor.
std::vector<float> test_values(int64_t count, int seed) {
  std::vector<float> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(seed) * 13) % 129) - 64) / 64.0f;
  }
  return v;
}

std::vector<std::byte> encode(const std::vector<float>& values, const std::string& dtype) {
  std::vector<std::byte> out;
  if (dtype == "F32") {
    out.resize(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
  } else if (dtype == "I32") {
    for (float f : values) {
      const auto i = static_cast<int32_t>(f);
      const auto* p = reinterpret_cast<const std::byte*>(&i);
      out.insert(out.end(), p, p + 4);
    }
  } else {
    const TensorType type = dtype == "F16" ? TensorType::F16 : TensorType::BF16;
    out.resize(values.size() * 2);
    EXPECT_TRUE(quantize(type, values, out, static_cast<int64_t>(values.size())));
  }
  return out;
}

// A checkpoint tensor given as its stored bytes.
struct RawHfTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

void write_raw_safetensors(const std::filesystem::path& path, const std::vector<RawHfTensor>& tensors,
                           const std::string& dtype) {
  json header = json::object();
  std::vector<std::byte> data;
  for (const RawHfTensor& t : tensors) {
    header[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  std::vector<std::byte> file(8);
  const uint64_t n = text.size();
  std::memcpy(file.data(), &n, 8);
  for (char c : text) file.push_back(static_cast<std::byte>(c));
  file.insert(file.end(), data.begin(), data.end());
  test::write_bytes(path, file);
}

void write_safetensors(const std::filesystem::path& path, const std::vector<HfTensor>& tensors, const std::string& dtype) {
  std::vector<RawHfTensor> raw;
  for (const HfTensor& t : tensors) raw.push_back({t.name, t.shape, encode(t.values, dtype)});
  write_raw_safetensors(path, raw, dtype);
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

struct TinyModel {
  std::string arch = "LlamaForCausalLM";
  int64_t layers = 2, embd = 32, heads = 4, kv_heads = 2, ff = 64, vocab = 40;
  bool tied = false;
  bool qkv_bias = false, qk_norm = false;
  std::string dtype = "F32";
  json extra_config = json::object();

  int64_t head_dim_key = 0;  // written as config.json's head_dim when not 0
  int64_t head_dim() const { return head_dim_key != 0 ? head_dim_key : embd / heads; }

  std::vector<HfTensor> tensors() const {
    std::vector<HfTensor> out;
    int seed = 0;
    auto add = [&](std::string name, std::vector<int64_t> shape) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      out.push_back({std::move(name), std::move(shape), test_values(n, ++seed)});
    };
    add("model.embed_tokens.weight", {vocab, embd});
    if (!tied) add("lm_head.weight", {vocab, embd});
    add("model.norm.weight", {embd});
    for (int64_t l = 0; l < layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      add(p + "input_layernorm.weight", {embd});
      add(p + "self_attn.q_proj.weight", {heads * head_dim(), embd});
      add(p + "self_attn.k_proj.weight", {kv_heads * head_dim(), embd});
      add(p + "self_attn.v_proj.weight", {kv_heads * head_dim(), embd});
      add(p + "self_attn.o_proj.weight", {embd, heads * head_dim()});
      if (qkv_bias) {
        add(p + "self_attn.q_proj.bias", {heads * head_dim()});
        add(p + "self_attn.k_proj.bias", {kv_heads * head_dim()});
        add(p + "self_attn.v_proj.bias", {kv_heads * head_dim()});
      }
      if (qk_norm) {
        add(p + "self_attn.q_norm.weight", {head_dim()});
        add(p + "self_attn.k_norm.weight", {head_dim()});
      }
      add(p + "post_attention_layernorm.weight", {embd});
      add(p + "mlp.gate_proj.weight", {ff, embd});
      add(p + "mlp.up_proj.weight", {ff, embd});
      add(p + "mlp.down_proj.weight", {embd, ff});
      add(p + "self_attn.rotary_emb.inv_freq", {head_dim() / 2});
    }
    return out;
  }

  json config() const {
    json c = {{"architectures", {arch}},
              {"hidden_size", embd},
              {"intermediate_size", ff},
              {"num_attention_heads", heads},
              {"num_key_value_heads", kv_heads},
              {"num_hidden_layers", layers},
              {"vocab_size", vocab},
              {"max_position_embeddings", 128},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 10000.0},
              {"tie_word_embeddings", tied}};
    if (head_dim_key != 0) c["head_dim"] = head_dim_key;
    for (auto& [k, v] : extra_config.items()) c[k] = v;
    return c;
  }

  // Writes the checkpoint to dir (created); `shards` > 1 writes an index and that many shards.
  void write(const std::filesystem::path& dir, int shards = 1) const {
    std::filesystem::create_directories(dir);
    write_text(dir / "config.json", config().dump(2));
    const auto all = tensors();
    if (shards == 1) {
      write_safetensors(dir / "model.safetensors", all, dtype);
      return;
    }
    json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
    for (int s = 0; s < shards; ++s) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
      std::vector<HfTensor> part;
      for (size_t i = static_cast<size_t>(s); i < all.size(); i += static_cast<size_t>(shards)) {
        part.push_back(all[i]);
        index["weight_map"][all[i].name] = name;
      }
      write_safetensors(dir / name, part, dtype);
    }
    write_text(dir / "model.safetensors.index.json", index.dump(2));
  }

  HfTensor find(const std::string& name) const {
    for (const auto& t : tensors()) {
      if (t.name == name) return t;
    }
    throw std::runtime_error("no tensor " + name);
  }
};

ConvertOptions no_tokenizer(TensorType out = TensorType::F32) {
  ConvertOptions o;
  o.out_type = out;
  o.tokenizer = false;
  o.sync = false;
  o.threads = Threads{2};
  return o;
}

std::vector<float> floats_of(const GgufFile& f, const std::string& name) {
  const TensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  std::vector<float> out(static_cast<size_t>(t->n_elements()));
  EXPECT_TRUE(dequantize(t->type, f.tensor_data(*t), out));
  return out;
}

// Converts `model` written to a fresh directory; returns the output file.
GgufFile convert(const TinyModel& model, const std::string& name, const ConvertOptions& options, int shards = 1) {
  const auto dir = test::temp_dir("convert-" + name) / name;
  model.write(dir, shards);
  const auto out = dir.parent_path() / "out.gguf";
  auto plan = convert_model(dir, out, options);
  EXPECT_TRUE(plan) << (plan ? "" : plan.error().describe());
  auto file = GgufFile::open(out);
  EXPECT_TRUE(file) << (file ? "" : file.error().describe());
  std::filesystem::remove_all(dir.parent_path());  // the mapping keeps the file's bytes
  return std::move(*file);
}

// LlamaModel.permute: output row r of a head of `rows_per_head` rows is the checkpoint row
// (r % 2) * rows_per_head / 2 + r / 2 of that head.
int64_t permuted_source_row(int64_t row, int64_t heads, int64_t rows) {
  const int64_t per_head = rows / heads;
  const int64_t head = row / per_head, r = row % per_head;
  return head * per_head + (r % 2) * (per_head / 2) + r / 2;
}

TEST(Convert, LlamaNamesShapesTypesAndKeys) {
  TinyModel m;
  const GgufFile f = convert(m, "Tiny-Llama-7B", no_tokenizer(TensorType::F16));
  // Every checkpoint tensor but the dropped inv_freq, in the order of their sorted HF names.
  ASSERT_EQ(f.tensors().size(), 3 + 9 * static_cast<size_t>(m.layers));
  EXPECT_EQ(f.tensors()[0].name, "output.weight");      // lm_head.weight sorts first
  EXPECT_EQ(f.tensors()[1].name, "token_embd.weight");  // model.embed_tokens
  EXPECT_EQ(f.tensors()[2].name, "blk.0.attn_norm.weight");   // model.layers.0.input_layernorm
  EXPECT_EQ(f.tensors()[3].name, "blk.0.ffn_down.weight");    // model.layers.0.mlp.down_proj
  EXPECT_EQ(f.tensors().back().name, "output_norm.weight");   // model.norm sorts last
  const TensorInfo* q = f.find_tensor("blk.1.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->n_dims, 2u);
  EXPECT_EQ(q->ne[0], m.embd);
  EXPECT_EQ(q->ne[1], m.heads * m.head_dim());
  EXPECT_EQ(q->type, TensorType::F16);
  const TensorInfo* k = f.find_tensor("blk.1.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->ne[1], m.kv_heads * m.head_dim());
  const TensorInfo* down = f.find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->ne[0], m.ff);
  EXPECT_EQ(down->ne[1], m.embd);
  for (const char* name : {"blk.0.attn_norm.weight", "blk.0.ffn_norm.weight", "output_norm.weight"}) {
    ASSERT_NE(f.find_tensor(name), nullptr) << name;
    EXPECT_EQ(f.find_tensor(name)->type, TensorType::F32) << name;  // norms stay F32
  }
  EXPECT_EQ(f.find_tensor("blk.0.attn_output.weight")->type, TensorType::F16);
  EXPECT_EQ(f.find_tensor("token_embd.weight")->type, TensorType::F16);

  EXPECT_EQ(f.metadata()[0].key, "general.architecture");
  EXPECT_EQ(f.get("general.architecture")->as_string(), "llama");
  EXPECT_EQ(f.get("general.type")->as_string(), "model");
  EXPECT_EQ(f.get("general.name")->as_string(), "Tiny Llama 7B");  // metadata.py's id_to_title of the directory
  EXPECT_EQ(f.get("llama.block_count")->get<uint32_t>(), 2u);
  EXPECT_EQ(f.get("llama.context_length")->get<uint32_t>(), 128u);
  EXPECT_EQ(f.get("llama.embedding_length")->get<uint32_t>(), 32u);
  EXPECT_EQ(f.get("llama.feed_forward_length")->get<uint32_t>(), 64u);
  EXPECT_EQ(f.get("llama.attention.head_count")->get<uint32_t>(), 4u);
  EXPECT_EQ(f.get("llama.attention.head_count_kv")->get<uint32_t>(), 2u);
  EXPECT_EQ(f.get("llama.rope.freq_base")->get<float>(), 10000.0f);
  EXPECT_EQ(f.get("llama.attention.layer_norm_rms_epsilon")->get<float>(), 1e-5f);
  EXPECT_EQ(f.get("llama.vocab_size")->get<uint32_t>(), 40u);
  EXPECT_EQ(f.get("llama.rope.dimension_count")->get<uint32_t>(), 8u);
  EXPECT_EQ(f.get("general.file_type")->get<uint32_t>(), 1u);  // MOSTLY_F16
  EXPECT_EQ(f.get("general.quantization_version")->get<uint32_t>(), 2u);
  EXPECT_FALSE(f.get("llama.rope.scaling.type"));
  EXPECT_FALSE(f.get("tokenizer.ggml.model"));
  // The label "7B" is far from the tiny model's size: metadata.py makes it a finetune, lower-cased.
  EXPECT_EQ(f.get("general.finetune")->as_string(), "7b");
  EXPECT_EQ(f.get("general.basename")->as_string(), "Tiny-Llama");
  // Its parameter count as gguf.size_label writes it.
  uint64_t params = 0;
  for (const TensorInfo& t : f.tensors()) params += static_cast<uint64_t>(t.n_elements());
  EXPECT_EQ(f.get("general.size_label")->as_string(), model_size_label(params));
}

TEST(Convert, LlamaPermutesQAndKRows) {
  TinyModel m;
  const GgufFile f = convert(m, "permute", no_tokenizer());
  for (const auto& [gguf, hf, heads] : {std::tuple{"blk.1.attn_q.weight", "model.layers.1.self_attn.q_proj.weight", m.heads},
                                         std::tuple{"blk.1.attn_k.weight", "model.layers.1.self_attn.k_proj.weight", m.kv_heads}}) {
    const HfTensor source = m.find(hf);
    const auto out = floats_of(f, gguf);
    const int64_t rows = source.shape[0], cols = source.shape[1];
    ASSERT_EQ(out.size(), source.values.size());
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t from = permuted_source_row(r, heads, rows);
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(out[static_cast<size_t>(r * cols + c)], source.values[static_cast<size_t>(from * cols + c)])
            << gguf << " row " << r;
      }
    }
    // A value moved: row 1 of the first head is the checkpoint's row head_dim / 2.
    EXPECT_EQ(out[static_cast<size_t>(cols)], source.values[static_cast<size_t>(m.head_dim() / 2 * cols)]);
    EXPECT_NE(out[static_cast<size_t>(cols)], source.values[static_cast<size_t>(cols)]);
  }
  // V is not permuted.
  EXPECT_EQ(floats_of(f, "blk.0.attn_v.weight"), m.find("model.layers.0.self_attn.v_proj.weight").values);
}

// A tensor that keeps its type is copied as llama.cpp's converter writes it: F32 and F16 bytes
// unchanged (numpy's astype to the same type), BF16 through float32 and back (gguf-py's bf16:
// only a signalling NaN changes, it comes back quiet); Q and K rows permuted; the same bytes on
// one thread and two. Every 16-bit pattern occurs: infinities, NaNs, subnormals, -0.
TEST(Convert, SameTypeTensorsAreCopiedAsTheConverterWritesThem) {
  TinyModel m;
  m.layers = 1;
  m.vocab = 2048;  // 2048 x 32 embedding rows: every 16-bit pattern
  for (const std::string dtype : {"F16", "BF16"}) {
    const TensorType type = dtype == "F16" ? TensorType::F16 : TensorType::BF16;
    std::vector<RawHfTensor> raw;
    uint32_t next = 0x5eed;
    for (const HfTensor& t : m.tensors()) {
      std::vector<std::byte> bytes(t.values.size() * 2);
      for (size_t i = 0; i < t.values.size(); ++i) {
        next = next * 1103515245u + 12345u;
        const uint16_t h = t.name == "model.embed_tokens.weight" ? static_cast<uint16_t>(i) : static_cast<uint16_t>(next >> 8);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
      raw.push_back({t.name, t.shape, std::move(bytes)});
    }
    // (Matrices only: norms and other vectors become F32, as the converter writes them.)
    const auto expected = [&](const RawHfTensor& t, int64_t heads) {
      const int64_t rows = t.shape[0], row_bytes = 2 * t.shape[1];
      std::vector<std::byte> out(t.bytes.size());
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t from = heads > 0 ? permuted_source_row(r, heads, rows) : r;
        std::memcpy(out.data() + r * row_bytes, t.bytes.data() + from * row_bytes, static_cast<size_t>(row_bytes));
      }
      for (size_t i = 0; type == TensorType::BF16 && i < out.size(); i += 2) {
        uint16_t h;
        std::memcpy(&h, out.data() + i, 2);
        if ((h & 0x7FFF) > 0x7F80) h |= 0x40;
        std::memcpy(out.data() + i, &h, 2);
      }
      return out;
    };
    const auto raw_of = [&](const std::string& name) -> const RawHfTensor& {
      return *std::find_if(raw.begin(), raw.end(), [&](const RawHfTensor& t) { return t.name == name; });
    };
    std::vector<std::vector<std::byte>> runs;
    for (const unsigned threads : {1u, 2u}) {
      const auto dir = test::temp_dir("convert-copy-" + dtype) / "model";
      m.write(dir);
      write_raw_safetensors(dir / "model.safetensors", raw, dtype);
      const auto path = dir.parent_path() / "out.gguf";
      ConvertOptions options = no_tokenizer(type);
      options.threads = Threads{threads};
      ASSERT_TRUE(convert_model(dir, path, options));
      auto f = GgufFile::open(path);
      ASSERT_TRUE(f);
      for (const auto& [gguf, hf, heads] :
           {std::tuple{"token_embd.weight", "model.embed_tokens.weight", int64_t{0}},
            std::tuple{"output.weight", "lm_head.weight", int64_t{0}},
            std::tuple{"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", m.heads},
            std::tuple{"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight", m.kv_heads},
            std::tuple{"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight", int64_t{0}},
            std::tuple{"blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight", int64_t{0}}}) {
        const TensorInfo* t = f->find_tensor(gguf);
        ASSERT_NE(t, nullptr) << gguf;
        EXPECT_EQ(t->type, type) << gguf;
        const auto data = f->tensor_data(*t);
        const auto want = expected(raw_of(hf), heads);
        EXPECT_TRUE(std::equal(data.begin(), data.end(), want.begin(), want.end())) << dtype << " " << gguf;
      }
      runs.push_back(test::read_bytes(path));
      std::filesystem::remove_all(dir.parent_path());
    }
    EXPECT_TRUE(runs[0] == runs[1]) << dtype << ": the thread count changed the bytes";
  }
}

TEST(Convert, TiedEmbeddingsHaveNoOutputTensor) {
  TinyModel m;
  m.tied = true;
  const GgufFile f = convert(m, "tied", no_tokenizer());
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(floats_of(f, "token_embd.weight"), m.find("model.embed_tokens.weight").values);
}

TEST(Convert, InputDtypes) {
  for (const std::string dtype : {"F32", "F16", "BF16"}) {
    for (TensorType out : {TensorType::F32, TensorType::F16, TensorType::BF16}) {
      TinyModel m;
      m.dtype = dtype;
      const GgufFile f = convert(m, "dtype-" + dtype + "-" + std::string(type_name(out)), no_tokenizer(out));
      EXPECT_EQ(f.find_tensor("blk.0.ffn_up.weight")->type, out);
      // The test's values are exact in every type: they come back unchanged.
      EXPECT_EQ(floats_of(f, "blk.0.ffn_up.weight"), m.find("model.layers.0.mlp.up_proj.weight").values) << dtype;
      EXPECT_EQ(floats_of(f, "output_norm.weight"), m.find("model.norm.weight").values) << dtype;
    }
  }
}

// Values f16 and bf16 cannot hold: rounded as ggml (and numpy, and gguf-py's bf16) round, to nearest even.
TEST(Convert, F32ToF16AndBf16RoundAsGgml) {
  TinyModel m;
  auto tensors = m.tensors();
  std::vector<float> values;
  for (auto& t : tensors) {
    if (t.name != "model.layers.0.mlp.up_proj.weight") continue;
    for (size_t i = 0; i < t.values.size(); ++i) t.values[i] = static_cast<float>(i) * 0.0123456789f - 7.654321f;
    values = t.values;
  }
  for (TensorType out : {TensorType::F16, TensorType::BF16}) {
    const auto dir = test::temp_dir("convert-round") / "model";
    m.write(dir);
    write_safetensors(dir / "model.safetensors", tensors, "F32");
    const auto path = dir.parent_path() / "out.gguf";
    ASSERT_TRUE(convert_model(dir, path, no_tokenizer(out)));
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f);
    const TensorInfo* up = f->find_tensor("blk.0.ffn_up.weight");
    ASSERT_EQ(up->type, out);
    std::vector<std::byte> expected(values.size() * 2);
    ASSERT_TRUE(quantize(out, values, expected, m.embd));
    const auto data = f->tensor_data(*up);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), expected.begin(), expected.end())) << type_name(out);
    std::filesystem::remove_all(dir.parent_path());
  }
}

TEST(Convert, IntegerInputsBecomeFloats) {
  TinyModel m;
  m.dtype = "I32";
  const GgufFile f = convert(m, "int", no_tokenizer());
  const auto source = m.find("model.layers.0.mlp.up_proj.weight").values;
  const auto out = floats_of(f, "blk.0.ffn_up.weight");
  ASSERT_EQ(out.size(), source.size());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<float>(static_cast<int32_t>(source[i])));
}

TEST(Convert, Q8_0IsQuantizeOfTheSameFloatsAndOddRowsFallBackToF16) {
  TinyModel m;
  m.ff = 48;  // ffn_down rows of 48: not a multiple of 32
  const GgufFile f = convert(m, "q8", no_tokenizer(TensorType::Q8_0));
  EXPECT_EQ(f.get("general.file_type")->get<uint32_t>(), 7u);  // MOSTLY_Q8_0
  const TensorInfo* gate = f.find_tensor("blk.0.ffn_gate.weight");
  ASSERT_NE(gate, nullptr);
  ASSERT_EQ(gate->type, TensorType::Q8_0);
  const HfTensor source = m.find("model.layers.0.mlp.gate_proj.weight");
  std::vector<std::byte> expected(*row_size(TensorType::Q8_0, m.embd) * static_cast<size_t>(m.ff));
  ASSERT_TRUE(quantize(TensorType::Q8_0, source.values, expected, m.embd));
  const auto data = f.tensor_data(*gate);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), expected.begin(), expected.end()));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight")->type, TensorType::F16);
  EXPECT_EQ(f.find_tensor("blk.0.attn_norm.weight")->type, TensorType::F32);
}

TEST(Convert, OtherQuantizedTypes) {
  TinyModel m;
  m.embd = 256;  // K-quant blocks of 256
  m.ff = 256;
  m.heads = 4;
  m.kv_heads = 4;
  m.layers = 1;
  const GgufFile f = convert(m, "q4k", no_tokenizer(TensorType::Q4_K));
  const TensorInfo* up = f.find_tensor("blk.0.ffn_up.weight");
  ASSERT_EQ(up->type, TensorType::Q4_K);
  std::vector<std::byte> expected(*row_size(TensorType::Q4_K, m.embd) * static_cast<size_t>(m.ff));
  ASSERT_TRUE(quantize(TensorType::Q4_K, m.find("model.layers.0.mlp.up_proj.weight").values, expected, m.embd));
  const auto data = f.tensor_data(*up);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), expected.begin(), expected.end()));
  EXPECT_EQ(f.get("general.file_type")->get<uint32_t>(), 15u);  // llama.h's LLAMA_FTYPE_MOSTLY_Q4_K_M
}

TEST(Convert, ShardedQwen2WithBiases) {
  TinyModel m;
  m.arch = "Qwen2ForCausalLM";
  m.qkv_bias = true;
  m.dtype = "BF16";
  const GgufFile f = convert(m, "qwen2-sharded", no_tokenizer(), 3);
  EXPECT_EQ(f.get("general.architecture")->as_string(), "qwen2");
  // Qwen2Model writes neither vocab_size nor rope.dimension_count.
  EXPECT_FALSE(f.get("qwen2.vocab_size"));
  EXPECT_FALSE(f.get("qwen2.rope.dimension_count"));
  EXPECT_EQ(f.get("qwen2.block_count")->get<uint32_t>(), 2u);
  EXPECT_EQ(f.tensors().size(), 3 + 12 * static_cast<size_t>(m.layers));
  for (const auto& [gguf, hf] : {std::pair{"blk.1.attn_q.bias", "model.layers.1.self_attn.q_proj.bias"},
                                  {"blk.1.attn_k.bias", "model.layers.1.self_attn.k_proj.bias"},
                                  {"blk.0.attn_v.bias", "model.layers.0.self_attn.v_proj.bias"},
                                  {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
                                  {"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight"}}) {
    EXPECT_EQ(floats_of(f, gguf), m.find(hf).values) << gguf;  // no permutation for qwen2
    EXPECT_EQ(f.find_tensor(gguf)->type, TensorType::F32);
  }
  // Shards in file-name order, each shard's tensors by name: the first shard holds every third
  // tensor of TinyModel's list, the embedding first.
  EXPECT_EQ(f.tensors()[0].name, "token_embd.weight");
}

TEST(Convert, Qwen3HeadNorms) {
  TinyModel m;
  m.arch = "Qwen3ForCausalLM";
  m.qk_norm = true;
  m.head_dim_key = 16;  // heads * head_dim (64) != hidden_size (32), as Qwen3 allows
  const GgufFile f = convert(m, "qwen3", no_tokenizer());
  EXPECT_EQ(f.get("general.architecture")->as_string(), "qwen3");
  EXPECT_EQ(f.get("qwen3.attention.key_length")->get<uint32_t>(), 16u);
  EXPECT_EQ(f.get("qwen3.attention.value_length")->get<uint32_t>(), 16u);
  const TensorInfo* qn = f.find_tensor("blk.0.attn_q_norm.weight");
  ASSERT_NE(qn, nullptr);
  EXPECT_EQ(qn->n_dims, 1u);
  EXPECT_EQ(qn->ne[0], 16);
  EXPECT_EQ(qn->type, TensorType::F32);
  const TensorInfo* q = f.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->ne[0], 32);
  EXPECT_EQ(q->ne[1], 64);
  EXPECT_EQ(floats_of(f, "blk.1.attn_k_norm.weight"), m.find("model.layers.1.self_attn.k_norm.weight").values);
  EXPECT_EQ(floats_of(f, "blk.1.attn_q.weight"), m.find("model.layers.1.self_attn.q_proj.weight").values);
}

TEST(Convert, Llama3RopeFreqs) {
  TinyModel m;
  m.extra_config = {{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                                      {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}}},
                    {"rope_theta", 500000.0}};
  const GgufFile f = convert(m, "llama3", no_tokenizer(TensorType::F16));
  ASSERT_EQ(f.tensors()[0].name, "rope_freqs.weight");  // generated tensors come first
  EXPECT_EQ(f.tensors()[0].type, TensorType::F32);
  const auto factors = floats_of(f, "rope_freqs.weight");
  ASSERT_EQ(factors.size(), static_cast<size_t>(m.head_dim() / 2));
  EXPECT_FALSE(f.get("llama.rope.scaling.type"));  // llama3 is the tensor, not keys
  for (size_t i = 0; i < factors.size(); ++i) {
    // generate_extra_tensors in double precision; the converter works in float32.
    const double freq = 1.0 / std::pow(500000.0, 2.0 * static_cast<double>(i) / static_cast<double>(m.head_dim()));
    const double wavelen = 2 * M_PI / freq;
    double expected;
    if (wavelen < 64.0 / 4.0) {
      expected = 1;
    } else if (wavelen > 64.0 / 1.0) {
      expected = 8;
    } else {
      const double smooth = (64.0 / wavelen - 1.0) / (4.0 - 1.0);
      expected = 1 / ((1 - smooth) / 8.0 + smooth);
    }
    EXPECT_NEAR(factors[i], expected, 1e-4 * expected) << i;
  }
  EXPECT_EQ(factors[0], 1.0f);
  EXPECT_EQ(factors.back(), 8.0f);
}

TEST(Convert, YarnAndLinearRopeScalingKeys) {
  TinyModel yarn;
  yarn.arch = "Qwen2ForCausalLM";
  yarn.qkv_bias = true;
  yarn.extra_config = {{"rope_scaling", {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768},
                                         {"beta_fast", 32.0}, {"beta_slow", 1.0}}}};
  const GgufFile f = convert(yarn, "yarn", no_tokenizer());
  EXPECT_EQ(f.get("qwen2.rope.scaling.type")->as_string(), "yarn");
  EXPECT_EQ(f.get("qwen2.rope.scaling.factor")->get<float>(), 4.0f);
  EXPECT_EQ(f.get("qwen2.rope.scaling.original_context_length")->get<uint32_t>(), 32768u);
  EXPECT_EQ(f.get("qwen2.rope.scaling.yarn_beta_fast")->get<float>(), 32.0f);
  EXPECT_EQ(f.get("qwen2.rope.scaling.yarn_beta_slow")->get<float>(), 1.0f);
  EXPECT_FALSE(f.get("qwen2.rope.scaling.yarn_ext_factor"));
  EXPECT_EQ(f.find_tensor("rope_freqs.weight"), nullptr);

  TinyModel linear;
  linear.arch = "MistralForCausalLM";
  linear.extra_config = {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}};
  const GgufFile g = convert(linear, "linear", no_tokenizer());
  EXPECT_EQ(g.get("general.architecture")->as_string(), "llama");
  EXPECT_EQ(g.get("llama.rope.scaling.type")->as_string(), "linear");
  EXPECT_EQ(g.get("llama.rope.scaling.factor")->get<float>(), 2.0f);
  EXPECT_FALSE(g.get("llama.rope.scaling.original_context_length"));
}

// The name heuristics against gguf-py's own answers (Metadata.get_model_id_components,
// Metadata.id_to_title and utility.size_label run on these inputs).
TEST(Convert, ModelNameHeuristicsMatchGgufPy) {
  auto p = model_name_parts("TinyLlama-1.1B-Chat-v1.0", 1100048384);
  EXPECT_EQ(p.name, "TinyLlama 1.1B Chat v1.0");
  EXPECT_EQ(p.basename, "TinyLlama");
  EXPECT_EQ(p.finetune, "Chat");
  EXPECT_EQ(p.version, "v1.0");
  EXPECT_EQ(p.size_label, "1.1B");
  p = model_name_parts("meta-llama/Llama-3.2-1B-Instruct", 1235814400);
  EXPECT_EQ(p.name, "Llama 3.2 1B Instruct");
  EXPECT_EQ(p.organization, "Meta Llama");
  EXPECT_EQ(p.basename, "Llama-3.2");
  EXPECT_EQ(p.finetune, "Instruct");
  EXPECT_EQ(p.version, std::nullopt);
  EXPECT_EQ(p.size_label, "1B");
  p = model_name_parts("tiny-llama", 123456);
  EXPECT_EQ(p.name, "Tiny Llama");
  EXPECT_EQ(p.basename, std::nullopt);
  EXPECT_EQ(p.size_label, std::nullopt);
  p = model_name_parts("bloom-7b1", 7069016064);
  EXPECT_EQ(p.name, "Bloom 7b1");
  EXPECT_EQ(p.basename, "bloom");
  EXPECT_EQ(p.size_label, "7.1B");
  p = model_name_parts("Phi-3-mini-128k-instruct", 3821079552);
  EXPECT_EQ(p.name, "Phi 3 Mini 128k Instruct");
  EXPECT_EQ(p.basename, "Phi-3");
  EXPECT_EQ(p.finetune, "128k-instruct");
  EXPECT_EQ(p.size_label, "mini");
  p = model_name_parts("my model dir", 10);
  EXPECT_EQ(p.name, "My Model Dir");
  EXPECT_EQ(model_size_label(1100048384), "1.1B");
  EXPECT_EQ(model_size_label(751632384), "752M");
  EXPECT_EQ(model_size_label(123456), "123K");
  EXPECT_EQ(model_size_label(5000), "5.0K");
  EXPECT_EQ(model_size_label(999999), "1000K");
  EXPECT_EQ(model_size_label(1000001), "1.0M");
  EXPECT_EQ(model_size_label(10), "0.01K");
}

// generation_config.json's sampling defaults become general.sampling.* before general.name, with
// gguf-py's types (i32, f32) and repetition_penalty read as penalty_repeat; a broken file adds nothing.
TEST(Convert, GenerationConfigSamplingKeys) {
  TinyModel m;
  const auto dir = test::temp_dir("convert-sampling") / "model";
  m.write(dir);
  std::ofstream(dir / "generation_config.json")
      << R"({"do_sample": true, "temperature": 0.6, "top_p": 0.9, "top_k": 40, "repetition_penalty": 1.1,
            "min_p": null, "mirostat": "no", "bos_token_id": 1})";
  auto plan = plan_convert(dir, no_tokenizer());
  ASSERT_TRUE(plan) << plan.error().describe();
  std::vector<std::string> names;
  for (const auto& [key, value] : plan->metadata) names.push_back(key);
  const auto at = [&](std::string_view key) { return std::ranges::find(names, key) - names.begin(); };
  const auto value_of = [&](std::string_view key) -> const MetadataValue* {
    for (const auto& [k, v] : plan->metadata) {
      if (k == key) return &v;
    }
    return nullptr;
  };
  ASSERT_NE(value_of("general.sampling.top_k"), nullptr);
  EXPECT_EQ(value_of("general.sampling.top_k")->view().get<int32_t>(), 40);
  EXPECT_EQ(value_of("general.sampling.top_p")->view().get<float>(), 0.9f);
  EXPECT_EQ(value_of("general.sampling.temp")->view().get<float>(), 0.6f);
  EXPECT_EQ(value_of("general.sampling.penalty_repeat")->view().get<float>(), 1.1f);
  EXPECT_EQ(value_of("general.sampling.min_p"), nullptr) << "null is absent";
  EXPECT_EQ(value_of("general.sampling.mirostat"), nullptr) << "a string is not an int";
  // gguf-py's order: top_k, top_p, temp, penalty_repeat, then general.name.
  EXPECT_LT(at("general.type"), at("general.sampling.top_k"));
  EXPECT_LT(at("general.sampling.top_k"), at("general.sampling.top_p"));
  EXPECT_LT(at("general.sampling.top_p"), at("general.sampling.temp"));
  EXPECT_LT(at("general.sampling.temp"), at("general.sampling.penalty_repeat"));
  EXPECT_LT(at("general.sampling.penalty_repeat"), at("general.name"));
  std::ofstream(dir / "generation_config.json") << "{not json";
  plan = plan_convert(dir, no_tokenizer());
  ASSERT_TRUE(plan) << plan.error().describe();
  for (const auto& [key, value] : plan->metadata) EXPECT_FALSE(key.starts_with("general.sampling.")) << key;
  std::filesystem::remove_all(dir.parent_path());
}

// Refusals: each names what is wrong.
Error plan_error(const TinyModel& m, const std::string& name, const std::function<void(const std::filesystem::path&)>& damage) {
  const auto dir = test::temp_dir("convert-bad-" + name) / "model";
  m.write(dir);
  damage(dir);
  auto plan = plan_convert(dir, no_tokenizer());
  EXPECT_FALSE(plan) << name;
  return plan ? Error{} : plan.error();
}

TEST(Convert, Refusals) {
  TinyModel m;
  Error e = plan_error(m, "no-config", [](const auto& dir) { std::filesystem::remove(dir / "config.json"); });
  EXPECT_EQ(e.code, ErrorCode::io_error);
  EXPECT_NE(e.describe().find("config.json"), std::string::npos);
  // Issue 29 review: a config.json that is not JSON said only "not a JSON object": where and why.
  e = plan_error(m, "bad-json", [](const auto& dir) { std::ofstream(dir / "config.json") << "{\"a\": 1,,}"; });
  EXPECT_EQ(e.code, ErrorCode::bad_header);
  EXPECT_EQ(e.describe(), "'config.json': not valid JSON: parse error at line 1, column 9: syntax error while parsing object key - "
                          "unexpected ','; expected string literal");
  e = plan_error(m, "json-array", [](const auto& dir) { std::ofstream(dir / "config.json") << "[1]"; });
  EXPECT_EQ(e.describe(), "'config.json': not a JSON object");

  TinyModel unknown = m;
  unknown.arch = "GPT2LMHeadModel";
  e = plan_error(unknown, "unknown-arch", [](const auto&) {});
  EXPECT_NE(e.describe().find("GPT2LMHeadModel"), std::string::npos);
  EXPECT_NE(e.describe().find("LlamaForCausalLM"), std::string::npos);  // lists what is supported

  // A checkpoint whose k_proj has the shape of q_proj (config says 2 KV heads).
  e = plan_error(m, "shape", [&](const auto& dir) {
    auto tensors = m.tensors();
    for (auto& t : tensors) {
      if (t.name == "model.layers.1.self_attn.k_proj.weight") {
        t.shape = {m.heads * m.head_dim(), m.embd};
        t.values = test_values(m.heads * m.head_dim() * m.embd, 1);
      }
    }
    write_safetensors(dir / "model.safetensors", tensors, "F32");
  });
  EXPECT_EQ(e.subject, "model.layers.1.self_attn.k_proj.weight");
  EXPECT_NE(e.message.find("[16, 32]"), std::string::npos) << e.message;

  e = plan_error(m, "missing", [&](const auto& dir) {
    auto tensors = m.tensors();
    std::erase_if(tensors, [](const HfTensor& t) { return t.name == "model.layers.0.mlp.up_proj.weight"; });
    write_safetensors(dir / "model.safetensors", tensors, "F32");
  });
  EXPECT_EQ(e.subject, "model.layers.0.mlp.up_proj.weight");

  e = plan_error(m, "no-lm-head", [&](const auto& dir) {
    auto tensors = m.tensors();
    std::erase_if(tensors, [](const HfTensor& t) { return t.name == "lm_head.weight"; });
    write_safetensors(dir / "model.safetensors", tensors, "F32");
  });
  EXPECT_EQ(e.subject, "lm_head.weight");

  e = plan_error(m, "extra", [&](const auto& dir) {
    auto tensors = m.tensors();
    tensors.push_back({"model.layers.5.mlp.up_proj.weight", {2}, {1, 2}});  // a layer the config does not have
    write_safetensors(dir / "model.safetensors", tensors, "F32");
  });
  EXPECT_EQ(e.subject, "model.layers.5.mlp.up_proj.weight");

  e = plan_error(m, "bad-config", [&](const auto& dir) {
    json c = m.config();
    c["num_attention_heads"] = -4;
    write_text(dir / "config.json", c.dump());
  });
  EXPECT_NE(e.subject.find("num_attention_heads"), std::string::npos);

  e = plan_error(m, "no-safetensors", [](const auto& dir) { std::filesystem::remove(dir / "model.safetensors"); });
  EXPECT_EQ(e.code, ErrorCode::io_error);
}

// Issue 29: config.json values gguf check then reports (llama.cpp aborts on a negative epsilon)
// were written with exit 0; they are refused, naming the field and the value, nothing written.
TEST(Convert, HyperparametersGgufCheckWouldReportAreRefused) {
  const std::string advice =
      "; the file was probably written by a converter for a different version or edited by hand; convert the model "
      "again or correct the key with gguf set";
  const std::string eps_error =
      "outside [0, inf): llama.cpp aborts on a negative or NaN epsilon (GGML_ASSERT(eps >= 0.0f) in ggml's norm "
      "operations), and an infinite one turns every normalized activation into 0";
  const std::string eps_warning =
      "outside (0, 0.1]: an epsilon is a small positive number (1e-5, 1e-6): at 0 a row of zeros is divided by zero, "
      "and above 0.1 it swamps the variance it is added to";
  const std::string key = "llama.attention.layer_norm_rms_epsilon";
  const auto refusal = [&](const std::string& field, const std::string& value, const std::string& finding) {
    return fmt::format("'config.json: {}': {} would be written as {}, and gguf check finds: {}", field, value, key,
                       finding);
  };
  const std::pair<json, std::string> cases[] = {
      {{{"rms_norm_eps", -1}}, refusal("rms_norm_eps", "-1", "error arch.bad_hyperparameter: '" + key + "' is -1, " + eps_error + advice)},
      {{{"rms_norm_eps", 1e39}}, refusal("rms_norm_eps", "inf", "error arch.bad_hyperparameter: '" + key + "' is inf, " + eps_error + advice)},
      {{{"rms_norm_eps", 0}}, refusal("rms_norm_eps", "0", "warning arch.implausible_hyperparameter: '" + key + "' is 0, " + eps_warning + advice)},
      {{{"rms_norm_eps", 1e30}}, refusal("rms_norm_eps", "1e+30", "warning arch.implausible_hyperparameter: '" + key + "' is 1e+30, " + eps_warning + advice)},
      {{{"norm_eps", -1e-5}, {"rms_norm_eps", nullptr}}, refusal("norm_eps", "-1e-05", "error arch.bad_hyperparameter: '" + key + "' is -1e-05, " + eps_error + advice)},
      {{{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}, {"beta_fast", 0}}}},
       "'config.json: rope_scaling.beta_fast': 0 would be written as llama.rope.scaling.yarn_beta_fast, and gguf check "
       "finds: warning rope.implausible_value: 'llama.rope.scaling.yarn_beta_fast' is 0, outside (0, inf): a yarn beta "
       "is a positive number of rotations (32 and 1 by default): the context is divided by it; set the model's "
       "rope_scaling parameters"},
      {{{"rope_theta", -10000.0}},
       "'config.json: rope_theta': -10000 would be written as llama.rope.freq_base, and gguf check finds: error "
       "rope.bad_freq_base: llama.rope.freq_base is -10000; RoPE needs a positive base (10000 is the usual default, "
       "newer models use larger ones); set the model's rope_theta"},
  };
  for (const auto& [change, expected] : cases) {
    SCOPED_TRACE(change.dump());
    TinyModel m;
    m.extra_config = change;
    const Error e = plan_error(m, "range", [](const auto&) {});
    EXPECT_EQ(e.describe(), expected);
    EXPECT_EQ(e.code, ErrorCode::invalid_argument);
  }
}

// The keys of the architecture a plan writes, "{arch}." left out, in order, with their values.
std::vector<std::string> arch_keys(const ConvertPlan& plan) {
  std::vector<std::string> out;
  const std::string prefix = plan.architecture + ".";
  for (const auto& [key, value] : plan.metadata) {
    if (!key.starts_with(prefix)) continue;
    std::string text = key.substr(prefix.size()) + "=";
    switch (value.type()) {
      case ValueType::UInt32: text += std::to_string(*value.view().get<uint32_t>()); break;
      case ValueType::Float32: text += fmt::format("{}", *value.view().get<float>()); break;
      default: text += "?"; break;
    }
    out.push_back(text);
  }
  return out;
}

ConvertPlan plan_of(const TinyModel& m, const std::string& name) {
  const auto dir = test::temp_dir("convert-plan-" + name) / "model";
  m.write(dir);
  auto plan = plan_convert(dir, no_tokenizer());
  EXPECT_TRUE(plan) << name << ": " << (plan ? "" : plan.error().describe());
  std::filesystem::remove_all(dir.parent_path());
  return plan ? std::move(*plan) : ConvertPlan{};
}

// A key config.json leaves out arrives as transformers' config class gives it (AutoConfig.to_dict(),
// which is what llama.cpp's converter reads), picked by model_type; without a model_type the file
// is read as it is.
TEST(Convert, ConfigClassDefaultsReachTheKeysAsAutoConfigGivesThem) {
  TinyModel llama;  // no head_dim in config.json: LlamaConfig derives it, so key and value lengths are written
  llama.extra_config = {{"model_type", "llama"}};
  EXPECT_EQ(arch_keys(plan_of(llama, "llama")),
            (std::vector<std::string>{"block_count=2", "context_length=128", "embedding_length=32", "feed_forward_length=64",
                                      "attention.head_count=4", "attention.head_count_kv=2", "rope.freq_base=10000",
                                      "attention.layer_norm_rms_epsilon=1e-05", "attention.key_length=8",
                                      "attention.value_length=8", "vocab_size=40", "rope.dimension_count=8"}));
  TinyModel raw = llama;  // no model_type: no config class, nothing derived
  raw.extra_config = json::object();
  EXPECT_EQ(arch_keys(plan_of(raw, "raw")),
            (std::vector<std::string>{"block_count=2", "context_length=128", "embedding_length=32", "feed_forward_length=64",
                                      "attention.head_count=4", "attention.head_count_kv=2", "rope.freq_base=10000",
                                      "attention.layer_norm_rms_epsilon=1e-05", "vocab_size=40", "rope.dimension_count=8"}));
  // GraniteConfig: the four multipliers default to 1 (always written); a key config.json sets to
  // null stays null (no rope base, no context length), as the class keeps a None it is given;
  // GraniteModel drops head_dim (no key or value length).
  TinyModel granite;
  granite.arch = "GraniteForCausalLM";
  granite.head_dim_key = 8;
  granite.extra_config = {{"model_type", "granite"}, {"rope_theta", nullptr}, {"max_position_embeddings", nullptr},
                          {"embedding_multiplier", 12.0}};
  const ConvertPlan g = plan_of(granite, "granite");
  EXPECT_EQ(g.architecture, "granite");
  EXPECT_EQ(arch_keys(g), (std::vector<std::string>{"block_count=2", "embedding_length=32", "feed_forward_length=64",
                                                    "attention.head_count=4", "attention.head_count_kv=2",
                                                    "attention.layer_norm_rms_epsilon=1e-05", "vocab_size=40",
                                                    "rope.dimension_count=8", "attention.scale=1", "embedding_scale=12",
                                                    "residual_scale=1", "logit_scale=1"}));
}

// Each family refuses what llama.cpp's converter refuses, with the key or tensor named.
TEST(Convert, FamilyRefusals) {
  TinyModel m;
  // An FP8 checkpoint: the tensor and the dtype named, and what to convert instead.
  Error e = plan_error(m, "fp8", [&](const auto& dir) {
    auto tensors = m.tensors();
    std::vector<RawHfTensor> raw;
    for (const HfTensor& t : tensors) raw.push_back({t.name, t.shape, std::vector<std::byte>(t.values.size())});
    write_raw_safetensors(dir / "model.safetensors", raw, "F8_E4M3");
  });
  EXPECT_EQ(e.subject, "lm_head.weight");
  EXPECT_EQ(e.message, "dtype F8_E4M3 is not supported: an FP8 checkpoint; convert its BF16 or F16 release "
                       "(F32, F16, BF16, F64, integers, BOOL)");
  // Gemma 3 has no attention soft-capping: Gemma3Model asserts it is unset.
  TinyModel gemma3 = m;
  gemma3.arch = "Gemma3ForCausalLM";
  gemma3.qk_norm = true;
  gemma3.tied = true;
  gemma3.head_dim_key = 8;
  gemma3.extra_config = {{"attn_logit_softcapping", 50.0}, {"sliding_window", 4}};
  e = plan_error(gemma3, "gemma3-softcap", [&](const auto& dir) {
    auto tensors = gemma3.tensors();
    for (int64_t l = 0; l < gemma3.layers; ++l) {  // Gemma 2/3's pre- and post-feed-forward norms
      for (const char* norm : {"pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight"}) {
        tensors.push_back({"model.layers." + std::to_string(l) + "." + norm, {gemma3.embd}, test_values(gemma3.embd, 3)});
      }
    }
    write_safetensors(dir / "model.safetensors", tensors, "F32");
  });
  EXPECT_EQ(e.subject, "config.json: attn_logit_softcapping");
  EXPECT_EQ(e.message, "set, but Gemma 3 has no attention soft-capping (the Python converter refuses it too)");
  // Phi-3's long-context factors must have one value per rotary dimension pair.
  TinyModel phi3 = m;
  phi3.arch = "Phi3ForCausalLM";
  phi3.extra_config = {{"original_max_position_embeddings", 64},
                       {"rope_scaling", {{"type", "longrope"}, {"long_factor", {1.0, 2.0}}, {"short_factor", {1.0, 1.0}}}}};
  e = plan_error(phi3, "phi3-factors", [](const auto&) {});
  EXPECT_EQ(e.subject, "config.json: rope_scaling");
  EXPECT_EQ(e.message, "long_factor (2) and short_factor (2) must both have 4 values");
}

TEST(Convert, NoTokenizerFilesIsAnError) {
  TinyModel m;
  const auto dir = test::temp_dir("convert-tokenizer") / "model";
  m.write(dir);
  ConvertOptions options = no_tokenizer();
  options.tokenizer = true;
  const auto out = dir.parent_path() / "out.gguf";
  auto plan = convert_model(dir, out, options);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("tokenizer"), std::string::npos) << plan.error().describe();
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(Convert, DryRunWritesNothing) {
  TinyModel m;
  const auto dir = test::temp_dir("convert-dry") / "model";
  m.write(dir);
  ConvertOptions options = no_tokenizer(TensorType::Q8_0);
  options.dry_run = true;
  const auto out = dir.parent_path() / "out.gguf";
  auto plan = convert_model(dir, out, options);
  ASSERT_TRUE(plan);
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(plan->skipped.size(), static_cast<size_t>(m.layers));  // the inv_freq buffers
  size_t permuted = 0;
  for (const auto& t : plan->tensors) permuted += t.transform == ConvertTransform::permute_rope;
  EXPECT_EQ(permuted, 2 * static_cast<size_t>(m.layers));
}

TEST(Convert, CancelledWritesNothing) {
  TinyModel m;
  const auto dir = test::temp_dir("convert-cancel") / "model";
  m.write(dir);
  std::atomic<bool> cancel{true};
  ConvertOptions options = no_tokenizer();
  options.cancel = &cancel;
  const auto out = dir.parent_path() / "out.gguf";
  auto plan = convert_model(dir, out, options);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ErrorCode::cancelled);
  EXPECT_EQ(plan.error().offset, std::nullopt);
  EXPECT_EQ(plan.error().describe(), "cancelled");
  EXPECT_FALSE(std::filesystem::exists(out));
  // Progress counts every tensor once, in order.
  cancel = false;
  std::vector<size_t> done;
  options.progress = [&](size_t n, size_t all) {
    EXPECT_EQ(all, 3 + 9 * static_cast<size_t>(m.layers));
    done.push_back(n);
  };
  ASSERT_TRUE(convert_model(dir, out, options));
  ASSERT_EQ(done.size(), 3 + 9 * static_cast<size_t>(m.layers));
  for (size_t i = 0; i < done.size(); ++i) EXPECT_EQ(done[i], i + 1);
  std::filesystem::remove_all(dir.parent_path());
}

TEST(ConvertCli, ConvertsDryRunsAndRefuses) {
  TinyModel m;
  const auto dir = test::temp_dir("convert-cli") / "model";
  m.write(dir);
  const auto out = (dir.parent_path() / "out.gguf").string();

  ::setenv("GGUFKIT_PROGRESS", "always", 1);  // progress is for terminals; shown here on purpose
  auto r = test::run_gguf({"convert", dir.string(), out, "--outtype", "f32", "--no-tokenizer"});
  ::unsetenv("GGUFKIT_PROGRESS");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, out + "\n");
  EXPECT_NE(r.err.find("output_norm.weight"), std::string::npos);  // progress on stderr
  auto f = GgufFile::open(out);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, TensorType::F32);
  EXPECT_EQ(f->get("general.file_type")->get<uint32_t>(), 0u);
  // --help names every checkpoint class the converter takes.
  const auto help = test::run_gguf({"convert", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.err, "");
  std::string classes = "Checkpoint classes (config.json's architectures[0]): ";
  for (const std::string_view name : convert_supported_architectures()) classes += std::string(name) + ", ";
  classes.replace(classes.size() - 2, 2, ".\n");
  EXPECT_NE(help.out.find("\n" + classes), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("LlamaForCausalLM, MistralForCausalLM"), std::string::npos);
  // --no-sync (no fsync before the rename) writes the same bytes.
  const auto written = test::read_bytes(out);
  r = test::run_gguf({"convert", dir.string(), out, "--outtype", "f32", "--no-tokenizer", "-f", "--no-sync", "-q"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, out + "\n");
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(test::read_bytes(out) == written);

  r = test::run_gguf({"convert", dir.string(), out + ".dry", "--outtype", "q8_0", "--dry-run", "--no-tokenizer"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("model.layers.0.self_attn.q_proj.weight"), std::string::npos);
  EXPECT_NE(r.out.find("blk.0.attn_q.weight"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out + ".dry"));

  r = test::run_gguf({"convert", dir.string(), out + ".json", "--dry-run", "--json", "--no-tokenizer"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json plan = json::parse(r.out);
  EXPECT_EQ(plan["architecture"], "llama");
  EXPECT_EQ(plan["tensors"].size(), 3 + 9 * static_cast<size_t>(m.layers));

  r = test::run_gguf({"convert", dir.string(), out + ".bad", "--outtype", "q9_9", "--no-tokenizer"});
  EXPECT_EQ(r.exit_code, 2);

  // Without tokenizer files (and without --no-tokenizer) the model would not load: refused.
  r = test::run_gguf({"convert", dir.string(), out + ".notok"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tokenizer"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out + ".notok"));

  r = test::run_gguf({"convert", (dir / "nowhere").string(), out + ".x", "--no-tokenizer"});
  EXPECT_EQ(r.exit_code, 2);
  std::filesystem::remove_all(dir.parent_path());
}

// Issue 29: refused on the command line: exit 2, one line naming config.json's field and its value,
// nothing on stdout, nothing written; and a tokenizer.model with a repeated piece or a NaN score
// (which llama.cpp aborts on, or orders its merges wrongly with) is refused with check's finding.
TEST(ConvertCli, ValuesGgufCheckWouldReportAreRefused) {
  const auto dir = test::temp_dir("convert-cli-refused");
  const auto out = dir / "out.gguf";
  TinyModel m;
  m.extra_config = {{"rms_norm_eps", -1}};
  m.write(dir / "eps");
  auto r = test::run_gguf({"convert", (dir / "eps").string(), out.string(), "--no-tokenizer"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "gguf: " + (dir / "eps").string() +
                ": 'config.json: rms_norm_eps': -1 would be written as llama.attention.layer_norm_rms_epsilon, and gguf "
                "check finds: error arch.bad_hyperparameter: 'llama.attention.layer_norm_rms_epsilon' is -1, outside "
                "[0, inf): llama.cpp aborts on a negative or NaN epsilon (GGML_ASSERT(eps >= 0.0f) in ggml's norm "
                "operations), and an infinite one turns every normalized activation into 0; the file was probably "
                "written by a converter for a different version or edited by hand; convert the model again or correct "
                "the key with gguf set [invalid_argument]\n");
  EXPECT_FALSE(std::filesystem::exists(out));

  // A SentencePiece tokenizer.model of 400 pieces (llama's layout) for a vocabulary of 400.
  TinyModel spm;
  spm.vocab = 400;
  const auto with_pieces = [&](const std::string& name, const std::function<void(std::vector<test::TinyPiece>&)>& change) {
    std::vector<test::TinyPiece> pieces = test::tiny_sentencepiece_pieces(false, 400);
    change(pieces);
    test::spm::Proto proto;
    for (const test::TinyPiece& p : pieces) proto.piece(p.piece, p.score, p.type);
    proto.byte_fallback().normalizer(true);
    spm.write(dir / name);
    test::write_bytes(dir / name / "tokenizer.model", proto.bytes());
    return dir / name;
  };
  const auto good = with_pieces("good", [](auto&) {});
  r = test::run_gguf({"convert", good.string(), out.string(), "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, out.string() + "\n");
  EXPECT_EQ(r.err, "");
  std::filesystem::remove(out);
  const auto duplicate = with_pieces("duplicate", [](auto& p) { p[300].piece = p[299].piece; });
  const auto nan = with_pieces("nan", [](auto& p) { p[310].score = std::numeric_limits<float>::quiet_NaN(); });
  for (const auto& [checkpoint, finding] :
       {std::pair{duplicate, std::string("'tokenizer.ggml.tokens': the converted file would not pass gguf check, which "
                                         "finds: error tokenizer.duplicate_token: 1 tokens repeat the text of an earlier "
                                         "token (ids 299 and 300 are both '\xE2\x96\x81n'); llama.cpp aborts while "
                                         "loading the vocabulary (each text must map to one id); give every token a "
                                         "distinct text")},
        std::pair{nan, std::string("'tokenizer.ggml.scores': the converted file would not pass gguf check, which finds: "
                                   "error tokenizer.nan_score: 1 score(s) are NaN (the first of token 310): llama.cpp's "
                                   "SentencePiece tokenizer orders its merges by score, and NaN breaks that order "
                                   "(undefined behaviour); convert the model again from its tokenizer")}}) {
    r = test::run_gguf({"convert", checkpoint.string(), out.string(), "-q"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "gguf: " + checkpoint.string() + ": " + finding + " [invalid_argument]\n");
    EXPECT_FALSE(std::filesystem::exists(out));
  }
  std::filesystem::remove_all(dir);
}

// The converter reads only regular files inside the checkpoint directory (or, in a Hugging Face
// cache snapshot, its blobs/), and bounded text files: a link to a private file, config.json linked
// to /dev/zero, a FIFO or an oversized file is refused with a message naming it, nothing written.
TEST(ConvertCli, ReadsOnlyTheCheckpointsOwnFiles) {
  TinyModel m;
  const auto root = test::temp_dir("convert-reads");
  const auto dir = root / "model";
  const auto out = (root / "out.gguf").string();
  const auto expect_refused = [&](const std::string& file, const std::string& message) {
    const auto r = test::run_gguf({"convert", dir.string(), out, "--no-tokenizer"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "gguf: " + file + ": " + message + " [io_error]\n");
    EXPECT_FALSE(std::filesystem::exists(out));
  };
  m.write(dir);
  std::filesystem::remove(dir / "config.json");
  std::filesystem::create_symlink("/dev/zero", dir / "config.json");
  expect_refused("config.json", "a link to /dev/zero, outside the checkpoint directory: not read (copy the file in if "
                                "it belongs to the model)");
  std::filesystem::remove(dir / "config.json");
  ASSERT_EQ(::mkfifo((dir / "config.json").c_str(), 0644), 0);
  expect_refused("config.json", "not a regular file: not read");
  std::filesystem::remove(dir / "config.json");
  write_text(root / "private.json", m.config().dump());
  std::filesystem::create_symlink(root / "private.json", dir / "config.json");
  expect_refused("config.json", "a link to " + (root / "private.json").string() +
                                    ", outside the checkpoint directory: not read (copy the file in if it belongs to the model)");
  std::filesystem::remove(dir / "config.json");
  write_text(dir / "config.json", m.config().dump());
  std::filesystem::resize_file(dir / "config.json", (uint64_t{4} << 20) + 1);  // sparse: nothing read
  expect_refused("config.json", "4194305 bytes, over the limit of 4194304 bytes for config.json: not read");
  // The weights too: model.safetensors linked outside.
  write_text(dir / "config.json", m.config().dump());
  std::filesystem::rename(dir / "model.safetensors", root / "weights.safetensors");
  std::filesystem::create_symlink(root / "weights.safetensors", dir / "model.safetensors");
  expect_refused("model.safetensors", "a link to " + (root / "weights.safetensors").string() +
                                          ", outside the checkpoint directory: not read (copy the file in if it belongs to the model)");

  // A Hugging Face cache snapshot: its files are links to ../../blobs/, which is allowed.
  const auto repo = root / "models--tiny";
  std::filesystem::create_directories(repo / "blobs");
  std::filesystem::create_directories(repo / "snapshots" / "abc123");
  std::filesystem::rename(root / "weights.safetensors", repo / "blobs" / "1111");
  std::filesystem::rename(dir / "config.json", repo / "blobs" / "2222");
  std::filesystem::create_symlink("../../blobs/1111", repo / "snapshots" / "abc123" / "model.safetensors");
  std::filesystem::create_symlink("../../blobs/2222", repo / "snapshots" / "abc123" / "config.json");
  const auto r = test::run_gguf({"convert", (repo / "snapshots" / "abc123").string(), out, "--no-tokenizer"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, out + "\n");
  EXPECT_EQ(r.err, "");
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace ggufkit
