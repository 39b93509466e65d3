// A fixed-size thread pool.
//
// Submit() is thread-safe and returns a std::future; an exception thrown by
// a task is stored in its future and re-raised by future::get() in the
// caller's thread. The destructor finishes queued tasks, then joins.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace topspin {

class ThreadPool {
 public:
  // threads == 0 means std::thread::hardware_concurrency() (at least 1).
  explicit ThreadPool(size_t threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size(); }

  template <typename F>
  auto Submit(F&& fn) -> std::future<std::invoke_result_t<F>> {
    using R = std::invoke_result_t<F>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
    std::future<R> result = task->get_future();
    Enqueue([task] { (*task)(); });
    return result;
  }

  // Runs fn(i) for i in [begin, end) in contiguous chunks across the pool
  // and waits. The first exception thrown by any chunk is re-raised here
  // after every chunk has finished.
  void ParallelFor(size_t begin, size_t end, const std::function<void(size_t)>& fn);

 private:
  void Enqueue(std::function<void()> task);
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace topspin
