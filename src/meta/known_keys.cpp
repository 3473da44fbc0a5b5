// The metadata keys llama.cpp and gguf-py name (known_keys.inc, generated), for gguf set's refusal
// of misspelt keys and every verb's "did you mean".
#include <algorithm>
#include <array>

#include "ggufkit/conventions.h"
#include "ggufkit/nearest.h"

namespace ggufkit {

namespace {

constexpr std::string_view kKnownKeys[] = {
#include "meta/known_keys.inc"
};

constexpr std::array<std::string_view, 4> kFixedNamespaces = {"general", "tokenizer", "split", "adapter"};

// `key` against a pattern: {arch} is the architecture, {id} one or more digits, {name} one or more
// characters other than '.'.
bool matches(std::string_view pattern, std::string_view key, std::string_view arch) {
  if (pattern.empty()) return key.empty();
  if (pattern.front() != '{') {
    return !key.empty() && key.front() == pattern.front() && matches(pattern.substr(1), key.substr(1), arch);
  }
  const size_t close = pattern.find('}');
  const std::string_view placeholder = pattern.substr(1, close - 1);
  const std::string_view rest = pattern.substr(close + 1);
  if (placeholder == "arch") {
    return !arch.empty() && key.starts_with(arch) && matches(rest, key.substr(arch.size()), arch);
  }
  const bool digits = placeholder == "id";
  for (size_t n = 1; n <= key.size(); ++n) {
    const char c = key[n - 1];
    if (c == '.' || (digits && (c < '0' || c > '9'))) break;
    if (matches(rest, key.substr(n), arch)) return true;
  }
  return false;
}

// The pattern as a concrete key near `key`: each placeholder-only segment takes the key's segment
// in the same place (so general.base_model.1.nmae meets general.base_model.1.name).
std::string instantiate(std::string_view pattern, std::string_view key, std::string_view arch) {
  std::string out;
  size_t key_pos = 0;
  while (true) {
    const size_t dot = pattern.find('.');
    const std::string_view part = pattern.substr(0, dot);
    // The key's segment at the same index.
    std::string_view key_part;
    if (key_pos != std::string_view::npos && key_pos <= key.size()) {
      const size_t kdot = key.find('.', key_pos);
      key_part = key.substr(key_pos, kdot == std::string_view::npos ? std::string_view::npos : kdot - key_pos);
      key_pos = kdot == std::string_view::npos ? std::string_view::npos : kdot + 1;
    }
    if (part == "{arch}") {
      out += arch;
    } else if (part == "{id}" || part == "{name}") {
      out += key_part.empty() ? (part == "{id}" ? "0" : "default") : std::string(key_part);
    } else if (const size_t brace = part.find("{name}"); brace != std::string_view::npos) {
      out += std::string(part.substr(0, brace)) + "dense_2" + std::string(part.substr(brace + 6));
    } else {
      out += part;
    }
    if (dot == std::string_view::npos) break;
    out += '.';
    pattern.remove_prefix(dot + 1);
  }
  return out;
}

}  // namespace

bool is_known_key(std::string_view key, std::string_view architecture) {
  return std::any_of(std::begin(kKnownKeys), std::end(kKnownKeys),
                     [&](std::string_view p) { return matches(p, key, architecture); });
}

std::string_view known_key_namespace(std::string_view key, std::string_view architecture) {
  const std::string_view first = key.substr(0, key.find('.'));
  if (first.size() == key.size()) return {};
  if (std::find(kFixedNamespaces.begin(), kFixedNamespaces.end(), first) != kFixedNamespaces.end()) return first;
  if (!architecture.empty() && first == architecture) return first;
  return {};
}

std::vector<std::string> known_keys(std::string_view architecture, std::string_view near) {
  std::vector<std::string> out;
  for (const std::string_view p : kKnownKeys) {
    if (p.starts_with("{arch}") && architecture.empty()) continue;
    out.push_back(instantiate(p, near, architecture));
  }
  return out;
}

std::optional<std::string> nearest_known_key(std::string_view key, std::string_view architecture) {
  return nearest_name(key, known_keys(architecture, key));
}

}  // namespace ggufkit
