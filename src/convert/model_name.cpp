// general.name, basename, finetune, version, size_label as gguf-py's metadata.py derives them from
// a model id ("org/Model-Name-7B-Instruct-v0.1" or a directory name) and the parameter count
// (Metadata.get_model_id_components, Metadata.id_to_title, utility.size_label).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "convert/model_name.h"

namespace ggufkit {
namespace {

bool is_ascii_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }

// Python's str.islower() for ASCII: some cased character, none upper case.
bool py_islower(std::string_view s) {
  bool cased = false;
  for (char c : s) {
    if (std::isupper(static_cast<unsigned char>(c))) return false;
    if (std::islower(static_cast<unsigned char>(c))) cased = true;
  }
  return cased;
}

// Python's str.title() for ASCII: a letter after a letter is lower case, any other letter upper.
std::string py_title(std::string_view s) {
  std::string out(s);
  bool previous_cased = false;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (is_ascii_alpha(c)) {
      c = static_cast<char>(previous_cased ? std::tolower(u) : std::toupper(u));
      previous_cased = true;
    } else {
      previous_cased = false;
    }
  }
  return out;
}

std::vector<std::string> split_whitespace(std::string_view s) {
  std::vector<std::string> words;
  std::string word;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

// Metadata.id_to_title: words title-cased unless they are acronyms or version numbers.
std::string id_to_title(std::string_view id) {
  std::string spaced(id);
  std::replace(spaced.begin(), spaced.end(), '-', ' ');
  static const std::regex version_like(R"(^(v\d+(?:\.\d+)*|\d.*)$)");
  std::string out;
  for (const std::string& w : split_whitespace(spaced)) {
    if (!out.empty()) out += ' ';
    out += py_islower(w) && !std::regex_search(w, version_like) ? py_title(w) : w;
  }
  return out;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::optional<std::string> join_tagged(const std::vector<std::string>& parts, const std::vector<std::set<std::string>>& tags,
                                       const char* tag, const char* unless = nullptr, bool dedupe = false) {
  std::vector<std::string> chosen;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!tags[i].contains(tag) || (unless != nullptr && tags[i].contains(unless))) continue;
    if (dedupe && std::find(chosen.begin(), chosen.end(), parts[i]) != chosen.end()) continue;
    chosen.push_back(parts[i]);
  }
  if (chosen.empty()) return std::nullopt;
  return fmt::format("{}", fmt::join(chosen, "-"));
}

}  // namespace

std::string model_size_label(uint64_t total_params) {
  const auto count = static_cast<double>(total_params);
  double scaled = 0;
  char suffix = 'K';
  if (count > 1e12) {
    scaled = count * 1e-12, suffix = 'T';
  } else if (count > 1e9) {
    scaled = count * 1e-9, suffix = 'B';
  } else if (count > 1e6) {
    scaled = count * 1e-6, suffix = 'M';
  } else {
    scaled = count * 1e-3;
  }
  // Python's round() rounds half to even, as nearbyint in the default rounding mode.
  std::string integer = fmt::format("{}", static_cast<int64_t>(std::nearbyint(scaled)));
  integer.erase(0, integer.find_first_not_of('0') == std::string::npos ? integer.size() : integer.find_first_not_of('0'));
  const int fix = std::max(2 - static_cast<int>(integer.size()), 0);
  return fmt::format("{:.{}f}{}", scaled, fix, suffix);
}

ModelNameParts model_name_parts(std::string_view model_id, int64_t total_params) {
  ModelNameParts result;
  if (model_id.find(' ') != std::string_view::npos) {  // a sentence: a plain name
    result.name = id_to_title(model_id);
    return result;
  }
  std::optional<std::string> org;
  std::string full(model_id);
  if (const size_t slash = model_id.find('/'); slash != std::string_view::npos) {
    org = std::string(model_id.substr(0, slash));
    full = std::string(model_id.substr(slash + 1));
  }
  if (org && !org->empty() && (*org)[0] == '.') org.reset();  // "./" or "../"

  std::vector<std::string> parts;
  for (size_t begin = 0;;) {
    const size_t dash = full.find('-', begin);
    std::string part = full.substr(begin, dash == std::string::npos ? std::string::npos : dash - begin);
    if (!part.empty()) parts.push_back(std::move(part));
    if (dash == std::string::npos) break;
    begin = dash + 1;
  }
  std::vector<std::set<std::string>> tags(parts.size());

  static const std::regex version_re(R"((v|iter)?\d+([.]\d+)*)", std::regex::icase);
  static const std::regex type_re(R"(i?q\d(_\w)*|b?fp?(16|32))", std::regex::icase);
  static const std::regex size_re(R"((([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl))",
                                  std::regex::icase);
  static const std::regex finetune_re(R"(chat|instruct|vision|lora)", std::regex::icase);
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string& part = parts[i];
    if (std::regex_match(part, version_re)) {
      tags[i].insert("version");
    } else if (std::regex_match(part, type_re)) {
      tags[i].insert("type");
      part = upper(part);
    } else if (i > 0 && std::regex_match(part, size_re)) {
      std::replace(part.begin(), part.end(), '_', '.');
      if (is_ascii_digit(part.back()) && part.size() >= 2) {  // bloom-7b1 -> 7.1b
        part = part.substr(0, part.size() - 2) + "." + part.back() + part[part.size() - 2];
      }
      if (part.size() > 1 && is_ascii_digit(part[part.size() - 2])) {
        const char last = part.back();
        if (last == 'k' || last == 'm' || last == 'b' || last == 't') part.back() = static_cast<char>(std::toupper(last));
      }
      if (total_params != 0) {
        // float(part[:-1]) * 1000 ** " KMBT".find(part[-1]); a part that is no number is used as is.
        const std::string number = part.substr(0, part.size() - 1);
        char* end = nullptr;
        const double value = std::strtod(number.c_str(), &end);
        const bool parsed = !number.empty() && end == number.c_str() + number.size() &&
                            number.find_first_not_of("0123456789.") == std::string::npos;
        if (parsed) {
          const size_t scale = std::string_view(" KMBT").find(part.back());
          const double label_params = value * (scale == std::string_view::npos ? 1e-3 : std::pow(1000.0, static_cast<double>(scale)));
          const auto total = static_cast<double>(total_params);
          const bool lora_too_small = total_params < 0 && label_params < static_cast<double>((-total_params) / 8);
          const bool far_off = total_params > 0 && std::abs(label_params - total) > static_cast<double>(7 * total_params / 8);
          if (lora_too_small || far_off) {  // likely a context length
            tags[i].insert("finetune");
            part.back() = static_cast<char>(std::tolower(static_cast<unsigned char>(part.back())));
          }
        }
      }
      if (tags[i].empty()) tags[i].insert("size_label");
    } else if (i > 0 && std::regex_match(part, finetune_re)) {
      if (total_params < 0 && upper(part) == "LORA") {
        tags[i].insert("type");
      } else {
        tags[i].insert("finetune");
      }
    }
  }
  // Word size labels ("small") are dropped when a numeric one is present.
  bool numeric_size = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (tags[i].contains("size_label") && std::any_of(parts[i].begin(), parts[i].end(), is_ascii_digit)) numeric_size = true;
  }
  if (numeric_size) {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (tags[i].contains("size_label") && std::all_of(parts[i].begin(), parts[i].end(), is_ascii_alpha)) {
        tags[i].erase("size_label");
      }
    }
  }
  bool at_start = true;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (at_start && ((tags[i].empty() && is_ascii_alpha(parts[i][0])) || tags[i].contains("version"))) {
      tags[i].insert("basename");
    } else {
      at_start = false;
      if (tags[i].empty()) tags[i].insert("finetune");
    }
  }
  for (size_t i = parts.size(); i-- > 0;) {  // a trailing version is not part of the basename
    if (tags[i].contains("basename") && tags[i].size() > 1) {
      tags[i].erase("basename");
    } else {
      break;
    }
  }
  std::optional<std::string> basename = join_tagged(parts, tags, "basename");
  result.size_label = join_tagged(parts, tags, "size_label", nullptr, true);
  result.finetune = join_tagged(parts, tags, "finetune");
  result.version = join_tagged(parts, tags, "version", "basename");
  if (!result.size_label && !result.finetune && !result.version) basename.reset();  // too ambiguous
  result.basename = basename;
  result.name = id_to_title(full);
  if (org) result.organization = id_to_title(*org);
  return result;
}

}  // namespace ggufkit
