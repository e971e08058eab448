// sweep-box: runs one run's command and ends with the whole of it. The driver starts every
// run through it (local, mpiexec, a container runtime), so that nothing a run starts
// outlives the run: a process left behind when the command exits (a helper, a setsid
// daemon, a double fork) gets SIGTERM and, after the grace period, SIGKILL before
// sweep-box exits, and a stop (SIGTERM from the driver, or the driver's death) ends the
// tree the same way. Its exit status is the command's.
//
//   sweep-box [--grace SECONDS] -- COMMAND [ARGS...]
//
// --grace  seconds from SIGTERM to SIGKILL, for a stop and for leftovers (default 10).
// Exits 2 on bad usage, 127 when the command cannot be started.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "process_tree.h"

namespace {

int usage(const std::string& why) {
  std::fprintf(stderr, "sweep-box: %s\nusage: sweep-box [--grace SECONDS] -- COMMAND [ARGS...]\n", why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  sweep::SuperviseOptions o;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--grace" && i + 1 < argc) {
      char* end = nullptr;
      const double g = std::strtod(argv[++i], &end);
      if (!*argv[i] || *end || !(g >= 0) || g > 1e6)
        return usage(std::string("--grace ") + argv[i] + ": expected seconds >= 0");
      o.stop_grace_s = o.leftover_grace_s = g;
    } else if (a == "--") {
      ++i;
      break;
    } else {
      return usage("unknown argument '" + a + "'");
    }
  }
  if (i >= argc) return usage("no command");
  return sweep::supervise(std::vector<std::string>(argv + i, argv + argc), o);
}
