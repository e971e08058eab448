// The report of a sweep in progress: while runs go on, the driver has report.html
// rewritten every few seconds by a child `sweep report` (another process, so neither a
// slow report nor a crash in one can stall or end the driver), one at a time. The report
// lists running runs from their partial records, read without HDF5's file lock.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "process.h"  // SpawnRunner

namespace sweep {

class LiveReport {
 public:
  /// `argv` rewrites the report (atomically: `sweep report` writes a temporary file and
  /// renames it); its output is appended to `log_path`. A rewrite starts at most every
  /// `every_s` seconds, and never sooner after the last one ended than `backoff` times as
  /// long as it took, so a large sweep's rewrites cost at most about 3% of one core.
  LiveReport(std::vector<std::string> argv, std::string log_path, double every_s, double backoff = 30);
  ~LiveReport();
  LiveReport(const LiveReport&) = delete;
  LiveReport& operator=(const LiveReport&) = delete;

  /// Called from the driver's loop: reaps a rewrite that ended and starts the next one
  /// when it is due. The first failure (it could not start, exited non-zero or died of a
  /// signal) goes to `warn` once; later ones are silent, and rewrites go on.
  void tick(const std::function<void(const std::string&)>& warn);
  /// Before the final report: waits up to `patience_s` for a rewrite in flight, then
  /// kills its process group.
  void stop(double patience_s = 10);
  /// Rewrites that ended well so far.
  int rewrites() const { return done_; }

 private:
  using Clock = std::chrono::steady_clock;
  void ended(const ExitStatus& st, const std::function<void(const std::string&)>& warn);

  std::vector<std::string> argv_;
  std::string log_;
  double every_s_, backoff_;
  SpawnRunner runner_;
  int child_ = -1;  ///< the rewrite in flight, or -1
  Clock::time_point started_{}, next_;
  int done_ = 0;
  bool warned_ = false;
};

}  // namespace sweep
