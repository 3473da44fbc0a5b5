// Hugging Face tokenizers as GGUF metadata: tokenizer.json (+ tokenizer_config.json, config.json
// when present) turned into the tokenizer.ggml.* keys (and tokenizer.chat_template) that llama.cpp's
// converter writes for the same model. BPE vocabularies (llama 3, qwen2/qwen3: tokens, token types,
// merges, the pre-tokenizer name llama.cpp recognises), SentencePiece models (tokenizer.model,
// read first for the llama family as llama.cpp does) and SentencePiece-style vocabularies as
// tokenizer.json represents them (llama 2: scores, byte tokens).
#pragma once

#include <filesystem>
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

// Reads the tokenizer files of a Hugging Face model directory.
Expected<TokenizerMetadata> convert_hf_tokenizer(const std::filesystem::path& model_dir);

}  // namespace ggufkit
