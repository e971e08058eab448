// The Slurm executor: one sbatch job array per sweep (one per run shape when runs differ
// in ranks or threads), throttled to launch.parallel tasks at once; the driver polls
// squeue (sacct once squeue has forgotten a job), maps Slurm's final states to failure
// classes, resubmits retries with --resume, and scancels everything on Ctrl-C.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sweep_run.h"

namespace sweep {

/// What the executor needs from Slurm; an interface so it can be tested with a fake.
class SlurmClient {
 public:
  virtual ~SlurmClient() = default;
  /// Runs sbatch `argv`; returns the job id. Throws std::runtime_error with sbatch's message.
  virtual std::string submit(const std::vector<std::string>& argv) = 0;
  /// "JOB_TASK" -> state for every task Slurm still knows of `jobs`.
  virtual std::map<std::string, std::string> states(const std::vector<std::string>& jobs) = 0;
  /// scancel `jobs` (Slurm sends SIGTERM, waits KillWait, then SIGKILL).
  virtual void cancel(const std::vector<std::string>& jobs) = 0;
  /// Where task `job_task` ("JOB_TASK") ran and which of those nodes Slurm now holds down,
  /// in words ("on n[1-2], down: n2 (down*: Not responding)"), for the message of a
  /// NODE_FAIL; "" when Slurm cannot say.
  virtual std::string nodes_of(const std::string& job_task) = 0;
};

/// SlurmClient over the sbatch, squeue, sacct and scancel programs.
class SlurmCli : public SlurmClient {
 public:
  std::string submit(const std::vector<std::string>& argv) override;
  std::map<std::string, std::string> states(const std::vector<std::string>& jobs) override;
  void cancel(const std::vector<std::string>& jobs) override;
  std::string nodes_of(const std::string& job_task) override;
};

/// Runs every point of `spec` not yet completed as Slurm job array tasks, then writes
/// <out>/report.html. `opt.out_dir` and `opt.train_binary` must be absolute.
SweepSummary run_sweep_slurm(const SweepSpec& spec, const std::vector<GridPoint>& points, const SweepRunOptions& opt,
                             SlurmClient& slurm);

}  // namespace sweep
