#include "prefetcher.h"

namespace sweep {

Prefetcher::Prefetcher(const Sampler& sampler, int64_t workers, int64_t first_step, int64_t steps, int64_t rank,
                       int64_t accum, int64_t micro_batches, size_t batch_elems)
    : sampler_(sampler),
      first_step_(first_step),
      rank_(rank),
      accum_(accum),
      micro_batches_(micro_batches),
      total_((steps - first_step) * accum) {
  const size_t depth = workers > 0 ? size_t(2 * workers) : 1;
  slots_.assign(depth, std::vector<int64_t>(batch_elems));
  ready_.assign(depth, -1);
  errors_.assign(depth, nullptr);
  for (int64_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void Prefetcher::fill(int64_t q, int64_t* out) const {
  const int64_t step = first_step_ + q / accum_, k = q % accum_;
  sampler_.fill(step, rank_ * accum_ + k, micro_batches_, out);
}

void Prefetcher::work() {
  const int64_t depth = int64_t(slots_.size());
  while (true) {
    int64_t q;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_ || next_task_ >= total_) return;
      q = next_task_++;
      // The slot of q is free once the consumer has released task q - depth.
      cv_.wait(lock, [&] { return stop_ || q < consumed_ + depth; });
      if (stop_) return;
    }
    std::exception_ptr error;
    try {
      fill(q, slots_[size_t(q % depth)].data());
    } catch (...) {  // a program's data source: the consumer rethrows it in its own thread
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      errors_[size_t(q % depth)] = error;
      ready_[size_t(q % depth)] = q;
    }
    cv_.notify_all();
  }
}

const int64_t* Prefetcher::next() {
  const int64_t depth = int64_t(slots_.size());
  const int64_t q = current_ + 1;
  if (threads_.empty()) {  // no workers: fill in the caller's thread
    current_ = q;
    fill(q, slots_[0].data());
    return slots_[0].data();
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (current_ >= 0) {
    ready_[size_t(current_ % depth)] = -1;
    consumed_ = current_ + 1;
    cv_.notify_all();
  }
  cv_.wait(lock, [&] { return ready_[size_t(q % depth)] == q; });
  current_ = q;
  if (errors_[size_t(q % depth)]) std::rethrow_exception(errors_[size_t(q % depth)]);
  return slots_[size_t(q % depth)].data();
}

}  // namespace sweep
