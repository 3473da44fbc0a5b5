// The structure pass: the reader's own checks, collected instead of stopping at the first (see
// OpenOptions::on_problem), and what the reader accepts but a careful reader should not: bool bytes
// other than 0 and 1, strings that are not UTF-8, non-zero padding, bytes after the last tensor.
#include <fmt/format.h>

#include <algorithm>

#include "check_internal.h"
#include "format/checked_math.h"
#include "ggufkit/tensor_types.h"

namespace ggufkit::check {
namespace {

// Ids other builds gave to formats llama.cpp never had: the same number means different things
// in different engines, so say which.
struct ForkTypeId {
  uint32_t id;
  std::string_view meaning;
};
constexpr ForkTypeId kForkTypeIds[] = {
    {43, "STQ1_0 in some llama.cpp forks (others recorded STQ1_0 as 42, which llama.cpp reads as Q2_0)"},
    {143, "PTQ1_0 in a llama.cpp fork"},
};

std::optional<std::string_view> fork_meaning(uint32_t id) {
  for (const ForkTypeId& f : kForkTypeIds) {
    if (f.id == id) return f.meaning;
  }
  return std::nullopt;
}

// Valid UTF-8 (no overlongs, no surrogates, at most U+10FFFF); ASCII runs are the fast path.
bool is_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const unsigned c = p[i];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (n - i < len) return false;
    if (p[i + 1] < lo || p[i + 1] > hi) return false;
    for (size_t k = 2; k < len; ++k) {
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

bool all_zero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

class ValueScanner {
 public:
  ValueScanner(const KeyValue& kv, Findings& out) : kv_(kv), out_(out) {}

  void scan(const ValueView& v) {
    switch (v.type()) {
      case ValueType::Bool:
        if (!v.encoded().empty() && static_cast<uint8_t>(v.encoded()[0]) > 1) note_bool(static_cast<uint8_t>(v.encoded()[0]));
        break;
      case ValueType::String:
        if (!is_utf8(v.as_string().value_or(""))) note_utf8(0, false);
        break;
      case ValueType::Array: scan_array(v); break;
      default: break;
    }
  }

 private:
  void scan_array(const ValueView& v) {
    const auto arr = v.as_array();
    if (!arr) return;
    if (arr->element_type() == ValueType::String) {
      uint64_t i = 0;
      for (std::string_view s : arr->strings()) {
        if (!is_utf8(s)) {
          note_utf8(i, true);
          return;  // once per key
        }
        ++i;
      }
    } else if (arr->element_type() == ValueType::Bool) {
      for (const std::byte b : arr->payload()) {
        if (static_cast<uint8_t>(b) > 1) {
          note_bool(static_cast<uint8_t>(b));
          return;
        }
      }
    } else if (arr->element_type() == ValueType::Array) {
      for (const ValueView e : arr->values()) scan(e);
    }
  }

  void note_bool(uint8_t byte) {
    out_.warning("structure.bad_bool", kv_.key, kv_.offset,
                 fmt::format("a bool is stored as byte {}; llama.cpp reads any non-zero byte as true, but other "
                             "readers may not (numpy bool, strict parsers): rewrite it as 0 or 1",
                             byte));
  }
  void note_utf8(uint64_t index, bool in_array) {
    out_.warning("structure.invalid_utf8", kv_.key, kv_.offset,
                 in_array ? fmt::format("string {} of the array (and maybe others) is not valid UTF-8, which GGUF "
                                        "requires; tools that decode it may fail or alter it",
                                        index)
                          : std::string("the string is not valid UTF-8, which GGUF requires; tools that decode it "
                                        "may fail or alter it"));
  }

  const KeyValue& kv_;
  Findings& out_;
};

void check_bytes_around_tensors(const GgufFile& file, Findings& out) {
  const auto bytes = file.bytes();
  const uint64_t size = bytes.size();
  // Between the tensor infos and the data section.
  const uint64_t header_end = std::min(file.header_size(), size);
  const uint64_t data_start = std::min(file.data_offset(), size);
  if (data_start > header_end && !all_zero(bytes.subspan(header_end, data_start - header_end))) {
    out.warning("structure.nonzero_padding", {}, header_end,
                fmt::format("the {} padding bytes before the data section are not all zero: something was written "
                            "there that no reader will see",
                            data_start - header_end));
  }
  // Between tensors, in data order.
  std::vector<const TensorInfo*> order;
  for (const TensorInfo& t : file.tensors()) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  uint64_t end = data_start;  // end of the data seen so far (file offsets)
  bool misplaced = false;
  for (const TensorInfo* t : order) {
    // Misplaced tensors (reported by the reader's checks) have no place to look around.
    const auto begin = checked::add(file.data_offset(), t->offset);
    if (!begin || !checked::fits(*begin, t->size, size)) {
      misplaced = true;
      continue;
    }
    const uint64_t start = *begin;
    if (start > end && end >= data_start) {
      const uint64_t padded_end = std::min(*checked::align_up(end - data_start, file.alignment()) + data_start, start);
      if (!all_zero(bytes.subspan(end, padded_end - end))) {
        out.warning("structure.nonzero_padding", t->name, end,
                    fmt::format("the padding before tensor '{}' is not all zero", t->name));
      }
    }
    end = std::max(end, start + t->size);
  }
  // After the last tensor: its padding, then nothing.
  const uint64_t expected_end =
      file.tensors().empty() ? header_end : std::min(*checked::align_up(end - data_start, file.alignment()) + data_start, size);
  if (end < expected_end && !all_zero(bytes.subspan(end, expected_end - end))) {
    out.warning("structure.nonzero_padding", {}, end, "the padding after the last tensor is not all zero");
  }
  // Bytes after the last tensor that fits are the start of a cut-off tensor when one does not fit
  // (the reader's data_out_of_bounds says so), not bytes appended to a whole file.
  if (size > expected_end && !misplaced &&
      !(file.tensors().empty() && all_zero(bytes.subspan(expected_end)) && size - expected_end < file.alignment())) {
    out.warning("structure.trailing_bytes", {}, expected_end,
                fmt::format("{} bytes follow the last tensor's data; no reader uses them. A file that was appended "
                            "to or concatenated? If not intended, rewrite it (gguf merge or any rewrite drops them)",
                            size - expected_end));
  }
}

}  // namespace

Finding reader_problem_finding(const Error& e) {
  Finding f;
  f.severity = Severity::error;
  f.code = fmt::format("structure.{}", error_code_name(e.code));
  f.subject = e.subject;
  f.offset = e.offset;
  f.message = e.message;
  return f;
}

void add_reader_problem(const Error& e, const GgufFile* file, Findings& out) {
  if (e.code == ErrorCode::unknown_tensor_type && file != nullptr) {
    // The reader keeps the raw id in the tensor's type: name a fork's meaning when we know one.
    if (const TensorInfo* t = file->find_tensor(e.subject)) {
      if (const auto meaning = fork_meaning(static_cast<uint32_t>(t->type))) {
        out.error("compat.fork_type_id", e.subject, e.offset,
                  fmt::format("tensor type id {} is not a llama.cpp type: it is {}. The same number means different "
                              "formats in different builds; only that fork can read this tensor",
                              static_cast<uint32_t>(t->type), *meaning));
        return;
      }
    }
  }
  Finding f = reader_problem_finding(e);
  out.add(f.severity, f.code, f.subject, f.offset, std::move(f.message));
}

void check_structure_extras(const GgufFile& file, Findings& out) {
  for (const KeyValue& kv : file.metadata()) {
    if (!is_utf8(kv.key)) {
      out.warning("structure.invalid_utf8", kv.key, kv.offset, "the key is not valid UTF-8, which GGUF requires");
    }
    ValueScanner(kv, out).scan(kv.value);
  }
  for (const TensorInfo& t : file.tensors()) {
    if (!is_utf8(t.name)) {
      out.warning("structure.invalid_utf8", t.name, t.info_offset, "the tensor name is not valid UTF-8");
    }
  }
  if (file.header_only()) return;  // a remote header: the data is on the server
  if (!file.has_tensor_data()) {
    out.error("structure.metadata_only", "", file.header_size(),
              fmt::format("the file ends where the tensor data would start: it holds {} tensor infos but none of "
                          "their data (a metadata-only file, as gguf_write_to_file writes with only_meta); "
                          "llama.cpp's parser reads it, but no engine can load it as a model",
                          file.tensors().size()));
    return;
  }
  check_bytes_around_tensors(file, out);
}

}  // namespace ggufkit::check
