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

/// "JOB_TASK" -> state from `squeue -h -r -t all -o %i|%T` (pending ranges such as
/// 12_[3-5%2] are expanded).
std::map<std::string, std::string> parse_squeue(const std::string& text);
/// "JOB_TASK" -> state from `sacct -n -P -X -o JobID,State` ("CANCELLED by 0" -> CANCELLED).
std::map<std::string, std::string> parse_sacct(const std::string& text);

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
