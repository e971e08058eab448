// A run's process tree, supervised: "the run is over" means every process it started is
// over. The supervisor (sweep-box at the top of a run, sweep-rank around each rank) is a
// child subreaper, so a descendant whose parent exits (a double fork, a setsid daemon)
// stays in its tree instead of moving to init; when the command ends, or is stopped, or
// the supervisor's parent dies, it ends what is left and only then exits. Without a
// supervisor a helper of a run could outlive it, hold its lock and rewrite its record.
// Free of the rest of the harness: sweep-box and sweep-rank link this alone.
#pragma once

#include <string>
#include <vector>

namespace sweep {

/// The living processes (zombies left out) whose parent chain leads to `root`, `root`
/// itself not included; read from /proc.
std::vector<int> descendants_of(int root);

/// The signal a driver sends a supervisor for "kill it all now" (its SIGKILL of a run):
/// a real SIGKILL would end the supervisor alone and orphan the rest of the tree.
int kill_tree_signal();

/// How supervise() runs its command.
struct SuperviseOptions {
  /// After a stop (SIGTERM, SIGINT, SIGHUP, SIGQUIT), seconds until the whole tree gets
  /// SIGKILL; 0 = no deadline of its own (the caller's launcher escalates).
  double stop_grace_s = 10;
  /// Seconds that processes left behind by a finished command get between SIGTERM and
  /// SIGKILL; 0 = SIGKILL at once.
  double leftover_grace_s = 10;
  /// When our parent dies: true = SIGKILL the tree at once (a rank dies with its
  /// launcher); false = stop it as after SIGTERM (a run whose driver died).
  bool kill_at_once_on_parent_death = false;
  std::string who = "sweep-box";  ///< names the supervisor in the lines it writes to stderr
};

/// Runs `argv` (execvp, in a process group of its own, stdin/stdout/stderr inherited) and
/// supervises its tree as described above: SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and
/// SIGUSR2 are passed on to the command's process group (with SIGCONT, so a stopped
/// command sees them); kill_tree_signal() kills the tree at once. Returns when nothing
/// of the tree is left, with the command's exit code; a command killed by a signal makes
/// the supervisor end by the same signal (so its parent sees what the command's parent
/// would have seen). 127 when the command cannot be started.
int supervise(const std::vector<std::string>& argv, const SuperviseOptions& options);

}  // namespace sweep
