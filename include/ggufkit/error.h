// Errors are values. Every rejection of a file carries a stable code, the byte offset it concerns,
// the key or tensor it concerns (when there is one) and a sentence for humans.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ggufkit {

// Stable codes: their names (error_code_name) are part of the CLI's JSON output and never change.
enum class ErrorCode : uint16_t {
  io_error = 1,            // the file could not be opened, mapped, read or written
  truncated,               // a record runs past the end of the file
  bad_magic,               // the file does not start with "GGUF"
  unsupported_version,     // version 0, 1 or newer than 3
  big_endian,              // kept for stability; big-endian files are read now and never get it
  bad_count,               // tensor or key/value count negative or larger than the file can hold
  string_too_long,         // a string longer than the 1 GiB cap
  array_too_long,          // an array with more than 2^30 elements
  array_too_deep,          // arrays of arrays nested deeper than the limit
  bad_value_type,          // a metadata value type id outside 0..12
  empty_key,               // a metadata key of length 0
  duplicate_key,           // the same metadata key twice
  bad_alignment,           // general.alignment not a uint32 power of two
  tensor_name_too_long,    // a tensor name of 64 bytes or more (llama.cpp's GGML_MAX_NAME)
  duplicate_tensor,        // the same tensor name twice
  bad_dimension_count,     // more than 4 dimensions
  bad_shape,               // a negative dimension
  shape_overflow,          // element count or byte size not representable
  unknown_tensor_type,     // a tensor type id ggml never defined
  removed_tensor_type,     // a tensor type id ggml once defined and removed
  block_size_mismatch,     // the first dimension is not a multiple of the type's block size
  bad_tensor_offset,       // an offset not aligned, out of order, overlapping or leaving a gap
  data_out_of_bounds,      // tensor data past the end of the file
  invalid_argument,        // a caller passed something the API cannot accept (writer, lookups)
  bad_header,              // safetensors: a header too large, not JSON, or not of the format's shape
  tensor_size_mismatch,    // safetensors: data_offsets span not the size shape and dtype need
  index_mismatch,          // safetensors: model.safetensors.index.json disagrees with its shards
  cancelled,               // the caller asked a long operation to stop (RunOptions::cancel); nothing written
  // safetensors' own codes (what the GGUF codes of the same name say, in a safetensors file):
  safetensors_truncated,         // shorter than its 8-byte size field, or a header past the end
  safetensors_duplicate_key,     // a repeated __metadata__ key or tensor field
  safetensors_duplicate_tensor,  // a tensor name twice
  safetensors_unknown_dtype,     // a dtype the reference crate does not know
  safetensors_shape_overflow,    // element count or byte size not representable
  safetensors_bad_offsets,       // data_offsets not tiling the data region (overlap, hole, reversed, bytes after)
  safetensors_out_of_bounds,     // data_offsets past the end of the file
  // What an output may replace (OutputPolicy, sink.h): refused before anything is written.
  output_exists,       // the output exists and the caller did not allow replacing it (--force)
  output_not_regular,  // the output is a directory, device, FIFO or socket: never replaced
  output_is_input,     // the output is (through links too) a file the same command reads
  // What the architecture registry (arch.h) refuses:
  unknown_architecture,  // general.architecture names an architecture the registry lacks
  bad_hyperparameter,    // a key llama.cpp needs is missing, of the wrong type, zero where it divides, or too large
  // Remote files (remote.h):
  network_error,   // no connection, a TLS failure, a timeout, a broken transfer
  http_error,      // the server refused (401, 403, 404, 5xx after retries) or answered wrongly
  remote_changed,  // the file changed between two ranges, and again when read once more
};

std::string_view error_code_name(ErrorCode code);

// Context is in fields, not pasted into the message (as LLVM's createFileError wraps an error with
// its file): whoever reports the error decides how to show it.
struct Error {
  ErrorCode code = ErrorCode::io_error;
  std::optional<uint64_t> offset;  // byte offset in the file the problem was found at; none for I/O,
                                   // argument and cancellation errors
  std::string subject;             // the key or tensor concerned, empty when none
  std::string message;             // one sentence, no trailing period needed
  std::string file;                // the file it concerns when the library knows better than the
                                   // caller (a shard of a split model, a checkpoint's JSON); else empty

  // "offset 1234: 'general.alignment': alignment 3 is not a power of two": the offset when there is
  // one, the subject when there is one, the message. The file is not included (see `file`).
  std::string describe() const;
};

// A value or an Error. Minimal stand-in for C++23 std::expected.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Expected(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  explicit operator bool() const { return state_.index() == 0; }
  bool has_value() const { return state_.index() == 0; }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T* operator->() { return &std::get<0>(state_); }
  const T* operator->() const { return &std::get<0>(state_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const& { return std::get<1>(state_); }
  Error&& error() && { return std::get<1>(std::move(state_)); }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  explicit operator bool() const { return ok_; }
  bool has_value() const { return ok_; }
  const Error& error() const& { return error_; }
  Error&& error() && { return std::move(error_); }

 private:
  Error error_;
  bool ok_ = true;
};

inline Error make_error(ErrorCode code, std::optional<uint64_t> offset, std::string subject, std::string message) {
  return Error{code, offset, std::move(subject), std::move(message), {}};
}
// The same error, about `file` (unless it already names a file).
inline Error with_file(Error e, std::string file) {
  if (e.file.empty()) e.file = std::move(file);
  return e;
}

}  // namespace ggufkit
