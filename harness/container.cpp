#include "container.h"

#include <unistd.h>

namespace sweep {

bool container_needs_rank_env(const ContainerSpec& c) { return c.runtime == "docker" || c.runtime == "podman"; }

std::vector<std::string> wrap_in_container(const ContainerSpec& c, const std::string& sweep_dir,
                                           const std::vector<std::string>& command) {
  if (c.runtime.empty()) return command;
  std::vector<std::string> binds = {sweep_dir + ":" + sweep_dir};
  binds.insert(binds.end(), c.binds.begin(), c.binds.end());
  std::vector<std::string> argv = {c.command.empty() ? c.runtime : c.command};
  if (c.runtime == "apptainer" || c.runtime == "singularity") {
    argv.push_back("exec");
    for (const auto& b : binds) argv.insert(argv.end(), {"--bind", b});
    if (c.gpus) argv.push_back("--nv");
    // Start in the sweep dir so relative data paths mean what they mean to the driver.
    argv.insert(argv.end(), {"--pwd", sweep_dir});
  } else {
    // Host network and IPC: ranks in separate containers reach each other as processes
    // on one host do (shared-memory transport, loopback). Same uid: files written into
    // the bound sweep dir stay the user's.
    argv.insert(argv.end(), {"run", "--rm", "--network=host", "--ipc=host", "--user",
                             std::to_string(::getuid()) + ":" + std::to_string(::getgid()), "-w", sweep_dir});
    for (const auto& b : binds) argv.insert(argv.end(), {"-v", b});
    if (c.gpus) {
      if (c.runtime == "docker")
        argv.insert(argv.end(), {"--gpus", "all"});
      else
        argv.insert(argv.end(), {"--device", "nvidia.com/gpu=all"});
    }
    argv.push_back(kRankEnvPlaceholder);
  }
  argv.push_back(c.image);
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

}  // namespace sweep
