// The streaming model quantizer: metadata as llama_model_quantize writes it, then each tensor
// either copied or converted a step of rows at a time, so memory holds a bounded slice of the model
// however large it is.
//
// Converting: every thread takes a few rows at a time, widens them to float32 in a small buffer of
// its own (it stays in the cache) and quantizes them straight into the step's output. With more
// than one thread a driver thread runs the steps ahead of the writer (two output buffers), so
// reading the source, converting and writing the file overlap; with one thread the writer's thread
// converts each step when it needs it. The bytes are the same either way.
#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ggufkit/atomic_file.h"
#include "ggufkit/conventions.h"
#include "ggufkit/endian.h"
#include "ggufkit/quantize.h"
#include "ggufkit/writer.h"
#include "quant/thread_pool.h"
#include "quantize/streamed.h"
#include "quantize/tensor_dims.h"

namespace ggufkit {
namespace {

constexpr int64_t kValuesPerStep = int64_t{1} << 22;  // values converted per step of the writer's stream
constexpr int64_t kValuesPerTask = int64_t{1} << 15;  // values a thread widens to float32 at a time (128 KiB)

Error cancelled() { return make_error(ErrorCode::cancelled, std::nullopt, {}, "cancelled"); }

// One tensor to convert.
struct Conversion {
  std::span<const std::byte> source;
  TensorType from = TensorType::F32, to = TensorType::F32;
  int64_t n_per_row = 0;
  uint64_t src_row = 0, dst_row = 0;  // bytes per row
  // The file is not in the host's byte order: source rows are swapped in before widening, and the
  // quantized blocks swapped back to the file's order.
  bool swap = false;
  // Importance weights: n_per_row per expert, each expert rows_per_expert rows (ne[1]); or empty.
  std::span<const float> importance;
  int64_t rows_per_expert = 1;
  // A source not in memory (convert_quantized: converted on demand): each step's rows are fetched
  // into a buffer first; `rows` is then the tensor's row count and `source` the fetched rows, the
  // first of them row `source_row0`.
  quantize_detail::TensorBytes fetch;
  int64_t rows = 0, source_row0 = 0;
};

// The importance weights of row `row`, and how many rows from it share them (to its expert's end).
std::pair<std::span<const float>, int64_t> importance_of_row(const Conversion& c, int64_t row, int64_t rows) {
  if (c.importance.empty()) return {{}, rows};
  const int64_t expert = row / c.rows_per_expert;
  const int64_t left_in_expert = (expert + 1) * c.rows_per_expert - row;
  return {c.importance.subspan(static_cast<size_t>(expert * c.n_per_row), static_cast<size_t>(c.n_per_row)),
          std::min(rows, left_in_expert)};
}

// Widens rows of `c` to float32 and quantizes them, at most kValuesPerTask values at a time through a
// buffer of the calling thread's own (small enough to stay in the cache).
Expected<void> convert_some_rows(const Conversion& c, int64_t first, int64_t rows, std::span<std::byte> out) {
  thread_local std::unique_ptr<float[]> widened;  // not zeroed: every value is written before it is read
  thread_local size_t widened_size = 0;
  const int64_t rows_per_task = std::max<int64_t>(1, kValuesPerTask / c.n_per_row);
  for (int64_t done = 0; done < rows; done += rows_per_task) {
    const auto n = static_cast<size_t>(std::min(rows_per_task, rows - done));
    auto src = c.source.subspan(static_cast<size_t>(first + done - c.source_row0) * c.src_row, n * c.src_row);
    const auto dst = out.subspan(static_cast<size_t>(done) * c.dst_row, n * c.dst_row);
    if (c.swap) {
      thread_local std::vector<std::byte> native;  // the rows in the host's order
      native.assign(src.begin(), src.end());
      if (auto r = swap_tensor_data(c.from, native); !r) return r;
      src = native;
    }
    const size_t values = n * static_cast<size_t>(c.n_per_row);
    std::span<const float> floats;
    if (c.from == TensorType::F32 && reinterpret_cast<uintptr_t>(src.data()) % alignof(float) == 0) {
      floats = {reinterpret_cast<const float*>(src.data()), values};  // already float32: no copy
    } else {
      if (widened_size < values) {
        widened = std::make_unique_for_overwrite<float[]>(values);
        widened_size = values;
      }
      const std::span<float> buffer(widened.get(), values);
      if (auto r = dequantize(c.from, src, buffer, Threads{1}); !r) return r;
      floats = buffer;
    }
    // Rows of one expert at a time: each expert has its own importance weights.
    for (int64_t row = 0; row < static_cast<int64_t>(n);) {
      const auto [weights, run] = importance_of_row(c, first + done + row, static_cast<int64_t>(n) - row);
      const auto values_at = static_cast<size_t>(row * c.n_per_row);
      if (auto r = quantize(c.to, floats.subspan(values_at, static_cast<size_t>(run * c.n_per_row)),
                            dst.subspan(static_cast<size_t>(row) * c.dst_row, static_cast<size_t>(run) * c.dst_row),
                            c.n_per_row, weights, Threads{1});
          !r) {
        return r;
      }
      row += run;
    }
    if (c.swap) {
      if (auto r = swap_tensor_data(c.to, dst); !r) return r;
    }
  }
  return {};
}

// Converts `rows` rows of `c` from row `first` into `out`, on `threads` threads.
Expected<void> convert_rows(const Conversion& c, int64_t first, int64_t rows, std::span<std::byte> out,
                            unsigned threads) {
  std::mutex failure_mutex;
  std::optional<Error> failure;
  const int64_t rows_per_task = std::max<int64_t>(1, kValuesPerTask / c.n_per_row);
  quant::parallel_ranges(rows, threads, rows_per_task, [&](int64_t begin, int64_t end) {
    auto r = convert_some_rows(c, first + begin, end - begin,
                               out.subspan(static_cast<size_t>(begin) * c.dst_row,
                                           static_cast<size_t>(end - begin) * c.dst_row));
    if (!r) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::move(r).error();
    }
  });
  if (failure) return std::move(*failure);
  return {};
}

// The converted tensors' bytes, in the order the writer asks for them: a list of steps (a run of
// rows of one tensor each), consumed strictly in order.
class ConversionStream {
 public:
  ConversionStream(unsigned threads, const std::atomic<bool>* cancel) : threads_(threads), cancel_(cancel) {}
  ~ConversionStream() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    if (driver_.joinable()) driver_.join();
  }
  ConversionStream(const ConversionStream&) = delete;
  ConversionStream& operator=(const ConversionStream&) = delete;

  // Registers a tensor (before start()); returns its index for read().
  size_t add(const Conversion& c) {
    if (c.n_per_row <= 0 || c.src_row == 0 || c.dst_row == 0) {  // an empty tensor: nothing to read
      conversions_.push_back(c);
      return conversions_.size() - 1;
    }
    const int64_t rows = c.fetch ? c.rows : static_cast<int64_t>(c.source.size() / c.src_row);
    const int64_t rows_per_step = std::max<int64_t>(1, kValuesPerStep / c.n_per_row);
    for (int64_t first = 0; first < rows; first += rows_per_step) {
      steps_.push_back({conversions_.size(), first, std::min(rows_per_step, rows - first)});
      slot_bytes_ = std::max(slot_bytes_, static_cast<uint64_t>(steps_.back().rows) * c.dst_row);
    }
    conversions_.push_back(c);
    return conversions_.size() - 1;
  }

  // With more than one thread, starts converting ahead of the reader.
  void start() {
    for (auto& slot : slots_) slot = std::make_unique_for_overwrite<std::byte[]>(static_cast<size_t>(slot_bytes_));
    if (threads_ > 1 && !steps_.empty()) driver_ = std::thread([this] { drive(); });
  }

  // Fills `out` with the bytes of tensor `index`'s output from `offset`. Calls come in order.
  Expected<void> read(size_t index, uint64_t offset, std::span<std::byte> out) {
    while (!out.empty()) {
      if (consumed_ >= steps_.size() || steps_[consumed_].conversion != index) {
        return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "tensor data requested out of order");
      }
      const Step& step = steps_[consumed_];
      const Conversion& c = conversions_[index];
      const uint64_t step_start = static_cast<uint64_t>(step.first_row) * c.dst_row;
      const uint64_t step_bytes = static_cast<uint64_t>(step.rows) * c.dst_row;
      if (offset < step_start || offset >= step_start + step_bytes) {
        return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "tensor data requested out of order");
      }
      if (auto r = wait_for(consumed_); !r) return r;
      const std::byte* buffer = slots_[consumed_ % kSlots].get();
      const uint64_t at = offset - step_start;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), step_bytes - at));
      std::copy_n(buffer + at, n, out.begin());
      out = out.subspan(n);
      offset += n;
      if (at + n == step_bytes) {  // the step is used up: its buffer is free again
        {
          std::lock_guard<std::mutex> lock(mutex_);
          ++consumed_;
        }
        changed_.notify_all();
      }
    }
    return {};
  }

 private:
  struct Step {
    size_t conversion;
    int64_t first_row, rows;
  };
  static constexpr size_t kSlots = 2;

  // Asks the kernel to start reading the next step's source while this one converts (it matters
  // when the input is not in the page cache yet; a hint, so failures do not matter).
  void prefetch(const Step& step) const {
    const Conversion& c = conversions_[step.conversion];
    if (c.fetch) return;
    const auto* begin = c.source.data() + static_cast<size_t>(step.first_row) * c.src_row;
    static const auto page = static_cast<uintptr_t>(std::max(1L, ::sysconf(_SC_PAGESIZE)));
    const uintptr_t from = reinterpret_cast<uintptr_t>(begin) / page * page;
    const uintptr_t to = reinterpret_cast<uintptr_t>(begin) + static_cast<size_t>(step.rows) * c.src_row;
    (void)::posix_madvise(reinterpret_cast<void*>(from), to - from, POSIX_MADV_WILLNEED);
  }

  Expected<void> convert_step(size_t s) {
    if (cancel_ != nullptr && cancel_->load()) return cancelled();
    if (s + 1 < steps_.size()) prefetch(steps_[s + 1]);
    const Step& step = steps_[s];
    const Conversion& c = conversions_[step.conversion];
    const std::span<std::byte> buffer(slots_[s % kSlots].get(), static_cast<size_t>(step.rows) * c.dst_row);
    if (!c.fetch) return convert_rows(c, step.first_row, step.rows, buffer, threads_);
    fetched_.resize(static_cast<size_t>(step.rows) * c.src_row);
    if (auto r = c.fetch(static_cast<uint64_t>(step.first_row) * c.src_row, fetched_); !r) return r;
    Conversion rows = c;
    rows.source = fetched_;
    rows.source_row0 = step.first_row;
    return convert_rows(rows, step.first_row, step.rows, buffer, threads_);
  }

  // Waits until step s is converted (converting it here when there is no driver).
  Expected<void> wait_for(size_t s) {
    if (!driver_.joinable()) {
      if (produced_ <= s) {
        if (auto r = convert_step(s); !r) return r;
        produced_ = s + 1;
      }
      return {};
    }
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return produced_ > s || failure_; });
    if (produced_ > s) return {};
    return *failure_;
  }

  void drive() {
    for (size_t s = 0; s < steps_.size(); ++s) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || s < consumed_ + kSlots; });
        if (stop_) return;
      }
      auto r = convert_step(s);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (r) {
          produced_ = s + 1;
        } else {
          failure_ = std::move(r).error();
        }
      }
      changed_.notify_all();
      if (!r) return;
    }
  }

  const unsigned threads_;
  const std::atomic<bool>* cancel_;
  std::vector<Conversion> conversions_;
  std::vector<Step> steps_;
  std::array<std::unique_ptr<std::byte[]>, kSlots> slots_;  // each holds the largest step's output
  uint64_t slot_bytes_ = 0;
  std::vector<std::byte> fetched_;  // a fetched step's source rows (one step converts at a time)
  std::mutex mutex_;
  std::condition_variable changed_;
  size_t produced_ = 0;  // steps converted
  size_t consumed_ = 0;  // steps read to their end
  std::optional<Error> failure_;
  bool stop_ = false;
  std::thread driver_;
};

}  // namespace

namespace {

// Sets a key as gguf_set_val does: removed, then added again at the end.
Expected<void> set_at_end(GgufBuilder& b, std::string_view key, MetadataValue value) {
  b.remove(key);
  return b.set(key, std::move(value));
}

// llama-quantize's kv overrides hold strings in 128-byte arrays (strncpy of 127 bytes).
std::string_view first_127_bytes(std::string_view s) { return s.substr(0, std::min<size_t>(s.size(), 127)); }

// Output shard `shard`'s metadata. The first (or only) file: the input's metadata as
// llama_model_quantize writes it; with keep_split, the other shards carry the split keys alone.
Expected<void> add_output_metadata(GgufBuilder& b, const GgufFile& input, const QuantizePlan& plan, uint32_t shard,
                                   const QuantizeOptions& options) {
  if (auto r = b.set_version(kGgufVersionLatest); !r) return r;
  if (shard == 0) {
    for (const KeyValue& kv : input.metadata()) {
      if (auto r = b.set(kv.key, MetadataValue::copy_of(kv.value)); !r) return r;
    }
    // As llama.cpp: split keys go, and the two quantization keys move to the end with new values.
    for (std::string_view key : {keys::kSplitNo, keys::kSplitCount, keys::kSplitTensorsCount}) b.remove(key);
    if (auto r = set_at_end(b, keys::kQuantizationVersion, MetadataValue::of<uint32_t>(kQuantizationVersionCurrent)); !r) return r;
    if (auto r = set_at_end(b, keys::kFileType, MetadataValue::of<uint32_t>(plan.file_type)); !r) return r;
    // --override-kv, then llama-quantize's own overrides naming the importance matrix.
    for (const MetadataOverride& o : options.metadata_overrides) {
      if (auto r = set_at_end(b, o.key, o.value); !r) return r;
    }
    const ImportanceMatrix* im = options.importance;
    if (im != nullptr && !im->entries.empty()) {
      if (auto r = set_at_end(b, "quantize.imatrix.file", MetadataValue::string(first_127_bytes(options.importance_file))); !r) return r;
      if (!im->datasets.empty()) {
        if (auto r = set_at_end(b, "quantize.imatrix.dataset", MetadataValue::string(first_127_bytes(im->datasets.front()))); !r) return r;
      }
      const auto entries = static_cast<uint32_t>(im->entries.size());
      if (auto r = set_at_end(b, "quantize.imatrix.entries_count", MetadataValue::of<uint32_t>(entries)); !r) return r;
      if (im->chunk_count > 0) {
        if (auto r = set_at_end(b, "quantize.imatrix.chunks_count", MetadataValue::of<uint32_t>(im->chunk_count)); !r) return r;
      }
    }
  }
  if (plan.shard_count > 1) {
    if (auto r = set_at_end(b, keys::kSplitNo, MetadataValue::of<uint16_t>(static_cast<uint16_t>(shard))); !r) return r;
    if (auto r = set_at_end(b, keys::kSplitCount, MetadataValue::of<uint16_t>(static_cast<uint16_t>(plan.shard_count))); !r) return r;
    const auto all = static_cast<int32_t>(plan.tensors.size());
    if (auto r = set_at_end(b, keys::kSplitTensorsCount, MetadataValue::of<int32_t>(all)); !r) return r;
  }
  return {};
}

// Writes output shard `shard` (the plan's tensors of that shard, in plan order) to `out`.
// `tensors_before`: the plan's tensors in earlier shards, for the progress count.
// `streamed`: the tensors' bytes come from it, not from `input` (a metadata-only header).
Expected<void> write_output_file(const GgufFile& input, const QuantizePlan& plan, uint32_t shard, ByteSink& out,
                                 const QuantizeOptions& options, size_t tensors_before,
                                 const quantize_detail::StreamedInput* streamed) {
  GgufBuilder b;
  if (auto r = add_output_metadata(b, input, plan, shard, options); !r) return r;
  // The builder's producers point into the stream; its destructor joins the driver thread.
  ConversionStream stream(quant::ThreadPool::resolve(options.threads.count), options.cancel);
  for (const TensorPlan& p : plan.tensors) {
    if (p.shard != shard) continue;
    const TensorInfo& t = *p.tensor;
    const auto index_in_input = static_cast<size_t>(p.tensor - input.tensors().data());
    if (!p.convert && streamed != nullptr) {
      auto producer = [streamed, index_in_input](uint64_t offset, std::span<std::byte> chunk) {
        return streamed->copy(index_in_input, offset, chunk);
      };
      if (auto r = b.add_tensor(t.name, t.type, quantize_detail::written_shape(t), TensorProducer(producer)); !r) return r;
      continue;
    }
    if (!p.convert) {
      if (auto r = b.add_tensor(t.name, t.type, quantize_detail::written_shape(t), p.data); !r) return r;
      continue;
    }
    if (!quant_capabilities(t.type).dequantize) {
      return make_error(ErrorCode::invalid_argument, t.info_offset, std::string(t.name),
                        fmt::format("cannot read {} tensors as floats", type_name(t.type)));
    }
    if (type_traits(t.type).quantized && !options.allow_requantize) {
      return make_error(ErrorCode::invalid_argument, t.info_offset, std::string(t.name),
                        fmt::format("the tensor is already quantized ({}); requantizing is disabled "
                                    "(--allow-requantize)", type_name(t.type)));
    }
    if (!quant_capabilities(p.target).quantize) {
      return make_error(ErrorCode::invalid_argument, t.info_offset, std::string(t.name),
                        fmt::format("ggufkit cannot quantize to {} yet", type_name(p.target)));
    }
    const bool swap = plan.byte_order != native_byte_order();
    if (swap && !byte_order_known(p.target)) {
      return make_error(ErrorCode::invalid_argument, t.info_offset, std::string(t.name),
                        fmt::format("the input is {}-endian and {} blocks have no defined {}-endian layout",
                                    byte_order_name(plan.byte_order), type_name(p.target),
                                    byte_order_name(plan.byte_order)));
    }
    const int64_t n_per_row = t.ne[0];
    Conversion c{p.data, t.type, p.target, n_per_row, *row_size(t.type, n_per_row), *row_size(p.target, n_per_row),
                 swap, p.importance, std::max<int64_t>(1, t.ne[1]), {}, 0, 0};
    if (streamed != nullptr) {
      c.fetch = [streamed, index_in_input](uint64_t offset, std::span<std::byte> chunk) {
        return streamed->fetch(index_in_input, offset, chunk);
      };
      c.rows = n_per_row == 0 ? 0 : t.n_elements() / n_per_row;
    }
    const size_t index = stream.add(c);
    ConversionStream* s = &stream;
    auto producer = [s, index](uint64_t offset, std::span<std::byte> chunk) { return s->read(index, offset, chunk); };
    if (auto r = b.add_tensor(t.name, p.target, quantize_detail::written_shape(t), TensorProducer(producer)); !r) return r;
  }
  stream.start();
  WriteOptions write_options;
  write_options.byte_order = plan.byte_order;  // a big-endian model's users run on big-endian hosts
  // After each tensor, its source pages leave the process's memory (as llama.cpp unmaps each
  // weight): the footprint stays a tensor or two, not the whole input.
  std::vector<const TensorPlan*> written;
  for (const TensorPlan& p : plan.tensors) {
    if (p.shard == shard) written.push_back(&p);
  }
  write_options.progress = [&](size_t done, size_t) {
    const TensorPlan& p = *written[done - 1];
    if (p.file != nullptr) p.file->release_tensor_pages(*p.tensor);
    if (options.progress) options.progress(tensors_before + done, plan.tensors.size());
  };
  if (options.tensor_progress) {
    write_options.tensor_progress = [&](size_t index, uint64_t done, uint64_t size) {
      options.tensor_progress(tensors_before + index, done, size);
    };
  }
  write_options.cancel = options.cancel;
  return b.write(out, write_options);
}

}  // namespace

Expected<uint64_t> quantize_output_bytes(const GgufFile& input, const QuantizePlan& plan, const QuantizeOptions& options) {
  GgufBuilder b;
  if (auto r = add_output_metadata(b, input, plan, 0, options); !r) return r.error();
  const auto unread = [](uint64_t, std::span<std::byte>) -> Expected<void> {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "a size-only builder is never written");
  };
  for (const TensorPlan& p : plan.tensors) {
    const TensorInfo& t = *p.tensor;
    if (auto r = b.add_tensor(t.name, p.convert ? p.target : t.type, quantize_detail::written_shape(t),
                              TensorProducer(unread));
        !r) {
      return r.error();
    }
  }
  WriteOptions write_options;
  write_options.byte_order = plan.byte_order;
  return b.file_bytes(write_options);
}

namespace {

// `input` holds the metadata (a plain file, or a split model's first shard).
// `inputs`: the files of the model, which no output may replace.
Expected<void> write_quantized(const GgufFile& input, const Expected<QuantizePlan>& plan,
                               const std::filesystem::path& output, const QuantizeOptions& caller_options,
                               std::span<const std::filesystem::path> inputs,
                               const quantize_detail::StreamedInput* streamed = nullptr) {
  if (!plan) return plan.error();
  QuantizeOptions options = caller_options;
  options.output.inputs.insert(options.output.inputs.end(), inputs.begin(), inputs.end());
  const auto paths = quantize_output_paths(*plan, output, options);
  // Every output is checked before any work: a refused second shard must not come after a first.
  for (const auto& path : paths) {
    if (auto r = AtomicFile::check(path, options.output); !r) return r;
  }
  // The outputs are a set (a split model): each is written under a temporary name, and the final
  // names appear only when all are complete.
  std::vector<std::unique_ptr<AtomicFile>> files;
  size_t tensors_before = 0;
  for (uint32_t shard = 0; shard < plan->shard_count; ++shard) {
    auto file = AtomicFile::create(paths[shard], options.output);
    if (!file) return std::move(file).error();
    if (auto r = write_output_file(input, *plan, shard, **file, options, tensors_before, streamed); !r) return r;
    files.push_back(std::move(file).value());
    tensors_before += static_cast<size_t>(
        std::ranges::count_if(plan->tensors, [&](const TensorPlan& p) { return p.shard == shard; }));
  }
  // Every output synced, then all renamed together (a cancel is heard until the renames).
  return AtomicFile::commit_all(files, options.sync, options.cancel);
}

}  // namespace

Expected<void> quantize_detail::write_quantized_streamed(const StreamedInput& input, const QuantizePlan& plan,
                                                         const std::filesystem::path& output,
                                                         const QuantizeOptions& options,
                                                         std::span<const std::filesystem::path> inputs) {
  if (options.keep_split) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "keep_split needs a split input");
  }
  return write_quantized(*input.header, plan, output, options, inputs, &input);
}

std::vector<std::filesystem::path> quantize_output_paths(const QuantizePlan& plan, const std::filesystem::path& output,
                                                         const QuantizeOptions& options) {
  if (!options.keep_split) return {output};
  // As llama-quantize: ".gguf" comes off the output's name, and every shard gets a split name.
  std::string prefix = output.string();
  if (prefix.ends_with(".gguf")) prefix.resize(prefix.size() - 5);
  std::vector<std::filesystem::path> paths;
  for (uint32_t i = 0; i < plan.shard_count; ++i) paths.emplace_back(split_path(prefix, i, plan.shard_count));
  return paths;
}

Expected<void> quantize_model(const GgufFile& input, const std::filesystem::path& output,
                              const QuantizeOptions& options) {
  std::vector<std::filesystem::path> inputs;
  if (!input.path().empty()) inputs.push_back(input.path());
  return write_quantized(input, plan_quantize(input, options), output, options, std::span(inputs));
}

Expected<void> quantize_model(const SplitModel& input, const std::filesystem::path& output,
                              const QuantizeOptions& options) {
  return write_quantized(input.metadata_file(), plan_quantize(input, options), output, options, input.paths());
}

}  // namespace ggufkit
