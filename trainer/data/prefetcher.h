// Background prefetch of micro-batches (data.workers threads). Micro-batches come out in
// the consumption order whatever the worker count, and each is a pure function of its
// (step, micro-batch), so the worker count never changes the bits.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "data_source.h"

namespace sweep {

class Prefetcher {
 public:
  /// Micro-batches of this rank for 0-based steps [first_step, steps): for each step,
  /// global micro-batches j = rank*accum + k, k = 0..accum-1, of micro_batches per step.
  Prefetcher(const Sampler& sampler, int64_t workers, int64_t first_step, int64_t steps, int64_t rank, int64_t accum,
             int64_t micro_batches, size_t batch_elems);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  /// The next micro-batch; valid until the following call. Rethrows what filling it threw
  /// (a worker's exception surfaces here, in the consumer's thread).
  const int64_t* next();

 private:
  void fill(int64_t q, int64_t* out) const;
  void work();

  const Sampler& sampler_;
  int64_t first_step_, rank_, accum_, micro_batches_, total_;
  std::vector<std::vector<int64_t>> slots_;
  std::vector<int64_t> ready_;              // task number held by each slot, -1 while empty
  std::vector<std::exception_ptr> errors_;  // what filling each slot threw, if anything
  int64_t next_task_ = 0;                   // next task a worker takes
  int64_t consumed_ = 0;                    // tasks handed to the consumer and released
  int64_t current_ = -1;                    // task the consumer holds
  bool stop_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> threads_;
};

}  // namespace sweep
