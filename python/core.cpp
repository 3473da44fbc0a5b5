// ggufkit._core: the C++ library under the Python package (python/ggufkit/). Only what Python
// cannot do fast lives here: opening and validating a file (ggufkit::GgufFile), decoding metadata
// values into Python objects, the offsets of a string array's elements, tensor infos, the file's
// bytes as a read-only buffer (numpy views into the mapping, no copy), quantize and dequantize
// with the GIL released, and a writer that takes each tensor's bytes as they come. The gguf-py
// names and behaviour are built on top of it in Python.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <sys/stat.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ggufkit/atomic_file.h"
#include "ggufkit/conventions.h"
#include "ggufkit/mapped_file.h"
#include "ggufkit/quant.h"
#include "ggufkit/reader.h"
#include "ggufkit/split.h"
#include "ggufkit/tensor_types.h"
#include "ggufkit/writer.h"
#include "binding.h"

namespace py = pybind11;
using namespace ggufkit;

namespace ggufkit::python {

[[noreturn]] void raise_error(const Error& e, const std::string& file) {
  py::object cls = py::module_::import("ggufkit.errors").attr("GGUFError");
  py::object offset = e.offset ? py::object(py::int_(*e.offset)) : py::object(py::none());
  const std::string where = !e.file.empty() ? e.file : file;
  std::string text = e.describe();
  if (!where.empty()) text = where + ": " + text;
  py::object error = cls(text, std::string(error_code_name(e.code)), offset, e.subject, where);
  PyErr_SetObject(cls.ptr(), error.ptr());
  throw py::error_already_set();
}

py::object text(std::string_view s, const char* errors) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), errors);
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

std::string utf8(const py::handle& s) {
  if (PyUnicode_Check(s.ptr())) {
    const auto bytes = py::reinterpret_steal<py::object>(PyUnicode_AsEncodedString(s.ptr(), "utf-8", "surrogateescape"));
    if (!bytes) throw py::error_already_set();
    return {PyBytes_AS_STRING(bytes.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(bytes.ptr()))};
  }
  if (PyByteArray_Check(s.ptr())) return {PyByteArray_AsString(s.ptr()), static_cast<size_t>(PyByteArray_Size(s.ptr()))};
  if (PyBytes_Check(s.ptr())) return {PyBytes_AS_STRING(s.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(s.ptr()))};
  throw py::cast_error("expected str or bytes, not " + std::string(py::str(py::type::of(s))));
}

namespace {

void append_values(const ArrayView& a, py::list& out, bool flatten, const char* errors) {
  if (a.element_type() == ValueType::String) {
    for (const std::string_view s : a.strings()) out.append(text(s, errors));
    return;
  }
  for (const ValueView v : a.values()) {
    if (v.type() == ValueType::Array && flatten) {
      append_values(*v.as_array(), out, flatten, errors);
    } else {
      out.append(value_to_python(v, flatten, errors));
    }
  }
}

}  // namespace

py::object value_to_python(const ValueView& v, bool flatten, const char* errors) {
  switch (v.type()) {
    case ValueType::UInt8: return py::int_(*v.get<uint8_t>());
    case ValueType::Int8: return py::int_(*v.get<int8_t>());
    case ValueType::UInt16: return py::int_(*v.get<uint16_t>());
    case ValueType::Int16: return py::int_(*v.get<int16_t>());
    case ValueType::UInt32: return py::int_(*v.get<uint32_t>());
    case ValueType::Int32: return py::int_(*v.get<int32_t>());
    case ValueType::UInt64: return py::int_(*v.get<uint64_t>());
    case ValueType::Int64: return py::int_(*v.get<int64_t>());
    case ValueType::Float32: return py::float_(static_cast<double>(*v.get<float>()));
    case ValueType::Float64: return py::float_(*v.get<double>());
    case ValueType::Bool: return py::bool_(*v.get<bool>());
    case ValueType::String: return text(*v.as_string(), errors);
    case ValueType::Array: break;
  }
  py::list out;
  if (const auto a = v.as_array()) append_values(*a, out, flatten, errors);
  return out;
}

}  // namespace ggufkit::python

namespace {

using namespace ggufkit::python;

// A read-only numpy array over `bytes`, keeping `owner` (the File) alive.
py::array byte_array(std::span<const std::byte> bytes, py::handle owner) {
  py::array a(py::dtype::of<uint8_t>(), {static_cast<py::ssize_t>(bytes.size())}, {1},
              reinterpret_cast<const uint8_t*>(bytes.data()), owner);
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

// After one of the module's own loops read `bytes`: GGUFError if some of them were in a mapped
// file that shrank meanwhile (read as zeros: mapped_file.h, zero_fill_on_bus_error).
void check_not_lost(std::span<const std::byte> bytes) {
  if (lost_to_bus_error(bytes)) {
    raise_error(make_error(ErrorCode::io_error, std::nullopt, {},
                           "the data were in a mapped file that was truncated or became unreadable while it was "
                           "read (bus error; read as zeros)"));
  }
}

class File {
 public:
  File(const std::string& path, bool allow_metadata_only) : path_(path) {
    OpenOptions options;
    options.allow_metadata_only = allow_metadata_only;
    file_ = std::make_unique<GgufFile>(take(GgufFile::open(path, options), path));
  }

  const GgufFile& file() const { return *file_; }

  // Key i (file order): (key, record offset, value offset in the header view, type id, value bytes).
  // The reader makes its fields from these on access, one at a time.
  size_t key_count() const { return file_->metadata().size(); }
  py::tuple field(size_t i) const {
    const KeyValue& kv = at(i);
    const auto value_offset = static_cast<uint64_t>(kv.value.encoded().data() - file_->header_view().data());
    return py::make_tuple(text(kv.key), kv.offset, value_offset, static_cast<uint32_t>(kv.value.type()), kv.value.encoded().size());
  }
  py::object key_name(size_t i) const { return text(at(i).key); }

  // Before a tensor's data are handed out: GGUFError (truncated) when the file no longer holds the
  // bytes [offset, offset + length) (truncated since it was opened), or a read of them hit the end.
  void check_data(uint64_t offset, uint64_t length, const py::handle& name) const {
    struct stat st {};
    const bool stat_ok = file_->fd() >= 0 && ::fstat(file_->fd(), &st) == 0;
    const bool short_now = stat_ok && static_cast<uint64_t>(st.st_size) < offset + length;
    const auto bytes = file_->bytes();
    const bool lost = offset + length <= bytes.size() && lost_to_bus_error(bytes.subspan(offset, length));
    if (!short_now && !lost) return;
    const std::string size = stat_ok ? " (it is now " + std::to_string(st.st_size) + " bytes)" : std::string();
    raise_error(make_error(ErrorCode::truncated, offset, utf8(name),
                           "the file was truncated after it was opened" + size + ": the tensor's data are gone"),
                path_);
  }
  // The index of the key `name` (the reader's sorted index), or -1.
  int64_t find_key(const py::handle& name) const {
    const KeyValue* kv = file_->find(utf8(name));
    return kv == nullptr ? -1 : static_cast<int64_t>(kv - file_->metadata().data());
  }

  py::object value(size_t i) const { return value_to_python(at(i).value, true); }

  // Where each element of string array i is in the header view: [offset of its length field,
  // offset of its first byte, offset after its last byte] per element, so that Python makes an
  // element's parts with one slice each.
  py::array_t<uint64_t> string_spans(size_t i) const {
    const KeyValue& kv = at(i);
    const auto a = kv.value.as_array();
    if (!a || a->element_type() != ValueType::String) throw py::value_error("not an array of strings");
    py::array_t<uint64_t> out({static_cast<py::ssize_t>(a->size()), py::ssize_t{3}});
    auto* o = out.mutable_data();
    const std::byte* base = file_->header_view().data();
    const std::byte* p = a->payload().data();
    for (uint64_t k = 0; k < a->size(); ++k) {
      uint64_t n;
      std::memcpy(&n, p, 8);
      const auto at = static_cast<uint64_t>(p - base);
      o[3 * k] = at;
      o[3 * k + 1] = at + 8;
      o[3 * k + 2] = at + 8 + n;
      p += 8 + n;
    }
    return out;
  }

  // Element k of array i (contents(k) of one element without decoding the others).
  py::object element(size_t i, uint64_t k) const {
    const auto a = at(i).value.as_array();
    if (!a || k >= a->size()) throw py::index_error("list index out of range");
    const auto v = a->at(k);
    return value_to_python(*v, true);
  }

  // Tensor i: (name, type id, dims as stored, offset in the data section, bytes, info record offset).
  size_t tensor_count() const { return file_->tensors().size(); }
  py::tuple tensor(size_t i) const {
    if (i >= file_->tensors().size()) throw py::index_error("tensor index out of range");
    const TensorInfo& t = file_->tensors()[i];
    py::list dims;
    for (const int64_t d : t.shape()) dims.append(d);
    return py::make_tuple(text(t.name), static_cast<uint32_t>(t.type), dims, t.offset, t.size, t.info_offset);
  }

 private:
  const KeyValue& at(size_t i) const {
    if (i >= file_->metadata().size()) throw py::index_error("no such key");
    return file_->metadata()[i];
  }
  std::string path_;
  std::unique_ptr<GgufFile> file_;
};

TensorType tensor_type_of(int id) {
  const TypeTraits* t = find_type_traits(static_cast<uint32_t>(id));
  if (t == nullptr || t->block_size == 0) throw py::value_error("unknown or removed tensor type " + std::to_string(id));
  return t->type();
}

// Dequantizes the contiguous bytes `data` (whole blocks) into a new float32 array of `count` values.
py::array_t<float> dequantize_bytes(const py::buffer& data, int type_id, int threads) {
  const TensorType type = tensor_type_of(type_id);
  const py::buffer_info in = data.request();
  const TypeTraits& traits = type_traits(type);
  const auto bytes = static_cast<uint64_t>(in.size) * static_cast<uint64_t>(in.itemsize);
  if (bytes % traits.block_bytes != 0) {
    throw py::value_error("the data is " + std::to_string(bytes) + " bytes, not a whole number of " +
                          std::string(traits.name) + " blocks of " + std::to_string(traits.block_bytes) + " bytes");
  }
  const uint64_t count = bytes / traits.block_bytes * traits.block_size;
  py::array_t<float> out(static_cast<py::ssize_t>(count));
  const std::span<const std::byte> src(static_cast<const std::byte*>(in.ptr), bytes);
  const std::span<float> dst(out.mutable_data(), count);
  Expected<void> r;
  {
    py::gil_scoped_release release;
    r = dequantize(type, src, dst, threads_of(threads));
  }
  check(r);
  check_not_lost(src);
  return out;
}

// Quantizes rows of n_per_row float32 values into a new uint8 array.
py::array_t<uint8_t> quantize_floats(const py::array_t<float, py::array::c_style | py::array::forcecast>& values,
                                     int type_id, int64_t n_per_row, const std::optional<py::array_t<float, py::array::c_style | py::array::forcecast>>& imatrix,
                                     int threads) {
  const TensorType type = tensor_type_of(type_id);
  const auto count = static_cast<uint64_t>(values.size());
  if (n_per_row <= 0 || count % static_cast<uint64_t>(n_per_row) != 0) throw py::value_error("not whole rows");
  const auto row = row_size(type, n_per_row);
  if (!row) {
    throw py::value_error("rows of " + std::to_string(n_per_row) + " values are not whole " + std::string(type_name(type)) + " blocks of " +
                          std::to_string(type_traits(type).block_size));
  }
  const uint64_t rows = count / static_cast<uint64_t>(n_per_row);
  py::array_t<uint8_t> out(static_cast<py::ssize_t>(rows * *row));
  std::span<const float> weights;
  if (imatrix) {
    if (imatrix->size() != n_per_row) throw py::value_error("the importance matrix must hold one weight per column");
    weights = std::span<const float>(imatrix->data(), static_cast<size_t>(n_per_row));
  }
  const std::span<const float> src(values.data(), count);
  const std::span<std::byte> dst(reinterpret_cast<std::byte*>(out.mutable_data()), rows * *row);
  Expected<void> r;
  {
    py::gil_scoped_release release;
    r = quantize(type, src, dst, n_per_row, weights, threads_of(threads));
  }
  check(r);
  check_not_lost(std::as_bytes(src));
  return out;
}

// A GGUF value from a Python object and gguf-py's type ids (sub_type for arrays). `depth` counts the
// arrays around v: past kMaxArrayDepth the value is refused (ArrayTooDeep) before the recursion goes
// further, so a deeply nested or self-referential list ends in an error, not in a stack overflow.
struct ArrayTooDeep {};
MetadataValue metadata_value(const py::handle& v, ValueType type, std::optional<ValueType> sub_type, uint32_t depth = 0);

template <class T>
MetadataValue typed_scalar(const py::handle& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return MetadataValue::of(v.cast<bool>());
  } else if constexpr (std::is_floating_point_v<T>) {
    return MetadataValue::of(static_cast<T>(v.cast<double>()));
  } else {
    // Python ints are unbounded: a value that does not fit is an error, not a wrapped number.
    const py::int_ i = py::reinterpret_borrow<py::object>(v).attr("__index__")();
    if constexpr (std::is_signed_v<T>) {
      const long long x = i.cast<long long>();
      if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) throw py::value_error("value out of range");
      return MetadataValue::of(static_cast<T>(x));
    } else {
      const unsigned long long x = i.cast<unsigned long long>();
      if (x > std::numeric_limits<T>::max()) throw py::value_error("value out of range");
      return MetadataValue::of(static_cast<T>(x));
    }
  }
}

// str (as UTF-8, surrogate-escaped bytes as they were read), bytes or bytearray.
std::string string_of(const py::handle& v) { return utf8(v); }

// gguf-py's GGUFValueType.get_type: str/bytes STRING, list ARRAY, float FLOAT32, bool BOOL, int INT32.
ValueType python_value_type(const py::handle& v) {
  if (py::isinstance<py::str>(v) || py::isinstance<py::bytes>(v) || py::isinstance<py::bytearray>(v)) return ValueType::String;
  if (py::isinstance<py::list>(v)) return ValueType::Array;
  if (py::isinstance<py::float_>(v)) return ValueType::Float32;
  if (py::isinstance<py::bool_>(v)) return ValueType::Bool;
  if (py::isinstance<py::int_>(v)) return ValueType::Int32;
  throw py::value_error("Unknown type: " + std::string(py::str(py::type::of(v))));
}

MetadataValue metadata_value(const py::handle& v, ValueType type, std::optional<ValueType> sub_type, uint32_t depth) {
  switch (type) {
    case ValueType::UInt8: return typed_scalar<uint8_t>(v);
    case ValueType::Int8: return typed_scalar<int8_t>(v);
    case ValueType::UInt16: return typed_scalar<uint16_t>(v);
    case ValueType::Int16: return typed_scalar<int16_t>(v);
    case ValueType::UInt32: return typed_scalar<uint32_t>(v);
    case ValueType::Int32: return typed_scalar<int32_t>(v);
    case ValueType::UInt64: return typed_scalar<uint64_t>(v);
    case ValueType::Int64: return typed_scalar<int64_t>(v);
    case ValueType::Float32: return typed_scalar<float>(v);
    case ValueType::Float64: return typed_scalar<double>(v);
    case ValueType::Bool: return typed_scalar<bool>(v);
    case ValueType::String: return MetadataValue::string(string_of(v));
    case ValueType::Array: break;
  }
  if (depth >= kMaxArrayDepth) throw ArrayTooDeep{};
  // The elements as owned references: a sequence's __getitem__ may make each element anew (range,
  // array.array, numpy arrays), and a borrowed handle to it would outlive the object. A numpy array
  // is taken as its tolist() (Python ints, floats, bools, str, bytes), as a list of them would be.
  py::object source = py::reinterpret_borrow<py::object>(v);
  if (py::isinstance<py::array>(source)) source = source.attr("tolist")();
  if (!PySequence_Check(source.ptr())) throw py::value_error("Invalid GGUF metadata array, expecting sequence");
  const auto items = py::reinterpret_steal<py::list>(PySequence_List(source.ptr()));
  if (!items) throw py::error_already_set();
  if (!sub_type) {  // an array inside an array: typed by its elements, as gguf-py's writer types them
    if (items.empty()) throw py::value_error("Invalid GGUF metadata array. Empty array");
    if (py::isinstance<py::bytes>(source)) {
      sub_type = ValueType::UInt8;
    } else {
      sub_type = python_value_type(items[0]);
      for (const py::handle item : items) {
        if (python_value_type(item) != *sub_type) throw py::value_error("All items in a GGUF array should be of the same type");
      }
    }
  }
  if (*sub_type == ValueType::String) {
    std::vector<std::string> strings;
    strings.reserve(items.size());
    for (const py::handle item : items) strings.push_back(string_of(item));
    return MetadataValue::string_array(strings);
  }
  std::vector<MetadataValue> elements;
  elements.reserve(items.size());
  for (const py::handle item : items) elements.push_back(metadata_value(item, *sub_type, std::nullopt, depth + 1));
  return take(MetadataValue::array_of(*sub_type, elements));
}

ValueType value_type_of_id(int id) {
  if (id < 0 || id >= static_cast<int>(kValueTypeIdLimit)) throw py::value_error("unknown GGUF value type " + std::to_string(id));
  return static_cast<ValueType>(id);
}

// The writer under GGUFWriter: keys and tensor infos first, then the header, then each tensor's
// bytes in order, into a temporary file renamed over the target by close() (nothing at the target
// until then; an unfinished writer leaves nothing behind).
class Writer {
 public:
  Writer(std::string path, bool big_endian) : path_(std::move(path)) {
    options_.byte_order = big_endian ? ByteOrder::big : ByteOrder::little;
    options_.output.overwrite = true;  // as gguf-py's GGUFWriter, an existing file is replaced
    // Without tensors gguf-py pads the header only in write_tensors_to_file (pad_header).
    options_.pad_header_without_tensors = false;
  }

  void add_kv(const py::handle& key_text, int type, const py::handle& value, std::optional<int> sub_type) {
    const std::string key = utf8(key_text);
    if (header_written_) throw py::value_error("the header is already written");
    std::optional<ValueType> sub;
    if (sub_type) sub = value_type_of_id(*sub_type);
    MetadataValue encoded;
    try {
      encoded = metadata_value(value, value_type_of_id(type), sub);
    } catch (const py::cast_error&) {  // a value that is not of the type: ValueError naming the key
      const std::string name(value_type_name(value_type_of_id(type)));
      const char* article = name.starts_with("int") || name.starts_with("array") ? " is not an " : " is not a ";
      throw py::value_error(key + ": " + std::string(py::repr(value)) + article + name +
                            (sub ? " of " + std::string(value_type_name(*sub)) : std::string()));
    } catch (const py::value_error& e) {
      throw py::value_error(key + ": " + e.what());
    } catch (const ArrayTooDeep&) {  // the builder's own refusal of such a value
      raise_error(make_error(ErrorCode::array_too_deep, std::nullopt, key,
                             fmt::format("arrays nested more than {} deep", kMaxArrayDepth)), path_);
    }
    check(builder_.set(key, std::move(encoded)), path_);
  }

  void add_tensor_info(const py::handle& name_text, int type_id, const std::vector<int64_t>& ne, uint64_t nbytes) {
    const std::string name = utf8(name_text);
    if (header_written_) throw py::value_error("the header is already written");
    TensorProducer pending = [](uint64_t, std::span<std::byte>) -> Expected<void> {
      return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "tensor data not given");
    };
    const TensorType type = tensor_type_of(type_id);
    check(builder_.add_tensor(name, type, ne, std::move(pending)), path_);
    // The bytes the builder lays out for this shape and type, against what the caller says (the
    // Python writer drops this Writer on the error).
    const uint64_t size = builder_.tensor_size(builder_.tensor_count() - 1);
    if (size != nbytes) {
      throw py::value_error("tensor " + name + ": " + std::to_string(nbytes) + " bytes for a " + std::string(type_name(type)) +
                            " tensor of this shape, which takes " + std::to_string(size));
    }
  }

  void write_header() {
    if (header_written_) return;
    file_ = take(AtomicFile::create(path_, options_.output), path_);
    check(builder_.write_header(*file_, options_), path_);
    header_written_ = true;
  }

  // A file without tensors: the header padded to the alignment (gguf-py's write_tensors_to_file).
  void pad_header() {
    write_header();
    if (builder_.tensor_count() != 0 || padded_) return;
    WriteOptions padded = options_;
    padded.pad_header_without_tensors = true;
    const std::vector<std::byte> zeros(static_cast<size_t>(builder_.header_bytes(padded) - builder_.header_bytes(options_)));
    check(file_->write(zeros), path_);
    padded_ = true;
  }

  void write_tensor(const py::buffer& data) {
    const std::lock_guard<std::mutex> lock(mutex_);  // the GIL is released while writing
    write_header();
    if (next_ >= builder_.tensor_count()) throw py::value_error("more tensor data than tensor infos");
    const uint64_t expected = builder_.tensor_size(next_);
    const py::buffer_info in = data.request();
    const auto bytes = static_cast<uint64_t>(in.size) * static_cast<uint64_t>(in.itemsize);
    if (bytes != expected) {
      throw py::value_error("tensor " + std::string(builder_.tensor_name(next_)) + ": " + std::to_string(bytes) + " bytes given, its info says " +
                            std::to_string(expected));
    }
    const std::span<const std::byte> span(static_cast<const std::byte*>(in.ptr), bytes);
    Expected<void> r;
    {
      py::gil_scoped_release release;
      r = file_->write(span);
      if (r) {
        const std::vector<std::byte> zeros(static_cast<size_t>(builder_.padding_after(bytes)));
        r = file_->write(zeros);
      }
    }
    check(r, path_);
    check_not_lost(span);  // (close() would refuse to commit anyway)
    ++next_;
  }

  void close(bool sync) {
    const std::lock_guard<std::mutex> lock(mutex_);
    write_header();
    if (next_ != builder_.tensor_count()) {
      throw py::value_error("the data of " + std::to_string(builder_.tensor_count() - next_) +
                            " tensor(s) was not written (first: " + std::string(builder_.tensor_name(next_)) +
                            "); nothing was written to " + path_);
    }
    Expected<void> r;
    {
      py::gil_scoped_release release;
      r = file_->commit(sync);
    }
    check(r, path_);
    file_.reset();
  }

  // Drops the temporary file (an unfinished writer).
  void abort() {
    const std::lock_guard<std::mutex> lock(mutex_);
    file_.reset();
  }

 private:
  std::string path_;
  GgufBuilder builder_;
  WriteOptions options_;
  std::unique_ptr<AtomicFile> file_;
  size_t next_ = 0;
  bool header_written_ = false;
  bool padded_ = false;
  // Another Python thread may call close() or abort() while write_tensor runs without the GIL.
  std::mutex mutex_;
};

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "ggufkit's C++ library (the ggufkit package is its Python face)";
  // A file truncated while it is mapped reads as zeros, not SIGBUS; nothing is committed from the
  // zeros and the module's loops raise GGUFError (docs/python.md, "Files that shrink").
  zero_fill_on_bus_error();
  ggufkit::python::register_verbs(m);

  py::class_<File, std::shared_ptr<File>>(m, "File")
      .def(py::init<const std::string&, bool>(), py::arg("path"), py::arg("allow_metadata_only") = false)
      .def_property_readonly("version", [](const File& f) { return f.file().version(); })
      .def_property_readonly("big_endian", [](const File& f) { return f.file().byte_order() == ByteOrder::big; })
      .def_property_readonly("alignment", [](const File& f) { return f.file().alignment(); })
      .def_property_readonly("data_offset", [](const File& f) { return f.file().data_offset(); })
      .def_property_readonly("header_size", [](const File& f) { return f.file().header_size(); })
      .def_property_readonly("file_size", [](const File& f) { return f.file().file_size(); })
      .def_property_readonly("has_tensor_data", [](const File& f) { return f.file().has_tensor_data(); })
      .def("key_count", &File::key_count)
      .def("field", &File::field)
      .def("key_name", &File::key_name)
      .def("find_key", &File::find_key)
      .def("check_data", &File::check_data)
      .def("value", &File::value)
      .def("string_spans", &File::string_spans)
      .def("element", &File::element)
      .def("tensor_count", &File::tensor_count)
      .def("tensor", &File::tensor)
      .def("bytes", [](py::object self) { return byte_array(self.cast<const File&>().file().bytes(), self); })
      .def("header", [](py::object self) { return byte_array(self.cast<const File&>().file().header_view(), self); });

  m.def("dequantize", &dequantize_bytes, py::arg("data"), py::arg("type"), py::arg("threads") = 0);
  m.def("quantize", &quantize_floats, py::arg("values"), py::arg("type"), py::arg("n_per_row"),
        py::arg("imatrix") = py::none(), py::arg("threads") = 0);

  // (id, name, block size, block bytes, quantized, can dequantize, can quantize, needs an imatrix)
  // for every id ggml defines (removed ids left out).
  m.def("tensor_types", [] {
    py::list out;
    for (const TypeTraits& t : all_type_traits()) {
      if (t.block_size == 0) continue;
      const QuantCapabilities caps = quant_capabilities(t.type());
      out.append(py::make_tuple(t.id, std::string(t.name), t.block_size, t.block_bytes, t.quantized, caps.dequantize,
                                caps.quantize, caps.requires_imatrix));
    }
    return out;
  });

  // The files of the model `path` opens (its shards, in order, when it is the first shard of a
  // split model), after SplitModel's checks of the set (every shard present, numbered, agreeing).
  m.def("model_files", [](const std::string& path) {
    const SplitModel model = take(SplitModel::open(path), path);
    std::vector<std::string> out;
    for (const auto& p : model.paths()) out.push_back(p.string());
    return out;
  });

  // general.file_type of a model whose weight matrices are of `type` (llama_ftype), or None.
  m.def("file_type_for_type", [](int type_id) -> std::optional<uint32_t> { return file_type_for_type(tensor_type_of(type_id)); });

  py::class_<Writer>(m, "Writer")
      .def(py::init<std::string, bool>(), py::arg("path"), py::arg("big_endian") = false)
      .def("add_kv", &Writer::add_kv, py::arg("key"), py::arg("type"), py::arg("value"), py::arg("sub_type") = py::none())
      .def("add_tensor_info", &Writer::add_tensor_info, py::arg("name"), py::arg("type"), py::arg("ne"), py::arg("nbytes"))
      .def("write_header", &Writer::write_header)
      .def("write_tensor", &Writer::write_tensor)
      .def("pad_header", &Writer::pad_header)
      .def("close", &Writer::close, py::arg("sync") = true)
      .def("abort", &Writer::abort);
}
