// Turning "run this config on W ranks" into the argv of a process. Values reach
// programs only through argv, never through a shell.
#pragma once

#include <string>
#include <vector>

#include "launch_config.h"  // LaunchSpec
#include "program.h"        // ProgramSpec

namespace sweep {

/// How runs start on this machine.
struct LocalLaunch {
  std::string train_binary;           ///< path of sweep-train
  std::string mpiexec = "mpiexec";    ///< used when world > 1
  std::vector<std::string> mpi_args;  ///< extra mpiexec arguments (e.g. --bind-to none)
  std::string rank_wrapper;           ///< path of sweep-rank (per-rank logs); empty = beside this program
  std::string device = "cpu";         ///< sweep-train --device for train_argv
  ProgramSpec program;                ///< a grid's `program:`; empty: train_binary
  int64_t threads = 1;                ///< the run's train.threads (a program's thread variables)
  std::string run_id;                 ///< a program's SWEEP_RUN_ID; empty: the run directory's name
  std::vector<std::string> env;       ///< NAME=VALUE for every run's command (OPENBLAS_CORETYPE)
  std::string confine;                ///< path of sweep-confine: a program runs under it; empty: not confined
  Rendezvous rendezvous;              ///< a program's torch.distributed rendezvous (MASTER_ADDR, MASTER_PORT)
  std::string sweep_id;       ///< a program's SWEEP_ID (its record's sweep_id); --sweep-id for one that takes arguments
  bool in_container = false;  ///< the program runs in an image: it starts where the image does, not in program.cwd
};

/// Stand-ins for a run's directory and id in a command written before the run is known
/// (a Slurm batch script replaces them with the array task's).
inline const std::string kRunDirMark = "\x01SWEEP_RUN_DIR\x01";
inline const std::string kRunIdMark = "\x01SWEEP_RUN_ID\x01";
/// Stand-ins for a Slurm run's rendezvous, which only the job knows (its first node, a
/// port from its job id): the batch script's "$master_addr" and "$master_port".
inline const std::string kMasterAddrMark = "\x01SWEEP_MASTER_ADDR\x01";
inline const std::string kMasterPortMark = "\x01SWEEP_MASTER_PORT\x01";

/// What starts the training program of a run in `run_dir`: {trainer}, or for a grid's
/// program `[sweep-confine --write DIR... --] env NAME=VALUE... ARGV...` with
/// program_environment (never a shell); `env` with launch.env first when that is set.
std::vector<std::string> program_head(const LocalLaunch& launch, const std::string& trainer,
                                      const std::string& run_dir);

/// The argv of one run in `out_dir` (its config is out_dir/config.yaml): trainer_args
/// behind `mpiexec -n W` when W > 1 (with Open MPI's --allow-run-as-root when running as
/// root and --oversubscribe when W exceeds the cores).
std::vector<std::string> train_argv(const LocalLaunch& launch, int world, const std::string& out_dir,
                                    const std::string& sweep_id, bool resume);

/// `head` (program_head) and sweep-train's own arguments for run directory `run_dir`
/// (`--device` only when not cpu); `head` alone when `launch` runs a grid's program that
/// takes no arguments from sweep (program.pass_args false: it reads SWEEP_CONFIG and
/// SWEEP_RUN_DIR, as python's sweep.init() does).
std::vector<std::string> trainer_args(std::vector<std::string> head, const std::string& run_dir,
                                      const std::string& sweep_id, bool resume, const std::string& device = "cpu",
                                      const LocalLaunch* launch = nullptr);

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

/// Whether a run's ranks may run on more than one host (mpirun with hosts or a hostfile,
/// Slurm with launch.slurm.nodes > 1): then each rank logs to logs/<host>/rank<r>.log
/// (sweep-rank --per-host).
bool spans_hosts(const LaunchSpec& spec);

/// The per-rank part shared by every launcher: [sweep-rank --log-dir D [--per-host] --] [container] sweep-train ...
std::vector<std::string> rank_command(const LaunchSpec& spec, const LocalLaunch& local, const std::string& sweep_dir,
                                      const std::string& run_dir, const std::string& sweep_id, bool resume);

}  // namespace sweep
