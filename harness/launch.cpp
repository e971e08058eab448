#include "launch.h"

#include <unistd.h>

#include <thread>

namespace sweep {

std::vector<std::string> train_argv(const LocalLaunch& launch, int world, const std::string& config_path,
                                    const std::string& out_dir, const std::string& sweep_id, bool resume) {
  std::vector<std::string> argv;
  if (world > 1) {
    argv = {launch.mpiexec};
    if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
    if (unsigned(world) > std::thread::hardware_concurrency()) argv.push_back("--oversubscribe");
    argv.insert(argv.end(), launch.mpi_args.begin(), launch.mpi_args.end());
    argv.insert(argv.end(), {"-n", std::to_string(world)});
  }
  argv.insert(argv.end(), {launch.train_binary, "--config", config_path, "--out", out_dir});
  if (!sweep_id.empty()) argv.insert(argv.end(), {"--sweep-id", sweep_id});
  if (resume) argv.push_back("--resume");
  return argv;
}

}  // namespace sweep
