// JSON text to a metadata value (gguf set's JSON form): the leaf type given, taken from the value
// it replaces, or inferred from the JSON.
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ggufkit/edit.h"
#include "ggufkit/format.h"

namespace ggufkit {
namespace {

Error usage_error(std::string message) { return make_error(ErrorCode::invalid_argument, std::nullopt, {}, std::move(message)); }

// The leaf type of a JSON value: what every scalar in it can be stored as.
Expected<ValueType> infer_leaf_type(const nlohmann::json& j) {
  bool any_string = false, any_bool = false, any_float = false, any_int = false, any_negative = false;
  bool fits_u32 = true, fits_i32 = true;
  std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& v) {
    if (v.is_array()) {
      for (const auto& e : v) walk(e);
    } else if (v.is_string()) {
      any_string = true;
    } else if (v.is_boolean()) {
      any_bool = true;
    } else if (v.is_number_float()) {
      any_float = true;
    } else if (v.is_number_unsigned()) {
      any_int = true;
      const auto u = v.get<uint64_t>();
      fits_u32 = fits_u32 && u <= UINT32_MAX;
      fits_i32 = fits_i32 && u <= INT32_MAX;
    } else if (v.is_number_integer()) {
      any_int = true;
      const auto i = v.get<int64_t>();
      any_negative = any_negative || i < 0;
      fits_u32 = fits_u32 && i >= 0 && i <= UINT32_MAX;
      fits_i32 = fits_i32 && i >= INT32_MIN && i <= INT32_MAX;
    } else {
      any_string = any_bool = true;  // null or object: rejected below
    }
  };
  walk(j);
  const int kinds = int{any_string} + int{any_bool} + int{any_float || any_int};
  if (kinds == 0) return usage_error("cannot infer the type of an empty array: give --type");
  if (kinds > 1) return usage_error("the JSON mixes strings, booleans and numbers (or holds null or objects)");
  if (any_string) return ValueType::String;
  if (any_bool) return ValueType::Bool;
  if (any_float) return ValueType::Float32;
  if (fits_u32 && !any_negative) return ValueType::UInt32;
  if (fits_i32) return ValueType::Int32;
  return any_negative ? ValueType::Int64 : ValueType::UInt64;
}

Expected<MetadataValue> convert(const nlohmann::json& j, ValueType leaf) {
  if (j.is_array()) {
    std::vector<MetadataValue> elements;
    elements.reserve(j.size());
    for (const auto& e : j) {
      auto v = convert(e, leaf);
      if (!v) return v;
      elements.push_back(std::move(*v));
    }
    const ValueType element_type = elements.empty() ? leaf : elements.front().type();
    return MetadataValue::array_of(element_type, elements);
  }
  if (leaf == ValueType::String) {
    if (!j.is_string()) return usage_error(fmt::format("{} is not a string", j.dump()));
    return MetadataValue::string(j.get<std::string>());
  }
  if (leaf == ValueType::Bool) {
    if (!j.is_boolean()) return usage_error(fmt::format("{} is not a boolean", j.dump()));
    return MetadataValue::of(j.get<bool>());
  }
  if (!j.is_number()) return usage_error(fmt::format("{} is not a number", j.dump()));
  if (j.is_number_float() && leaf != ValueType::Float32 && leaf != ValueType::Float64) {
    return usage_error(fmt::format("{} is not an integer ({})", j.dump(), value_type_name(leaf)));
  }
  return parse_scalar_value(j.dump(), leaf);
}

// Refuses text nested deeper than a GGUF array may be, before anything recurses over it (the
// conversion and the type inference below do): 40000 brackets are an error, not a stack overflow,
// and nine empty arrays say they are too deep rather than empty.
Expected<void> check_nesting(std::string_view text) {
  uint32_t depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxArrayDepth) {
        return make_error(ErrorCode::array_too_deep, std::nullopt, {},
                          fmt::format("arrays nested more than {} deep", kMaxArrayDepth));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return {};
}

}  // namespace

Expected<MetadataValue> parse_json_value(std::string_view json_text, std::optional<ValueType> type,
                                         const ValueView* like) {
  if (auto nesting = check_nesting(json_text); !nesting) return std::move(nesting).error();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    return usage_error(fmt::format("not valid JSON: {}", e.what()));
  }
  ValueType leaf{};
  if (type) {
    leaf = *type;
  } else if (like != nullptr) {
    leaf = like->type();
    if (leaf == ValueType::Array) {
      const auto array = like->as_array();
      leaf = array ? array->element_type() : ValueType::Array;
      if (leaf == ValueType::Array || !j.is_array()) {
        auto inferred = infer_leaf_type(j);
        if (!inferred) return std::move(inferred).error();
        leaf = *inferred;
      }
    } else if (j.is_array()) {
      auto inferred = infer_leaf_type(j);
      if (!inferred) return std::move(inferred).error();
      leaf = *inferred;
    }
  } else {
    auto inferred = infer_leaf_type(j);
    if (!inferred) return std::move(inferred).error();
    leaf = *inferred;
  }
  return convert(j, leaf);
}

}  // namespace ggufkit
