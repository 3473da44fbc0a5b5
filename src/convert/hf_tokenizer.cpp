// Hugging Face tokenizer files to GGUF tokenizer metadata (to be written).
#include "ggufkit/hf_tokenizer.h"

namespace ggufkit {

Expected<TokenizerMetadata> convert_hf_tokenizer(const std::filesystem::path&) {
  return make_error(ErrorCode::invalid_argument, 0, {}, "tokenizer conversion is not written yet");
}

}  // namespace ggufkit
