// Slurm without a cluster: the batch script and sbatch argv of a job array, and parsing
// what squeue and sacct print. Values reach sbatch as argv elements; the script holds
// every value single-quoted, so a grid value such as $(touch pwned) stays text.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "launch.h"         // LocalLaunch
#include "launch_config.h"  // LaunchSpec, FailureClass

namespace sweep {

/// One job array: runs that share a shape (ranks, threads per rank).
struct SlurmArray {
  std::string sweep_name;         ///< job name is sweep-<name>
  std::string sweep_dir;          ///< absolute
  int world = 1;                  ///< srun -n / --ntasks
  int threads = 1;                ///< --cpus-per-task
  std::vector<std::string> dirs;  ///< run directory of task i (absolute)
  std::vector<bool> resume;       ///< task i continues from its checkpoints
  /// Task i starts from this checkpoint (sweep-train's --fork-from: a pbt member's exploit,
  /// until it has checkpoints of its own); "" or absent = from its own (resume) or step 0.
  std::vector<std::string> fork_from;
  /// The array's `%` throttle: tasks of it running at once; 0 = launch.parallel. The
  /// executor splits launch.parallel over the arrays of a sweep (slurm_exec.h).
  int throttle = 0;
};

/// What squeue or sacct says of one task.
struct SlurmTask {
  std::string state;   ///< PENDING, RUNNING, COMPLETED, ...
  std::string reason;  ///< squeue's %r: why it waits (Priority, Resources, ...); "None" or "" otherwise
};

/// The limits of a cluster that bound how a sweep is submitted (`scontrol show config`).
struct SlurmLimits {
  int max_array_size = 1001;  ///< MaxArraySize: an array's task indices are 0 .. MaxArraySize-1
  int max_job_count = 10000;  ///< MaxJobCount: jobs slurmctld holds (each array task counts)
  bool read = false;          ///< false: Slurm's defaults above, the config could not be read
};

/// `s` as one shell word: 'it'\''s'.
std::string shell_quote(const std::string& s);

/// The bash batch script: task $SLURM_ARRAY_TASK_ID runs `srun --mpi=M -n W` over
/// sweep-rank (per-rank logs), the optional container and sweep-train, and writes the
/// exit code to <run>/slurm-exit.
std::string sbatch_script(const SlurmArray& a, const LaunchSpec& spec, const LocalLaunch& local);

/// sbatch --parsable ... --array=0-N%P --ntasks=W --nodes=N ... SCRIPT, one value per argv
/// element. --no-requeue: Slurm would requeue a task whose node failed and run the same
/// attempt again unseen; the driver's retries (launch.retries) resubmit it instead.
std::vector<std::string> sbatch_argv(const SlurmArray& a, const LaunchSpec& spec, const std::string& script_path);

/// --time in minutes, rounded up (Slurm counts time limits in minutes).
std::string slurm_minutes(double seconds);

/// "JOB_TASK" -> state and reason from `squeue -h -t all -o %i|%T|%r` (pending ranges
/// such as 12_[3-5%2] are expanded; a line without a reason has an empty one).
std::map<std::string, SlurmTask> parse_squeue(const std::string& text);
/// "JOB_TASK" -> state from `sacct -n -P -X -o JobID,State` ("CANCELLED by 0" -> CANCELLED).
std::map<std::string, SlurmTask> parse_sacct(const std::string& text);

/// MaxArraySize and MaxJobCount from `scontrol show config`; Slurm's defaults (1001,
/// 10000) for what the text does not say, `read` true only when it said both.
SlurmLimits parse_slurm_limits(const std::string& text);

/// Whether `scontrol update JobId=J ArrayTaskThrottle=N` changed the throttle, from its
/// exit code and output. On an array some of whose tasks have ended, scontrol answers one
/// line per task and exits 1 ("J_0: Job has already finished", "J_4: No error"): the
/// throttle of the tasks still pending changed all the same. True when the exit code is 0,
/// or every line is one of those two answers and at least one says "No error".
bool throttle_updated(bool exit_ok, const std::string& output);

/// True for a pending reason that no wait can clear, only a change of the job or of the
/// cluster's configuration: the request exceeds its partition (PartitionNodeLimit,
/// PartitionTimeLimit, PartitionConfig), names an account or QOS it may not use, asks for
/// features no node has, or exceeds a per-job limit of its QOS or association. Reasons
/// that pass (Priority, Resources, ReqNodeNotAvail with a node down, PartitionDown,
/// per-user and group limits) are false.
bool slurm_reason_permanent(const std::string& reason);

/// The nodes of `sinfo -h -N -o %N|%T|%E` that Slurm holds down, drained, failing or not
/// responding (a state ending in '*'), each once, in words:
/// "sweep-node2 (down*: Not responding)"; "" when none is.
std::string describe_down_nodes(const std::string& sinfo_text);

/// True once a job in `state` will not run any more.
bool slurm_state_final(const std::string& state);
/// The failure class of a final state; FailureClass::none for COMPLETED (the record
/// still decides), crashed for FAILED and anything unknown.
FailureClass slurm_failure_class(const std::string& state);

}  // namespace sweep
