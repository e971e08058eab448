// Ends this process when the run stops making progress (a peer rank died or hung inside
// a collective), so that the launcher tears the job down instead of hanging forever.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace sweep {

class Watchdog {
 public:
  /// `timeout_s` <= 0 disables it. `on_timeout` runs (on the watchdog thread, while the
  /// main thread is stuck) with the cause, just before the process exits.
  Watchdog(double timeout_s, int rank, std::function<void(const std::string&)> on_timeout = {})
      : timeout_s_(timeout_s), rank_(rank), on_timeout_(std::move(on_timeout)) {
    if (timeout_s_ > 0) thread_ = std::thread([this] { watch(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Marks progress: step `step` has started (or finished a phase).
  void beat(long long step) {
    step_.store(step);
    last_.store(now_s());
  }

 private:
  static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  void watch() {
    last_.store(now_s());
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; })) {
      if (now_s() - last_.load() > timeout_s_) {
        // Exiting (not MPI_Abort from this thread, which MPI_THREAD_FUNNELED forbids) makes
        // mpirun / srun kill the remaining ranks.
        char why[256];
        std::snprintf(why, sizeof why,
                      "rank %d: no progress for %.0f s (dist.timeout_s) at step %lld; a peer rank died or hung", rank_,
                      timeout_s_, step_.load());
        std::fprintf(stderr, "sweep-train: %s; aborting\n", why);
        std::fflush(stderr);
        if (on_timeout_) on_timeout_(why);
        std::_Exit(4);
      }
    }
  }
  double timeout_s_;
  int rank_;
  std::function<void(const std::string&)> on_timeout_;
  std::atomic<double> last_{0};
  std::atomic<long long> step_{0};
  bool stop_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace sweep
