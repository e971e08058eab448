// Starting child processes: always an argv vector, never a shell string. Each child gets
// its own process group, so a terminal's Ctrl-C reaches only the driver, which then stops
// every run (SIGTERM, grace period, SIGKILL) through that group.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "monotonic.h"  // monotonic_s, which the harness times its children with

namespace sweep {

/// How a child process ended.
struct ExitStatus {
  int code = -1;   ///< exit code when it exited, else -1
  int signal = 0;  ///< terminating signal, else 0
  bool ok() const { return code == 0 && signal == 0; }
  std::string describe() const;  ///< "exit code 2", "killed by signal 9 (Killed)"
};

/// Starts commands and reports how they ended. An interface so the executor can be
/// tested with a fake. A fake overrides either run() alone (it then runs synchronously,
/// one command at a time) or start(), wait_some() and signal_group() like SpawnRunner.
class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;
  /// Starts argv[0] with `argv` in a new process group, stdout and stderr appended to
  /// `log_path`, stdin from /dev/null. Returns the child's id. Throws
  /// std::runtime_error when it cannot be started. Default: run() now, result queued.
  virtual int start(const std::vector<std::string>& argv, const std::string& log_path);
  /// The children that ended since the last call; waits up to `wait_s` for the first
  /// one, less when a signal arrives.
  virtual std::vector<std::pair<int, ExitStatus>> wait_some(double wait_s);
  /// Sends `sig` to the whole process group of child `id` (mpiexec and its ranks).
  virtual void signal_group(int id, int sig) {}
  /// Starts one command and waits for it (other children's endings are kept for the
  /// next wait_some).
  virtual ExitStatus run(const std::vector<std::string>& argv, const std::string& log_path);

 protected:
  std::vector<std::pair<int, ExitStatus>> held_;   ///< ended while run() waited for another
  std::vector<std::pair<int, ExitStatus>> ended_;  ///< default start(): finished synchronously
  int next_id_ = 1;
};

/// fork/exec runner; each child gets SIGTERM when the driver dies (PR_SET_PDEATHSIG).
class SpawnRunner : public ProcessRunner {
 public:
  SpawnRunner() = default;
  /// Every command runs under the supervisor `box` (sweep-box, process_tree.h), so that
  /// the run ends with everything it started; `grace_s` is its time from SIGTERM to
  /// SIGKILL. A SIGKILL of such a run's group goes to the box as kill_tree_signal() (a
  /// real SIGKILL would end the box alone and orphan the tree), and becomes a real one
  /// if the box has not ended 5 s later. A box that something stopped (SIGSTOP) is
  /// continued.
  SpawnRunner(std::string box, double grace_s) : box_(std::move(box)), grace_s_(grace_s) {}
  int start(const std::vector<std::string>& argv, const std::string& log_path) override;
  std::vector<std::pair<int, ExitStatus>> wait_some(double wait_s) override;
  void signal_group(int id, int sig) override;

 private:
  std::string box_;
  double grace_s_ = 10;
  std::vector<int> live_;
  std::vector<std::pair<int, double>> kill_sent_;  ///< boxes told to kill their tree, and when
};

/// A finished command's exit status and its output (stdout and stderr together).
struct Captured {
  ExitStatus status;
  std::string output;
  bool timed_out = false;  ///< killed (with its process group) after the timeout
  bool truncated = false;  ///< it wrote more than CaptureOptions::max_output_bytes
};

/// How capture() runs a command.
struct CaptureOptions {
  double timeout_s = 60;  ///< then SIGKILL to its process group
  /// The child's whole environment ("NAME=value"); unset = the driver's.
  std::optional<std::vector<std::string>> env;
  size_t max_output_bytes = 0;  ///< keep at most this much output; 0 = all of it
  bool note_timeout = true;     ///< append "(killed after N s)" to the output on a timeout
};

/// Runs `argv` (no shell, stdin from /dev/null, its own process group), returns its
/// output; kills it after `timeout_s`. For short tools such as sbatch and squeue. Throws
/// std::runtime_error when it cannot start.
Captured capture(const std::vector<std::string>& argv, double timeout_s = 60);
Captured capture(const std::vector<std::string>& argv, const CaptureOptions& options);

/// `name` as execvp would find it: as given when it holds a '/', else the first
/// executable file of that name on PATH; "" when there is none.
std::string resolve_program(const std::string& name);

/// Directory holding the running executable (from /proc/self/exe).
std::string executable_dir();

}  // namespace sweep
