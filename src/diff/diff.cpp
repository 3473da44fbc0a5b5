#include "ggufkit/endian.h"
#include "ggufkit/diff.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>

#include <fmt/format.h>

namespace ggufkit {
namespace {

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// ---- metadata ----

// One model as compared: the file holding its metadata, and its tensors in model order (from one
// file, or from every shard of a split model).
struct SideTensor {
  const TensorInfo* info = nullptr;
  std::span<const std::byte> data;  // as stored
  bool swap = false;                // stored in the other byte order than the host's
  std::string_view name() const { return info->name; }
};
struct Side {
  const GgufFile* meta = nullptr;
  bool split_keys_are_layout = false;  // a split model: its split.* keys say how it is sharded
  uint32_t shards = 1;
  std::vector<SideTensor> tensors;
  std::vector<std::string_view> sorted_names;  // for has_tensor

  bool compared_key(std::string_view key) const {
    if (key == keys::kAlignment) return false;
    return !(split_keys_are_layout && (key == keys::kSplitNo || key == keys::kSplitCount || key == keys::kSplitTensorsCount));
  }
  bool has_key(std::string_view key) const { return compared_key(key) && meta->find(key) != nullptr; }
  bool has_tensor(std::string_view name) const {
    return std::binary_search(sorted_names.begin(), sorted_names.end(), name);
  }
};

Side side_of(const GgufFile& f) {
  Side s;
  s.meta = &f;
  const bool swap = f.byte_order() != native_byte_order();
  for (const TensorInfo& t : f.tensors()) s.tensors.push_back({&t, f.tensor_data(t), swap});
  return s;
}

Side side_of(const SplitModel& m) {
  Side s;
  s.meta = &m.metadata_file();
  s.split_keys_are_layout = true;
  s.shards = static_cast<uint32_t>(m.shards().size());
  for (const ModelTensor& t : m.tensors()) {
    s.tensors.push_back({t.info, t.data, m.shard_of(t).byte_order() != native_byte_order()});
  }
  return s;
}

void index_names(Side& s) {
  for (const SideTensor& t : s.tensors) s.sorted_names.push_back(t.name());
  std::sort(s.sorted_names.begin(), s.sorted_names.end());
}

// Compared keys sorted bytewise.
std::vector<const KeyValue*> sorted_keys(const Side& side) {
  std::vector<const KeyValue*> out;
  out.reserve(side.meta->metadata().size());
  for (const KeyValue& kv : side.meta->metadata()) {
    if (side.compared_key(kv.key)) out.push_back(&kv);
  }
  std::sort(out.begin(), out.end(), [](const KeyValue* x, const KeyValue* y) { return x->key < y->key; });
  return out;
}

std::vector<SideTensor> sorted_tensors(const Side& side) {
  std::vector<SideTensor> out = side.tensors;
  std::sort(out.begin(), out.end(), [](const SideTensor& x, const SideTensor& y) { return x.name() < y.name(); });
  return out;
}

// Walks two name-sorted lists in step: only_a(x), only_b(y), both(x, y).
template <class T, class Name, class OnlyA, class OnlyB, class Both>
void merge_walk(const std::vector<T>& a, const std::vector<T>& b, Name name, OnlyA only_a, OnlyB only_b, Both both) {
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && name(a[i]) < name(b[j]))) {
      only_a(a[i++]);
    } else if (i == a.size() || name(b[j]) < name(a[i])) {
      only_b(b[j++]);
    } else {
      both(a[i++], b[j++]);
    }
  }
}

// A string element's value view, rebuilt from the string_view the lazy range yields (its length
// prefix sits just before it).
ValueView string_element(std::string_view s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data()) - 8;
  return ValueView(ValueType::String, std::span<const std::byte>(p, s.size() + 8));
}

std::optional<MetadataDiff> diff_values(const KeyValue& ka, const KeyValue& kb, size_t max_shown) {
  const ValueView& a = ka.value;
  const ValueView& b = kb.value;
  if (a.type() == b.type() && same_bytes(a.encoded(), b.encoded())) return std::nullopt;
  MetadataDiff d;
  d.key = ka.key;
  d.a = a;
  d.b = b;
  if (a.type() != b.type()) {
    d.type_changed = true;
    return d;
  }
  if (a.type() == ValueType::Array) {
    const auto xa = a.as_array();
    const auto xb = b.as_array();
    if (xa && xb) {
      d.elements = diff_arrays(*xa, *xb, max_shown);
      d.type_changed = !d.elements.has_value();
    }
  }
  return d;
}

// Whether the keys (tensor names) both models hold come in the same relative order in each.
bool metadata_order_differs(const Side& a, const Side& b) {
  const auto common_keys = [](const Side& from, const Side& other) {
    std::vector<std::string_view> out;
    for (const KeyValue& kv : from.meta->metadata()) {
      if (from.compared_key(kv.key) && other.has_key(kv.key)) out.push_back(kv.key);
    }
    return out;
  };
  return common_keys(a, b) != common_keys(b, a);
}

bool tensor_order_differs(const Side& a, const Side& b) {
  const auto common_names = [](const Side& from, const Side& other) {
    std::vector<std::string_view> out;
    for (const SideTensor& t : from.tensors) {
      if (other.has_tensor(t.name())) out.push_back(t.name());
    }
    return out;
  };
  return common_names(a, b) != common_names(b, a);
}

// ---- tensor data ----

// Sums over a run of elements; merged in a fixed order so that the figures do not depend on the
// number of threads.
struct Partial {
  double sum_sq = 0, dot = 0, norm_a = 0, norm_b = 0, max_abs = 0;
  uint64_t elements = 0, differing = 0, non_finite = 0;

  void add(const float* a, const float* b, size_t n) {
    elements += n;
    for (size_t i = 0; i < n; ++i) {
      const float x = a[i], y = b[i];
      if (x != y) ++differing;
      if (!std::isfinite(x) || !std::isfinite(y)) {
        ++non_finite;
        continue;
      }
      const double dx = x, dy = y;
      const double d = dx - dy;
      sum_sq += d * d;
      dot += dx * dy;
      norm_a += dx * dx;
      norm_b += dy * dy;
      max_abs = std::max(max_abs, std::fabs(d));
    }
  }
  void merge(const Partial& p) {
    sum_sq += p.sum_sq;
    dot += p.dot;
    norm_a += p.norm_a;
    norm_b += p.norm_b;
    max_abs = std::max(max_abs, p.max_abs);
    elements += p.elements;
    differing += p.differing;
    non_finite += p.non_finite;
  }
  ValueStats finish() const {
    ValueStats s;
    s.elements = elements;
    s.differing = differing;
    s.non_finite = non_finite;
    s.max_abs_diff = max_abs;
    const uint64_t finite = elements - non_finite;
    s.rmse = finite ? std::sqrt(sum_sq / static_cast<double>(finite)) : 0.0;
    if (norm_a == 0 && norm_b == 0) {
      s.cosine = 1.0;
    } else if (norm_a == 0 || norm_b == 0) {
      s.cosine = 0.0;
    } else {
      // Rounding may put it a hair outside [-1, 1].
      s.cosine = std::clamp(dot / (std::sqrt(norm_a) * std::sqrt(norm_b)), -1.0, 1.0);
    }
    return s;
  }
};

// Dequantizes both tensors segment by segment (whole blocks of both types), each worker into its
// own two buffers, and accumulates the figures. Memory: 2 buffers of `segment` floats per thread,
// and one Partial per segment of a group.
Expected<ValueStats> compare_tensor_values(const SideTensor& sa, const SideTensor& sb, const DiffOptions& options) {
  const TensorInfo& ta = *sa.info;
  const TensorInfo& tb = *sb.info;
  const TypeTraits& ra = type_traits(ta.type);
  const TypeTraits& rb = type_traits(tb.type);
  const uint64_t total = static_cast<uint64_t>(ta.n_elements());
  const uint64_t unit = std::lcm(uint64_t{ra.block_size}, uint64_t{rb.block_size});
  const uint64_t segment = std::max<uint64_t>(1, (options.segment_elements + unit - 1) / unit) * unit;
  const uint64_t segments = (total + segment - 1) / segment;

  constexpr uint64_t kGroup = 1024;  // segments whose partials are held at once
  const unsigned workers = static_cast<unsigned>(std::min<uint64_t>(thread_count(options.threads), std::max<uint64_t>(1, std::min(segments, kGroup))));
  std::vector<std::vector<float>> buf_a(workers), buf_b(workers);
  std::vector<std::vector<std::byte>> native_a(workers), native_b(workers);  // swapped slices
  std::vector<Partial> partials;
  std::mutex error_mutex;
  std::optional<Error> error;
  Partial whole;

  for (uint64_t group = 0; group < segments; group += kGroup) {
    const uint64_t group_end = std::min(segments, group + kGroup);
    partials.assign(static_cast<size_t>(group_end - group), Partial{});
    std::atomic<uint64_t> next{group};
    auto work = [&](unsigned w) {
      std::vector<float>& xa = buf_a[w];
      std::vector<float>& xb = buf_b[w];
      xa.resize(static_cast<size_t>(segment));
      xb.resize(static_cast<size_t>(segment));
      for (uint64_t s = next++; s < group_end; s = next++) {
        const uint64_t begin = s * segment;
        const uint64_t count = std::min(segment, total - begin);
        const auto slice = [&](std::span<const std::byte> bytes, const TypeTraits& t) {
          return bytes.subspan(static_cast<size_t>(begin / t.block_size * t.block_bytes),
                               static_cast<size_t>(count / t.block_size * t.block_bytes));
        };
        // Each slice in the host's byte order (the stored bytes, or a swapped copy), then as floats.
        const auto to_floats = [&](const SideTensor& side, TensorType type, const TypeTraits& traits,
                                   std::vector<std::byte>& copy, std::vector<float>& out) -> Expected<void> {
          std::span<const std::byte> bytes = slice(side.data, traits);
          if (side.swap) {
            copy.assign(bytes.begin(), bytes.end());
            if (auto r = swap_tensor_data(type, copy); !r) return r;
            bytes = copy;
          }
          return dequantize(type, bytes, std::span<float>(out.data(), static_cast<size_t>(count)));
        };
        auto e = to_floats(sa, ta.type, ra, native_a[w], xa);
        if (e) e = to_floats(sb, tb.type, rb, native_b[w], xb);
        if (!e) {
          const std::lock_guard lock(error_mutex);
          if (!error) error = e.error();
          return;
        }
        partials[static_cast<size_t>(s - group)].add(xa.data(), xb.data(), static_cast<size_t>(count));
      }
    };
    if (workers <= 1) {
      work(0);
    } else {
      std::vector<std::thread> pool;
      for (unsigned w = 0; w < workers; ++w) pool.emplace_back(work, w);
      for (std::thread& t : pool) t.join();
    }
    if (error) {
      error->subject = std::string(ta.name);
      return *error;
    }
    for (const Partial& p : partials) whole.merge(p);
  }
  return whole.finish();
}

std::string cannot_dequantize(TensorType type) {
  return fmt::format("{} values cannot be converted to float32", type_name(type));
}

std::string cannot_swap(TensorType type) {
  return fmt::format("the byte layout of {} blocks is not known: the big-endian data cannot be read", type_name(type));
}

// Whether two tensors of one type and shape hold the same bytes once both are in the host's byte
// order. Tensors in the same order compare as stored; otherwise a chunk of each at a time is
// swapped (the caller made sure the type's layout is known).
bool same_native_bytes(const SideTensor& a, const SideTensor& b) {
  if (a.swap == b.swap) return same_bytes(a.data, b.data);
  if (a.data.size() != b.data.size()) return false;
  constexpr size_t kChunk = size_t{1} << 20;
  std::vector<std::byte> ca(std::min(kChunk, a.data.size())), cb(ca.size());
  for (uint64_t at = 0; at < a.data.size(); at += ca.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(ca.size(), a.data.size() - at));
    const std::span<std::byte> xa(ca.data(), n), xb(cb.data(), n);
    if (!copy_tensor_bytes(a.info->type, a.data, at, xa, a.swap) || !copy_tensor_bytes(b.info->type, b.data, at, xb, b.swap)) {
      return false;
    }
    if (std::memcmp(xa.data(), xb.data(), n) != 0) return false;
  }
  return true;
}

}  // namespace

std::string_view change_name(Change change) {
  switch (change) {
    case Change::added: return "added";
    case Change::removed: return "removed";
    case Change::changed: return "changed";
  }
  return "changed";
}

std::optional<ArrayDiff> diff_arrays(const ArrayView& a, const ArrayView& b, size_t max_shown) {
  if (a.element_type() != b.element_type()) return std::nullopt;
  ArrayDiff d;
  d.length_a = a.size();
  d.length_b = b.size();
  const uint64_t common = std::min(d.length_a, d.length_b);
  const auto note = [&](uint64_t i, ValueView va, ValueView vb) {
    ++d.differing;
    if (d.shown.size() < max_shown) d.shown.push_back({i, va, vb});
  };
  // Elements past the shorter array's end, while there is room to show them.
  const auto note_tail = [&](uint64_t i, ValueView v) {
    if (d.length_a > d.length_b) {
      d.shown.push_back({i, v, std::nullopt});
    } else {
      d.shown.push_back({i, std::nullopt, v});
    }
  };
  const ValueType type = a.element_type();

  if (is_fixed_size(type)) {
    // memcmp runs of elements; look inside a run only when it differs.
    const size_t size = value_type_size(type);
    const std::byte* pa = a.payload().data();
    const std::byte* pb = b.payload().data();
    constexpr uint64_t kRun = 4096;
    const auto element = [&](const std::byte* p, uint64_t i) {
      return ValueView(type, std::span<const std::byte>(p + i * size, size));
    };
    for (uint64_t start = 0; start < common; start += kRun) {
      const uint64_t n = std::min(kRun, common - start);
      if (std::memcmp(pa + start * size, pb + start * size, static_cast<size_t>(n * size)) == 0) continue;
      for (uint64_t i = start; i < start + n; ++i) {
        if (std::memcmp(pa + i * size, pb + i * size, size) != 0) note(i, element(pa, i), element(pb, i));
      }
    }
    const std::byte* longer = d.length_a > d.length_b ? pa : pb;
    for (uint64_t i = common; i < std::max(d.length_a, d.length_b) && d.shown.size() < max_shown; ++i) {
      note_tail(i, element(longer, i));
    }
    return d;
  }

  if (type == ValueType::String) {
    // Zero copy: both vocabularies are walked in step as views into the files.
    auto ia = a.strings().begin();
    auto ib = b.strings().begin();
    for (uint64_t i = 0; i < common; ++i, ++ia, ++ib) {
      const std::string_view sa = *ia, sb = *ib;
      if (sa != sb) note(i, string_element(sa), string_element(sb));
    }
    auto rest = d.length_a > d.length_b ? ia : ib;
    for (uint64_t i = common; i < std::max(d.length_a, d.length_b) && d.shown.size() < max_shown; ++i, ++rest) {
      note_tail(i, string_element(*rest));
    }
    return d;
  }

  // Arrays of arrays: elements compared by their encoded bytes.
  auto ia = a.values().begin();
  auto ib = b.values().begin();
  for (uint64_t i = 0; i < common; ++i, ++ia, ++ib) {
    const ValueView va = *ia, vb = *ib;
    if (!same_bytes(va.encoded(), vb.encoded())) note(i, va, vb);
  }
  auto rest = d.length_a > d.length_b ? ia : ib;
  for (uint64_t i = common; i < std::max(d.length_a, d.length_b) && d.shown.size() < max_shown; ++i, ++rest) {
    note_tail(i, *rest);
  }
  return d;
}

ValueStats compare_values(std::span<const float> a, std::span<const float> b) {
  Partial p;
  p.add(a.data(), b.data(), std::min(a.size(), b.size()));
  return p.finish();
}

namespace {

Expected<DiffResult> diff_sides(Side& a, Side& b, const DiffOptions& options) {
  index_names(a);
  index_names(b);
  DiffResult r;
  r.data_compared = options.data;

  // Layout: for information only.
  r.layout.version_a = a.meta->version();
  r.layout.version_b = b.meta->version();
  r.layout.alignment_a = a.meta->alignment();
  r.layout.alignment_b = b.meta->alignment();
  r.layout.shards_a = a.shards;
  r.layout.shards_b = b.shards;
  r.layout.metadata_order_differs = metadata_order_differs(a, b);
  r.layout.tensor_order_differs = tensor_order_differs(a, b);

  // Metadata.
  const auto keys_a = sorted_keys(a);
  const auto keys_b = sorted_keys(b);
  r.counts.keys_a = keys_a.size();
  r.counts.keys_b = keys_b.size();
  merge_walk(
      keys_a, keys_b, [](const KeyValue* kv) { return kv->key; },
      [&](const KeyValue* x) {
        MetadataDiff d;
        d.key = x->key;
        d.change = Change::removed;
        d.a = x->value;
        r.metadata.push_back(std::move(d));
      },
      [&](const KeyValue* y) {
        MetadataDiff d;
        d.key = y->key;
        d.change = Change::added;
        d.b = y->value;
        r.metadata.push_back(std::move(d));
      },
      [&](const KeyValue* x, const KeyValue* y) {
        if (auto d = diff_values(*x, *y, options.max_shown_elements)) r.metadata.push_back(std::move(*d));
      });

  // Tensor directory; the pairs whose data can be compared.
  const auto tensors_a = sorted_tensors(a);
  const auto tensors_b = sorted_tensors(b);
  r.counts.tensors_a = tensors_a.size();
  r.counts.tensors_b = tensors_b.size();
  std::vector<std::pair<SideTensor, SideTensor>> comparable;
  merge_walk(
      tensors_a, tensors_b, [](const SideTensor& t) { return t.name(); },
      [&](const SideTensor& t) { r.tensors.push_back({.name = t.name(), .change = Change::removed, .a = t.info}); },
      [&](const SideTensor& t) { r.tensors.push_back({.name = t.name(), .change = Change::added, .b = t.info}); },
      [&](const SideTensor& ta, const SideTensor& tb) {
        const TensorInfo* x = ta.info;
        const TensorInfo* y = tb.info;
        const bool type_changed = x->type != y->type;
        const bool shape_changed = x->n_dims != y->n_dims || x->ne != y->ne;
        if (type_changed || shape_changed) {
          r.tensors.push_back({.name = x->name, .change = Change::changed, .a = x, .b = y,
                               .type_changed = type_changed, .shape_changed = shape_changed});
        }
        // [64] and [64, 1] hold the same elements: their data can still be compared.
        if (x->ne == y->ne) comparable.emplace_back(ta, tb);
      });

  if (!options.data) return r;
  // Tensor data: bytes first; values only when the bytes differ.
  size_t done = 0;
  for (const auto& [ta, tb] : comparable) {
    const TensorInfo* x = ta.info;
    const TensorInfo* y = tb.info;
    ++r.counts.data_compared;
    // Data in another byte order than the host's is read swapped: its layout must be known.
    const bool readable_a = !ta.swap || byte_order_known(x->type);
    const bool readable_b = !tb.swap || byte_order_known(y->type);
    if (x->type == y->type && (ta.swap == tb.swap || (readable_a && readable_b)) && same_native_bytes(ta, tb)) {
      ++r.counts.data_bytes_equal;
    } else {
      DataDiff d;
      d.name = x->name;
      d.a = x;
      d.b = y;
      if (!quant_capabilities(x->type).dequantize) {
        d.note = cannot_dequantize(x->type);
      } else if (!quant_capabilities(y->type).dequantize) {
        d.note = cannot_dequantize(y->type);
      } else if (!readable_a) {
        d.note = cannot_swap(x->type);
      } else if (!readable_b) {
        d.note = cannot_swap(y->type);
      } else {
        auto stats = compare_tensor_values(ta, tb, options);
        if (!stats) return std::move(stats).error();
        d.values = *stats;
      }
      r.data.push_back(std::move(d));
    }
    if (options.progress) options.progress(++done, comparable.size());
  }
  return r;
}

}  // namespace

Expected<DiffResult> diff_files(const GgufFile& a, const GgufFile& b, const DiffOptions& options) {
  Side sa = side_of(a);
  Side sb = side_of(b);
  return diff_sides(sa, sb, options);
}

Expected<DiffResult> diff_models(const SplitModel& a, const SplitModel& b, const DiffOptions& options) {
  Side sa = side_of(a);
  Side sb = side_of(b);
  return diff_sides(sa, sb, options);
}

}  // namespace ggufkit
