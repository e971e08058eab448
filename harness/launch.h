// Turning "run this config on W ranks" into the argv of a process. Values reach
// programs only through argv, never through a shell.
#pragma once

#include <string>
#include <vector>

namespace sweep {

/// How runs start on this machine.
struct LocalLaunch {
  std::string train_binary;           ///< path of sweep-train
  std::string mpiexec = "mpiexec";    ///< used when world > 1
  std::vector<std::string> mpi_args;  ///< extra mpiexec arguments (e.g. --bind-to none)
};

/// The argv of one run: `sweep-train --config C --out D [--sweep-id S] [--resume]`, behind
/// `mpiexec -n W` when W > 1 (with Open MPI's --allow-run-as-root when running as root and
/// --oversubscribe when W exceeds the cores).
std::vector<std::string> train_argv(const LocalLaunch& launch, int world, const std::string& config_path,
                                    const std::string& out_dir, const std::string& sweep_id, bool resume);

}  // namespace sweep
