// Turning "run this config on W ranks" into the argv of a process. Values reach
// programs only through argv, never through a shell.
#pragma once

#include <string>
#include <vector>

#include "launch_config.h"  // LaunchSpec

namespace sweep {

/// How runs start on this machine.
struct LocalLaunch {
  std::string train_binary;           ///< path of sweep-train
  std::string mpiexec = "mpiexec";    ///< used when world > 1
  std::vector<std::string> mpi_args;  ///< extra mpiexec arguments (e.g. --bind-to none)
  std::string rank_wrapper;           ///< path of sweep-rank (per-rank logs); empty = beside this program
  std::string device = "cpu";         ///< sweep-train --device for train_argv
};

/// The argv of one run: `sweep-train --config C --out D [--sweep-id S] [--resume]`, behind
/// `mpiexec -n W` when W > 1 (with Open MPI's --allow-run-as-root when running as root and
/// --oversubscribe when W exceeds the cores).
std::vector<std::string> train_argv(const LocalLaunch& launch, int world, const std::string& config_path,
                                    const std::string& out_dir, const std::string& sweep_id, bool resume);

/// sweep-train's own arguments for run directory `run_dir` (`--device` only when not cpu).
std::vector<std::string> trainer_args(const std::string& trainer, const std::string& run_dir,
                                      const std::string& sweep_id, bool resume, const std::string& device = "cpu");

/// One attempt of a run: its argv and the file that gets the launcher's output.
struct RunCommand {
  std::vector<std::string> argv;
  std::string log;  ///< logs/rank0.log for a lone rank started directly, else logs/launcher.log
};

/// The command of one attempt under the local or mpirun launcher. One rank without a
/// container is sweep-train itself (its output is rank0.log). Otherwise each rank runs
/// under sweep-rank, which writes logs/rank<r>.log, optionally inside a container; with
/// W > 1 behind mpiexec (hosts or hostfile for launcher mpirun).
RunCommand local_run_command(const LaunchSpec& spec, const LocalLaunch& local, int world, const std::string& sweep_dir,
                             const std::string& run_dir, const std::string& sweep_id, bool resume);

/// The per-rank part shared by every launcher: [sweep-rank --log-dir D --] [container] sweep-train ...
std::vector<std::string> rank_command(const LaunchSpec& spec, const LocalLaunch& local, const std::string& sweep_dir,
                                      const std::string& run_dir, const std::string& sweep_id, bool resume);

}  // namespace sweep
