// The `launch:` section of a grid: how the runs of a sweep are started (launcher,
// parallelism, retries, time limits, Slurm, containers). None of it is part of a run's
// config or id: the same point launched another way is the same run.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace YAML {
class Node;
}

namespace sweep {

/// Why an attempt at a run did not complete. Decides whether it is retried.
enum class FailureClass {
  none,         ///< completed
  config,       ///< sweep-train exit 2: bad config or data; never retried
  diverged,     ///< the run recorded status "diverged"; never retried (the math is the same next time)
  crashed,      ///< non-zero exit or killed by a signal, without a record
  hang,         ///< sweep-train exit 4: a rank made no progress for dist.timeout_s
  timeout,      ///< over launch.timeout_s, or Slurm TIMEOUT
  oom,          ///< Slurm OUT_OF_MEMORY
  node_fail,    ///< Slurm NODE_FAIL
  preempted,    ///< Slurm PREEMPTED
  cancelled,    ///< Slurm CANCELLED by someone else than this driver; not retried
  lost,         ///< ended "successfully" without a completed record
  interrupted,  ///< stopped by this driver (Ctrl-C / SIGTERM); run again by the next `sweep run`
  desync,       ///< the ranks' parameters parted (the desync check): deterministic, so never retried
};

/// "crashed", "timeout", ... as used in grids, state files and messages.
const char* failure_class_name(FailureClass c);
/// Inverse of failure_class_name; FailureClass::none when unknown.
FailureClass failure_class_from(const std::string& name);
/// Classes a grid may ask to retry (everything but config, diverged, cancelled, interrupted).
const std::vector<FailureClass>& retryable_classes();

/// `launch.slurm`.
struct SlurmSpec {
  std::string partition;     ///< --partition; empty = the cluster default
  std::string time;          ///< --time (e.g. "10", "0:30:00"); empty = from timeout_s, else the partition default
  std::string account;       ///< --account; empty = the user's default
  std::string qos;           ///< --qos; empty = the account's default
  std::string constraint;    ///< --constraint: node features, e.g. "a100|h100"; empty = any node
  int gpus = 0;              ///< GPUs per node of a run (--gpus-per-node); 0 = none
  int gpus_per_task = 0;     ///< GPUs per rank (--gpus-per-task); 0 = none; not with gpus
  int nodes = 1;             ///< nodes per run (--nodes; a run of fewer ranks gets one node per rank)
  std::string mpi = "pmix";  ///< srun --mpi=; `srun --mpi=list` shows what the cluster has
  std::vector<std::string> extra_args;  ///< more sbatch arguments, each one argv element
  double poll_s = 5;                    ///< seconds between squeue/sacct polls
};

/// `launch.container`.
struct ContainerSpec {
  std::string runtime;  ///< apptainer | singularity | docker | podman | charliecloud; empty = no container
  std::string command;  ///< program to run as the runtime; default: the runtime's name (ch-run for charliecloud)
  std::string image;    ///< image file (.sif), directory (charliecloud) or name (docker/podman)
  std::vector<std::string> binds;       ///< "host[:container[:opts]]" mounts; the sweep dir is always bound
  bool gpus = false;                    ///< expose GPUs (--nv / --gpus all / CDI); refused for charliecloud
  std::string trainer = "sweep-train";  ///< sweep-train's path inside the image
};

/// The whole `launch:` section with its defaults.
struct LaunchSpec {
  std::string launcher = "local";       ///< local | mpirun | slurm
  int parallel = 1;                     ///< runs at once (slurm: the job array's %throttle)
  int slots = 0;                        ///< cores the driver may fill (local/mpirun); 0 = this machine's cores
  std::vector<std::string> hosts;       ///< mpirun: "host" or "host:slots", passed as --host
  std::string hostfile;                 ///< mpirun: --hostfile (relative paths: to the grid file)
  std::string hostfile_where;           ///< file:line:col of launch.hostfile, for messages
  std::vector<std::string> mpi_args;    ///< extra mpiexec arguments
  std::map<FailureClass, int> retries;  ///< extra attempts per failure class (absent = 0)
  double timeout_s = 0;                 ///< wall-clock limit per attempt; 0 = none
  double grace_s = 10;                  ///< SIGTERM -> SIGKILL delay when stopping runs
  /// After the runs, replay each diverged run's last step and each completed run's first
  /// spike decision (sweep diagnose).
  bool diagnose = false;
  std::string device = "cpu";  ///< cpu | cuda: sweep-train --device (recorded in each record, not in run ids)
  /// The training program: sweep-train, or a program of one's own built on
  /// sweep::train_main (its model kinds come from its --describe-models). A relative path
  /// is to the grid file; empty: sweep-train beside sweep. `sweep run --trainer` overrides.
  std::string trainer;
  /// The OpenBLAS kernel of every run: auto (the default: OpenBLAS's own choice unless it
  /// is weaker than the CPU and another kernel is clearly faster), native, or a kernel name
  /// (blas_kernel.h). Set through OPENBLAS_CORETYPE in each run's command; recorded.
  std::string blas = "auto";
  SlurmSpec slurm;
  ContainerSpec container;
};

/// Parses the `launch:` node; `source` names the grid file for file:line:col messages.
/// Throws ConfigError for unknown keys (with a did-you-mean), wrong types and ranges.
LaunchSpec parse_launch(const YAML::Node& node, const std::string& source);

/// The retries allowed for class `c`.
int retries_for(const LaunchSpec& l, FailureClass c);

}  // namespace sweep
