// The Slurm executor: sbatch job arrays of at most MaxArraySize tasks (one set per run
// shape when runs differ in ranks or threads), launch.parallel tasks running at once over
// all of them, the sweep's queued and running tasks kept under MaxJobCount; one squeue
// (and, for tasks squeue has forgotten, one sacct) per poll for every array; Slurm's
// final states mapped to failure classes, retries resubmitted with --resume, a job that
// can never start cancelled, Ctrl-C scancelling every array, and a driver started after
// one that died waiting for that driver's arrays (<dir>/slurm-jobs) instead of
// submitting them again.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "slurm.h"  // SlurmTask, SlurmLimits, SlurmArray
#include "sweep_run.h"

namespace sweep {

/// What one squeue or sacct call said.
struct SlurmAnswer {
  /// The command ran and its answer is complete (no jobs known is an answer); false: it
  /// failed (slurmctld busy, no accounting), and nothing may be concluded from a task's
  /// absence.
  bool answered = false;
  std::map<std::string, SlurmTask> tasks;  ///< "JOB_TASK" -> state
};

/// What the executor needs from Slurm; an interface so it can be tested with a fake.
/// Each call is one command, however many jobs it names.
class SlurmClient {
 public:
  virtual ~SlurmClient() = default;
  /// Runs sbatch `argv`; returns the job id. Throws std::runtime_error with sbatch's message.
  virtual std::string submit(const std::vector<std::string>& argv) = 0;
  /// One squeue: every task of `jobs` Slurm still holds (pending, running, or ended less
  /// than MinJobAge ago), with its pending reason.
  virtual SlurmAnswer queue(const std::vector<std::string>& jobs) = 0;
  /// One sacct: the final states accounting keeps of `jobs`.
  virtual SlurmAnswer accounting(const std::vector<std::string>& jobs) = 0;
  /// One scancel of `ids`, each a job ("12") or a task ("12_3") (Slurm sends SIGTERM,
  /// waits KillWait, then SIGKILL).
  virtual void cancel(const std::vector<std::string>& ids) = 0;
  /// `scontrol update JobId=job ArrayTaskThrottle=n`; false when Slurm refused.
  virtual bool set_throttle(const std::string& job, int n) = 0;
  /// MaxArraySize and MaxJobCount (`scontrol show config`), Slurm's defaults when unread.
  virtual SlurmLimits limits() = 0;
  /// Where task `job_task` ("JOB_TASK") ran and which of those nodes Slurm now holds down,
  /// in words ("on n[1-2], down: n2 (down*: Not responding)"), for the message of a
  /// NODE_FAIL; "" when Slurm cannot say.
  virtual std::string nodes_of(const std::string& job_task) = 0;
};

/// SlurmClient over the sbatch, squeue, sacct, scancel and scontrol programs.
class SlurmCli : public SlurmClient {
 public:
  std::string submit(const std::vector<std::string>& argv) override;
  SlurmAnswer queue(const std::vector<std::string>& jobs) override;
  SlurmAnswer accounting(const std::vector<std::string>& jobs) override;
  void cancel(const std::vector<std::string>& ids) override;
  bool set_throttle(const std::string& job, int n) override;
  SlurmLimits limits() override;
  std::string nodes_of(const std::string& job_task) override;
};

/// How many Slurm commands a sweep ran, said in its last line ("slurm: 3 sbatch, 40
/// squeue, 0 sacct over 40 polls").
struct SlurmCalls {
  int sbatch = 0;
  int squeue = 0;
  int sacct = 0;
  int scancel = 0;
  int scontrol = 0;  ///< throttle updates (and the one `show config`)
  int polls = 0;
};

/// The command line of each task: sweep-rank, sweep-confine and the trainer beside the
/// driver, the runs' environment, the grid's program.
LocalLaunch slurm_local_launch(const SweepSpec& spec, const SweepRunOptions& opt);

/// Runs every point of `spec` not yet completed as Slurm job array tasks, then writes
/// <out>/report.html. `opt.out_dir` and `opt.train_binary` must be absolute. `calls`
/// (optional) receives the count of Slurm commands.
SweepSummary run_sweep_slurm(const SweepSpec& spec, const std::vector<GridPoint>& points, const SweepRunOptions& opt,
                             SlurmClient& slurm, SlurmCalls* calls = nullptr);

/// What `sweep run` would submit first, without submitting or writing anything: the sbatch
/// argv and batch script of its first array, for `sweep plan --slurm-script`.
struct SlurmPreview {
  std::vector<std::string> argv;  ///< sbatch's, the script path last
  std::string script;             ///< the batch script's text
  size_t runs = 0;                ///< runs in that array
  size_t arrays = 0;              ///< arrays the whole sweep needs at least (MaxArraySize, shapes)
  SlurmLimits limits;
};
/// `points` minus the completed ones (`runs`: scan_runs of the sweep directory), in
/// arrays of at most limits.max_array_size.
SlurmPreview preview_slurm(const SweepSpec& spec, const std::vector<GridPoint>& points, const SweepRunOptions& opt,
                           const SlurmLimits& limits);

/// How `sweep status` words a run whose state file says running, from what Slurm says of
/// the task of its last submission: "queued in Slurm (job 12_3, Priority)", "running in
/// Slurm (job 12_3)"; "" when Slurm does not hold it (the task ended, or was forgotten).
struct SlurmRunView {
  bool queued = false;  ///< waiting in Slurm's queue (else running there)
  std::string detail;   ///< "queued in Slurm (job 12_3, Priority)", "running in Slurm (job 12_3)"
};
/// For every run of `ids` that sweep directory `dir`'s slurm-jobs names: one squeue
/// call over their jobs. Empty when the directory submitted nothing or squeue fails.
std::map<std::string, SlurmRunView> slurm_run_views(const std::string& dir, const std::vector<std::string>& ids,
                                                    SlurmClient& slurm);

}  // namespace sweep
