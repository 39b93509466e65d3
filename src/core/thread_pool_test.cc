#include "topspin/core/thread_pool.h"

#include <atomic>
#include <set>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace topspin {
namespace {

TEST(ThreadPool, RunsTasksAndReturnsResults) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3u);
  std::vector<std::future<int>> results;
  for (int i = 0; i < 100; ++i) results.push_back(pool.Submit([i] { return i * i; }));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(results[i].get(), i * i);
}

TEST(ThreadPool, UsesSeveralThreads) {
  ThreadPool pool(4);
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> arrived{0};
  std::vector<std::future<void>> done;
  for (int i = 0; i < 4; ++i) {
    done.push_back(pool.Submit([&] {
      ++arrived;
      while (arrived.load() < 4) std::this_thread::yield();  // all 4 run at once
      std::lock_guard lock(mu);
      ids.insert(std::this_thread::get_id());
    }));
  }
  for (auto& f : done) f.get();
  EXPECT_EQ(ids.size(), 4u);
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  ThreadPool pool(2);
  auto f = pool.Submit([]() -> int { throw std::runtime_error("boom"); });
  EXPECT_THROW(f.get(), std::runtime_error);
  EXPECT_EQ(pool.Submit([] { return 5; }).get(), 5);  // the pool survives
}

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1001);
  pool.ParallelFor(0, hits.size(), [&](size_t i) { hits[i]++; });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  pool.ParallelFor(5, 5, [&](size_t) { FAIL(); });
}

TEST(ThreadPool, ParallelForRethrowsAfterAllChunksFinish) {
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.ParallelFor(0, 100,
                                [&](size_t i) {
                                  ++ran;
                                  if (i == 10) throw std::invalid_argument("bad row");
                                }),
               std::invalid_argument);
  EXPECT_GE(ran.load(), 11);
}

TEST(ThreadPool, DestructorDrainsQueuedTasks) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(1);
    for (int i = 0; i < 50; ++i) pool.Submit([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 50);
}

}  // namespace
}  // namespace topspin
