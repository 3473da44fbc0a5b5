// A persistent pool of worker threads for the conversion kernels: starting threads for every call
// costs tens of microseconds per thread, which dominates small conversions and the many steps of
// a streamed model quantization. Work is handed out as numbered tasks from a shared counter, so a
// thread slowed down by another process does not hold the others back.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace ggufkit::quant {

class ThreadPool {
 public:
  // The process-wide pool. Its workers are started on first use and grow to the largest
  // participant count asked for; they sleep when idle and are never joined (the process exit
  // ends them), so no static destructor can wait on them.
  static ThreadPool& shared();

  // The number of threads a Threads{count} means: 0 is one per core.
  static unsigned resolve(unsigned count);

  // Calls task(i) for every i in [0, tasks), on at most `participants` threads, the calling
  // thread included, and returns when all calls have returned. Which thread runs which task is
  // not fixed: tasks must be independent. Calls from inside a task run inline, and concurrent
  // callers take turns. `task` must not throw.
  template <class Task>
  void run(int64_t tasks, unsigned participants, Task&& task) {
    using Fn = std::remove_reference_t<Task>;
    run_erased(tasks, participants, [](void* f, int64_t i) { (*static_cast<Fn*>(f))(i); },
               const_cast<void*>(static_cast<const void*>(&task)));
  }

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

 private:
  ThreadPool() = default;
  struct Job;
  using Call = void (*)(void*, int64_t);

  void run_erased(int64_t tasks, unsigned participants, Call call, void* context);
  void ensure_workers(unsigned helpers);  // under turn_
  void worker_loop();
  static void work_on(Job& job);

  std::mutex turn_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  Job* job_ = nullptr;         // the open job, null between jobs
  uint64_t generation_ = 0;    // counts jobs, so a worker joins each at most once
  unsigned helpers_joined_ = 0;
  unsigned helpers_active_ = 0;
  std::vector<std::thread> workers_;
};

// Runs work(begin, end) over [0, units) in runs of about `units_per_task` units, spread over
// `threads` threads (ThreadPool::resolve). One thread, or work too small to split, runs inline
// as a single call.
template <class Work>
void parallel_ranges(int64_t units, unsigned threads, int64_t units_per_task, Work&& work) {
  if (units <= 0) return;
  units_per_task = units_per_task < 1 ? 1 : units_per_task;
  const int64_t tasks = (units + units_per_task - 1) / units_per_task;
  const unsigned n = ThreadPool::resolve(threads);
  if (n <= 1 || tasks <= 1) {
    work(int64_t{0}, units);
    return;
  }
  ThreadPool::shared().run(tasks, n, [&](int64_t i) {
    const int64_t begin = i * units_per_task;
    work(begin, begin + units_per_task < units ? begin + units_per_task : units);
  });
}

}  // namespace ggufkit::quant
