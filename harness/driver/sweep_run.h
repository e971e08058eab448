// Running a sweep: lay out the sweep directory, run every point not yet completed
// (in parallel within the launch's slots, with retries, time limits and Ctrl-C
// handling), record each run's state, write the report. The Slurm executor is in
// slurm_exec.h; both share SweepSession.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grid.h"
#include "live_report.h"  // LiveReport
#include "process.h"
#include "progress.h"
#include "sweep_dir.h"  // record_path, RunState
#include "sweep_lock.h"

namespace sweep {

/// A run an asynchronous search hands the executor: run `id`, stopping after step
/// `stop_at` (0: train.steps), as SweepRunOptions::stop_at would have it.
struct FedRun {
  std::string id;
  int64_t stop_at = 0;
};

/// Where an asynchronous search (kind asha) feeds the executor from: instead of every
/// point at once, the executor asks for one run each time a worker is free and nothing is
/// queued, and says when each run it was handed has ended (completed, stopped at its
/// step, or failed or interrupted for good). It ends when the feed has nothing to hand out
/// and nothing runs.
class RunFeed {
 public:
  virtual ~RunFeed() = default;
  /// The next run to start, or nullopt: none now (a decision waits for a run still going).
  virtual std::optional<FedRun> next() = 0;
  /// A run it handed out has ended (or had nothing to do: already at its step).
  virtual void ended(const std::string& id) = 0;
  /// A run an earlier driver started is still queued or running in Slurm and is waited
  /// for, not started again: it counts as handed out (its end is said by ended()).
  virtual void adopted(const std::string& id) = 0;
};

/// Settings of one `sweep run` that do not come from the grid.
struct SweepRunOptions {
  std::string out_dir;               ///< sweep directory; default sweep-out/<name>
  std::string train_binary;          ///< path of sweep-train
  std::string rank_wrapper;          ///< path of sweep-rank; empty = beside this program
  std::vector<std::string> run_env;  ///< NAME=VALUE set in every run's command (the BLAS kernel)
  std::string mpiexec = "mpiexec";
  bool quiet = false;            ///< no per-run lines (the summary still prints)
  bool tty = false;              ///< draw a live progress bar
  double progress_every_s = 30;  ///< without a tty: a progress line this often
  double poll_s = 0.2;           ///< how often the local executor looks at its runs
  /// While runs go on, report.html is rewritten this often by `report_binary report`
  /// (live_report.h); 0 = only at the end.
  double report_every_s = 0;
  std::string report_binary;  ///< the `sweep` executable
  /// The caller holds the sweep directory's SweepLock for longer than one session (a tpe
  /// search, across its batches): the session does not take it again.
  bool lock_held = false;
  /// A halving search's rung: run id -> the step that run stops after (its record then
  /// says `stopped`, and its checkpoint stays); a run not named trains to train.steps. A
  /// run already stopped at or past its step is skipped; one stopped earlier is promoted:
  /// its record moves aside (kept) and it resumes from its checkpoint.
  std::map<std::string, int64_t> stop_at;
  /// An asynchronous search's feed (RunFeed): no point is queued up front, each is run
  /// when fed, as often as fed. Null: every point, once.
  RunFeed* feed = nullptr;
};

/// What happened to the points of a sweep.
struct SweepSummary {
  int completed = 0;    ///< ran now and completed
  int skipped = 0;      ///< already had a completed record
  int failed = 0;       ///< ended without a completed record after its retries, or diverged
  int interrupted = 0;  ///< stopped by Ctrl-C / SIGTERM; run again by the next `sweep run`
  int not_started = 0;  ///< still pending when the sweep was stopped
  int retries = 0;      ///< extra attempts made
  /// The run ids of `completed` and of `skipped`, in the order they were counted: a search
  /// that runs several stages counts each run once (a halving trial trains a rung a stage).
  std::vector<std::string> completed_runs, skipped_runs;
  std::vector<std::string> diverged_dirs;  ///< the directories of the runs that ended diverged now
  int stop_signal = 0;                     ///< the signal that stopped the sweep, or 0
  /// Seconds the executor ran, and the seconds its runs' attempts took together: a search
  /// says from them how busy its launch.parallel workers were.
  double wall_s = 0, busy_s = 0;
  /// Why the sweep stopped short of trying every run without a signal (sbatch refused an
  /// array: Slurm's message), or "".
  std::string stop_reason;
  std::string report_path;
};

/// A run this invocation has to do.
struct RunTask {
  const GridPoint* point = nullptr;
  std::string dir;        ///< runs/<id>
  RunState state;         ///< as on disk, updated as attempts go
  int retries_used = 0;   ///< retries made in this invocation
  double started_at = 0;  ///< steady-clock seconds of the current attempt
  int64_t stop_at = 0;    ///< SweepRunOptions::stop_at of this run; 0 = to the end
  /// Earlier attempts may have left checkpoints: continue from them.
  bool resume() const { return state.attempts > 0; }
};

/// The checkpoint a run that is a fork (train.fork_parent, as a pbt search makes them)
/// starts from: its parent's (runs/<parent>/checkpoints/step_<train.fork_step>) while it
/// has no complete checkpoint of its own; "" for any other run, or once it has one (it
/// resumes from its own then). The executor passes it as sweep-train's --fork-from.
std::string fork_source(const std::string& sweep_dir, const RunTask& t);

/// Class of an ended attempt from its exit status and what it left in `run_dir`
/// (a completed or diverged record decides over the exit status); `detail` says why.
/// `program` (a grid's program, ProgramSpec::json) is what the record's environment
/// `program` must say; a record of another run id or program is a config failure.
/// `stop_at` is the step a search asked the run to stop after (0: none): a record stopped
/// unasked or at another step, or completed past it, is a config failure too. Each such
/// record is moved aside at once.
FailureClass classify_attempt(const ExitStatus& st, const std::string& run_dir, std::string* detail,
                              const std::string& program = "", int64_t stop_at = 0);

/// The bookkeeping every executor shares: lock, directories, configs, state files,
/// progress lines, retries, summary and report.
class SweepSession {
 public:
  /// Takes the sweep dir's lock (throws ConfigError when another driver holds it),
  /// writes points.tsv, and sorts the points into already-done and to-do.
  SweepSession(const SweepSpec& spec, const std::vector<GridPoint>& points, const SweepRunOptions& opt);

  std::vector<RunTask>& tasks() { return tasks_; }
  const SweepSpec& spec() const { return spec_; }
  const SweepRunOptions& options() const { return opt_; }
  Progress& progress() { return *progress_; }
  SweepSummary& summary() { return sum_; }

  /// A run a feed handed out (SweepRunOptions::feed), to stop after `stop_at`: decides
  /// as the constructor decides for every point without a feed (skip one already at its
  /// step, promote one stopped earlier, start over a stale one) and returns it to be
  /// queued, or null when there is nothing to run (the line says why).
  RunTask* admit(const FedRun& run);
  /// Writes the run's directories and config.yaml; call before its command can start.
  /// Done per attempt, not up front, so a 100,000-point sweep does not write 100,000
  /// files before its first run starts.
  void prepare(RunTask& t);
  /// An attempt is starting: attempts+1, state "running", a header line in `log`.
  void attempt_started(RunTask& t, const std::string& log);
  /// An attempt an earlier driver started goes on (a Slurm task it submitted, found
  /// still queued or running): it counts as running, and its end is recorded as any
  /// other attempt's. `where` ("job 12_3 of an earlier driver, PENDING") is said in a
  /// line unless empty.
  void attempt_adopted(RunTask& t, const std::string& where);
  /// An attempt ended with `c` (none = completed) and `detail` says why. Records the state
  /// and prints the line; returns true when the run should be started again (a retry). A
  /// hang at the site of an earlier attempt's is deterministic and not retried: the
  /// verdict comes first in the detail (repeated_hang.h).
  bool attempt_ended(RunTask& t, FailureClass c, const std::string& detail, const std::string& log);
  /// Called often from the executor's loop: the progress line and the live report.
  void tick();
  /// Writes the report and returns the summary.
  SweepSummary finish();

 private:
  std::string label(const RunTask& t) const;
  enum class Admit { queue, done, failed };
  /// What the constructor, or admit(), decides for a task with its state and stop_at:
  /// `line` says it when it is not queued as it is.
  Admit decide(RunTask& t, std::string* line);
  /// write_run_state, reporting (not throwing) an I/O error.
  void save_state(RunTask& t);

  const SweepSpec& spec_;
  SweepRunOptions opt_;
  std::unique_ptr<SweepLock> lock_;
  std::vector<RunTask> tasks_;
  std::map<std::string, size_t> task_of_;  ///< run id -> index in tasks_ (with a feed)
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<LiveReport> live_;  ///< null without report_every_s
  SweepSummary sum_;
  size_t total_ = 0;
};

/// Runs every point of `spec` not yet completed through `runner` with the local or
/// mpirun launcher, then writes <out>/report.html.
SweepSummary run_sweep(const SweepSpec& spec, const std::vector<GridPoint>& points, const SweepRunOptions& opt,
                       ProcessRunner& runner);

/// Writes the HTML report of sweep directory `dir` to `out_path`.
void write_report(const std::string& dir, const std::string& title, const std::string& out_path);

}  // namespace sweep
