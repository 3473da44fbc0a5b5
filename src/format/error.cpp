#include "ggufkit/error.h"

#include <fmt/format.h>

namespace ggufkit {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::io_error: return "io_error";
    case ErrorCode::truncated: return "truncated";
    case ErrorCode::bad_magic: return "bad_magic";
    case ErrorCode::unsupported_version: return "unsupported_version";
    case ErrorCode::big_endian: return "big_endian";
    case ErrorCode::bad_count: return "bad_count";
    case ErrorCode::string_too_long: return "string_too_long";
    case ErrorCode::array_too_long: return "array_too_long";
    case ErrorCode::array_too_deep: return "array_too_deep";
    case ErrorCode::bad_value_type: return "bad_value_type";
    case ErrorCode::empty_key: return "empty_key";
    case ErrorCode::duplicate_key: return "duplicate_key";
    case ErrorCode::bad_alignment: return "bad_alignment";
    case ErrorCode::tensor_name_too_long: return "tensor_name_too_long";
    case ErrorCode::duplicate_tensor: return "duplicate_tensor";
    case ErrorCode::bad_dimension_count: return "bad_dimension_count";
    case ErrorCode::bad_shape: return "bad_shape";
    case ErrorCode::shape_overflow: return "shape_overflow";
    case ErrorCode::unknown_tensor_type: return "unknown_tensor_type";
    case ErrorCode::removed_tensor_type: return "removed_tensor_type";
    case ErrorCode::block_size_mismatch: return "block_size_mismatch";
    case ErrorCode::bad_tensor_offset: return "bad_tensor_offset";
    case ErrorCode::data_out_of_bounds: return "data_out_of_bounds";
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::bad_header: return "bad_header";
    case ErrorCode::tensor_size_mismatch: return "tensor_size_mismatch";
    case ErrorCode::index_mismatch: return "index_mismatch";
    case ErrorCode::cancelled: return "cancelled";
    case ErrorCode::safetensors_truncated: return "safetensors_truncated";
    case ErrorCode::safetensors_duplicate_key: return "safetensors_duplicate_key";
    case ErrorCode::safetensors_duplicate_tensor: return "safetensors_duplicate_tensor";
    case ErrorCode::safetensors_unknown_dtype: return "safetensors_unknown_dtype";
    case ErrorCode::safetensors_shape_overflow: return "safetensors_shape_overflow";
    case ErrorCode::safetensors_bad_offsets: return "safetensors_bad_offsets";
    case ErrorCode::safetensors_out_of_bounds: return "safetensors_out_of_bounds";
    case ErrorCode::output_exists: return "output_exists";
    case ErrorCode::output_not_regular: return "output_not_regular";
    case ErrorCode::output_is_input: return "output_is_input";
    case ErrorCode::unknown_architecture: return "unknown_architecture";
    case ErrorCode::bad_hyperparameter: return "bad_hyperparameter";
    case ErrorCode::network_error: return "network_error";
    case ErrorCode::http_error: return "http_error";
    case ErrorCode::remote_changed: return "remote_changed";
  }
  return "unknown_error";
}

std::string Error::describe() const {
  std::string out = offset ? fmt::format("offset {}: ", *offset) : std::string();
  if (!subject.empty()) out += fmt::format("'{}': ", subject);
  out += message;
  return out;
}

}  // namespace ggufkit
