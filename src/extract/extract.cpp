#include "ggufkit/endian.h"
#include "ggufkit/extract.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "ggufkit/atomic_file.h"
#include "ggufkit/quant.h"
#include "format/fp16.h"

namespace ggufkit {
namespace {

// Elements converted per step: bounds memory whatever the tensor's size.
constexpr int64_t kChunkElements = int64_t{1} << 20;

std::string_view native_descr(TensorType type) {
  switch (type) {
    case TensorType::F32: return "<f4";
    case TensorType::F16: return "<f2";
    case TensorType::F64: return "<f8";
    case TensorType::I8: return "|i1";
    case TensorType::I16: return "<i2";
    case TensorType::I32: return "<i4";
    case TensorType::I64: return "<i8";
    default: return {};
  }
}

}  // namespace

Expected<NpyLayout> npy_layout(const TensorInfo& tensor, ExtractType type) {
  NpyLayout layout;
  for (uint32_t d = tensor.n_dims; d-- > 0;) layout.shape.push_back(tensor.ne[d]);
  if (type == ExtractType::f32 || type == ExtractType::f16) {
    if (!quant_capabilities(tensor.type).dequantize) {
      return make_error(ErrorCode::invalid_argument, std::nullopt, std::string(tensor.name),
                        fmt::format("cannot convert {} to floats yet; use --type raw", type_name(tensor.type)));
    }
    layout.descr = type == ExtractType::f32 ? "<f4" : "<f2";
    return layout;
  }
  if (const auto descr = native_descr(tensor.type); !descr.empty()) {
    layout.descr = std::string(descr);
    return layout;
  }
  // Blocks as bytes: the row (last NumPy axis) becomes its byte length, as gguf-py does.
  layout.descr = "|u1";
  if (layout.shape.empty()) layout.shape.push_back(1);
  layout.shape.back() = static_cast<int64_t>(*row_size(tensor.type, tensor.ne[0]));
  return layout;
}

std::string npy_header(const NpyLayout& layout) {
  // Python tuple syntax: "()", "(3,)", "(3, 4)".
  const std::string shape = layout.shape.size() == 1 ? fmt::format("({},)", layout.shape[0])
                                                     : fmt::format("({})", fmt::join(layout.shape, ", "));
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", layout.descr, shape);
  // magic (6) + version (2) + length (2) + dict + padding + '\n' is a multiple of 64.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xFF);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict;
}

Expected<void> extract_npy(const GgufFile& file, const TensorInfo& tensor, ExtractType type,
                           const std::filesystem::path& out, bool sync, const OutputPolicy& output,
                           const std::atomic<bool>* cancel) {
  const auto cancelled = [cancel] { return cancel != nullptr && cancel->load(); };
  const auto stop = [] { return make_error(ErrorCode::cancelled, std::nullopt, {}, "cancelled"); };
  auto layout = npy_layout(tensor, type);
  if (!layout) return std::move(layout).error();
  OutputPolicy policy = output;
  if (!file.path().empty()) policy.inputs.push_back(file.path());
  auto sink = AtomicFile::create(out, policy);
  if (!sink) return std::move(sink).error();
  const std::string header = npy_header(*layout);
  if (auto r = (*sink)->write(std::as_bytes(std::span(header))); !r) return r;

  const std::span<const std::byte> data = file.tensor_data(tensor);
  // A big-endian file's bytes are swapped to the host's order on the way (a step at a time).
  const bool swap = file.byte_order() != native_byte_order();
  std::vector<std::byte> native;
  auto bytes_at = [&](uint64_t offset, uint64_t length) -> Expected<std::span<const std::byte>> {
    if (!swap) return data.subspan(offset, length);
    native.resize(length);
    if (auto r = copy_tensor_native(file, tensor, offset, native); !r) return std::move(r).error();
    return std::span<const std::byte>(native);
  };
  if (type == ExtractType::raw) {
    if (!swap) {
      if (auto r = (*sink)->write(data); !r) return r;
      return (*sink)->commit(sync, cancel);
    }
    constexpr uint64_t kStep = uint64_t{4} << 20;
    for (uint64_t at = 0; at < data.size(); at += kStep) {
      if (cancelled()) return stop();
      auto chunk = bytes_at(at, std::min<uint64_t>(kStep, data.size() - at));
      if (!chunk) return std::move(chunk).error();
      if (auto r = (*sink)->write(*chunk); !r) return r;
    }
    return (*sink)->commit(sync, cancel);
  }
  // Dequantize whole rows at a time (a row is whole blocks), a bounded number per step.
  const int64_t row_elements = std::max<int64_t>(tensor.ne[0], 1);
  const uint64_t row_bytes = *row_size(tensor.type, tensor.ne[0]);
  const int64_t rows = tensor.ne[0] == 0 ? 0 : tensor.n_elements() / row_elements;
  const int64_t rows_per_step = std::max<int64_t>(1, kChunkElements / row_elements);
  std::vector<float> floats;
  std::vector<uint16_t> halves;
  for (int64_t row = 0; row < rows; row += rows_per_step) {
    if (cancelled()) return stop();
    const int64_t n_rows = std::min(rows_per_step, rows - row);
    floats.resize(static_cast<size_t>(n_rows * row_elements));
    auto src = bytes_at(static_cast<uint64_t>(row) * row_bytes, static_cast<uint64_t>(n_rows) * row_bytes);
    if (!src) return std::move(src).error();
    if (auto r = dequantize(tensor.type, *src, floats); !r) return r;
    Expected<void> w;
    if (type == ExtractType::f32) {
      w = (*sink)->write(std::as_bytes(std::span(floats)));
    } else {
      halves.resize(floats.size());
      std::transform(floats.begin(), floats.end(), halves.begin(), format::fp32_to_fp16);
      w = (*sink)->write(std::as_bytes(std::span(halves)));
    }
    if (!w) return w;
  }
  return (*sink)->commit(sync, cancel);
}

}  // namespace ggufkit
