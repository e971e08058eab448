// results/analysis/parallel_for.h: every index once, on several threads, and the first
// exception back on the caller's thread.
#include "parallel_for.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

TEST(ParallelFor, EveryIndexOnceOnMoreThanOneThreadWhereThereAreCores) {
  const size_t n = 10000;
  std::vector<std::atomic<int>> calls(n);
  std::vector<std::thread::id> by(n);
  // Index 0 waits (up to 30 s) until another thread has taken an index, so a second
  // thread, where there is one, is seen however fast the first would have been alone.
  std::atomic<bool> other{false};
  std::thread::id first;
  std::atomic<bool> first_set{false};
  const bool cores = std::thread::hardware_concurrency() > 1;
  sweep::parallel_for(n, [&](size_t i) {
    ++calls[i];
    by[i] = std::this_thread::get_id();
    if (i == 0) {
      first = by[i];
      first_set = true;
      for (int k = 0; cores && !other && k < 30000; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else if (first_set && by[i] != first) {
      other = true;
    }
  });
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(calls[i].load(), 1) << i;
  const std::set<std::thread::id> threads(by.begin(), by.end());
  if (cores) {
    EXPECT_GT(threads.size(), 1u);
  }
  EXPECT_TRUE(threads.count(std::this_thread::get_id())) << "the caller works too";
  // Too few indexes for a second thread: all on the caller's.
  std::set<std::thread::id> few;
  sweep::parallel_for(10, [&](size_t) { few.insert(std::this_thread::get_id()); });
  EXPECT_EQ(few, std::set<std::thread::id>{std::this_thread::get_id()});
  sweep::parallel_for(0, [](size_t) { FAIL() << "no index"; });
}

TEST(ParallelFor, TheFirstExceptionIsRethrownAfterEveryWorkerStopped) {
  std::atomic<size_t> done{0};
  EXPECT_THROW(sweep::parallel_for(5000,
                                   [&](size_t i) {
                                     if (i == 100) throw std::runtime_error("index 100");
                                     ++done;
                                   }),
               std::runtime_error);
  EXPECT_LT(done.load(), 5000u);
}

}  // namespace
