// Starting child processes: always an argv vector, never a shell string.
#pragma once

#include <string>
#include <vector>

namespace sweep {

/// How a child process ended.
struct ExitStatus {
  int code = -1;     ///< exit code when it exited, else -1
  int signal = 0;    ///< terminating signal, else 0
  bool ok() const { return code == 0 && signal == 0; }
  std::string describe() const;  ///< "exit code 2", "killed by signal 9 (Killed)"
};

/// Runs one command to completion. An interface so the executor can be tested with a fake.
class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;
  /// Runs argv[0] with `argv` in its own process group, stdout and stderr appended to
  /// `log_path`. Throws std::runtime_error when it cannot be started.
  virtual ExitStatus run(const std::vector<std::string>& argv, const std::string& log_path) = 0;
};

/// posix_spawn-based runner.
class SpawnRunner : public ProcessRunner {
 public:
  ExitStatus run(const std::vector<std::string>& argv, const std::string& log_path) override;
};

/// Directory holding the running executable (from /proc/self/exe).
std::string executable_dir();

}  // namespace sweep
