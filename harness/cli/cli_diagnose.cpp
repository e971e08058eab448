// `sweep diagnose RUN_DIR --step S`: is a bad step the data, a transient fault or one
// rank? (harness/driver/diagnose.h). Exit 0 diagnosed (data or program, transient, rank
// r), 1 inconclusive or a replay failed, 2 usage or bad input (nothing written).
#include <cstdio>
#include <memory>

#include "cli.h"
#include "config_error.h"  // ConfigError
#include "diagnose.h"      // diagnose
#include "process.h"       // SpawnRunner, executable_dir

namespace sweep {
namespace {

struct DiagnoseCliOptions {
  DiagnoseOptions opt;
  std::string trainer, mpiexec;
};

int run_diagnose(DiagnoseCliOptions& o) {
  o.opt.launch.train_binary = o.trainer.empty() ? executable_dir() + "/sweep-train" : o.trainer;
  o.opt.trainer_given = !o.trainer.empty();
  o.opt.launch.mpiexec = find_in_path(o.mpiexec.empty() ? "mpiexec" : o.mpiexec);
  SpawnRunner runner(executable_dir() + "/sweep-box", 10);  // each replay ends with all it started
  const DiagnoseResult r = diagnose(o.opt, runner);
  std::printf("%s\n", terminal_text(r.line).c_str());
  return r.exit_code();
}

}  // namespace

CliAction setup_diagnose(CLI::App& app) {
  auto o = std::make_shared<DiagnoseCliOptions>();
  auto* cmd = app.add_subcommand(
      "diagnose",
      "replay one step of a run (own layout, shares rotated over the ranks, one rank) into <run dir>/diagnose/<n>/ "
      "and say bit for bit whether it is the data or program, a transient fault or one rank; exit 0 diagnosed, 1 "
      "inconclusive or a replay failed, 2 usage");
  cmd->add_option("run", o->opt.run_dir, "run directory (sweep-dir/runs/ID) with a completed record")->required();
  cmd->add_option("--step", o->opt.step, "the step to replay, from the newest complete checkpoint before it")
      ->required()
      ->check(whole_number(1));
  cmd->add_option("--set", o->opt.set, "test only: KEY=VALUE override of every replay's config, repeatable")
      ->allow_extra_args(false);
  cmd->add_option("--trainer", o->trainer, "sweep-train binary (default: beside sweep)");
  cmd->add_option("--mpiexec", o->mpiexec, "mpiexec for the replays on more than one rank (default: from PATH)");
  cmd->add_option("--hosts", o->opt.hosts,
                  "the run's nodes, comma-separated, rank 0's first (as launch.hosts): the own-layout and rotated "
                  "replays run their ranks there, so a bad node is named; the one-rank replay runs here")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_option("--mpi-arg", o->opt.mpi_args,
                  "an extra mpiexec argument for the replays on --hosts, repeatable, as launch.mpi_args (e.g. "
                  "--mpi-arg=--mca --mpi-arg=plm_rsh_agent --mpi-arg=ssh)")
      ->allow_extra_args(false);
  return [o, cmd]() { return cmd->parsed() ? run_diagnose(*o) : -1; };
}

}  // namespace sweep
