// gguf check, tokenizer pass: what llama.cpp's vocabulary loader (llama-vocab.cpp, load()) reads,
// checked for the cases where it throws, aborts, or silently falls back to something else.
//
// Stays fast on 262k-token vocabularies: tokens are read through the lazy string views, token
// types straight from the array's bytes, and nothing is allocated per token: the duplicate
// search uses two arrays sized once for the whole vocabulary.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <bitset>
#include <cctype>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "check_internal.h"
#include "hash/digest.h"

namespace ggufkit::check {
namespace {

// tokenizer.ggml.model values llama.cpp's loader knows; it throws on any other.
constexpr std::array<std::string_view, 11> kKnownModels = {
    "no_vocab", "none", "llama", "bert", "gpt2", "hybriddna", "whitespace", "t5", "rwkv", "plamo2", "gemma4",
};

// tokenizer.ggml.pre values llama.cpp knows for BPE vocabularies; it throws on any other
// ("unknown pre-tokenizer type").
constexpr std::array<std::string_view, 88> kKnownPreTokenizers = {
    "default", "minicpm5", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
    "lfm2", "jina-v5-nano", "deepseek-llm", "deepseek-coder", "deepseek-v3", "youtu", "falcon", "mpt",
    "starcoder", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
    "mellum", "modern-bert", "jais-2", "gemma4", "granite-embed-multi-311m", "sarvam-moe", "jina-v1-en",
    "jina-v2-code", "roberta-bpe", "whitespace", "refact", "command-r", "qwen2", "deepseek-r1-qwen", "kormo",
    "f2llmv2", "qwen35", "stablelm2", "olmo", "dbrx", "smaug-bpe", "poro-chat", "glm4", "chatglm-bpe", "viking",
    "jais", "tekken", "smollm", "codeshell", "bloom", "gpt3-finnish", "exaone", "exaone4", "exaone-moe",
    "chameleon", "minerva-7b", "megrez", "gpt-4o", "llama4", "kanana2", "talkie", "granite-embed-multi-97m",
    "tiny_aya", "cohere2moe", "superbpe", "trillion", "granite-docling", "bailingmoe", "bailingmoe2",
    "llada-moe", "seed-coder", "hunyuan", "hunyuan-dense", "joyai-llm", "kimi-k2", "grok-2", "afmoe", "laguna",
    "minimax-m2", "solar-open", "mellum2",
};

// Every special token id key llama.cpp reads (the last three are deprecated spellings of the
// fim ids; cls is no longer read but still written by older converters).
constexpr std::array<std::string_view, 18> kSpecialTokenKeys = {
    "tokenizer.ggml.bos_token_id",     "tokenizer.ggml.eos_token_id",     "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id",     "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
    "tokenizer.ggml.padding_token_id", "tokenizer.ggml.mask_token_id",    "tokenizer.ggml.cls_token_id",
    "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.fim_mid_token_id",
    "tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id",
    "tokenizer.ggml.prefix_token_id",  "tokenizer.ggml.suffix_token_id",  "tokenizer.ggml.middle_token_id",
};

// llama_token_type.
constexpr int32_t kTokenTypeLimit = 7;  // UNDEFINED 0 .. BYTE 6
constexpr int32_t kTokenTypeByte = 6;

template <size_t N>
bool is_one_of(std::string_view value, const std::array<std::string_view, N>& known) {
  return std::find(known.begin(), known.end(), value) != known.end();
}

// The models llama.cpp loads as BPE vocabularies: the ones with merges and a pre-tokenizer.
bool is_bpe_model(std::string_view model) {
  return model == "gpt2" || model == "hybriddna" || model == "whitespace" || model == "gemma4";
}
bool is_vocabless_model(std::string_view model) { return model == "no_vocab" || model == "none"; }

std::optional<uint64_t> offset_of(const ModelUnderCheck& model, std::string_view key) {
  const KeyValue* kv = model.find(key);
  return kv ? std::optional<uint64_t>(kv->offset) : std::nullopt;
}

bool is_string_array(const KeyValue& kv) {
  const auto array = kv.value.as_array();
  return array && array->element_type() == ValueType::String;
}

// A token's text for a message: at most 40 bytes (cut on a UTF-8 boundary), control bytes escaped.
std::string printable(std::string_view text) {
  constexpr size_t kMaxBytes = 40;
  size_t end = std::min(text.size(), kMaxBytes);
  if (end < text.size()) {
    while (end > 0 && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) --end;
  }
  std::string out = "'";
  for (const char c : text.substr(0, end)) {
    const auto byte = static_cast<uint8_t>(c);
    if (byte < 0x20 || byte == 0x7F) {
      out += fmt::format("\\x{:02X}", byte);
    } else {
      out += c;
    }
  }
  out += end < text.size() ? "'..." : "'";
  return out;
}

// "<0x0A>" -> 10: the form llama.cpp writes and looks byte tokens up by (upper-case hex).
std::optional<uint8_t> parse_byte_token(std::string_view text) {
  if (text.size() != 6 || !text.starts_with("<0x") || text[5] != '>') return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int high = digit(text[3]);
  const int low = digit(text[4]);
  if (high < 0 || low < 0) return std::nullopt;
  return static_cast<uint8_t>(high * 16 + low);
}

// Files that carry no vocabulary of their own: LoRA adapters, multimodal projectors.
bool expects_tokenizer(const ModelUnderCheck& model) {
  const KeyValue* type = model.find(keys::kType);
  if (!type) return true;
  const auto value = type->value.as_string();
  return !value || *value == "model";
}

// tokenizer.ggml.model: present, a string, one llama.cpp knows. Returns it when usable.
std::optional<std::string_view> check_model_name(const ModelUnderCheck& model, Findings& out) {
  const KeyValue* kv = model.find(keys::kTokenizerModel);
  if (!kv) {
    out.error("tokenizer.missing_model", keys::kTokenizerModel, std::nullopt,
              "the file has no tokenizer.ggml.model and llama.cpp refuses to load a model without it; set it to "
              "the tokenizer the model was trained with (llama, gpt2, bert, t5, ...), or 'none' for a model "
              "without a vocabulary");
    return std::nullopt;
  }
  const auto name = kv->value.as_string();
  if (!name) {
    out.error("tokenizer.wrong_type", kv->key, kv->offset,
              fmt::format("tokenizer.ggml.model is a {}, not a string, and llama.cpp refuses the file; "
                          "write it as a string",
                          value_type_name(kv->value.type())));
    return std::nullopt;
  }
  if (!is_one_of(*name, kKnownModels)) {
    out.error("tokenizer.unknown_model", kv->key, kv->offset,
              fmt::format("tokenizer model '{}' is not one llama.cpp knows (llama, gpt2, bert, t5, rwkv, plamo2, "
                          "gemma4, hybriddna, whitespace, none) and it refuses the file ('unknown tokenizer'); "
                          "use the name of the tokenizer type the model was converted with",
                          *name));
    return std::nullopt;
  }
  return name;
}

// tokenizer.ggml.pre: read (as a string) for every model, used for BPE vocabularies only.
std::optional<std::string_view> check_pre_tokenizer(const ModelUnderCheck& model, std::string_view tokenizer_model,
                                                    Findings& out) {
  const KeyValue* kv = model.find(keys::kTokenizerPre);
  std::optional<std::string_view> pre;
  if (kv) {
    pre = kv->value.as_string();
    if (!pre) {
      out.error("tokenizer.wrong_type", kv->key, kv->offset,
                fmt::format("tokenizer.ggml.pre is a {}, not a string, and llama.cpp refuses the file; write it "
                            "as a string",
                            value_type_name(kv->value.type())));
      return std::nullopt;
    }
  }
  // gemma4 vocabularies get their pre-tokenizer from the model name, whatever the key says.
  if (!is_bpe_model(tokenizer_model) || tokenizer_model == "gemma4") return pre;
  if (!pre || pre->empty()) {
    out.warning("tokenizer.missing_pre", keys::kTokenizerPre, kv ? std::optional(kv->offset) : std::nullopt,
                "a BPE vocabulary without tokenizer.ggml.pre: llama.cpp falls back to the 'default' "
                "pre-tokenizer and warns that generation quality will be degraded; set it to the model's "
                "pre-tokenizer (convert_hf_to_gguf.py identifies it from the tokenizer's hash)");
  } else if (!is_one_of(*pre, kKnownPreTokenizers)) {
    out.error("tokenizer.unknown_pre", kv->key, kv->offset,
              fmt::format("pre-tokenizer '{}' is not one llama.cpp knows, and it refuses a BPE vocabulary whose "
                          "pre-tokenizer it does not know ('unknown pre-tokenizer type'); use a name from "
                          "llama-vocab.cpp, or a newer llama.cpp that supports it",
                          *pre));
  }
  return pre;
}

// tokenizer.ggml.merges for BPE vocabularies: present, strings, each "left right".
void check_merges(const ModelUnderCheck& model, std::string_view tokenizer_model, std::optional<std::string_view> pre,
                  Findings& out) {
  const KeyValue* kv = model.find(keys::kMerges);
  if (!kv) {
    // Kimi-K2 tokenizes without merges; llama.cpp accepts it only for that pre-tokenizer.
    if (tokenizer_model != "gemma4" && pre == std::string_view("kimi-k2")) return;
    out.error("tokenizer.missing_merges", keys::kMerges, std::nullopt,
              fmt::format("a BPE vocabulary ('{}') without tokenizer.ggml.merges: llama.cpp refuses the file "
                          "('cannot find tokenizer merges'); convert the model again so the merges are written",
                          tokenizer_model));
    return;
  }
  if (!is_string_array(*kv)) {
    out.error("tokenizer.wrong_type", kv->key, kv->offset,
              "tokenizer.ggml.merges is not an array of strings and llama.cpp refuses the file; write the "
              "merges as strings \"left right\"");
    return;
  }
  uint64_t malformed = 0;
  uint64_t index = 0;
  std::optional<std::pair<uint64_t, std::string_view>> first;
  for (const std::string_view merge : kv->value.as_array()->strings()) {
    // As llama.cpp splits it: at the first space after the first byte; both parts non-empty.
    const size_t space = merge.find(' ', 1);
    if (space == std::string_view::npos || space + 1 == merge.size()) {
      if (!first) first.emplace(index, merge);
      ++malformed;
    }
    ++index;
  }
  if (malformed != 0) {
    out.warning("tokenizer.bad_merge", kv->key, kv->offset,
                fmt::format("{} of {} merges are not two non-empty parts separated by a space (the first is #{}, "
                            "{}); llama.cpp loads them as empty pairs that never apply, so tokenization differs "
                            "from the original tokenizer; convert the model again",
                            malformed, index, first->first, printable(first->second)));
  }
}

// scores or token_type: an array of an accepted element type, at least one entry per token.
// Returns the array when llama.cpp would use it.
std::optional<ArrayView> check_parallel_array(const ModelUnderCheck& model, std::string_view key, uint64_t n_tokens,
                                              bool float_allowed, Findings& out) {
  const KeyValue* kv = model.find(key);
  if (!kv) return std::nullopt;
  const auto array = kv->value.as_array();
  const bool type_ok = array && (array->element_type() == ValueType::Int32 ||
                                 (float_allowed && array->element_type() == ValueType::Float32));
  if (!type_ok) {
    out.error("tokenizer.wrong_type", kv->key, kv->offset,
              fmt::format("{} must be an array of {}; llama.cpp refuses the file otherwise", key,
                          float_allowed ? "float32 (or int32)" : "int32"));
    return std::nullopt;
  }
  if (array->size() < n_tokens) {
    out.error("tokenizer.length_mismatch", kv->key, kv->offset,
              fmt::format("{} has {} entries for {} tokens and llama.cpp refuses the file ('Index out of array "
                          "bounds'); it needs one entry per token",
                          key, array->size(), n_tokens));
    return std::nullopt;
  }
  if (array->size() > n_tokens) {
    out.warning("tokenizer.length_mismatch", kv->key, kv->offset,
                fmt::format("{} has {} entries for {} tokens; llama.cpp ignores the extra entries, but they "
                            "suggest the tokens and {} come from different vocabularies",
                            key, array->size(), n_tokens, key));
  }
  return array;
}

// Scores are compared (llama-vocab.cpp: the SentencePiece merges' priority queue orders them with
// `<`, the Unigram search adds them up): NaN breaks the ordering, an infinity swamps every sum.
void check_scores(const KeyValue& kv, const ArrayView& scores, Findings& out) {
  if (scores.element_type() != ValueType::Float32) return;
  uint64_t nan = 0, inf = 0;
  std::optional<uint64_t> first_nan, first_inf;
  for (uint64_t i = 0; i < scores.size(); ++i) {
    const float v = *scores.get<float>(i);
    if (std::isnan(v)) {
      if (!first_nan) first_nan = i;
      ++nan;
    } else if (std::isinf(v)) {
      if (!first_inf) first_inf = i;
      ++inf;
    }
  }
  if (nan != 0) {
    out.error("tokenizer.nan_score", kv.key, kv.offset,
              fmt::format("{} score(s) are NaN (the first of token {}): llama.cpp's SentencePiece tokenizer orders "
                          "its merges by score, and NaN breaks that order (undefined behaviour); convert the model "
                          "again from its tokenizer",
                          nan, *first_nan));
  }
  if (inf != 0) {
    out.warning("tokenizer.infinite_score", kv.key, kv.offset,
                fmt::format("{} score(s) are infinite (the first of token {}): a score is a log probability, and an "
                            "infinite one decides every tokenization it takes part in; convert the model again from "
                            "its tokenizer",
                            inf, *first_inf));
  }
}

// The first id of each token text: an open-addressing table of 8-byte slots (id and 32 bits of
// the hash) over the texts by id, both sized once for the whole vocabulary.
class TextIndex {
 public:
  explicit TextIndex(uint64_t n_tokens)
      : slots_(std::bit_ceil(static_cast<size_t>(n_tokens) + static_cast<size_t>(n_tokens) / 2 + 1)) {
    texts_.reserve(static_cast<size_t>(n_tokens));
  }

  // The id of an earlier token with this text; otherwise records this one and returns nullopt.
  // Ids must be given in increasing order, each once.
  std::optional<uint32_t> insert(std::string_view text, uint32_t id) {
    texts_.resize(size_t{id} + 1);
    texts_[id] = text;
    const size_t hash = std::hash<std::string_view>{}(text);
    const auto tag = static_cast<uint32_t>(hash >> 32);
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.id_plus_one == 0) {
        slot = Slot{id + 1, tag};
        return std::nullopt;
      }
      if (slot.tag == tag && texts_[slot.id_plus_one - 1] == text) return slot.id_plus_one - 1;
    }
  }

 private:
  struct Slot {
    uint32_t id_plus_one = 0;  // 0: empty
    uint32_t tag = 0;
  };
  std::vector<Slot> slots_;
  std::vector<std::string_view> texts_;
};

// One pass over the tokens (and their types): empty tokens, invalid types, malformed byte
// tokens, the byte tokens a SentencePiece vocabulary needs, and duplicates.
void check_token_texts(const ModelUnderCheck& model, const KeyValue& tokens_kv, ArrayView tokens,
                       std::optional<ArrayView> types, std::string_view tokenizer_model, Findings& out) {
  const uint64_t n_tokens = tokens.size();
  uint64_t empty = 0, bad_type = 0, bad_byte = 0;
  std::optional<uint64_t> first_empty, first_bad_type, first_bad_byte;
  int32_t first_bad_type_value = 0;
  std::string_view first_bad_byte_text;
  std::bitset<256> byte_tokens;
  TextIndex first_with_text(n_tokens);
  uint64_t duplicates = 0;
  std::optional<std::pair<uint32_t, uint32_t>> first_duplicate;
  std::string_view first_duplicate_text;

  const std::byte* type_bytes = types ? types->payload().data() : nullptr;
  uint32_t id = 0;
  for (const std::string_view text : tokens.strings()) {
    const int32_t type = type_bytes ? detail::load<int32_t>(type_bytes + size_t{id} * 4) : 1;
    if (text.empty()) {
      if (!first_empty) first_empty = id;
      ++empty;
    } else {
      // llama.cpp maps text -> id and asserts that the map has one entry per token: a duplicate aborts it.
      if (const auto earlier = first_with_text.insert(text, id)) {
        if (!first_duplicate) {
          first_duplicate.emplace(*earlier, id);
          first_duplicate_text = text;
        }
        ++duplicates;
      }
    }
    if (type < 0 || type >= kTokenTypeLimit) {
      if (!first_bad_type) {
        first_bad_type = id;
        first_bad_type_value = type;
      }
      ++bad_type;
    }
    const auto byte = parse_byte_token(text);
    if (byte) byte_tokens.set(*byte);
    if (type == kTokenTypeByte && !byte) {
      if (!first_bad_byte) {
        first_bad_byte = id;
        first_bad_byte_text = text;
      }
      ++bad_byte;
    }
    ++id;
  }

  if (empty != 0) {
    out.warning("tokenizer.empty_token", tokens_kv.key, tokens_kv.offset,
                fmt::format("{} tokens are empty strings (the first is id {}); llama.cpp renames them "
                            "'[EMPTY_<id>]', so they can never be produced from text; check the conversion",
                            empty, *first_empty));
  }
  if (bad_type != 0) {
    out.warning("tokenizer.bad_token_type", keys::kTokenType, offset_of(model, keys::kTokenType),
                fmt::format("{} token types are outside llama_token_type's 0..6 (the first is id {} with type "
                            "{}); llama.cpp treats them as UNDEFINED; write NORMAL (1), CONTROL (3), "
                            "USER_DEFINED (4), UNUSED (5) or BYTE (6)",
                            bad_type, *first_bad_type, first_bad_type_value));
  }
  if (bad_byte != 0) {
    out.error("tokenizer.bad_byte_token", tokens_kv.key, tokens_kv.offset,
              fmt::format("{} tokens of type BYTE are not of the form <0xXX> with upper-case hex digits (the "
                          "first is id {}, {}); llama.cpp decodes byte tokens from that text, so these decode "
                          "to wrong bytes; fix the texts or the types",
                          bad_byte, *first_bad_byte, printable(first_bad_byte_text)));
  }
  if (tokenizer_model == "llama" && byte_tokens.count() != 256) {
    size_t first_missing = 0;
    while (byte_tokens.test(first_missing)) ++first_missing;
    out.warning("tokenizer.missing_byte_tokens", tokens_kv.key, tokens_kv.offset,
                fmt::format("a SentencePiece ('llama') vocabulary with {} of the 256 byte tokens <0x00>..<0xFF> "
                            "(<0x{:02X}> is missing); llama.cpp's byte fallback fails on text containing a "
                            "missing byte; convert the model again with its full vocabulary",
                            byte_tokens.count(), first_missing));
  }

  if (duplicates != 0) {
    out.error("tokenizer.duplicate_token", tokens_kv.key, tokens_kv.offset,
              fmt::format("{} tokens repeat the text of an earlier token (ids {} and {} are both {}); llama.cpp "
                          "aborts while loading the vocabulary (each text must map to one id); give every token "
                          "a distinct text",
                          duplicates, first_duplicate->first, first_duplicate->second,
                          printable(first_duplicate_text)));
  }
}

// The special token ids: uint32, inside the vocabulary.
void check_special_tokens(const ModelUnderCheck& model, uint64_t n_tokens, Findings& out) {
  for (const std::string_view key : kSpecialTokenKeys) {
    const KeyValue* kv = model.find(key);
    if (!kv) continue;
    const auto id = kv->value.get<uint32_t>();
    if (!id) {
      out.error("tokenizer.wrong_type", kv->key, kv->offset,
                fmt::format("{} is a {}; llama.cpp reads token ids as uint32 and refuses the file with any "
                            "other type; write it as uint32",
                            key, value_type_name(kv->value.type())));
      continue;
    }
    if (*id >= n_tokens) {
      out.error("tokenizer.special_token_out_of_range", kv->key, kv->offset,
                fmt::format("{} is {} but the vocabulary has {} tokens (ids 0..{}); llama.cpp ignores it and "
                            "uses its default for the tokenizer instead; set it to the id of the intended token",
                            key, *id, n_tokens, n_tokens == 0 ? 0 : n_tokens - 1));
    }
  }
}

// token_embd.weight and output.weight need exactly one row (ne[1]) per token: llama.cpp
// creates them as {n_embd, n_tokens} and refuses any other shape. Except where it sizes them
// otherwise: the draft models (eagle3, dflash) by their draft vocabulary, qwen3vl's output.
void check_vocab_against_tensors(const ModelUnderCheck& model, uint64_t n_tokens, Findings& out) {
  const auto arch = model.meta().architecture().value_or("");
  if (arch == "eagle3" || arch == "dflash") return;
  for (const std::string_view name : {std::string_view("token_embd.weight"), std::string_view("output.weight")}) {
    if (arch == "qwen3vl" && name == "output.weight") continue;
    const TensorInfo* tensor = model.find_tensor(name);
    if (!tensor || tensor->n_dims < 2 || tensor->ne[1] < 0) continue;
    const auto rows = static_cast<uint64_t>(tensor->ne[1]);
    if (rows == n_tokens) continue;
    if (n_tokens < rows) {
      out.error("tokenizer.vocab_size_mismatch", name, tensor->info_offset,
                fmt::format("the vocabulary has {} tokens but {} has {} rows; llama.cpp needs exactly one row "
                            "per token and refuses the file ('wrong shape'), padding rows included; if the {} "
                            "extra rows are padding, add placeholder tokens for them ('[PAD<id>]' of type "
                            "UNUSED, as convert_hf_to_gguf.py does)",
                            n_tokens, name, rows, rows - n_tokens));
    } else {
      out.error("tokenizer.vocab_size_mismatch", name, tensor->info_offset,
                fmt::format("the vocabulary has {} tokens but {} has only {} rows: {} tokens have no row and "
                            "llama.cpp refuses the file ('wrong shape'); the vocabulary and the weights come "
                            "from different models",
                            n_tokens, name, rows, n_tokens - rows));
    }
  }
  const auto key = model.meta().arch_key("vocab_size");
  const KeyValue* kv = key ? model.find(*key) : nullptr;
  const auto declared = kv ? kv->value.as_uint() : std::nullopt;
  if (declared && *declared != n_tokens) {
    out.warning("tokenizer.vocab_size_mismatch", kv->key, kv->offset,
                fmt::format("{} is {} but the vocabulary has {} tokens; llama.cpp sizes the model by the tokens, "
                            "so one of the two is wrong; make them agree",
                            kv->key, *declared, n_tokens));
  }
}

// The vocabulary: tokens, scores, types, special ids, agreement with the embedding tensors.
void check_vocabulary(const ModelUnderCheck& model, std::string_view tokenizer_model, Findings& out) {
  if (is_vocabless_model(tokenizer_model)) {
    // llama.cpp makes {arch}.vocab_size dummy tokens.
    const auto declared = model.meta().vocab_size();
    if (declared) check_vocab_against_tensors(model, *declared, out);
    return;
  }
  const KeyValue* tokens_kv = model.find(keys::kTokens);
  if (!tokens_kv) {
    out.error("tokenizer.missing_tokens", keys::kTokens, std::nullopt,
              fmt::format("a '{}' tokenizer without tokenizer.ggml.tokens: llama.cpp refuses the file ('cannot "
                          "find tokenizer vocab'); convert the model again with its vocabulary",
                          tokenizer_model));
    return;
  }
  if (!is_string_array(*tokens_kv)) {
    out.error("tokenizer.wrong_type", tokens_kv->key, tokens_kv->offset,
              "tokenizer.ggml.tokens is not an array of strings and llama.cpp refuses the file");
    return;
  }
  const ArrayView tokens = *tokens_kv->value.as_array();
  if (tokens.empty()) {
    out.error("tokenizer.empty_vocabulary", tokens_kv->key, tokens_kv->offset,
              "tokenizer.ggml.tokens is empty: llama.cpp cannot tokenize anything; convert the model again with "
              "its vocabulary");
    return;
  }
  if (const auto scores = check_parallel_array(model, keys::kScores, tokens.size(), /*float_allowed=*/true, out)) {
    check_scores(*model.find(keys::kScores), *scores, out);
  }
  const auto types = check_parallel_array(model, keys::kTokenType, tokens.size(), /*float_allowed=*/false, out);
  check_token_texts(model, *tokens_kv, tokens, types, tokenizer_model, out);
  check_special_tokens(model, tokens.size(), out);
  check_vocab_against_tensors(model, tokens.size(), out);
}

// general.name, finetune or basename naming an instruction-tuned model: a word "instruct...",
// "chat" or "it" (gemma-2-9b-it).
bool looks_instruction_tuned(const ModelUnderCheck& model) {
  for (const std::string_view key : {keys::kName, keys::kFinetune, keys::kBasename}) {
    const auto value = model.meta().string(key);
    if (!value) continue;
    std::string word;
    auto is_instruct_word = [](const std::string& w) { return w.starts_with("instruct") || w == "chat" || w == "it"; };
    for (const char c : *value) {
      if (std::isalnum(static_cast<unsigned char>(c))) {
        word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        continue;
      }
      if (is_instruct_word(word)) return true;
      word.clear();
    }
    if (is_instruct_word(word)) return true;
  }
  return false;
}

// Chat templates are fingerprinted (never rendered or printed); an instruction-tuned model
// without one gets a warning.
void check_chat_templates(const ModelUnderCheck& model, Findings& out) {
  const std::string named_prefix = std::string(keys::kChatTemplate) + ".";
  bool any_template = false;
  for (const KeyValue& kv : model.metadata->metadata()) {
    if (kv.key != keys::kChatTemplate && !kv.key.starts_with(named_prefix)) continue;
    const auto text = kv.value.as_string();
    if (!text) {
      out.warning("tokenizer.bad_chat_template", kv.key, kv.offset,
                  fmt::format("{} is a {}, not a string, so it is no usable chat template; write the template "
                              "text as a string",
                              kv.key, value_type_name(kv.value.type())));
      continue;
    }
    any_template = true;
    out.info("tokenizer.chat_template", kv.key, kv.offset,
             fmt::format("chat template of {} bytes, SHA-256 {}; compare the hash with the template of the "
                         "original model to be sure it is the intended one",
                         text->size(), digest::sha256_hex(*text)));
  }
  if (!any_template && looks_instruction_tuned(model)) {
    out.warning("tokenizer.missing_chat_template", keys::kChatTemplate, std::nullopt,
                "the model's name says it is instruction-tuned but the file has no tokenizer.chat_template; "
                "chat front ends fall back to a generic template that may not match its training; add the "
                "template from the original tokenizer_config.json");
  }
}

}  // namespace

void check_tokenizer(const ModelUnderCheck& model, Findings& out) {
  if (!expects_tokenizer(model)) return;
  const auto tokenizer_model = check_model_name(model, out);
  if (tokenizer_model) {
    const auto pre = check_pre_tokenizer(model, *tokenizer_model, out);
    if (is_bpe_model(*tokenizer_model)) check_merges(model, *tokenizer_model, pre, out);
    check_vocabulary(model, *tokenizer_model, out);
  }
  check_chat_templates(model, out);
}

}  // namespace ggufkit::check
