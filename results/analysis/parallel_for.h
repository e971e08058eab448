// parallel_for: the readers' one way to spread independent per-run work (decoding cached
// records, judging each run's health) over the machine's cores. Each index is handed out
// once, in no particular order; `fn` must only write what belongs to its index. The first
// exception a call throws is rethrown on the caller's thread after every worker stopped.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace sweep {

/// Calls fn(i) for every i in [0, n), on up to min(cores, 8) threads (the caller's one of
/// them); on one thread when `n` is below `min_per_thread` per extra thread.
template <class Fn>
void parallel_for(size_t n, Fn&& fn, size_t min_per_thread = 64) {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>({cores, 8, std::max<size_t>(1, n / min_per_thread)});
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        const std::lock_guard<std::mutex> hold(error_mutex);
        if (!error) error = std::current_exception();
        next = n;  // the others stop at their next index
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace sweep
