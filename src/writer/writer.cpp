#include "ggufkit/writer.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "format/checked_math.h"
#include "format/encoder.h"
#include "ggufkit/atomic_file.h"

namespace ggufkit {
namespace {

// The largest alignment general.alignment can give (a uint32 power of two).
constexpr uint64_t kMaxAlignment = uint64_t{1} << 31;

// add_tensor keeps the data section, padded at the largest alignment, below 2^63 bytes, so the
// checked result is always there.
uint64_t padded(uint64_t n, uint64_t alignment) { return checked::align_up(n, alignment).value(); }

const std::byte kZeros[4096] = {};

Expected<void> write_zeros(ByteSink& sink, uint64_t n) {
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, sizeof kZeros));
    if (auto r = sink.write(std::span<const std::byte>(kZeros, chunk)); !r) return r;
    n -= chunk;
  }
  return {};
}

}  // namespace

GgufBuilder GgufBuilder::from_file(const GgufFile& file) {
  GgufBuilder b;
  b.version_ = file.version();
  for (const KeyValue& kv : file.metadata()) {
    b.kvs_.push_back(Entry{std::string(kv.key), MetadataValue::copy_of(kv.value)});
  }
  for (const TensorInfo& t : file.tensors()) {
    b.tensors_.push_back(Tensor{std::string(t.name), t.type, t.n_dims, t.ne, t.size, file.tensor_data(t), {}, {}});
    const auto padded_size = checked::align_up(t.size, kMaxAlignment);  // saturates: a later add_tensor then fails
    b.data_bound_ = padded_size ? checked::add(b.data_bound_, *padded_size).value_or(UINT64_MAX) : UINT64_MAX;
  }
  b.suggested_.byte_order = file.byte_order();
  b.suggested_.pad_header_without_tensors = file.header_padded();
  return b;
}

Expected<void> GgufBuilder::set(std::string_view key, MetadataValue value) {
  if (key.empty()) return make_error(ErrorCode::empty_key, std::nullopt, {}, "metadata keys cannot be empty");
  if (key.size() > kMaxStringLength) return make_error(ErrorCode::string_too_long, std::nullopt, {}, "key too long");
  if (!value.well_formed()) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, std::string(key), "the value holds no well-formed encoding");
  }
  // Nothing the reader would refuse (format.h's limits): a file written so could not even be edited back.
  if (auto r = value.check_limits(key); !r) return r;
  if (key == keys::kAlignment) {
    const auto a = value.view().get<uint32_t>();
    if (!a || !checked::is_power_of_two(*a)) {
      return make_error(ErrorCode::bad_alignment, std::nullopt, std::string(key), "general.alignment must be a uint32 power of two");
    }
  }
  for (Entry& e : kvs_) {
    if (e.key == key) {
      e.value = std::move(value);
      return {};
    }
  }
  if (kvs_.size() >= kMaxHeaderCount) {
    return make_error(ErrorCode::bad_count, std::nullopt, std::string(key),
                      fmt::format("a file holds at most {} keys", kMaxHeaderCount));
  }
  kvs_.push_back(Entry{std::string(key), std::move(value)});
  return {};
}

bool GgufBuilder::remove(std::string_view key) {
  auto it = std::find_if(kvs_.begin(), kvs_.end(), [&](const Entry& e) { return e.key == key; });
  if (it == kvs_.end()) return false;
  kvs_.erase(it);
  return true;
}

const MetadataValue* GgufBuilder::find(std::string_view key) const {
  for (const Entry& e : kvs_) {
    if (e.key == key) return &e.value;
  }
  return nullptr;
}

uint32_t GgufBuilder::alignment() const {
  const MetadataValue* v = find(keys::kAlignment);
  // A bad general.alignment (kept from a file opened past problems) counts as the default, as the
  // reader takes it: the layout arithmetic only ever sees a power of two.
  const auto a = v ? v->view().get<uint32_t>() : std::nullopt;
  return a && checked::is_power_of_two(*a) ? *a : kDefaultAlignment;
}

Expected<void> GgufBuilder::add_tensor(std::string_view name, TensorType type, std::span<const int64_t> shape,
                                       std::span<const std::byte> data) {
  return add_tensor_impl(name, type, shape, data, {});
}

Expected<void> GgufBuilder::add_tensor(std::string_view name, TensorType type, std::span<const int64_t> shape,
                                       std::vector<std::byte>&& data) {
  auto owned = std::make_shared<std::vector<std::byte>>(std::move(data));
  auto r = add_tensor_impl(name, type, shape, *owned, {});
  if (r) tensors_.back().owned = std::move(owned);
  return r;
}

Expected<void> GgufBuilder::set_version(uint32_t version) {
  if (version < 2 || version > kGgufVersionLatest) {
    return make_error(ErrorCode::unsupported_version, std::nullopt, {}, fmt::format("ggufkit writes GGUF v2 and v3, not v{}", version));
  }
  version_ = version;
  return {};
}

Expected<void> GgufBuilder::add_tensor(std::string_view name, TensorType type, std::span<const int64_t> shape,
                                       TensorProducer producer) {
  if (!producer) return make_error(ErrorCode::invalid_argument, std::nullopt, std::string(name), "empty tensor producer");
  return add_tensor_impl(name, type, shape, {}, std::move(producer));
}

Expected<void> GgufBuilder::add_tensor_impl(std::string_view name, TensorType type, std::span<const int64_t> shape,
                                            std::span<const std::byte> data, TensorProducer producer) {
  const std::string subject(name);
  const TypeTraits* traits = find_type_traits(static_cast<uint32_t>(type));
  if (traits == nullptr) {
    return make_error(ErrorCode::unknown_tensor_type, std::nullopt, subject,
                      fmt::format("tensor type id {} is unknown", static_cast<uint32_t>(type)));
  }
  if (traits->status != TypeStatus::supported) {
    return make_error(ErrorCode::removed_tensor_type, std::nullopt, subject, std::string(traits->note));
  }
  if (name.empty()) return make_error(ErrorCode::invalid_argument, std::nullopt, subject, "tensor names cannot be empty");
  if (name.size() > kMaxTensorNameBytes) {
    return make_error(ErrorCode::tensor_name_too_long, std::nullopt, subject,
                      fmt::format("tensor name is {} bytes; llama.cpp allows at most {}", name.size(),
                                  kMaxTensorNameBytes));
  }
  if (shape.empty() || shape.size() > kMaxDimensions) {
    return make_error(ErrorCode::bad_dimension_count, std::nullopt, subject, "a tensor has 1 to 4 dimensions");
  }
  if (tensors_.size() >= kMaxHeaderCount) {
    return make_error(ErrorCode::bad_count, std::nullopt, subject, fmt::format("a file holds at most {} tensors", kMaxHeaderCount));
  }
  // llama.cpp (and so the reader) ends a name at a NUL byte: "a\0x" repeats "a\0y".
  const auto c_name = [](std::string_view n) { return n.substr(0, n.find('\0')); };
  for (const Tensor& t : tensors_) {
    if (t.name == name) return make_error(ErrorCode::duplicate_tensor, std::nullopt, subject, "a tensor of that name exists");
    if (c_name(t.name) == c_name(name)) {
      return make_error(ErrorCode::duplicate_tensor, std::nullopt, subject,
                        "a tensor has the same name up to a NUL byte, which llama.cpp treats as the end of a name");
    }
  }
  Tensor t{subject, type, static_cast<uint32_t>(shape.size()), {1, 1, 1, 1}, 0, data, std::move(producer), {}};
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) return make_error(ErrorCode::bad_shape, std::nullopt, subject, "negative dimension");
    t.ne[d] = shape[d];
  }
  // A zero dimension empties the tensor whatever the others say (as the reader accepts it).
  const bool empty = std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end();
  uint64_t elements = empty ? 0 : 1;
  for (size_t d = 0; d < shape.size() && !empty; ++d) {
    const auto e = checked::mul(elements, static_cast<uint64_t>(shape[d]));
    if (!e || *e > static_cast<uint64_t>(INT64_MAX)) return make_error(ErrorCode::shape_overflow, std::nullopt, subject, "too many elements");
    elements = *e;
  }
  if (t.ne[0] % traits->block_size != 0) {
    return make_error(ErrorCode::block_size_mismatch, std::nullopt, subject,
                      fmt::format("first dimension {} is not a multiple of {}'s block size {}", t.ne[0], traits->name,
                                  traits->block_size));
  }
  const auto size = checked::mul(elements / traits->block_size, traits->block_bytes);
  if (!size) return make_error(ErrorCode::shape_overflow, std::nullopt, subject, "size in bytes overflows");
  t.size = *size;
  const auto padded_size = checked::align_up(t.size, kMaxAlignment);
  const auto bound = padded_size ? checked::add(data_bound_, *padded_size) : std::nullopt;
  if (!bound || *bound > static_cast<uint64_t>(INT64_MAX)) {
    return make_error(ErrorCode::shape_overflow, std::nullopt, subject, "the data section would pass 2^63 bytes");
  }
  if (!t.producer && data.size() != t.size) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, subject,
                      fmt::format("data is {} bytes; the shape and type need {}", data.size(), t.size));
  }
  tensors_.push_back(std::move(t));
  data_bound_ = *bound;
  return {};
}

void GgufBuilder::encode_header(std::vector<std::byte>& out, ByteOrder order) const {
  format::Encoder e(out, order);
  e.preamble(version_, tensors_.size(), kvs_.size());
  for (const Entry& kv : kvs_) e.kv(kv.key, kv.value.type(), kv.value.encoded());
  const uint64_t alignment = this->alignment();
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    e.tensor_info(t.name, std::span(t.ne.data(), t.n_dims), static_cast<int32_t>(t.type), offset);
    offset += padded(t.size, alignment);
  }
}

// The padding is written as zeros by write(), never held in memory (an alignment may be 2^31).
uint64_t GgufBuilder::header_padding(uint64_t unpadded, const WriteOptions& options) const {
  if (tensors_.empty() && !options.pad_header_without_tensors) return 0;
  return padded(unpadded, alignment()) - unpadded;
}

uint64_t GgufBuilder::header_bytes(const WriteOptions& options) const {
  std::vector<std::byte> header;
  encode_header(header);
  return header.size() + header_padding(header.size(), options);
}

uint64_t GgufBuilder::file_bytes(const WriteOptions& options) const {
  uint64_t total = header_bytes(options);
  for (const Tensor& t : tensors_) total += padded(t.size, alignment());
  return total;
}

Expected<void> GgufBuilder::write_header(ByteSink& sink, const WriteOptions& options) const {
  std::vector<std::byte> header;
  encode_header(header, options.byte_order);
  if (auto r = sink.write(header); !r) return r;
  return write_zeros(sink, header_padding(header.size(), options));
}

uint64_t GgufBuilder::padding_after(uint64_t bytes) const { return padded(bytes, alignment()) - bytes; }

Expected<void> GgufBuilder::write(ByteSink& sink, const WriteOptions& options) const {
  if (auto r = write_header(sink, options); !r) return r;
  const auto cancelled = [&] { return options.cancel != nullptr && options.cancel->load(); };
  const auto stop = [] { return make_error(ErrorCode::cancelled, std::nullopt, {}, "cancelled"); };
  // Views are written a slice at a time too, so that a cancel is seen within one slice.
  constexpr uint64_t kViewSlice = uint64_t{64} << 20;
  std::vector<std::byte> chunk;
  for (size_t index = 0; index < tensors_.size(); ++index) {
    const Tensor& t = tensors_[index];
    if (!t.producer) {
      for (uint64_t done = 0; done < t.bytes.size();) {
        if (cancelled()) return stop();
        const uint64_t n = std::min<uint64_t>(kViewSlice, t.bytes.size() - done);
        if (auto r = sink.write(t.bytes.subspan(done, n)); !r) return r;
        done += n;
        if (options.tensor_progress) options.tensor_progress(index, done, t.size);
      }
    } else {
      chunk.resize(static_cast<size_t>(std::min<uint64_t>(std::max<size_t>(options.chunk_bytes, 1), t.size)));
      for (uint64_t done = 0; done < t.size;) {
        if (cancelled()) return stop();
        const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), t.size - done));
        const std::span<std::byte> out(chunk.data(), n);
        if (auto r = t.producer(done, out); !r) return r;
        if (auto r = sink.write(out); !r) return r;
        done += n;
        if (options.tensor_progress) options.tensor_progress(index, done, t.size);
      }
    }
    if (auto r = write_zeros(sink, padding_after(t.size)); !r) return r;
    if (options.progress) options.progress(index + 1, tensors_.size());
  }
  // The last chance: a cancel that came during the last tensor still leaves nothing behind.
  if (cancelled()) return stop();
  return {};
}

Expected<void> GgufBuilder::write_file(const std::filesystem::path& path, const WriteOptions& options) const {
  auto file = AtomicFile::create(path, options.output);
  if (!file) return std::move(file).error();
  if (auto r = write(**file, options); !r) return r;  // the temporary file is removed on return
  return (*file)->commit(options.sync, options.cancel);
}

Expected<void> rewrite_file(const GgufFile& file, const std::filesystem::path& path, bool sync) {
  const GgufBuilder b = GgufBuilder::from_file(file);
  WriteOptions options = b.suggested_options();
  options.sync = sync;
  return b.write_file(path, options);
}

}  // namespace ggufkit
