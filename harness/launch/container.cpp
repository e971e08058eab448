#include "container.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

namespace sweep {
namespace {

/// The calling user's name, for ch-run, which refuses to start without $USER.
std::string user_name() {
  if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_name && *pw->pw_name) return pw->pw_name;
  return std::to_string(::getuid());
}

/// ch-run IMAGE with the sweep dir and `binds` at their paths, started in the sweep dir.
/// ch-run passes the host environment on (the rank's OMPI_*, PMIX_*, SLURM_* variables)
/// and binds the host's /tmp, where Open MPI keeps the session directory whose sockets a
/// rank uses to reach its launcher, so nothing more is needed for MPI.
std::vector<std::string> charliecloud_argv(const ContainerSpec& c, const std::vector<std::string>& binds,
                                           const std::string& sweep_dir) {
  std::vector<std::string> argv;
  // env, not a shell: only when the driver's own environment has no USER (a service, a
  // container); otherwise ch-run sees the user's.
  const char* user = std::getenv("USER");
  if (user == nullptr || *user == '\0') argv = {"env", "USER=" + user_name()};
  argv.push_back(c.command.empty() ? "ch-run" : c.command);
  for (const auto& b : binds) argv.insert(argv.end(), {"-b", b});
  argv.insert(argv.end(), {"--cd", sweep_dir, c.image, "--"});
  return argv;
}

}  // namespace

bool container_needs_rank_env(const ContainerSpec& c) { return c.runtime == "docker" || c.runtime == "podman"; }

std::vector<std::string> wrap_in_container(const ContainerSpec& c, const std::string& sweep_dir,
                                           const std::vector<std::string>& command) {
  if (c.runtime.empty()) return command;
  std::vector<std::string> binds = {sweep_dir + ":" + sweep_dir};
  binds.insert(binds.end(), c.binds.begin(), c.binds.end());
  std::vector<std::string> argv;
  if (c.runtime == "charliecloud") {
    argv = charliecloud_argv(c, binds, sweep_dir);
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  }
  argv.push_back(c.command.empty() ? c.runtime : c.command);
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
