// tokenizer.ggml.pre by llama.cpp's check hash (pre_tokenizer.h). What is reproduced, and how:
//   - the pre-tokenizer: recognised by its exact JSON structure and regexes (kCheckShapes); chktxt
//     pre-tokenized by it is generated data (kCheckWords), computed by Hugging Face's own regexes
//     in scripts/gen-pre-tokenizer-table.py. The normalizers accepted leave chktxt as it is (none,
//     an empty Sequence, NFC: chktxt is in NFC).
//   - added tokens (tokenizers' AddedVocabulary): those whose text occurs in chktxt are cut out of
//     it first; the generated data has the cut for the sets real vocabularies have (GPT-NeoX's
//     whitespace tokens), any other set is refused.
//   - BPE (tokenizers' models/bpe): a word found whole in the vocabulary is one token when the model
//     has ignore_merges; otherwise from its characters the adjacent pair of lowest merge rank
//     (leftmost first) is merged until no pair has a rank. Of a merge listed twice, the later rank
//     counts (tokenizers builds its merge map with the later entry over the earlier).
//   - what encode() adds (add_special_tokens=True): transformers' Llama, CodeLlama, Gemma, Cohere
//     and GPT-NeoX fast tokenizers rebuild the post-processor from tokenizer_config.json
//     (update_post_processor: BOS and EOS by add_bos_token/add_eos_token and their defaults); every
//     other class encodes with tokenizer.json's post_processor as it is. The class is
//     tokenizer_config.json's tokenizer_class, else config.json's, else AutoTokenizer's by
//     config.json's model_type (TOKENIZER_MAPPING_NAMES of transformers 4.57, the version llama.cpp
//     pins, for the model types whose class rebuilds it). special_tokens_map.json is not read.
#include "convert/pre_tokenizer.h"

#include <algorithm>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "hash/digest.h"

namespace ggufkit::convert_detail {

namespace {

using json = nlohmann::json;

enum class ShapeKind : uint8_t {
  byte_level,         // a lone ByteLevel with its own (GPT-2's) regex
  digits_byte_level,  // Digits (individual_digits), then ByteLevel with its regex
  splits,             // the Splits (regexes in order), then ByteLevel without regex
};
struct CheckShape {
  std::string_view name;
  ShapeKind kind;
  std::span<const std::string_view> splits;
};
struct CheckItem {
  bool added;             // an added token's text, else a byte-level word
  std::string_view text;  // UTF-8
};
struct CheckWords {
  std::string_view shape;
  std::span<const std::string_view> added;  // the added tokens cut out of chktxt, sorted
  std::span<const CheckItem> items;
};
struct KnownHash {
  std::string_view chkhsh, name;
};

#include "convert/pre_tokenizer.inc"

constexpr std::string_view kTokenizerJson = "tokenizer.json";
constexpr std::string_view kTokenizerConfig = "tokenizer_config.json";
constexpr std::string_view kShapesKnown =
    "llama.cpp's converter names it by the token ids of a check text, computed here for GPT-2's ByteLevel, Digits then "
    "ByteLevel, and a Split on the regex of llama 3, Qwen2, GPT-4o (o200k), Tekken or DeepSeek-V3 then ByteLevel";

Error check_error(ErrorCode code, std::string_view file, std::string message) {
  return with_file(make_error(code, std::nullopt, std::string(file), std::move(message)), std::string(file));
}
Error shape_error(const std::string& reason) {
  return check_error(ErrorCode::invalid_argument, kTokenizerJson,
                     fmt::format("BPE pre-tokenizer not recognised: {} ({})", reason, kShapesKnown));
}

// obj[key] when obj is an object that has it.
const json* field(const json* obj, std::string_view key) {
  if (obj == nullptr || !obj->is_object()) return nullptr;
  const auto it = obj->find(key);
  return it == obj->end() ? nullptr : &*it;
}
std::string_view type_of(const json* obj) {
  const json* t = field(obj, "type");
  return t != nullptr && t->is_string() ? std::string_view(t->get_ref<const std::string&>()) : std::string_view();
}
// Python's truth of a JSON value (absent: false).
bool python_true(const json* v) {
  if (v == nullptr || v->is_null()) return false;
  if (v->is_boolean() || v->is_number()) return v->is_boolean() ? v->get<bool>() : v->get<double>() != 0.0;
  return v->is_string() ? !v->get_ref<const std::string&>().empty() : !v->empty();
}
// A JSON value that is absent, null, or "" (an unset string option).
bool unset(const json* v) { return v == nullptr || v->is_null() || (v->is_string() && v->get_ref<const std::string&>().empty()); }
std::string json_quoted(std::string_view text) { return json(std::string(text)).dump(); }

// ---- the shape ----

// ByteLevel with add_prefix_space false or absent and use_regex as wanted (absent: true).
bool is_byte_level(const json& step, bool use_regex) {
  if (type_of(&step) != "ByteLevel" || python_true(field(&step, "add_prefix_space"))) return false;
  const json* rx = field(&step, "use_regex");
  return (rx == nullptr || python_true(rx)) == use_regex;
}

// A Split on a regex, Isolated (HF-converted files) or Removed and inverted (Xenova's): the same
// pieces for these regexes, which match every character.
std::optional<std::string_view> split_regex(const json& step) {
  if (type_of(&step) != "Split") return std::nullopt;
  const json* behavior = field(&step, "behavior");
  const bool invert = python_true(field(&step, "invert"));
  if (behavior == nullptr || !(*behavior == (invert ? "Removed" : "Isolated"))) return std::nullopt;
  const json* regex = field(field(&step, "pattern"), "Regex");
  if (regex == nullptr || !regex->is_string()) return std::nullopt;
  return std::string_view(regex->get_ref<const std::string&>());
}

Expected<const CheckShape*> recognise_shape(const json& tokenizer) {
  const json* normalizer = field(&tokenizer, "normalizer");
  const bool empty_sequence = type_of(normalizer) == "Sequence" && !python_true(field(normalizer, "normalizers"));
  if (!unset(normalizer) && !empty_sequence && type_of(normalizer) != "NFC") {
    return shape_error(fmt::format("its normalizer ({}) may change the check text", normalizer->dump()));
  }
  const json* model = field(&tokenizer, "model");
  for (const char* option : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!unset(field(model, option))) return shape_error(fmt::format("model.{} is set", option));
  }
  if (python_true(field(model, "byte_fallback"))) return shape_error("model.byte_fallback is set");

  const json* pre = field(&tokenizer, "pre_tokenizer");
  const auto shape = [](ShapeKind kind, std::span<const std::string_view> splits = {}) -> const CheckShape* {
    for (const CheckShape& s : kCheckShapes) {
      if (s.kind == kind && std::ranges::equal(s.splits, splits)) return &s;
    }
    return nullptr;
  };
  const CheckShape* found = nullptr;
  if (pre != nullptr && is_byte_level(*pre, true)) found = shape(ShapeKind::byte_level);
  const json* steps = type_of(pre) == "Sequence" ? field(pre, "pretokenizers") : nullptr;
  if (steps != nullptr && steps->is_array() && steps->size() >= 2) {
    const json& first = steps->front();
    if (steps->size() == 2 && type_of(&first) == "Digits" && field(&first, "individual_digits") != nullptr &&
        *field(&first, "individual_digits") == true && is_byte_level(steps->back(), true)) {
      found = shape(ShapeKind::digits_byte_level);
    } else if (is_byte_level(steps->back(), false)) {
      std::vector<std::string_view> regexes;
      for (size_t i = 0; i + 1 < steps->size(); ++i) {
        if (const auto regex = split_regex((*steps)[i])) regexes.push_back(*regex);
      }
      if (regexes.size() + 1 == steps->size()) found = shape(ShapeKind::splits, regexes);
    }
  }
  if (found == nullptr) {
    return shape_error(pre == nullptr ? "there is no pre_tokenizer" : "its pre_tokenizer is another");
  }
  return found;
}

// The pre-tokenized chktxt for the shape and the added tokens found in chktxt.
Expected<const CheckWords*> check_words(const CheckShape& shape, const json& tokenizer) {
  static const json kNone = json::array();
  const json* list = field(&tokenizer, "added_tokens");
  std::vector<std::string_view> added;
  for (const json& token : list != nullptr && list->is_array() ? *list : kNone) {
    const json* content = field(&token, "content");
    if (content == nullptr || !content->is_string() || content->get_ref<const std::string&>().empty()) continue;
    const std::string& text = content->get_ref<const std::string&>();
    if (kCheckText.find(text) == std::string_view::npos) continue;
    for (const char* option : {"lstrip", "rstrip", "single_word"}) {
      if (python_true(field(&token, option))) {
        return check_error(ErrorCode::invalid_argument, kTokenizerJson,
                           fmt::format("BPE pre-tokenizer not recognised: the added token {}, which occurs in llama.cpp's "
                                       "check text, has {}, which the check is not computed for here",
                                       json_quoted(text), option));
      }
    }
    added.push_back(text);
  }
  std::ranges::sort(added);
  added.erase(std::unique(added.begin(), added.end()), added.end());
  for (const CheckWords& w : kCheckWords) {
    if (w.shape == shape.name && std::ranges::equal(w.added, added)) return &w;
  }
  std::string names;
  for (const std::string_view a : added) names += (names.empty() ? "" : ", ") + json_quoted(a);
  return check_error(ErrorCode::invalid_argument, kTokenizerJson,
                     fmt::format("BPE pre-tokenizer not recognised: the added tokens {} occur in llama.cpp's check text, "
                                 "which is not pre-tokenized around them here for the {} pre-tokenizer",
                                 names, shape.name));
}

// ---- BPE ----

// The UTF-8 characters of a word: the byte-level symbols BPE starts from.
std::vector<std::string_view> characters(std::string_view word) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < word.size();) {
    const auto lead = static_cast<unsigned char>(word[i]);
    const size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    out.push_back(word.substr(i, std::min(n, word.size() - i)));
    i += n;
  }
  return out;
}

struct PairHash {
  size_t operator()(const std::pair<std::string_view, std::string_view>& p) const {
    const std::hash<std::string_view> h;
    return h(p.first) * 1000003u ^ h(p.second);
  }
};
using MergeRanks = std::unordered_map<std::pair<std::string_view, std::string_view>, uint32_t, PairHash>;

// The ranks of the merges that can apply to the words: both sides must be pieces of a word (a
// merge joins two adjacent symbols, each a run of a word's characters), which leaves a few
// thousand of a vocabulary's hundreds of thousands. Views into the parser's DOM.
Expected<MergeRanks> merge_ranks(const std::optional<simdjson::dom::element>& merges, const CheckWords& words) {
  std::unordered_set<std::string_view> pieces;
  for (const CheckItem& item : words.items) {
    if (item.added) continue;
    const std::vector<std::string_view> chars = characters(item.text);
    for (size_t begin = 0, offset = 0; begin < chars.size(); offset += chars[begin++].size()) {
      size_t length = 0;
      for (size_t end = begin; end < chars.size(); ++end) pieces.insert(item.text.substr(offset, length += chars[end].size()));
    }
  }
  MergeRanks ranks;
  if (!merges || !merges->is_array()) return ranks;
  const simdjson::dom::array list(*merges);
  const bool pairs = list.size() > 0 && list.at(0).value_unsafe().is_array();
  uint32_t rank = 0;
  for (const simdjson::dom::element m : list) {
    std::string_view a, b;
    if (!pairs && m.is_string()) {
      const std::string_view text(m);
      const size_t space = text.find(' ');
      if (space != std::string_view::npos) a = text.substr(0, space), b = text.substr(space + 1);
    } else if (pairs && m.is_array() && simdjson::dom::array(m).size() == 2) {
      const simdjson::dom::array pair(m);
      if (pair.at(0).value_unsafe().is_string() && pair.at(1).value_unsafe().is_string()) {
        a = std::string_view(pair.at(0).value_unsafe()), b = std::string_view(pair.at(1).value_unsafe());
      }
    }
    if (a.empty() || b.empty()) {
      return check_error(ErrorCode::bad_header, kTokenizerJson,
                         fmt::format("model.merges[{}] is not two tokens (\"a b\", or [\"a\", \"b\"] throughout)", rank));
    }
    if (pieces.contains(a) && pieces.contains(b)) ranks.insert_or_assign(std::pair{a, b}, rank);
    ++rank;
  }
  return ranks;
}

// The model options the check follows.
struct BpeOptions {
  bool ignore_merges = false;
  std::optional<std::string_view> unk_token;  // model.unk_token
  bool fuse_unk = false;
};

Expected<void> bpe(std::string_view word, const MergeRanks& ranks, const BpeOptions& options,
                   const PreTokenizerSource& source, std::vector<uint64_t>& ids) {
  if (options.ignore_merges) {
    if (const auto id = source.token_id(word)) {
      ids.push_back(*id);
      return {};
    }
  }
  // A character without a token is left out, or is the unknown token (one for a run of them with
  // fuse_unk), which we never merge (a merge with it in a vocabulary that needs it is not modelled).
  struct Symbol {
    std::string_view text;
    bool unknown = false;
  };
  std::vector<Symbol> symbols;
  for (const std::string_view c : characters(word)) {
    if (source.token_id(c)) {
      symbols.push_back({c});
    } else if (options.unk_token && !(options.fuse_unk && !symbols.empty() && symbols.back().unknown)) {
      symbols.push_back({*options.unk_token, true});
    }
  }
  std::deque<std::string> joined;  // merged symbols whose characters are not adjacent in the word
  while (symbols.size() > 1) {
    size_t best = symbols.size();
    uint32_t best_rank = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      if (symbols[i].unknown || symbols[i + 1].unknown) continue;
      const auto it = ranks.find({symbols[i].text, symbols[i + 1].text});
      if (it != ranks.end() && (best == symbols.size() || it->second < best_rank)) best = i, best_rank = it->second;
    }
    if (best == symbols.size()) break;
    const std::string_view a = symbols[best].text, b = symbols[best + 1].text;
    symbols[best].text = a.data() + a.size() == b.data() ? std::string_view(a.data(), a.size() + b.size())
                                                        : std::string_view(joined.emplace_back(std::string(a) + std::string(b)));
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  for (const Symbol& s : symbols) {
    const auto id = source.token_id(s.text);
    if (!id) {
      return check_error(ErrorCode::invalid_argument, kTokenizerJson,
                         fmt::format("BPE pre-tokenizer not recognised: llama.cpp's check text needs the token {}, "
                                     "which is not in the vocabulary",
                                     json_quoted(s.text)));
    }
    ids.push_back(*id);
  }
  return {};
}

// ---- what transformers' encode() adds ----

struct Specials {
  std::vector<uint64_t> prefix, suffix;
};

// A fast tokenizer class that rebuilds the post-processor (update_post_processor), with its
// __init__ defaults.
struct RebuildingClass {
  std::string_view name;  // without "Fast"
  bool add_bos, add_eos;
  std::string_view bos, eos;
};
constexpr RebuildingClass kRebuildingClasses[] = {
    {"LlamaTokenizer", true, false, "<s>", "</s>"},
    {"CodeLlamaTokenizer", true, false, "<s>", "</s>"},
    {"GemmaTokenizer", true, false, "<bos>", "<eos>"},
    {"CohereTokenizer", true, false, "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"},
    {"GPTNeoXTokenizer", false, false, "<|endoftext|>", "<|endoftext|>"},
};
// AutoTokenizer's class by config.json's model_type, for the model types whose fast class is one
// of the above (transformers' TOKENIZER_MAPPING_NAMES).
constexpr std::pair<std::string_view, std::string_view> kModelTypeClasses[] = {
    {"arcee", "LlamaTokenizer"},         {"aria", "LlamaTokenizer"},           {"chameleon", "LlamaTokenizer"},
    {"deepseek_v3", "LlamaTokenizer"},   {"diffllama", "LlamaTokenizer"},      {"idefics", "LlamaTokenizer"},
    {"idefics2", "LlamaTokenizer"},      {"idefics3", "LlamaTokenizer"},       {"jamba", "LlamaTokenizer"},
    {"janus", "LlamaTokenizer"},         {"jetmoe", "LlamaTokenizer"},         {"llama", "LlamaTokenizer"},
    {"llama4", "LlamaTokenizer"},        {"llama4_text", "LlamaTokenizer"},    {"llava", "LlamaTokenizer"},
    {"llava_next", "LlamaTokenizer"},    {"llava_onevision", "LlamaTokenizer"}, {"mistral", "LlamaTokenizer"},
    {"mixtral", "LlamaTokenizer"},       {"mllama", "LlamaTokenizer"},         {"paligemma", "LlamaTokenizer"},
    {"persimmon", "LlamaTokenizer"},     {"phi3", "LlamaTokenizer"},           {"phimoe", "LlamaTokenizer"},
    {"zamba", "LlamaTokenizer"},         {"zamba2", "LlamaTokenizer"},         {"code_llama", "CodeLlamaTokenizer"},
    {"gemma", "GemmaTokenizer"},         {"gemma2", "GemmaTokenizer"},         {"gemma3", "GemmaTokenizer"},
    {"gemma3_text", "GemmaTokenizer"},   {"gemma3n", "GemmaTokenizer"},        {"gemma3n_text", "GemmaTokenizer"},
    {"recurrent_gemma", "GemmaTokenizer"}, {"aya_vision", "CohereTokenizer"}, {"cohere", "CohereTokenizer"},
    {"cohere2", "CohereTokenizer"},      {"falcon_mamba", "GPTNeoXTokenizer"}, {"gpt_neox", "GPTNeoXTokenizer"},
    {"mamba", "GPTNeoXTokenizer"},       {"mamba2", "GPTNeoXTokenizer"},       {"mpt", "GPTNeoXTokenizer"},
    {"olmo", "GPTNeoXTokenizer"},        {"olmo2", "GPTNeoXTokenizer"},        {"olmoe", "GPTNeoXTokenizer"},
    {"rwkv", "GPTNeoXTokenizer"},        {"stablelm", "GPTNeoXTokenizer"},
};

// The tokenizer class AutoTokenizer loads, "Fast" left out.
std::string_view tokenizer_class(const PreTokenizerSource& source) {
  for (const json* config : {source.tokenizer_config, source.model_config}) {
    if (const json* c = field(config, "tokenizer_class"); c != nullptr && c->is_string()) {
      std::string_view name = c->get_ref<const std::string&>();
      if (name.ends_with("Fast")) name.remove_suffix(4);
      return name;
    }
  }
  if (const json* type = field(source.model_config, "model_type"); type != nullptr && type->is_string()) {
    for (const auto& [model_type, name] : kModelTypeClasses) {
      if (model_type == type->get_ref<const std::string&>()) return name;
    }
  }
  return {};
}

// update_post_processor of the class: BOS/EOS by tokenizer_config.json, else the class's defaults.
Expected<Specials> rebuilt_specials(const PreTokenizerSource& source, const RebuildingClass& cls) {
  const json* config = source.tokenizer_config;
  if (const json* prefix = field(config, "add_prefix_space");
      cls.name == "LlamaTokenizer" && prefix != nullptr && !prefix->is_null()) {
    return check_error(ErrorCode::invalid_argument, kTokenizerConfig,
                       "add_prefix_space is set for LlamaTokenizerFast, which makes transformers rebuild the tokenizer "
                       "from the slow SentencePiece one; not supported");
  }
  Specials out;
  for (const bool bos : {true, false}) {
    const std::string role = bos ? "bos" : "eos";
    const json* add = field(config, "add_" + role + "_token");
    if (!(add != nullptr ? python_true(add) : bos ? cls.add_bos : cls.add_eos)) continue;
    std::string_view token = bos ? cls.bos : cls.eos;
    if (const json* t = field(config, role + "_token")) {
      const json* content = t->is_object() ? field(t, "content") : t;
      if (content == nullptr || !content->is_string()) {
        return check_error(ErrorCode::invalid_argument, kTokenizerConfig,
                           fmt::format("transformers' {}Fast adds the {} token, but {}_token is not a token (transformers "
                                       "refuses this)",
                                       cls.name, role, role));
      }
      token = content->get_ref<const std::string&>();
    }
    const auto id = source.token_id(token);
    if (!id) {
      return check_error(ErrorCode::invalid_argument, kTokenizerConfig,
                         fmt::format("BPE pre-tokenizer not recognised: the {} token {}, which transformers' {}Fast adds "
                                     "to llama.cpp's check text, is not in the vocabulary",
                                     role, json_quoted(token), cls.name));
    }
    (bos ? out.prefix : out.suffix).push_back(*id);
  }
  return out;
}

// What tokenizer.json's post_processor adds to a single sequence.
Expected<Specials> post_processor_specials(const json* processor) {
  const auto malformed = [](std::string_view what) {
    return check_error(ErrorCode::bad_header, kTokenizerJson, fmt::format("post_processor: {}", what));
  };
  Specials out;
  const std::string_view type = type_of(processor);
  if (unset(processor) || type == "ByteLevel") return out;
  if (type == "Sequence") {
    const json* list = field(processor, "processors");
    if (list == nullptr || !list->is_array()) return malformed("a Sequence without a list of processors");
    for (const json& p : *list) {  // each one wraps what the ones before it made
      auto inner = post_processor_specials(&p);
      if (!inner) return inner;
      out.prefix.insert(out.prefix.begin(), inner->prefix.begin(), inner->prefix.end());
      out.suffix.insert(out.suffix.end(), inner->suffix.begin(), inner->suffix.end());
    }
    return out;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    const json* cls = field(processor, "cls");
    const json* sep = field(processor, "sep");
    const auto id_of = [](const json* pair) {
      return pair != nullptr && pair->is_array() && pair->size() == 2 && (*pair)[1].is_number_unsigned();
    };
    if (!id_of(cls) || !id_of(sep)) return malformed(fmt::format("{}'s cls and sep are not [token, id]", type));
    out.prefix.push_back((*cls)[1].get<uint64_t>());
    out.suffix.push_back((*sep)[1].get<uint64_t>());
    return out;
  }
  if (type != "TemplateProcessing") {
    return check_error(ErrorCode::invalid_argument, kTokenizerJson,
                       fmt::format("BPE pre-tokenizer not recognised: its post_processor {} is not one the check is "
                                   "computed for here (TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel)",
                                   type));
  }
  const json* single = field(processor, "single");
  if (single == nullptr || !single->is_array()) return malformed("TemplateProcessing without a single template");
  bool after_sequence = false;
  for (const json& piece : *single) {
    if (field(&piece, "Sequence") != nullptr) {
      after_sequence = true;
      continue;
    }
    const json* name = field(field(&piece, "SpecialToken"), "id");
    const json* ids = name != nullptr && name->is_string()
                          ? field(field(field(processor, "special_tokens"), name->get_ref<const std::string&>()), "ids")
                          : nullptr;
    if (ids == nullptr || !ids->is_array()) return malformed("a special token of the single template has no ids");
    for (const json& id : *ids) {
      if (!id.is_number_unsigned()) return malformed("a special token id is not a non-negative integer");
      (after_sequence ? out.suffix : out.prefix).push_back(id.get<uint64_t>());
    }
  }
  return out;
}

Expected<Specials> transformers_specials(const PreTokenizerSource& source) {
  const std::string_view name = tokenizer_class(source);
  for (const RebuildingClass& cls : kRebuildingClasses) {
    if (cls.name == name) return rebuilt_specials(source, cls);
  }
  return post_processor_specials(field(&source.tokenizer, "post_processor"));
}

}  // namespace

Expected<std::vector<uint64_t>> check_text_ids(const PreTokenizerSource& source) {
  auto shape = recognise_shape(source.tokenizer);
  if (!shape) return std::move(shape).error();
  if ((*shape)->kind == ShapeKind::byte_level && python_true(field(source.tokenizer_config, "add_prefix_space"))) {
    // transformers sets a lone ByteLevel pre-tokenizer's add_prefix_space from it.
    return check_error(ErrorCode::invalid_argument, kTokenizerConfig,
                       "BPE pre-tokenizer not recognised: add_prefix_space puts a space before the text, which the check "
                       "is not computed for here");
  }
  auto words = check_words(**shape, source.tokenizer);
  if (!words) return std::move(words).error();
  auto ranks = merge_ranks(source.merges, **words);
  if (!ranks) return std::move(ranks).error();
  auto specials = transformers_specials(source);
  if (!specials) return std::move(specials).error();

  const json* model = field(&source.tokenizer, "model");
  BpeOptions options;
  options.ignore_merges = python_true(field(model, "ignore_merges"));
  options.fuse_unk = python_true(field(model, "fuse_unk"));
  if (const json* unk = field(model, "unk_token"); unk != nullptr && unk->is_string()) {
    options.unk_token = unk->get_ref<const std::string&>();
  }
  std::vector<uint64_t> ids = std::move(specials->prefix);
  for (const CheckItem& item : (*words)->items) {
    if (item.added) {
      ids.push_back(source.token_id(item.text).value_or(0));  // an added token's text: in get_vocab()
    } else if (auto ok = bpe(item.text, *ranks, options, source, ids); !ok) {
      return std::move(ok).error();
    }
  }
  ids.insert(ids.end(), specials->suffix.begin(), specials->suffix.end());
  return ids;
}

std::string check_hash(std::span<const uint64_t> ids) {
  std::string text = "[";
  for (size_t i = 0; i < ids.size(); ++i) fmt::format_to(std::back_inserter(text), "{}{}", i == 0 ? "" : ", ", ids[i]);
  text += "]";
  return digest::sha256_hex(text);
}

std::optional<std::string_view> llama_cpp_pre_name(std::string_view chkhsh) {
  const auto it = std::ranges::lower_bound(kKnownHashes, chkhsh, {}, &KnownHash::chkhsh);
  if (it == std::end(kKnownHashes) || it->chkhsh != chkhsh) return std::nullopt;
  return it->name;
}

Expected<std::string> llama_cpp_pre_tokenizer(const PreTokenizerSource& source) {
  auto ids = check_text_ids(source);
  if (!ids) return std::move(ids).error();
  const std::string chkhsh = check_hash(*ids);
  if (const auto name = llama_cpp_pre_name(chkhsh)) return std::string(*name);
  return check_error(ErrorCode::invalid_argument, kTokenizerJson,
                     fmt::format("BPE pre-tokenizer not recognised: chkhsh {} is not in llama.cpp's table "
                                 "(conversion/base.py, get_vocab_base_pre), so llama.cpp's converter does not know "
                                 "this pre-tokenizer either",
                                 chkhsh));
}

}  // namespace ggufkit::convert_detail
