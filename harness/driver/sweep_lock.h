// One driver per sweep directory: two drivers would start the same runs twice and race
// on their state files. The lock is an flock on <dir>/sweep.lock, so it goes away with
// the process that held it, however it ended.
#pragma once

#include <string>

namespace sweep {

class SweepLock {
 public:
  /// Takes the lock of sweep directory `dir` (created if needed). Throws ConfigError
  /// naming the holder (pid, host, start time) when another driver has it.
  explicit SweepLock(const std::string& dir);
  ~SweepLock();
  SweepLock(const SweepLock&) = delete;
  SweepLock& operator=(const SweepLock&) = delete;

  /// "pid 123 on host, since 2024-...Z" of the driver holding `dir`'s lock, or "" when none.
  static std::string holder(const std::string& dir);

 private:
  int fd_ = -1;
};

}  // namespace sweep
