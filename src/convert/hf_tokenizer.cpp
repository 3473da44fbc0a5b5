// Hugging Face tokenizer files to GGUF tokenizer metadata, as llama.cpp's convert_hf_to_gguf.py
// writes them (conversion/base.py, conversion/llama.py, conversion/qwen.py, gguf-py/gguf/vocab.py
// of llama.cpp at the version cloned for this project).
//
// Which path llama.cpp takes:
//   - the model family comes from config.json's architectures[0]: Qwen2*/Qwen3* models only ever
//     use the GPT-2 BPE path (Qwen2Model.set_vocab, no tokenizer.model); everything else is
//     treated as LlamaModel.set_vocab;
//   - LlamaModel: tokenizer_config.json's add_prefix_space (when set) first; then
//     _set_vocab_sentencepiece when there is a tokenizer.model (sentencepiece_vocab), then
//     _set_vocab_llama_hf (LlamaHfVocab) when tokenizer.json's model is
//     BPE with byte_fallback and a Sequence decoder (llama 2 as tokenizer.json represents it),
//     else the GPT-2 BPE path (_set_vocab_gpt2, llama 3).
//
// Where we cannot do what llama.cpp does, because it runs Hugging Face's tokenizer:
//   - tokenizer.ggml.pre: llama.cpp hashes the token ids Hugging Face's tokenizer gives for a
//     fixed text. We compute the same ids without it (pre_tokenizer.h) for the pre-tokenizers we
//     know, and look the hash up in llama.cpp's table; another pre-tokenizer, or a hash the table
//     does not have, is refused (as llama.cpp refuses a hash it does not know).
//   - added tokens that are not "normalized": llama.cpp replaces their text by
//     decode(encode(text)); we keep the text (it is the identity for the special tokens of the
//     models we test).
//   - LlamaHfVocab's special ids (all_special_ids): the ids of tokenizer_config.json's
//     {bos,eos,unk,sep,pad,cls,mask}_token and additional_special_tokens.
#include "ggufkit/hf_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <deque>
#include <memory>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "convert/checkpoint_files.h"
#include "convert/family.h"
#include "convert/pre_tokenizer.h"
#include "ggufkit/sentencepiece.h"

namespace ggufkit {

namespace {

namespace fs = std::filesystem;
// std::map objects: ordered_json inserts in linear time, quadratic for a 150k-token vocabulary.
using json = nlohmann::json;

// The largest vocabulary a SentencePiece model is padded to (config.json's vocab_size): real ones
// are at most 262k; this bounds what a hostile config.json can make us allocate.
constexpr uint64_t kMaxSentencePieceVocab = uint64_t{1} << 24;

// gguf.TokenType
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

Error tokenizer_error(ErrorCode code, const fs::path& file, std::string message) {
  // The file is the subject (and the error's file); the message does not repeat it.
  return with_file(make_error(code, std::nullopt, file.filename().string(), std::move(message)), file.filename().string());
}

// Reads and parses a JSON file; nullopt when the file does not exist.
// Every file it reads is directly in the checkpoint directory (read as checkpoint_files.h says).
Expected<std::optional<json>> load_json(const fs::path& file) {
  auto text = convert_detail::read_checkpoint_text(file.parent_path(), file.filename());
  if (!text) return std::move(text).error();
  if (!*text) return std::optional<json>{};
  try {
    return std::optional<json>(json::parse(**text));
  } catch (const json::exception& e) {
    std::string what = e.what();
    if (const size_t at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    return tokenizer_error(ErrorCode::bad_header, file, "not valid JSON: " + what);
  }
}

// tokenizer.json, parsed with simdjson (a 128k-token vocabulary is 9 MB of JSON): model.vocab and
// model.merges, the large parts, are read straight from simdjson's DOM, which `parser` owns; the
// rest, small, is a nlohmann value for the code that follows the converter's dict lookups.
struct TokenizerJson {
  std::unique_ptr<simdjson::dom::parser> parser;
  json rest;
  std::optional<simdjson::dom::element> vocab, merges;  // model.vocab, model.merges when present
};

// The fields of a tokenizer.json (the tokenizers library's TokenizerImpl): the root's others are
// not read, and not copied (a hostile file's megabytes of junk cost only simdjson's parse).
bool is_tokenizer_field(std::string_view key) {
  for (const std::string_view k : {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                                   "post_processor", "decoder", "model"}) {
    if (key == k) return true;
  }
  return false;
}

// A simdjson value as nlohmann parses it: non-negative integers unsigned, a repeated key's last
// value kept; model.vocab and model.merges left out (`depth` 1 is the root's "model"), and the
// root's fields other than a tokenizer's.
json to_nlohmann(simdjson::dom::element e, int depth = 0) {
  using simdjson::dom::element_type;
  switch (e.type()) {
    case element_type::ARRAY: {
      json out = json::array();
      for (simdjson::dom::element item : simdjson::dom::array(e)) out.push_back(to_nlohmann(item, depth + 1));
      return out;
    }
    case element_type::OBJECT: {
      json out = json::object();
      for (simdjson::dom::key_value_pair field : simdjson::dom::object(e)) {
        if (depth == 1 && (field.key == "vocab" || field.key == "merges")) continue;
        if (depth == 0 && !is_tokenizer_field(field.key)) continue;
        const bool model = depth == 0 && field.key == "model";
        out[std::string(field.key)] = to_nlohmann(field.value, model ? 1 : 2);
      }
      return out;
    }
    case element_type::INT64: {
      const int64_t v = int64_t(e);
      return v >= 0 ? json(static_cast<uint64_t>(v)) : json(v);
    }
    case element_type::UINT64: return json(uint64_t(e));
    case element_type::DOUBLE: return json(double(e));
    case element_type::STRING: return json(std::string(std::string_view(e)));
    case element_type::BOOL: return json(bool(e));
    case element_type::NULL_VALUE: return json(nullptr);
  }
  return json(nullptr);
}

// Reads and parses tokenizer.json; nullopt when the file does not exist.
Expected<std::optional<TokenizerJson>> load_tokenizer_json(const fs::path& file) {
  auto text = convert_detail::read_checkpoint_text(file.parent_path(), file.filename());
  if (!text) return std::move(text).error();
  if (!*text) return std::optional<TokenizerJson>{};
  TokenizerJson t;
  t.parser = std::make_unique<simdjson::dom::parser>();
  simdjson::dom::element root;
  if (const auto error = t.parser->parse(**text).get(root); error != simdjson::SUCCESS) {
    return tokenizer_error(ErrorCode::bad_header, file, std::string("not valid JSON: ") + simdjson::error_message(error));
  }
  t.rest = to_nlohmann(root);
  simdjson::dom::element model;
  if (root.is_object() && root["model"].get(model) == simdjson::SUCCESS && model.is_object()) {
    simdjson::dom::element value;
    if (model["vocab"].get(value) == simdjson::SUCCESS) t.vocab = value;
    if (model["merges"].get(value) == simdjson::SUCCESS) t.merges = value;
  }
  return std::optional<TokenizerJson>(std::move(t));
}

// Python's truthiness of a JSON value, as the converter tests `if value:`.
bool truthy(const json* v) {
  if (v == nullptr || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_string()) return !v->get_ref<const std::string&>().empty();
  if (v->is_array() || v->is_object()) return !v->empty();
  if (v->is_number_integer() || v->is_number_unsigned()) return v->get<int64_t>() != 0;
  if (v->is_number_float()) return v->get<double>() != 0.0;
  return true;
}

// obj.get(key) for an object, nullptr when absent or when obj is not an object.
const json* member(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::optional<std::string> string_member(const json& obj, std::string_view key) {
  const json* v = member(obj, key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

// obj.get(a, {}).get(b): the nested value, nullptr when any level is missing.
const json* nested(const json& obj, std::string_view a, std::string_view b) {
  const json* outer = member(obj, a);
  return outer == nullptr ? nullptr : member(*outer, b);
}

bool looks_special(std::string_view text) {
  // BaseModel.does_token_look_special
  if (text == "<pad>" || text == "<mask>" || text == "<2mass>" || text == "[@BOS@]") return true;
  auto starts = [&](std::string_view p) { return text.size() >= p.size() && text.substr(0, p.size()) == p; };
  auto ends = [&](std::string_view s) { return text.size() >= s.size() && text.substr(text.size() - s.size()) == s; };
  if (starts("<|") && ends("|>")) return true;
  if (starts("<\xEF\xBD\x9C") && ends("\xEF\xBD\x9C>")) return true;  // fullwidth vertical bar, deepseek
  return starts("<unused") && ends(">");
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

constexpr std::string_view kSentencePieceSpace = "\xE2\x96\x81";  // U+2581

// A Python dict's insertion order: setting an existing key keeps its place.
template <class V>
class OrderedMap {
 public:
  V* find(const std::string& key) {
    for (auto& [k, v] : items_) if (k == key) return &v;
    return nullptr;
  }
  void set(const std::string& key, V value) {
    if (V* v = find(key)) *v = std::move(value);
    else items_.emplace_back(key, std::move(value));
  }
  const std::vector<std::pair<std::string, V>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, V>> items_;
};

// ---- SpecialVocab (gguf-py/gguf/vocab.py) ----

struct SpecialVocab {
  std::vector<std::string> merges;
  OrderedMap<uint32_t> special_token_ids;
  OrderedMap<bool> add_special_token;
  std::optional<json> chat_template;  // a string or a list of {name, template}
  std::optional<bool> normalizer_lowercase;
  std::optional<bool> normalizer_strip_accents;
  std::vector<std::string> special_token_types{"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
  std::optional<uint64_t> n_vocab;

  bool has_type(std::string_view t) const {
    return std::find(special_token_types.begin(), special_token_types.end(), t) != special_token_types.end();
  }

  // _set_special_token: ints only, the first value for a type wins, ids past n_vocab skipped.
  Expected<void> set_special_token(const std::string& type, const json* id, const fs::path& file) {
    if (id == nullptr || !(id->is_number_integer() || id->is_number_unsigned())) return {};
    if (id->is_number_integer() && id->get<int64_t>() < 0) {
      return tokenizer_error(ErrorCode::bad_header, file, fmt::format("invalid value for special token type {}: {}", type, id->get<int64_t>()));
    }
    const uint64_t value = id->get<uint64_t>();
    if (value > UINT32_MAX) return {};
    if (n_vocab && value >= *n_vocab) return {};
    if (special_token_ids.find(type) == nullptr) special_token_ids.set(type, static_cast<uint32_t>(value));
    return {};
  }

  void parse_normalizer(const json& normalizer) {
    const std::string type = string_member(normalizer, "type").value_or("");
    if (type == "Lowercase") {
      normalizer_lowercase = true;
    } else if (type == "StripAccents") {
      normalizer_strip_accents = true;
    } else if (type == "BertNormalizer") {
      if (const json* v = member(normalizer, "lowercase")) normalizer_lowercase = truthy(v);
      if (const json* v = member(normalizer, "strip_accents")) normalizer_strip_accents = truthy(v);
    } else if (type == "Sequence") {
      if (const json* list = member(normalizer, "normalizers"); list != nullptr && list->is_array()) {
        for (const json& n : *list) parse_normalizer(n);
      }
    }
  }
};

Expected<void> load_merges(SpecialVocab& sv, const std::optional<simdjson::dom::element>& merges_value, const fs::path& file) {
  if (!merges_value || !merges_value->is_array()) return {};
  const simdjson::dom::array merges(*merges_value);
  if (merges.size() == 0) return {};
  const simdjson::dom::element first = merges.at(0).value_unsafe();
  const auto pair_of_strings = [](simdjson::dom::element m) {
    if (!m.is_array()) return false;
    const simdjson::dom::array a(m);
    return a.size() == 2 && a.at(0).value_unsafe().is_string() && a.at(1).value_unsafe().is_string();
  };
  const bool strings = first.is_string();
  const bool pairs = first.is_array() && simdjson::dom::array(first).size() == 2 &&
                     simdjson::dom::array(first).at(0).value_unsafe().is_string();
  if (!strings && !pairs) return tokenizer_error(ErrorCode::bad_header, file, "unknown format of model.merges");
  sv.merges.reserve(merges.size());
  size_t i = 0;
  for (const simdjson::dom::element m : merges) {
    if (strings) {
      if (!m.is_string()) return tokenizer_error(ErrorCode::bad_header, file, fmt::format("model.merges[{}] is not a string", i));
      sv.merges.emplace_back(std::string_view(m));
    } else {
      if (!pair_of_strings(m)) {
        return tokenizer_error(ErrorCode::bad_header, file, fmt::format("model.merges[{}] is not a pair of strings", i));
      }
      // Spaces inside a part are written as U+0120, as gguf-py does for the pair format.
      const simdjson::dom::array a(m);
      sv.merges.push_back(replace_all(std::string(std::string_view(a.at(0).value_unsafe())), " ", "\xC4\xA0") + " " +
                          replace_all(std::string(std::string_view(a.at(1).value_unsafe())), " ", "\xC4\xA0"));
    }
    ++i;
  }
  return {};
}

Expected<void> load_merges_txt(SpecialVocab& sv, const fs::path& dir) {
  const fs::path file = dir / "merges.txt";
  auto content = convert_detail::read_checkpoint_text(dir, "merges.txt");
  if (!content) return std::move(content).error();
  if (!*content) return {};
  std::istringstream in(std::move(**content));
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    const size_t b = line.find_first_not_of(" \t\r\n");
    const size_t e = line.find_last_not_of(" \t\r\n");
    line = b == std::string::npos ? std::string() : line.substr(b, e - b + 1);
    if (first && line.size() > 0 && line[0] == '#') { first = false; continue; }
    first = false;
    if (line.empty()) continue;
    std::istringstream parts(line);
    std::string a, c, extra;
    if (!(parts >> a >> c) || (parts >> extra)) continue;  // malformed entries are ignored
    sv.merges.push_back(a + " " + c);
  }
  return {};
}

// _try_load_from_tokenizer_json's post-processor analysis, which may rewrite tokenizer_config.
void read_post_processor(SpecialVocab& sv, const json& post_processor, json& config) {
  const bool have_config = truthy(&config);
  auto config_value = [&](const char* key) -> json {
    const json* v = member(config, key);
    return v != nullptr ? *v : json();
  };
  json special_bos = config_value("bos_token");
  json special_cls = config_value("cls_token");
  json special_eos = config_value("eos_token");
  json special_sep = config_value("sep_token");
  if (!truthy(&special_bos) && truthy(&special_cls) && have_config) config["bos_token"] = special_bos = special_cls;
  if (!truthy(&special_eos) && truthy(&special_sep) && have_config) config["eos_token"] = special_eos = special_sep;

  std::vector<const json*> processors;
  if (const json* list = member(post_processor, "processors"); list != nullptr && list->is_array()) {
    for (const json& p : *list) processors.push_back(&p);
  } else {
    processors.push_back(&post_processor);
  }
  auto special_id = [](const json& entry) -> json {
    const json* id = nested(entry, "SpecialToken", "id");
    return id != nullptr ? *id : json();
  };
  for (const json* processor : processors) {
    const std::string type = string_member(*processor, "type").value_or("");
    if (type == "RobertaProcessing") {
      sv.add_special_token.set("bos", true);
      sv.add_special_token.set("eos", true);
      sv.add_special_token.set("sep", true);
      if (!truthy(&special_cls) && have_config) {
        const json* cls = member(*processor, "cls");
        special_cls = cls != nullptr && cls->is_array() && !cls->empty() ? (*cls)[0] : special_bos;
        config["cls_token"] = special_cls;
      }
      if (!truthy(&special_sep) && have_config) {
        const json* sep = member(*processor, "sep");
        special_sep = sep != nullptr && sep->is_array() && !sep->empty() ? (*sep)[0] : special_eos;
        config["sep_token"] = special_sep;
      }
      continue;
    }
    if (type != "TemplateProcessing") continue;
    const json* single_ptr = member(*processor, "single");
    const json* pair_ptr = member(*processor, "pair");
    const json single = single_ptr != nullptr && single_ptr->is_array() ? *single_ptr : json::array();
    json pair = pair_ptr != nullptr && pair_ptr->is_array() ? *pair_ptr : json::array();
    json special_first;
    json special_last;
    if (single.size() > 1) {
      special_first = special_id(single.front());
      if (truthy(&special_first)) {
        if (!have_config) {
          special_bos = special_first;
        } else if (special_first != special_bos && special_first != special_cls) {
          if (!truthy(&special_bos)) config["bos_token"] = special_bos = special_first;
          if (!truthy(&special_cls)) config["cls_token"] = special_cls = special_first;
        }
        sv.add_special_token.set("bos", special_first == special_bos || special_first == special_cls);
      }
      special_last = special_id(single.back());
      if (truthy(&special_last)) {
        if (!have_config) {
          special_eos = special_last;
        } else if (special_last != special_eos) {
          if (!sv.has_type("eot")) {
            sv.special_token_types.push_back("eot");
            config["eot_token"] = special_eos;
          } else if (!sv.has_type("eom")) {
            sv.special_token_types.push_back("eom");
            config["eom_token"] = special_eos;
          }
          config["eos_token"] = special_eos = special_last;
        }
        sv.add_special_token.set("eos", special_last == special_eos);
      }
    }
    if (pair.empty()) continue;
    const size_t seq_start = truthy(&special_first) && special_id(pair.front()) == special_first ? 1 : 0;
    const bool drop_last = truthy(&special_last) && special_id(pair.back()) == special_last;
    const size_t seq_stop = pair.size() - (drop_last ? 1 : 0);
    json middle = json::array();
    for (size_t i = seq_start; i < seq_stop; ++i) middle.push_back(pair[i]);
    if (middle.empty()) continue;
    const json* a = nested(middle.front(), "Sequence", "id");
    const json* b = nested(middle.back(), "Sequence", "id");
    if (a == nullptr || b == nullptr || *a != "A" || *b != "B" || middle.size() <= 2) continue;
    // A [sep] [eos] B
    json between = json::array();
    for (size_t i = 1; i + 1 < middle.size(); ++i) between.push_back(middle[i]);
    bool add_sep = false;
    const json entry = special_id(between[0]);
    if (truthy(&entry) && (entry == special_sep || entry == special_eos) && !truthy(&special_last)) add_sep = true;
    if (between.size() == 2) {
      const json second = special_id(between[1]);
      if (truthy(&second) && (second == special_sep || second == special_eos)) add_sep = true;
    }
    sv.add_special_token.set("sep", add_sep);
    if (add_sep && !truthy(&special_sep) && have_config) config["sep_token"] = special_eos;
  }
}

Expected<std::optional<json>> load_chat_template_alternative(const fs::path& dir) {
  std::error_code ec;
  auto read_text = [&](const fs::path& file) -> Expected<std::string> {
    auto text = convert_detail::read_checkpoint_text(dir, file.lexically_relative(dir));
    if (!text) return std::move(text).error();
    if (!*text) return tokenizer_error(ErrorCode::io_error, file, "cannot be opened");
    return std::move(**text);
  };
  const fs::path jinja = dir / "chat_template.jinja";
  if (fs::exists(fs::symlink_status(jinja, ec))) {
    auto text = read_text(jinja);
    if (!text) return std::move(text).error();
    std::vector<fs::path> extra;
    for (const auto& e : fs::directory_iterator(dir / "additional_chat_templates", ec)) {
      if (e.path().extension() == ".jinja") extra.push_back(e.path());
    }
    if (extra.empty()) return std::optional<json>(json(*text));
    std::sort(extra.begin(), extra.end());
    json list = json::array({json{{"name", "default"}, {"template", *text}}});
    for (const fs::path& p : extra) {
      auto t = read_text(p);
      if (!t) return std::move(t).error();
      list.push_back(json{{"name", p.stem().string()}, {"template", *t}});
    }
    return std::optional<json>(std::move(list));
  }
  auto templ = load_json(dir / "chat_template.json");
  if (!templ) return std::move(templ).error();
  if (!*templ) return std::optional<json>{};
  const json* value = member(**templ, "chat_template");
  return value != nullptr ? std::optional<json>(*value) : std::optional<json>{};
}

// SpecialVocab.__init__ + _load, on already parsed files.
Expected<SpecialVocab> load_special_vocab(const fs::path& dir, const json& tokenizer,
                                          const std::optional<simdjson::dom::element>& merges,
                                          const std::optional<json>& config_file,
                                          const std::optional<json>& model_config, bool with_merges,
                                          std::optional<uint64_t> n_vocab,
                                          std::optional<std::vector<std::string>> types = std::nullopt) {
  SpecialVocab sv;
  sv.n_vocab = n_vocab;
  if (types) sv.special_token_types = std::move(*types);
  const fs::path tokenizer_file = dir / "tokenizer.json";
  const fs::path config_path = dir / "tokenizer_config.json";
  if (with_merges) {
    if (auto ok = load_merges(sv, merges, tokenizer_file); !ok) return std::move(ok).error();
  }
  if (const json* normalizer = member(tokenizer, "normalizer"); truthy(normalizer)) sv.parse_normalizer(*normalizer);
  const json* added_ptr = member(tokenizer, "added_tokens");
  const json added_tokens = added_ptr != nullptr && added_ptr->is_array() ? *added_ptr : json::array();

  json config = config_file && config_file->is_object() ? *config_file : json::object();
  if (const json* post = member(tokenizer, "post_processor"); truthy(post)) read_post_processor(sv, *post, config);

  if (truthy(&config)) {
    const json* templ = member(config, "chat_template");
    std::optional<json> chat_template;
    if (templ != nullptr) {
      chat_template = *templ;
    } else {
      auto alt = load_chat_template_alternative(dir);
      if (!alt) return std::move(alt).error();
      chat_template = *alt;
    }
    if (chat_template && (chat_template->is_string() || chat_template->is_array())) sv.chat_template = *chat_template;

    for (const std::string& type : std::vector<std::string>(sv.special_token_types)) {
      if (const json* add = member(config, "add_" + type + "_token"); add != nullptr && add->is_boolean()) {
        sv.add_special_token.set(type, add->get<bool>());
      }
      const json* entry = member(config, type + "_token");
      std::optional<std::string> content;
      if (entry != nullptr && entry->is_string()) content = entry->get<std::string>();
      else if (entry != nullptr && entry->is_object()) content = string_member(*entry, "content");
      if (!content) continue;
      for (const json& token : added_tokens) {
        if (string_member(token, "content") == *content) {
          if (auto ok = sv.set_special_token(type, member(token, "id"), config_path); !ok) return std::move(ok).error();
          break;
        }
      }
    }
  }
  if (model_config) {
    const fs::path config_json = dir / "config.json";
    for (const std::string& type : sv.special_token_types) {
      const json* id = member(*model_config, type + "_token_id");
      if (id == nullptr) {
        if (const json* text_config = member(*model_config, "text_config")) id = member(*text_config, type + "_token_id");
      }
      if (id != nullptr && id->is_null()) id = nullptr;
      if (auto ok = sv.set_special_token(type, id, config_json); !ok) return std::move(ok).error();
    }
  }
  if (with_merges && sv.merges.empty()) {
    if (auto ok = load_merges_txt(sv, dir); !ok) return std::move(ok).error();
  }
  return sv;
}

// SpecialVocab.add_to_gguf: keys set as gguf-py's writer sets them (a second SpecialVocab replaces
// what the first wrote, where it stands).
void add_special_vocab(TokenizerMetadata& out, const SpecialVocab& sv) {
  if (!sv.merges.empty()) set_tokenizer_key(out, "tokenizer.ggml.merges", MetadataValue::string_array(sv.merges));
  static const std::map<std::string, std::string, std::less<>> id_keys{
      {"bos", "tokenizer.ggml.bos_token_id"},       {"eos", "tokenizer.ggml.eos_token_id"},
      {"unk", "tokenizer.ggml.unknown_token_id"},   {"sep", "tokenizer.ggml.seperator_token_id"},
      {"pad", "tokenizer.ggml.padding_token_id"},   {"mask", "tokenizer.ggml.mask_token_id"},
      {"eot", "tokenizer.ggml.eot_token_id"},       {"eom", "tokenizer.ggml.eom_token_id"},
  };
  for (const auto& [type, id] : sv.special_token_ids.items()) {
    if (const auto it = id_keys.find(type); it != id_keys.end()) set_tokenizer_key(out, it->second, MetadataValue::of(id));
  }
  for (const auto& [type, add] : sv.add_special_token.items()) {
    if (type == "bos" || type == "eos" || type == "sep") {
      set_tokenizer_key(out, "tokenizer.ggml.add_" + type + "_token", MetadataValue::of(add));
    }
  }
  if (sv.chat_template) {
    if (sv.chat_template->is_string()) {
      set_tokenizer_key(out, "tokenizer.chat_template", MetadataValue::string(sv.chat_template->get<std::string>()));
    } else {
      // GGUFWriter.add_chat_template with named templates; names reduced to [A-Za-z0-9_].
      std::optional<std::string> default_template;
      std::vector<std::string> names;
      for (const json& choice : *sv.chat_template) {
        std::string name = string_member(choice, "name").value_or("");
        for (char& c : name) {
          const auto u = static_cast<unsigned char>(c);
          if (!((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9'))) c = '_';
        }
        const std::optional<std::string> templ = string_member(choice, "template");
        if (name.empty() || !templ) continue;
        if (name == "default") {
          default_template = *templ;
        } else {
          if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
          set_tokenizer_key(out, "tokenizer.chat_template." + name, MetadataValue::string(*templ));
        }
      }
      if (!names.empty()) set_tokenizer_key(out, "tokenizer.chat_templates", MetadataValue::string_array(names));
      if (default_template) set_tokenizer_key(out, "tokenizer.chat_template", MetadataValue::string(*default_template));
    }
  }
  if (sv.normalizer_lowercase) {
    set_tokenizer_key(out, "tokenizer.ggml.normalizer.lowercase", MetadataValue::of(*sv.normalizer_lowercase));
  }
  if (sv.normalizer_strip_accents) {
    set_tokenizer_key(out, "tokenizer.ggml.normalizer.strip_accents", MetadataValue::of(*sv.normalizer_strip_accents));
  }
}

// The model's vocabulary, model.vocab (token -> id), in the file's order, with each token's
// place (a token twice is refused: the file is ambiguous). The texts are views into the parser's DOM.
struct ModelVocab {
  std::vector<std::pair<uint64_t, std::string_view>> entries;  // (id, token)
  std::unordered_map<std::string_view, size_t> index;          // token -> its entry
};

// id -> token as Python's {id: tok for tok, id in vocab.items()} builds it: by id, the later of
// two tokens of one id kept.
std::vector<std::pair<uint64_t, std::string_view>> by_id(std::vector<std::pair<uint64_t, std::string_view>> entries) {
  const auto by_first = [](const auto& a, const auto& b) { return a.first < b.first; };
  if (!std::is_sorted(entries.begin(), entries.end(), by_first)) std::stable_sort(entries.begin(), entries.end(), by_first);
  size_t kept = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i + 1 < entries.size() && entries[i + 1].first == entries[i].first) continue;
    entries[kept++] = entries[i];
  }
  entries.resize(kept);
  return entries;
}

Expected<ModelVocab> read_model_vocab(const std::optional<simdjson::dom::element>& vocab, const fs::path& file) {
  if (!vocab || !vocab->is_object()) {
    return tokenizer_error(ErrorCode::bad_header, file, "model.vocab is missing or not an object of token ids");
  }
  ModelVocab out;
  const simdjson::dom::object object(*vocab);
  out.index.reserve(object.size());
  out.entries.reserve(object.size());
  for (const simdjson::dom::key_value_pair field : object) {
    const simdjson::dom::element id = field.value;
    uint64_t n = 0;
    if (id.type() == simdjson::dom::element_type::UINT64) {
      n = uint64_t(id);
    } else if (id.type() == simdjson::dom::element_type::INT64 && int64_t(id) >= 0) {
      n = static_cast<uint64_t>(int64_t(id));
    } else {
      return tokenizer_error(ErrorCode::bad_header, file, fmt::format("model.vocab: the id of token {} is not a non-negative integer", json(std::string(field.key)).dump()));
    }
    if (n >= (uint64_t{1} << 30)) return tokenizer_error(ErrorCode::bad_header, file, fmt::format("model.vocab: token id {} is too large", n));
    if (!out.index.emplace(field.key, out.entries.size()).second) {
      return tokenizer_error(ErrorCode::bad_header, file, fmt::format("model.vocab: token {} appears twice", json(std::string(field.key)).dump()));
    }
    out.entries.emplace_back(n, field.key);
  }
  return out;
}

struct AddedToken {
  uint64_t id = 0;
  std::string content;
  bool special = false;
};

Expected<std::vector<AddedToken>> read_added_tokens(const json& tokenizer, const fs::path& file) {
  std::vector<AddedToken> out;
  const json* added = member(tokenizer, "added_tokens");
  if (added == nullptr || added->is_null()) return out;
  if (!added->is_array()) return tokenizer_error(ErrorCode::bad_header, file, "added_tokens is not an array");
  for (size_t i = 0; i < added->size(); ++i) {
    const json& t = (*added)[i];
    const json* id = member(t, "id");
    const std::optional<std::string> content = string_member(t, "content");
    if (id == nullptr || !(id->is_number_unsigned() || (id->is_number_integer() && id->get<int64_t>() >= 0)) || !content) {
      return tokenizer_error(ErrorCode::bad_header, file, fmt::format("added_tokens[{}] needs a non-negative integer id and a string content", i));
    }
    if (id->get<uint64_t>() >= (uint64_t{1} << 30)) {
      return tokenizer_error(ErrorCode::bad_header, file, fmt::format("added_tokens[{}]: id {} is too large", i, id->get<uint64_t>()));
    }
    out.push_back({id->get<uint64_t>(), *content, truthy(member(t, "special"))});
  }
  return out;
}

struct Inputs {
  fs::path dir;
  TokenizerJson tokenizer_json;
  json tokenizer;  // tokenizer_json.rest
  std::optional<json> tokenizer_config;
  std::optional<json> model_config;
  bool has_tokenizer_json = false, has_sentencepiece = false;  // tokenizer.json, tokenizer.model there
};

// TextModel._set_vocab_gpt2 (get_vocab_base + SpecialVocab with merges).
Expected<void> gpt2_vocab(const Inputs& in, TokenizerMetadata& out) {
  const fs::path file = in.dir / "tokenizer.json";
  auto model_vocab = read_model_vocab(in.tokenizer_json.vocab, file);
  if (!model_vocab) return std::move(model_vocab).error();
  auto added = read_added_tokens(in.tokenizer, file);
  if (!added) return std::move(added).error();

  // get_vocab(): token -> id, the model's with the added tokens over them; then id -> token.
  std::unordered_map<std::string_view, const AddedToken*> added_by_text;  // views into *added
  std::map<uint64_t, const AddedToken*> added_by_id;  // added_tokens_decoder
  std::vector<std::pair<uint64_t, std::string_view>> vocab = std::move(model_vocab->entries);
  std::unordered_map<std::string_view, size_t>& index = model_vocab->index;
  for (const AddedToken& t : *added) {
    added_by_id[t.id] = &t;
    added_by_text[t.content] = &t;
    if (const auto [at, inserted] = index.emplace(t.content, vocab.size()); inserted) {
      vocab.emplace_back(t.id, t.content);
    } else {
      vocab[at->second].first = t.id;  // a dict keeps a key's place when its value changes
    }
  }
  const std::vector<std::pair<uint64_t, std::string_view>> reverse_vocab = by_id(vocab);  // vocab: for the check below
  uint64_t vocab_size = index.size();
  if (in.model_config) {
    if (const json* v = member(*in.model_config, "vocab_size"); v != nullptr && !v->is_null()) {
      if (!v->is_number_unsigned() || v->get<uint64_t>() > (uint64_t{1} << 30)) {
        return tokenizer_error(ErrorCode::bad_header, in.dir / "config.json", "vocab_size is not a valid token count");
      }
      vocab_size = v->get<uint64_t>();
    }
  }
  if (!reverse_vocab.empty() && reverse_vocab.back().first >= vocab_size) {
    return tokenizer_error(ErrorCode::bad_header, file, fmt::format("token id {} is not below the vocabulary size {}", reverse_vocab.back().first, vocab_size));
  }
  // get_vocab_base_pre, on get_vocab() (the model's tokens with the added tokens over them).
  const auto token_id = [&](std::string_view token) -> std::optional<uint64_t> {
    const auto it = index.find(token);
    return it != index.end() ? std::optional<uint64_t>(vocab[it->second].first) : std::nullopt;
  };
  auto pre = convert_detail::llama_cpp_pre_tokenizer(
      {in.tokenizer, in.tokenizer_config ? &*in.tokenizer_config : nullptr, in.model_config ? &*in.model_config : nullptr,
       token_id, in.tokenizer_json.merges});
  if (!pre) return std::move(pre).error();

  // Views into the DOM or *added; the texts made here (padding, user-defined tokens) in `made`.
  std::vector<std::string_view> tokens;
  std::deque<std::string> made;
  std::vector<int32_t> types;
  tokens.reserve(vocab_size);
  types.reserve(vocab_size);
  auto at = reverse_vocab.begin();
  for (uint64_t i = 0; i < vocab_size; ++i) {
    while (at != reverse_vocab.end() && at->first < i) ++at;
    if (at == reverse_vocab.end() || at->first != i) {
      tokens.push_back(made.emplace_back(fmt::format("[PAD{}]", i)));
      types.push_back(kUnused);
      continue;
    }
    std::string_view token = at->second;
    int32_t type = kNormal;
    if (const auto a = added_by_text.find(token); a != added_by_text.end()) {
      // added_tokens_decoder[i]: the added token with this id (its flags), else the one with this text.
      const auto added_here = added_by_id.find(i);
      const AddedToken* flags = added_here != added_by_id.end() ? added_here->second : a->second;
      if (flags->special || looks_special(token)) {
        type = kControl;
      } else {
        token = made.emplace_back(replace_all(std::string(token), kSentencePieceSpace, " "));
        type = kUserDefined;
      }
    }
    tokens.push_back(token);
    types.push_back(type);
  }
  out.keys.emplace_back("tokenizer.ggml.model", MetadataValue::string("gpt2"));
  out.keys.emplace_back("tokenizer.ggml.pre", MetadataValue::string(*pre));
  out.keys.emplace_back("tokenizer.ggml.tokens", MetadataValue::string_array(tokens));
  out.keys.emplace_back("tokenizer.ggml.token_type", MetadataValue::array(types));

  auto sv = load_special_vocab(in.dir, in.tokenizer, in.tokenizer_json.merges, in.tokenizer_config, in.model_config,
                               true, std::nullopt);
  if (!sv) return std::move(sv).error();
  add_special_vocab(out, *sv);
  return {};
}

// gguf.LlamaHfVocab's test: a SentencePiece BPE vocabulary as tokenizer.json holds it.
bool is_llama_hf_vocab(const json& tokenizer) {
  const json* model = member(tokenizer, "model");
  if (model == nullptr || string_member(*model, "type") != "BPE") return false;
  const json* byte_fallback = member(*model, "byte_fallback");
  if (byte_fallback == nullptr || !truthy(byte_fallback)) return false;
  const json* decoder = member(tokenizer, "decoder");
  return decoder != nullptr && string_member(*decoder, "type") == "Sequence";
}

bool is_byte_token(std::string_view text) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); };
  return text.size() == 6 && text.substr(0, 3) == "<0x" && hex(text[3]) && hex(text[4]) && text[5] == '>';
}

// TextModel._set_vocab_llama_hf
Expected<void> llama_hf_vocab(const Inputs& in, TokenizerMetadata& out) {
  const fs::path file = in.dir / "tokenizer.json";
  auto model_vocab = read_model_vocab(in.tokenizer_json.vocab, file);
  if (!model_vocab) return std::move(model_vocab).error();
  auto added = read_added_tokens(in.tokenizer, file);
  if (!added) return std::move(added).error();
  const uint64_t base_size = model_vocab->entries.size();

  std::map<uint64_t, std::string> reverse_vocab;
  for (const auto& [id, text] : by_id(model_vocab->entries)) reverse_vocab.emplace_hint(reverse_vocab.end(), id, text);
  std::unordered_map<std::string, uint64_t> vocab;  // get_vocab(): text -> id, added tokens included
  vocab.reserve(reverse_vocab.size() + added->size());
  for (const auto& [id, text] : reverse_vocab) vocab[text] = id;
  for (const AddedToken& t : *added) {
    reverse_vocab[t.id] = t.content;
    vocab[t.content] = t.id;
  }
  // all_special_tokens / all_special_ids
  std::vector<std::string> special_texts;
  if (in.tokenizer_config) {
    for (const char* type : {"bos", "eos", "unk", "sep", "pad", "cls", "mask"}) {
      const json* entry = member(*in.tokenizer_config, std::string(type) + "_token");
      if (entry != nullptr && entry->is_string()) special_texts.push_back(entry->get<std::string>());
      else if (entry != nullptr && entry->is_object()) {
        if (auto c = string_member(*entry, "content")) special_texts.push_back(*c);
      }
    }
    if (const json* extra = member(*in.tokenizer_config, "additional_special_tokens"); extra != nullptr && extra->is_array()) {
      for (const json& e : *extra) {
        if (e.is_string()) special_texts.push_back(e.get<std::string>());
        else if (auto c = string_member(e, "content")) special_texts.push_back(*c);
      }
    }
  }
  std::set<uint64_t> special_ids;
  std::set<std::string> specials;
  for (const std::string& text : special_texts) {
    if (const auto it = vocab.find(text); it != vocab.end()) {
      special_ids.insert(it->second);
      specials.insert(text);
    }
  }

  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (uint64_t id = 0; id < base_size; ++id) {
    const auto it = reverse_vocab.find(id);
    if (it == reverse_vocab.end()) {
      return tokenizer_error(ErrorCode::bad_header, file, fmt::format("model.vocab has no token with id {} (ids must be 0..{})", id, base_size - 1));
    }
    tokens.push_back(it->second);
    scores.push_back(-1000.0f);
    types.push_back(is_byte_token(it->second) ? kByte : special_ids.count(id) != 0 ? kControl : kNormal);
  }
  std::vector<const AddedToken*> appended;
  for (const AddedToken& t : *added) {
    if (t.id >= base_size) appended.push_back(&t);
  }
  std::stable_sort(appended.begin(), appended.end(), [](const AddedToken* a, const AddedToken* b) { return a->id < b->id; });
  for (const AddedToken* t : appended) {
    tokens.push_back(t->content);
    scores.push_back(-1000.0f);
    types.push_back(specials.count(t->content) != 0 ? kControl : kUserDefined);
  }
  out.keys.emplace_back("tokenizer.ggml.model", MetadataValue::string("llama"));
  out.keys.emplace_back("tokenizer.ggml.pre", MetadataValue::string("default"));
  out.keys.emplace_back("tokenizer.ggml.tokens", MetadataValue::string_array(tokens));
  out.keys.emplace_back("tokenizer.ggml.scores", MetadataValue::array(scores));
  out.keys.emplace_back("tokenizer.ggml.token_type", MetadataValue::array(types));

  auto sv = load_special_vocab(in.dir, in.tokenizer, in.tokenizer_json.merges, in.tokenizer_config, in.model_config,
                               false, tokens.size());
  if (!sv) return std::move(sv).error();
  add_special_vocab(out, *sv);
  return {};
}

// A config.json size field as find_hparam(keys, optional=True) reads it: the first key present;
// 0 or absent means "none" (`or tokenizer.vocab_size()`).
Expected<std::optional<uint64_t>> config_vocab_size(const Inputs& in, std::initializer_list<const char*> keys) {
  if (!in.model_config) return std::optional<uint64_t>{};
  for (const char* key : keys) {
    const json* v = member(*in.model_config, key);
    if (v == nullptr) continue;
    if (v->is_null()) return std::optional<uint64_t>{};
    if (!v->is_number_unsigned() || v->get<uint64_t>() > kMaxSentencePieceVocab) {
      return tokenizer_error(ErrorCode::bad_header, in.dir / "config.json",
                             fmt::format("{} is not a token count (0 to {})", key, kMaxSentencePieceVocab));
    }
    const uint64_t n = v->get<uint64_t>();
    return n != 0 ? std::optional<uint64_t>(n) : std::optional<uint64_t>{};
  }
  return std::optional<uint64_t>{};
}

// A non-negative token id written as JSON (added_tokens.json) or as an object key
// (added_tokens_decoder, Python's int()); nullopt when it is neither.
std::optional<uint64_t> token_id_of_value(const json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  return std::nullopt;
}
std::optional<uint64_t> token_id_of_key(std::string_view key) {
  while (!key.empty() && (key.front() == ' ' || key.front() == '+')) key.remove_prefix(1);
  while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
  if (key.empty() || key.size() > 12) return std::nullopt;
  uint64_t n = 0;
  for (const char c : key) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

// TextModel._set_vocab_sentencepiece / _create_vocab_sentencepiece: tokenizer.model's pieces
// (scores, types; a USER_DEFINED piece becomes NORMAL), padded with [PAD{i}] to config.json's
// vocabulary size, then added_tokens.json's tokens and tokenizer_config.json's
// added_tokens_decoder over them (score -1000); ids past the vocabulary are ignored as there.
// The two variants of the SentencePiece vocabulary: TextModel's, and Phi3MiniModel.set_vocab's
// (config.json's vocab_size only; pieces past it, and added_tokens_decoder ids past it, refused
// where Python fails on them; added_tokens_decoder's texts as they are, CONTROL only when
// "special"; then tokenizer.json's added_tokens the same way).
enum class SentencePieceVariant { text_model, phi3 };

Expected<void> sentencepiece_vocab(const Inputs& in, TokenizerMetadata& out,
                                   SentencePieceVariant variant = SentencePieceVariant::text_model) {
  const bool phi3 = variant == SentencePieceVariant::phi3;
  const fs::path file = in.dir / "tokenizer.model";
  auto bytes = convert_detail::read_checkpoint_text(in.dir, "tokenizer.model");
  if (!bytes) return std::move(bytes).error();
  if (!*bytes) return tokenizer_error(ErrorCode::io_error, file, "not found");
  const std::string& raw = **bytes;
  auto model = parse_sentencepiece_model(std::as_bytes(std::span(raw.data(), raw.size())));
  if (!model) return with_file(std::move(model).error(), "tokenizer.model");
  auto configured = phi3 ? config_vocab_size(in, {"vocab_size"}) : config_vocab_size(in, {"vocab_size_per_layer_input", "vocab_size"});
  if (!configured) return std::move(configured).error();
  const uint64_t vocab_size = configured->value_or(model->pieces.size());
  if (phi3 && model->pieces.size() > vocab_size) {
    return tokenizer_error(ErrorCode::bad_header, file, fmt::format("{} pieces, more than config.json's vocab_size {}",
                                                                    model->pieces.size(), vocab_size));
  }

  std::vector<std::string> tokens;
  std::vector<float> scores(vocab_size, -10000.0f);
  std::vector<int32_t> types(vocab_size, kUnused);
  tokens.reserve(vocab_size);
  for (uint64_t i = 0; i < vocab_size; ++i) tokens.push_back(fmt::format("[PAD{}]", i));
  for (size_t id = 0; id < model->pieces.size() && id < vocab_size; ++id) {
    SentencePiece& p = model->pieces[id];
    tokens[id] = std::move(p.piece);
    scores[id] = p.score;
    switch (p.type) {
      case SentencePieceType::unknown: types[id] = kUnknown; break;
      case SentencePieceType::control: types[id] = kControl; break;
      case SentencePieceType::unused: types[id] = kUnused; break;
      case SentencePieceType::byte: types[id] = kByte; break;
      default: types[id] = kNormal; break;  // NORMAL, USER_DEFINED
    }
  }

  auto added = load_json(in.dir / "added_tokens.json");
  if (!added) return std::move(added).error();
  if (*added) {
    if (!(*added)->is_object()) return tokenizer_error(ErrorCode::bad_header, in.dir / "added_tokens.json", "not a JSON object of token ids");
    for (const auto& [text, value] : (*added)->items()) {
      const std::optional<uint64_t> id = token_id_of_value(value);
      if (!id) {
        return tokenizer_error(ErrorCode::bad_header, in.dir / "added_tokens.json",
                               fmt::format("the id of {} is not a non-negative integer", json(text).dump()));
      }
      if (*id >= vocab_size) continue;  // "ignore token: id is out of range"
      tokens[*id] = text;
      scores[*id] = -1000.0f;
      types[*id] = kUserDefined;
    }
  }
  if (in.tokenizer_config) {
    if (const json* decoder = member(*in.tokenizer_config, "added_tokens_decoder"); decoder != nullptr && !decoder->is_null()) {
      const fs::path config_file = in.dir / "tokenizer_config.json";
      if (!decoder->is_object()) return tokenizer_error(ErrorCode::bad_header, config_file, "added_tokens_decoder is not an object");
      for (const auto& [key, data] : decoder->items()) {
        const std::optional<uint64_t> id = token_id_of_key(key);
        const std::optional<std::string> content = string_member(data, "content");
        if (!id || !content) {
          return tokenizer_error(ErrorCode::bad_header, config_file,
                                 fmt::format("added_tokens_decoder[{}] needs an integer id and a string content", json(key).dump()));
        }
        if (*id >= vocab_size) {
          if (!phi3) continue;
          return tokenizer_error(ErrorCode::bad_header, config_file,
                                 fmt::format("added_tokens_decoder id {} is past the vocabulary ({})", *id, vocab_size));
        }
        std::string token = *content;
        if (phi3) {
          types[*id] = truthy(member(data, "special")) ? kControl : kUserDefined;
        } else if (truthy(member(data, "special")) || looks_special(token)) {
          types[*id] = kControl;
        } else {
          token = replace_all(std::move(token), kSentencePieceSpace, " ");  // pre-normalize user-defined spaces
          types[*id] = kUserDefined;
        }
        scores[*id] = -1000.0f;
        tokens[*id] = std::move(token);
      }
    }
  }
  if (phi3) {  // tokenizer.json's added_tokens, the same way again
    const fs::path tokenizer_file = in.dir / "tokenizer.json";
    const json* added_tokens = member(in.tokenizer, "added_tokens");
    for (const json& entry : added_tokens != nullptr && added_tokens->is_array() ? *added_tokens : json::array()) {
      const json* id_value = member(entry, "id");
      const std::optional<uint64_t> id = id_value != nullptr ? token_id_of_value(*id_value) : std::nullopt;
      const std::optional<std::string> content = string_member(entry, "content");
      if (!id || !content) {
        return tokenizer_error(ErrorCode::bad_header, tokenizer_file, "an added token needs an integer id and a string content");
      }
      if (*id >= vocab_size) {
        return tokenizer_error(ErrorCode::bad_header, tokenizer_file,
                               fmt::format("added token id {} is past the vocabulary ({})", *id, vocab_size));
      }
      tokens[*id] = *content;
      scores[*id] = -1000.0f;
      types[*id] = truthy(member(entry, "special")) ? kControl : kUserDefined;
    }
  }
  out.keys.emplace_back("tokenizer.ggml.model", MetadataValue::string("llama"));
  out.keys.emplace_back("tokenizer.ggml.pre", MetadataValue::string("default"));
  out.keys.emplace_back("tokenizer.ggml.tokens", MetadataValue::string_array(tokens));
  out.keys.emplace_back("tokenizer.ggml.scores", MetadataValue::array(scores));
  out.keys.emplace_back("tokenizer.ggml.token_type", MetadataValue::array(types));
  auto sv = load_special_vocab(in.dir, in.tokenizer, std::nullopt, in.tokenizer_config, in.model_config, false,
                               tokens.size());
  if (!sv) return std::move(sv).error();
  add_special_vocab(out, *sv);
  return {};
}


// The second gguf.SpecialVocab of GemmaModel.set_vocab and CodeLlama's (TokenizerOptions).
Expected<void> extra_special_vocab(const Inputs& in, const TokenizerOptions& options, TokenizerMetadata& out) {
  auto sv = load_special_vocab(in.dir, in.tokenizer, std::nullopt, in.tokenizer_config, in.model_config, false,
                               std::nullopt, options.extra_special_types);
  if (!sv) return std::move(sv).error();
  for (const auto& [type, id] : options.extra_special_ids) {
    if (sv->special_token_ids.find(type) == nullptr) sv->special_token_ids.set(type, id);
  }
  if (!options.extra_chat_template) sv->chat_template.reset();
  add_special_vocab(out, *sv);
  return {};
}

// LlamaModel.set_vocab's rules by config.json's vocab_size, after the vocabulary: CodeLlama's
// (32016) second SpecialVocab of prefix 32007, suffix 32008, middle 32009 and eot 32010 (only eot
// has a key in gguf-py); Granite's small models (49152) add no BOS (the key set in place).
Expected<void> llama_vocab_size_rules(const Inputs& in, TokenizerMetadata& out) {
  const json* size = in.model_config ? member(*in.model_config, "vocab_size") : nullptr;
  const uint64_t vocab_size = size != nullptr && size->is_number_unsigned() ? size->get<uint64_t>() : 32000;
  if (vocab_size == 32016) {
    TokenizerOptions codellama;
    codellama.extra_special_types = {"prefix", "suffix", "middle", "eot"};
    codellama.extra_special_ids = {{"prefix", 32007u}, {"suffix", 32008u}, {"middle", 32009u}, {"eot", 32010u}};
    if (auto ok = extra_special_vocab(in, codellama, out); !ok) return ok;
  }
  if (vocab_size == 49152) set_tokenizer_key(out, "tokenizer.ggml.add_bos_token", MetadataValue::of(false));
  return {};
}

// tokenizer.json's checks, when its vocabulary is the one converted: an object whose model is BPE.
Expected<void> check_tokenizer_json(const Inputs& in, bool present) {
  const fs::path file = in.dir / "tokenizer.json";
  if (!present) return tokenizer_error(ErrorCode::io_error, file, "not found in " + in.dir.string());
  if (!in.tokenizer.is_object()) return tokenizer_error(ErrorCode::bad_header, file, "not a JSON object");
  const json* model = member(in.tokenizer, "model");
  if (model == nullptr || !model->is_object()) return tokenizer_error(ErrorCode::bad_header, file, "has no \"model\" object");
  const std::optional<std::string> model_type = string_member(*model, "type");
  if (!model_type) return tokenizer_error(ErrorCode::bad_header, file, "model.type is missing");
  if (*model_type != "BPE") {
    return tokenizer_error(ErrorCode::invalid_argument, file,
                           fmt::format("model type {} is not supported (only BPE)", json(*model_type).dump()));
  }
  return {};
}

// The tokenizer files of `dir` (the ones there), read once, checked to be JSON objects;
// config.json is `model_config` when the caller has read it.
Expected<Inputs> load_inputs(const fs::path& dir, const json* model_config_read) {
  Inputs in;
  in.dir = dir;
  auto tokenizer = load_tokenizer_json(dir / "tokenizer.json");
  if (!tokenizer) return std::move(tokenizer).error();
  const bool has_tokenizer_json = tokenizer->has_value();
  in.has_tokenizer_json = has_tokenizer_json;
  if (has_tokenizer_json) {
    in.tokenizer_json = std::move(**tokenizer);
    in.tokenizer = std::move(in.tokenizer_json.rest);
  } else {
    in.tokenizer = json::object();  // SpecialVocab reads it when it is there
  }
  std::error_code ec;
  const bool has_sentencepiece = fs::is_regular_file(dir / "tokenizer.model", ec);
  in.has_sentencepiece = has_sentencepiece;
  if (!has_tokenizer_json && !has_sentencepiece) {
    return tokenizer_error(ErrorCode::io_error, dir / "tokenizer.json", "not found in " + dir.string() + " (nor tokenizer.model)");
  }
  if (has_tokenizer_json && !in.tokenizer.is_object()) {
    return tokenizer_error(ErrorCode::bad_header, dir / "tokenizer.json", "not a JSON object");
  }

  auto config = load_json(dir / "tokenizer_config.json");
  if (!config) return std::move(config).error();
  in.tokenizer_config = std::move(*config);
  if (in.tokenizer_config && !in.tokenizer_config->is_object()) {
    return tokenizer_error(ErrorCode::bad_header, dir / "tokenizer_config.json", "not a JSON object");
  }
  if (model_config_read != nullptr) {
    in.model_config = *model_config_read;
  } else {
    auto model_config = load_json(dir / "config.json");
    if (!model_config) return std::move(model_config).error();
    in.model_config = std::move(*model_config);
  }
  if (in.model_config && !in.model_config->is_object()) {
    return tokenizer_error(ErrorCode::bad_header, dir / "config.json", "not a JSON object");
  }
  return in;
}

// The vocabulary keys of the recipe's set_vocab.
Expected<TokenizerMetadata> read_vocab(const Inputs& in, TokenizerRecipe recipe) {
  const fs::path& dir = in.dir;
  const bool has_tokenizer_json = in.has_tokenizer_json, has_sentencepiece = in.has_sentencepiece;
  std::string architecture;
  if (in.model_config) {
    if (const json* list = member(*in.model_config, "architectures"); list != nullptr && list->is_array() && !list->empty() && (*list)[0].is_string()) {
      architecture = (*list)[0].get<std::string>();
    }
  }
  if (recipe == TokenizerRecipe::automatic) {
    const bool qwen = architecture.rfind("Qwen2", 0) == 0 || architecture.rfind("Qwen3", 0) == 0;
    recipe = qwen ? TokenizerRecipe::gpt2 : TokenizerRecipe::llama;
  }
  if (recipe == TokenizerRecipe::sentencepiece_or_gpt2) {
    recipe = has_sentencepiece ? TokenizerRecipe::sentencepiece : TokenizerRecipe::gpt2;
  }
  if (recipe == TokenizerRecipe::phi3) {  // Phi3MiniModel.set_vocab: Phi-4's GPT2Tokenizer, else its SentencePiece
    if (in.tokenizer_config) {
      const json* tokenizer_class = member(*in.tokenizer_config, "tokenizer_class");
      if (tokenizer_class == nullptr) {
        return tokenizer_error(ErrorCode::bad_header, dir / "tokenizer_config.json", "tokenizer_class is missing");
      }
      if (*tokenizer_class == "GPT2Tokenizer") recipe = TokenizerRecipe::gpt2;
    }
    if (recipe == TokenizerRecipe::phi3) {
      if (!has_sentencepiece) return tokenizer_error(ErrorCode::io_error, dir / "tokenizer.model", "not found in " + dir.string());
      TokenizerMetadata out;
      if (auto ok = sentencepiece_vocab(in, out, SentencePieceVariant::phi3); !ok) return std::move(ok).error();
      return out;
    }
  }

  TokenizerMetadata out;
  if (recipe == TokenizerRecipe::gpt2) {  // _set_vocab_gpt2 (Qwen2Model.set_vocab): the GPT-2 path only
    if (auto ok = check_tokenizer_json(in, has_tokenizer_json); !ok) return std::move(ok).error();
    if (auto ok = gpt2_vocab(in, out); !ok) return std::move(ok).error();
    return out;
  }
  if (recipe == TokenizerRecipe::sentencepiece) {  // _set_vocab_sentencepiece: tokenizer.model only
    if (!has_sentencepiece) return tokenizer_error(ErrorCode::io_error, dir / "tokenizer.model", "not found in " + dir.string());
    if (auto ok = sentencepiece_vocab(in, out); !ok) return std::move(ok).error();
    return out;
  }
  // LlamaModel.set_vocab: add_prefix_space, then tokenizer.model (SentencePiece) before
  // tokenizer.json (LlamaHfVocab, else GPT-2).
  if (in.tokenizer_config) {
    if (const json* prefix = member(*in.tokenizer_config, "add_prefix_space"); prefix != nullptr && !prefix->is_null()) {
      out.keys.emplace_back("tokenizer.ggml.add_space_prefix", MetadataValue::of(truthy(prefix)));
    }
  }
  if (has_sentencepiece) {
    if (auto ok = sentencepiece_vocab(in, out); !ok) return std::move(ok).error();
  } else {
    if (auto ok = check_tokenizer_json(in, has_tokenizer_json); !ok) return std::move(ok).error();
    auto ok = is_llama_hf_vocab(in.tokenizer) ? llama_hf_vocab(in, out) : gpt2_vocab(in, out);
    if (!ok) return std::move(ok).error();
  }
  if (auto ok = llama_vocab_size_rules(in, out); !ok) return std::move(ok).error();
  return out;
}

Expected<TokenizerMetadata> convert(const fs::path& dir, const TokenizerOptions& options, const json* model_config) {
  auto in = load_inputs(dir, model_config);
  if (!in) return std::move(in).error();
  auto out = read_vocab(*in, options.recipe);
  if (!out) return out;
  if (!options.extra_special_types.empty()) {
    if (auto ok = extra_special_vocab(*in, options, *out); !ok) return std::move(ok).error();
  }
  if (options.add_space_prefix && (options.recipe != TokenizerRecipe::sentencepiece_or_gpt2 || in->has_sentencepiece)) {
    set_tokenizer_key(*out, "tokenizer.ggml.add_space_prefix", MetadataValue::of(*options.add_space_prefix));
  }
  return out;
}

}  // namespace

Expected<std::optional<uint64_t>> hf_tokenizer_json_token_count(const std::filesystem::path& model_dir) {
  auto tokenizer = load_tokenizer_json(model_dir / "tokenizer.json");
  if (!tokenizer) return std::move(tokenizer).error();
  if (!*tokenizer) return std::optional<uint64_t>{};
  const TokenizerJson& t = **tokenizer;
  uint64_t count = 0;
  if (t.vocab && t.vocab->is_object()) count += simdjson::dom::object(*t.vocab).size();
  if (const json* added = member(t.rest, "added_tokens"); added != nullptr && added->is_array()) count += added->size();
  return std::optional<uint64_t>{count};
}

void set_tokenizer_key(TokenizerMetadata& metadata, std::string_view key, MetadataValue value) {
  for (auto& [k, v] : metadata.keys) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata.keys.emplace_back(std::string(key), std::move(value));
}

namespace {

Expected<TokenizerMetadata> convert_caught(const fs::path& model_dir, const TokenizerOptions& options,
                                           const json* model_config) {
  try {
    return convert(model_dir, options, model_config);
  } catch (const std::exception& e) {
    // A backstop: the code above checks types before reading values, so this is a bug or
    // an allocation failure, reported as an error rather than thrown at the caller.
    return make_error(ErrorCode::bad_header, std::nullopt, "tokenizer.json", std::string("tokenizer conversion failed: ") + e.what());
  }
}

}  // namespace

Expected<TokenizerMetadata> convert_hf_tokenizer(const std::filesystem::path& model_dir, const TokenizerOptions& options) {
  return convert_caught(model_dir, options, nullptr);
}

Expected<TokenizerMetadata> convert_detail::convert_hf_tokenizer(const std::filesystem::path& model_dir,
                                                                 const TokenizerOptions& options, const json& model_config) {
  return convert_caught(model_dir, options, &model_config);
}

}  // namespace ggufkit
