// Hugging Face tokenizers as GGUF metadata: tokenizer.json (+ tokenizer_config.json, config.json
// when present) turned into the tokenizer.ggml.* keys (and tokenizer.chat_template) that llama.cpp's
// converter writes for the same model. BPE vocabularies (llama 3, qwen2/qwen3: tokens, token types,
// merges, the pre-tokenizer name llama.cpp recognises), SentencePiece models (tokenizer.model,
// read first for the llama family as llama.cpp does) and SentencePiece-style vocabularies as
// tokenizer.json represents them (llama 2: scores, byte tokens).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <string>
#include <utility>
#include <vector>

#include "ggufkit/error.h"
#include "ggufkit/value.h"

namespace ggufkit {

struct TokenizerMetadata {
  // The keys in the order llama.cpp's converter writes them.
  std::vector<std::pair<std::string, MetadataValue>> keys;
};

// Which set_vocab of llama.cpp's converter a model family takes.
enum class TokenizerRecipe : uint8_t {
  automatic,              // by config.json's architectures[0]: Qwen2*/Qwen3* gpt2, everything else llama
  llama,                  // LlamaModel.set_vocab: add_prefix_space, tokenizer.model, else LlamaHfVocab or GPT-2 BPE
  gpt2,                   // _set_vocab_gpt2: tokenizer.json's BPE only (Qwen2Model, TextModel's default)
  sentencepiece,          // _set_vocab_sentencepiece: tokenizer.model only (GemmaModel, Gemma2Model)
  sentencepiece_or_gpt2,  // tokenizer.model when there is one, else GPT-2 BPE (Gemma3Model)
  phi3,                   // Phi3MiniModel: GPT-2 BPE for a GPT2Tokenizer (Phi-4), else its own SentencePiece variant
};

// How a family's set_vocab reads the tokenizer files.
struct TokenizerOptions {
  TokenizerRecipe recipe = TokenizerRecipe::automatic;
  // A second gguf.SpecialVocab after the vocabulary (GemmaModel.set_vocab): its token types, the
  // ids set after its files are read (an id the files give wins), and whether it writes the chat
  // template again. Only the types gguf-py's writer has a key for are written (eot; not prefix,
  // suffix, middle or fsep).
  std::vector<std::string> extra_special_types{};
  std::vector<std::pair<std::string, uint32_t>> extra_special_ids{};
  bool extra_chat_template = true;
  // tokenizer.ggml.add_space_prefix set last (Gemma: false); with sentencepiece_or_gpt2, only
  // when the vocabulary came from tokenizer.model (Gemma3Model.set_vocab).
  std::optional<bool> add_space_prefix{};
};

// Reads the tokenizer files of a Hugging Face model directory.
Expected<TokenizerMetadata> convert_hf_tokenizer(const std::filesystem::path& model_dir, const TokenizerOptions& options = {});
// tokenizer.json's model.vocab entries plus its added_tokens (Gemma3Model's real vocabulary size);
// nothing when there is no tokenizer.json.
Expected<std::optional<uint64_t>> hf_tokenizer_json_token_count(const std::filesystem::path& model_dir);
// A key set as gguf-py's writer sets it: in place when it is there, else at the end.
void set_tokenizer_key(TokenizerMetadata& metadata, std::string_view key, MetadataValue value);

}  // namespace ggufkit
