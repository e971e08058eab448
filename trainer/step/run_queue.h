// How long a thread was ready to run but waited for a CPU: the kernel's run-queue wait
// (the second figure of /proc/thread-self/schedstat). It grows when other processes share
// the thread's cores; sleeping, waiting on a peer or on I/O do not add to it. The trainer
// reads it around each step, so a record can say that a rank was slow because it shared
// its cores, not because its share of the work was larger.
#pragma once

namespace sweep {

class RunQueueClock {
 public:
  /// Opens the schedstat of the calling thread (the one whose wait wait_s() reports).
  RunQueueClock();
  ~RunQueueClock();
  RunQueueClock(const RunQueueClock&) = delete;
  RunQueueClock& operator=(const RunQueueClock&) = delete;
  /// Seconds that thread has waited on a run queue since it started; NaN where the
  /// kernel does not say (no schedstat: a kernel without CONFIG_SCHED_INFO, or not Linux).
  double wait_s() const;

 private:
  int fd_ = -1;
};

}  // namespace sweep
