// Hugging Face tokenizers as GGUF metadata: tokenizer.json (+ tokenizer_config.json, config.json
// when present) turned into the tokenizer.ggml.* keys (and tokenizer.chat_template) that llama.cpp's
// converter writes for the same model. BPE vocabularies (llama 3, qwen2/qwen3: tokens, token types,
// merges, the pre-tokenizer name llama.cpp recognises), SentencePiece models (tokenizer.model,
// read first for the llama family as llama.cpp does) and SentencePiece-style vocabularies as
// tokenizer.json represents them (llama 2: scores, byte tokens).
#pragma once

#include <cstdint>
#include <filesystem>
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
};

// Reads the tokenizer files of a Hugging Face model directory.
Expected<TokenizerMetadata> convert_hf_tokenizer(const std::filesystem::path& model_dir,
                                                 TokenizerRecipe recipe = TokenizerRecipe::automatic);
// A key set as gguf-py's writer sets it: in place when it is there, else at the end.
void set_tokenizer_key(TokenizerMetadata& metadata, std::string_view key, MetadataValue value);

}  // namespace ggufkit
