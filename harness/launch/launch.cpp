#include "launch.h"

#include <unistd.h>

#include <filesystem>
#include <thread>

#include "container.h"  // wrap_in_container
#include "process.h"    // executable_dir

namespace sweep {
namespace {

std::vector<std::string> mpiexec_prefix(const std::string& mpiexec, const std::vector<std::string>& mpi_args, int world,
                                        bool local_only) {
  std::vector<std::string> argv = {mpiexec};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  if (local_only && unsigned(world) > std::thread::hardware_concurrency()) argv.push_back("--oversubscribe");
  argv.insert(argv.end(), mpi_args.begin(), mpi_args.end());
  return argv;
}

}  // namespace

bool spans_hosts(const LaunchSpec& spec) {
  return (spec.launcher == "mpirun" && (!spec.hosts.empty() || !spec.hostfile.empty())) ||
         (spec.launcher == "slurm" && spec.slurm.nodes > 1);
}

std::vector<std::string> program_head(const LocalLaunch& launch, const std::string& trainer,
                                      const std::string& run_dir) {
  if (launch.program.empty() && launch.env.empty()) return {trainer};
  std::vector<std::string> head;
  if (!launch.program.empty() && launch.program.confine && !launch.confine.empty()) {
    head.push_back(launch.confine);
    const auto args = confine_args(launch.program, run_dir);
    head.insert(head.end(), args.begin(), args.end());
    head.push_back("--");
  }
  head.push_back("env");
  // A program starts in program.cwd (its grid's directory by default), so its relative
  // paths mean what they mean next to its grid; in an image, where the image starts.
  if (!launch.program.empty() && !launch.program.cwd.empty() && !launch.in_container)
    head.push_back("--chdir=" + launch.program.cwd);
  head.insert(head.end(), launch.env.begin(), launch.env.end());
  if (launch.program.empty()) return head.push_back(trainer), head;
  const std::string id = !launch.run_id.empty()   ? launch.run_id
                         : run_dir == kRunDirMark ? kRunIdMark
                                                  : std::filesystem::path(run_dir).filename().string();
  for (auto& v : program_environment(launch.program, run_dir, id, launch.threads, launch.rendezvous))
    head.push_back(std::move(v));
  if (!launch.sweep_id.empty()) head.push_back("SWEEP_ID=" + launch.sweep_id);
  head.insert(head.end(), launch.program.argv.begin(), launch.program.argv.end());
  return head;
}

std::vector<std::string> trainer_args(std::vector<std::string> head, const std::string& run_dir,
                                      const std::string& sweep_id, bool resume, const std::string& device,
                                      const LocalLaunch* launch) {
  std::vector<std::string> argv = std::move(head);
  if (launch && !launch->program.empty() && !launch->program.pass_args) return argv;
  argv.insert(argv.end(), {"--config", run_dir + "/config.yaml", "--out", run_dir});
  if (!sweep_id.empty()) argv.insert(argv.end(), {"--sweep-id", sweep_id});
  if (resume) argv.push_back("--resume");
  if (device != "cpu") argv.insert(argv.end(), {"--device", device});
  return argv;
}

std::vector<std::string> train_argv(const LocalLaunch& launch, int world, const std::string& out_dir,
                                    const std::string& sweep_id, bool resume) {
  std::vector<std::string> argv;
  if (world > 1) {
    argv = mpiexec_prefix(launch.mpiexec, launch.mpi_args, world, true);
    argv.insert(argv.end(), {"-n", std::to_string(world)});
  }
  const auto run = trainer_args(program_head(launch, launch.train_binary, out_dir), out_dir, sweep_id, resume,
                                launch.device, &launch);
  argv.insert(argv.end(), run.begin(), run.end());
  return argv;
}

std::vector<std::string> rank_command(const LaunchSpec& spec, const LocalLaunch& local, const std::string& sweep_dir,
                                      const std::string& run_dir, const std::string& sweep_id, bool resume) {
  const bool boxed = !spec.container.runtime.empty();
  std::string wrapper = local.rank_wrapper.empty() ? executable_dir() + "/sweep-rank" : local.rank_wrapper;
  std::vector<std::string> argv = {wrapper, "--log-dir", run_dir + "/logs"};
  if (spans_hosts(spec)) argv.push_back("--per-host");
  argv.push_back("--");
  LocalLaunch in_box = local;
  in_box.in_container = boxed;
  auto inner = trainer_args(program_head(in_box, boxed ? spec.container.trainer : local.train_binary, run_dir), run_dir,
                            sweep_id, resume, spec.device, &local);
  auto boxed_argv = wrap_in_container(spec.container, sweep_dir, inner);
  argv.insert(argv.end(), boxed_argv.begin(), boxed_argv.end());
  return argv;
}

RunCommand local_run_command(const LaunchSpec& spec, const LocalLaunch& local, int world, const std::string& sweep_dir,
                             const std::string& run_dir, const std::string& sweep_id, bool resume) {
  RunCommand c;
  if (world == 1 && spec.container.runtime.empty() && spec.launcher == "local") {
    c.argv =
        trainer_args(program_head(local, local.train_binary, run_dir), run_dir, sweep_id, resume, spec.device, &local);
    c.log = run_dir + "/logs/rank0.log";
    return c;
  }
  c.log = run_dir + "/logs/launcher.log";
  std::vector<std::string> mpi_args = local.mpi_args;
  mpi_args.insert(mpi_args.end(), spec.mpi_args.begin(), spec.mpi_args.end());
  if (world > 1 || spec.launcher == "mpirun") {
    const bool remote = spec.launcher == "mpirun" && (!spec.hosts.empty() || !spec.hostfile.empty());
    c.argv = mpiexec_prefix(local.mpiexec, mpi_args, world, !remote);
    if (!spec.hosts.empty()) {
      std::string hosts;
      for (const auto& h : spec.hosts) hosts += (hosts.empty() ? "" : ",") + h;
      c.argv.insert(c.argv.end(), {"--host", hosts});
    }
    if (!spec.hostfile.empty()) c.argv.insert(c.argv.end(), {"--hostfile", spec.hostfile});
    c.argv.insert(c.argv.end(), {"-n", std::to_string(world)});
  }
  auto ranks = rank_command(spec, local, sweep_dir, run_dir, sweep_id, resume);
  c.argv.insert(c.argv.end(), ranks.begin(), ranks.end());
  return c;
}

}  // namespace sweep
