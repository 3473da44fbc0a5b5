#include "ggufkit/conventions.h"

namespace ggufkit {

std::optional<std::string_view> ModelMetadata::string(std::string_view key) const {
  const auto v = file_->get(key);
  return v ? v->as_string() : std::nullopt;
}

std::optional<uint64_t> ModelMetadata::uint(std::string_view key) const {
  const auto v = file_->get(key);
  return v ? v->as_uint() : std::nullopt;
}

std::optional<double> ModelMetadata::number(std::string_view key) const {
  const auto v = file_->get(key);
  return v ? v->as_double() : std::nullopt;
}

std::optional<bool> ModelMetadata::boolean(std::string_view key) const {
  const auto v = file_->get(key);
  return v ? v->get<bool>() : std::nullopt;
}

std::optional<ArrayView> ModelMetadata::array(std::string_view key) const {
  const auto v = file_->get(key);
  return v ? v->as_array() : std::nullopt;
}

std::optional<std::string> ModelMetadata::arch_key(std::string_view suffix) const {
  const auto arch = architecture();
  if (!arch) return std::nullopt;
  std::string key(*arch);
  key += '.';
  key += suffix;
  return key;
}

std::optional<uint64_t> ModelMetadata::arch_uint(std::string_view suffix) const {
  const auto key = arch_key(suffix);
  if (!key) return std::nullopt;
  const auto v = file_->get(*key);
  if (!v) return std::nullopt;
  if (auto scalar = v->as_uint()) return scalar;
  // Per-layer arrays (head counts of some architectures): the value when all layers agree.
  const auto arr = v->as_array();
  if (!arr || arr->empty()) return std::nullopt;
  std::optional<uint64_t> common;
  for (const ValueView e : arr->values()) {
    const auto x = e.as_uint();
    if (!x || (common && *common != *x)) return std::nullopt;
    common = x;
  }
  return common;
}

std::optional<double> ModelMetadata::arch_number(std::string_view suffix) const {
  const auto key = arch_key(suffix);
  return key ? number(*key) : std::nullopt;
}

std::optional<std::string_view> ModelMetadata::arch_string(std::string_view suffix) const {
  const auto key = arch_key(suffix);
  return key ? string(*key) : std::nullopt;
}

std::optional<std::string_view> ModelMetadata::chat_template(std::string_view name) const {
  if (name.empty()) return string(keys::kChatTemplate);
  std::string key(keys::kChatTemplate);
  key += '.';
  key += name;
  return string(key);
}

}  // namespace ggufkit
