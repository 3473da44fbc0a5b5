// The library's one convention for thread counts, and the options every long operation shares.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>

#include "ggufkit/sink.h"

namespace ggufkit {

// How many threads an operation may use: 0 means one per core, 1 runs on the caller's thread. The
// one convention of the library: whole-model operations (the options of quantize, convert, diff,
// hash) default to one per core; the kernel calls below default to the caller's thread, since their
// callers are usually already parallel. Work is split into runs of whole blocks (rows, when
// quantizing), so no result depends on the number of threads.
struct Threads {
  unsigned count = 1;
};
inline constexpr Threads kAllCores{0};

// What every long whole-model operation takes (quantize_model, write_converted): its options
// structs derive from this, so that threads, cancellation, progress and syncing are spelled and
// defaulted once.
struct RunOptions {
  Threads threads = kAllCores;
  // Set from another thread (a signal handler) to stop; the output is then not written.
  const std::atomic<bool>* cancel = nullptr;
  // Called after each tensor is written: (tensors done, tensors in all), in plan order.
  std::function<void(size_t, size_t)> progress;
  // Called while a tensor is written, after each chunk of it: (its index in plan order from 0, its
  // output bytes written so far, its output size). Movement inside a large tensor.
  std::function<void(size_t tensor, uint64_t done, uint64_t size)> tensor_progress{};
  bool sync = true;  // flush the output to the disk before it is renamed into place
  // What the output may replace (sink.h); the operation adds the files it reads to `inputs`.
  OutputPolicy output{};
};

// The number of threads `threads` stands for: count, or one per core (at least 1) for 0.
inline unsigned thread_count(Threads threads) {
  return threads.count != 0 ? threads.count : std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace ggufkit
