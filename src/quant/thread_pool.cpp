#include "quant/thread_pool.h"

#include "ggufkit/threads.h"

#include <algorithm>
#include <atomic>

namespace ggufkit::quant {
namespace {

constexpr unsigned kMaxHelpers = 255;

// Set on pool workers, and on a caller while it runs its share of a job: a nested run() then
// works inline instead of waiting for a turn it already holds.
thread_local bool t_in_pool_task = false;

}  // namespace

struct ThreadPool::Job {
  Call call;
  void* context;
  int64_t tasks;
  unsigned max_helpers;
  std::atomic<int64_t> next{0};
};

ThreadPool& ThreadPool::shared() {
  static ThreadPool* pool = new ThreadPool();  // never destroyed: see the header
  return *pool;
}

unsigned ThreadPool::resolve(unsigned count) {
  return thread_count(Threads{count});
}

void ThreadPool::work_on(Job& job) {
  for (int64_t i = job.next.fetch_add(1, std::memory_order_relaxed); i < job.tasks;
       i = job.next.fetch_add(1, std::memory_order_relaxed)) {
    job.call(job.context, i);
  }
}

void ThreadPool::ensure_workers(unsigned helpers) {
  while (workers_.size() < helpers) {
    uint64_t seen;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      seen = generation_;
    }
    workers_.emplace_back([this, seen] {
      t_in_pool_task = true;
      uint64_t last = seen;
      std::unique_lock<std::mutex> lock(mutex_);
      for (;;) {
        wake_.wait(lock, [&] { return job_ != nullptr && generation_ != last; });
        last = generation_;
        if (helpers_joined_ >= job_->max_helpers) continue;
        ++helpers_joined_;
        ++helpers_active_;
        Job* job = job_;
        lock.unlock();
        work_on(*job);
        lock.lock();
        if (--helpers_active_ == 0) done_.notify_one();
      }
    });
  }
}

void ThreadPool::run_erased(int64_t tasks, unsigned participants, Call call, void* context) {
  if (tasks <= 0) return;
  if (participants <= 1 || tasks == 1 || t_in_pool_task) {
    for (int64_t i = 0; i < tasks; ++i) call(context, i);
    return;
  }
  std::lock_guard<std::mutex> turn(turn_);
  const auto helpers =
      static_cast<unsigned>(std::min<int64_t>({int64_t{participants} - 1, tasks - 1, int64_t{kMaxHelpers}}));
  ensure_workers(helpers);
  Job job{call, context, tasks, helpers};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job;
    ++generation_;
    helpers_joined_ = 0;
  }
  wake_.notify_all();
  // The caller works too: a small job is often done before a worker has woken up.
  t_in_pool_task = true;
  work_on(job);
  t_in_pool_task = false;
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = nullptr;  // late wakers find nothing to join
  done_.wait(lock, [&] { return helpers_active_ == 0; });
}

}  // namespace ggufkit::quant
