// sweep-rank: runs one rank's command with its stdout and stderr in <log-dir>/rank<R>.log,
// R taken from the launcher's environment (Open MPI, PMIx, Slurm). It is what gives every
// launcher (mpiexec, srun, containers) the same per-rank log files, without a shell and
// without the launchers' own %-patterns in file names.
//
//   sweep-rank --log-dir DIR [--per-host] -- COMMAND [ARGS...]
//
// With --per-host (a run whose ranks may span hosts) the log is <log-dir>/<host>/rank<R>.log,
// <host> being this machine's host name, so each node's logs are apart.
//
// An argument equal to @SWEEP_RANK_ENV@ (docker/podman wrapping) becomes `-e NAME` for
// every launcher variable set for this rank, so the containerised rank finds its peers.
// Exits 127 when the command cannot be started, 2 on bad usage; otherwise with the
// command's exit status (or by its signal), so they are the rank's own. It supervises the
// rank's process tree (process_tree.h): signals from the launcher are passed on to the
// command, what the command leaves behind is killed when it exits, and when the launcher
// dies the whole tree is killed at once, so nothing of a rank outlives it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "process_tree.h"

extern char** environ;

namespace {

const char* kPlaceholder = "@SWEEP_RANK_ENV@";
const char* kPrefixes[] = {"OMPI_",
                           "PMIX_",
                           "PMI_",
                           "SLURM_",
                           "OPAL_",
                           "HWLOC_",
                           "NCCL_",
                           "UCX_",
                           "CUDA_VISIBLE_DEVICES",
                           "OMP_NUM_THREADS",
                           "RANK",
                           "WORLD_SIZE",
                           "LOCAL_RANK",
                           "LOCAL_WORLD_SIZE"};

/// The first of `names` set in the environment, or "".
std::string first_env(std::initializer_list<const char*> names) {
  for (const char* v : names) {
    const char* r = std::getenv(v);
    if (r && *r) return r;
  }
  return "";
}

/// torch.distributed's env:// variables from the launcher's (Open MPI, Slurm), where not
/// set already, so a rank of a grid's program finds its place: RANK, WORLD_SIZE,
/// LOCAL_RANK, LOCAL_WORLD_SIZE (MASTER_ADDR and MASTER_PORT come from the driver).
void set_torch_distributed_env(const std::string& rank) {
  const std::pair<const char*, std::string> vars[] = {
      {"RANK", rank},
      {"WORLD_SIZE", first_env({"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_NTASKS"})},
      {"LOCAL_RANK", first_env({"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})},
      {"LOCAL_WORLD_SIZE", first_env({"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"})}};
  for (const auto& [name, value] : vars)
    if (!value.empty() && value.find_first_not_of("0123456789") == std::string::npos) ::setenv(name, value.c_str(), 0);
}

std::string rank_of_env() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* r = std::getenv(v);
    if (r && *r) return r;
  }
  return "0";
}

/// This host's name as a safe directory name: characters other than letters, digits,
/// '.', '-' and '_' become '_', and "", "." and ".." become "host".
std::string host_dir_name() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  std::string h = buf;
  for (char& c : h)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  return h.empty() || h == "." || h == ".." ? "host" : h;
}

}  // namespace

int main(int argc, char** argv) {
  std::string log_dir;
  bool per_host = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--log-dir" && i + 1 < argc) {
      log_dir = argv[++i];
    } else if (a == "--per-host") {
      per_host = true;
    } else if (a == "--") {
      ++i;
      break;
    } else {
      std::fprintf(
          stderr,
          "sweep-rank: unknown argument '%s'\nusage: sweep-rank --log-dir DIR [--per-host] -- COMMAND [ARGS...]\n",
          argv[i]);
      return 2;
    }
  }
  if (log_dir.empty() || i >= argc) {
    std::fprintf(stderr, "usage: sweep-rank --log-dir DIR [--per-host] -- COMMAND [ARGS...]\n");
    return 2;
  }
  std::string rank = rank_of_env();
  for (char c : rank)
    if (c < '0' || c > '9') rank = "x";  // never let the environment pick a path
  if (rank != "x") set_torch_distributed_env(rank);
  if (per_host) {
    log_dir += "/" + host_dir_name();
    // A directory of its own, never a link planted in its place.
    struct stat st;
    if ((::mkdir(log_dir.c_str(), 0755) != 0 && errno != EEXIST) || ::lstat(log_dir.c_str(), &st) != 0 ||
        !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "sweep-rank: %s: %s\n", log_dir.c_str(),
                   errno == EEXIST || errno == 0 ? "exists and is not a directory" : std::strerror(errno));
      return 127;
    }
  }
  const std::string log = log_dir + "/rank" + rank + ".log";
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0644);  // never through a link
  if (fd < 0) {
    std::fprintf(stderr, "sweep-rank: %s: %s\n", log.c_str(), std::strerror(errno));
    return 127;
  }
  ::dup2(fd, STDOUT_FILENO);
  ::dup2(fd, STDERR_FILENO);
  ::close(fd);

  std::vector<std::string> args;
  for (; i < argc; ++i) {
    if (std::strcmp(argv[i], kPlaceholder) != 0) {
      args.push_back(argv[i]);
      continue;
    }
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      std::string name = kv.substr(0, kv.find('='));
      for (const char* p : kPrefixes)
        if (name.rfind(p, 0) == 0) {
          args.insert(args.end(), {"-e", name});  // the value comes from our environment
          break;
        }
    }
  }
  // Open MPI gives each rank a process group of its own, so a launcher killed outright
  // (SIGKILL to its group, out of memory) would leave its ranks running unsupervised: the
  // rank dies with its launcher instead. The launcher's orderly stop (SIGTERM, which is
  // passed on) comes first and lets the rank record why; the launcher (or the sweep-box
  // above it) escalates, so the rank sets no deadline of its own.
  sweep::SuperviseOptions o;
  o.who = "sweep-rank";
  o.stop_grace_s = 0;
  o.leftover_grace_s = 0;  // a rank is over when its command is: leftovers are killed at once, as Slurm does
  o.kill_at_once_on_parent_death = true;
  return sweep::supervise(args, o);
}
