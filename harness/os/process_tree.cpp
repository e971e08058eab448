#include "process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "monotonic.h"  // monotonic_s

namespace sweep {
namespace {

/// The signal the kernel sends a supervisor whose parent died (PR_SET_PDEATHSIG).
int parent_died_signal() { return SIGRTMIN + 5; }

struct ProcEntry {
  int ppid = 0;
  char state = '?';
  std::string comm;
};

/// pid -> (parent, state, name) of every process, from /proc/<pid>/stat.
std::map<int, ProcEntry> read_proc() {
  std::map<int, ProcEntry> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // gone meanwhile
    char buf[1024];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) continue;
    buf[n] = 0;
    // "pid (comm) S ppid ...": the name may hold spaces and parentheses, so the fields
    // after it are found from the last ')'.
    const char* open = std::strchr(buf, '(');
    const char* close = std::strrchr(buf, ')');
    if (!open || !close || close < open || close[1] != ' ' || !close[2]) continue;
    ProcEntry p;
    p.comm.assign(open + 1, close);
    p.state = close[2];
    p.ppid = int(std::strtol(close + 3, nullptr, 10));
    out[int(pid)] = p;
  }
  ::closedir(d);
  return out;
}

std::vector<int> descendants_in(const std::map<int, ProcEntry>& procs, int root) {
  std::multimap<int, int> children;
  for (const auto& [pid, p] : procs) children.emplace(p.ppid, pid);
  std::vector<int> out, todo = {root};
  while (!todo.empty()) {
    const int p = todo.back();
    todo.pop_back();
    auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it) {
      const auto& e = procs.at(it->second);
      if (e.state != 'Z' && e.state != 'X') out.push_back(it->second);
      todo.push_back(it->second);  // a zombie's children are still ours
    }
  }
  return out;
}

void say(const SuperviseOptions& o, const std::string& line) {
  const std::string text = o.who + ": " + line + "\n";
  (void)!::write(STDERR_FILENO, text.data(), text.size());
}

/// Our own children (zombies included), from the kernel's list of them: cheaper than a
/// walk of /proc, so a chase of a process that forks and exits in a loop stays ahead of
/// it. Empty where the kernel has no such list (the /proc walk is then all there is).
std::vector<int> own_children() {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/children", int(::getpid()));
  std::vector<int> out;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, size_t(n));
  ::close(fd);
  const char* p = text.c_str();
  while (*p) {
    char* end = nullptr;
    const long pid = std::strtol(p, &end, 10);
    if (end == p) break;
    if (pid > 0) out.push_back(int(pid));
    p = end;
  }
  return out;
}

/// Reaps every child that has ended; returns true when we have no child left at all,
/// living or not. This is exact where a /proc walk is not: as a subreaper we inherit every
/// orphan of the tree before its parent can be reaped, so "no child" means "no tree". (A
/// walk can see a process that forks and exits in a loop only as zombies: the living one
/// was born after the walk listed the pids.)
bool tree_gone(pid_t main, bool* main_ended, int* main_status) {
  while (true) {
    int st = 0;
    const pid_t r = ::waitpid(-1, &st, WNOHANG);
    if (r > 0) {
      if (r == main) *main_ended = true, *main_status = st;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    return r < 0 && errno == ECHILD;
  }
}

/// SIGKILL to every process of the tree until we have no child left. A process that forks
/// while this runs only adds a child that the next round finds (orphans come to us: we
/// are their subreaper); a killed process cannot fork any more, so a process that forks
/// and exits in a loop is caught once a round reaches its living generation. Gives up after
/// a minute on a process that does not die (stuck in the kernel), saying so.
void kill_tree(pid_t main, bool* main_ended, int* main_status, const SuperviseOptions& o) {
  const double give_up = monotonic_s() + 60;
  while (!tree_gone(main, main_ended, main_status)) {
    for (int pid : own_children()) ::kill(pid, SIGKILL);
    const auto left = descendants_of(::getpid());
    for (int pid : left) ::kill(pid, SIGKILL);
    if (monotonic_s() > give_up) {
      say(o, std::to_string(left.size()) + " processes of the run do not die" +
                 (left.empty() ? std::string() : " (pid " + std::to_string(left[0]) + " first)") + ": leaving them");
      return;
    }
    // A short pause: long enough for the killed to die, short against a fork.
    struct timespec ts = {0, 1000L * 1000};
    ::nanosleep(&ts, nullptr);
  }
}

/// Starts the command in a process group of its own, with the signal mask it would have had
/// (`old`); it dies with us (`self`). Its pid, or -1 (said) when it could not be started:
/// an exec that fails is reported through a pipe, so a missing program is named here.
pid_t start_command(const std::vector<std::string>& argv, const sigset_t& old, pid_t self, const SuperviseOptions& o) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return say(o, std::string("pipe: ") + std::strerror(errno)), -1;
  const pid_t main = ::fork();
  if (main < 0) return say(o, std::string("fork: ") + std::strerror(errno)), -1;
  if (main == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a supervisor killed outright takes its command along
    if (::getppid() != self) ::_exit(127);
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    ::execvp(args[0], args.data());
    const int e = errno;
    (void)!::write(err_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  ::setpgid(main, main);  // here too: no window in which the group does not exist
  ::close(err_pipe[1]);
  int child_errno = 0;
  ssize_t n;
  while ((n = ::read(err_pipe[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  ::close(err_pipe[0]);
  if (n == sizeof child_errno) {
    int st = 0;
    while (::waitpid(main, &st, 0) < 0 && errno == EINTR) {
    }
    say(o, "cannot start " + argv[0] + ": " + std::strerror(child_errno));
    return -1;
  }
  return main;
}

/// The command is over and these processes of its tree are not (a helper, a daemon, a
/// forgotten child): names them, and sends SIGTERM where a grace period is given.
void stop_leftovers(pid_t self, const SuperviseOptions& o) {
  const auto procs = read_proc();  // one read of /proc: the tree and its names
  auto left = descendants_in(procs, self);
  for (int pid : own_children())  // a hopping process may show in the walk as zombies only
    if (std::find(left.begin(), left.end(), pid) == left.end()) left.push_back(pid);
  // The command is over, and these are not: a helper, a daemon, a forgotten child.
  std::string names;
  for (size_t i = 0; i < left.size() && i < 5; ++i) {
    auto it = procs.find(left[i]);
    names += (i ? ", " : "") + std::to_string(left[i]) + (it == procs.end() ? "" : " " + it->second.comm);
  }
  if (left.size() > 5) names += ", ...";
  char grace[64];
  std::snprintf(grace, sizeof grace, o.leftover_grace_s > 0 ? "SIGTERM now, SIGKILL after %g s" : "SIGKILL",
                o.leftover_grace_s);
  say(o, std::to_string(left.size()) + (left.size() == 1 ? " process" : " processes") +
             " outlived the run's command (" + names + "): " + grace);
  if (o.leftover_grace_s > 0)
    for (int pid : left) ::kill(pid, SIGTERM), ::kill(pid, SIGCONT);
}

/// Ends as the command ended, so that whoever waits for us sees its exit code or signal.
int end_as(int main_status) {
  if (WIFEXITED(main_status)) return WEXITSTATUS(main_status);
  if (WIFSIGNALED(main_status)) {
    const int s = WTERMSIG(main_status);
    struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(s, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, s);
    ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
    ::raise(s);
    return 128 + s;
  }
  return 127;
}
}  // namespace

std::vector<int> descendants_of(int root) { return descendants_in(read_proc(), root); }

int kill_tree_signal() { return SIGRTMIN + 4; }

int supervise(const std::vector<std::string>& argv, const SuperviseOptions& o) {
  if (argv.empty()) return say(o, "no command to run"), 2;
  // Orphans of the tree become our children, not init's.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  sigset_t set, old;
  sigemptyset(&set);
  for (int s : forwarded) sigaddset(&set, s);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, kill_tree_signal());
  sigaddset(&set, parent_died_signal());
  ::sigprocmask(SIG_BLOCK, &set, &old);
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, parent_died_signal());
  bool parent_gone = ::getppid() != parent;  // it died before the line above took effect

  const pid_t self = ::getpid();
  const pid_t main = start_command(argv, old, self, o);
  if (main < 0) return 127;

  bool main_ended = false;
  int main_status = 0;
  double deadline = 0;  // when the tree gets SIGKILL (0 = none set)
  bool leftovers_told = false;
  auto stop = [&](int sig, double grace_s) {
    if (!main_ended) ::kill(-main, sig), ::kill(-main, SIGCONT);
    if (grace_s > 0 && (deadline == 0 || monotonic_s() + grace_s < deadline)) deadline = monotonic_s() + grace_s;
  };
  if (parent_gone) {
    if (o.kill_at_once_on_parent_death)
      kill_tree(main, &main_ended, &main_status, o);
    else
      stop(SIGTERM, o.stop_grace_s > 0 ? o.stop_grace_s : o.leftover_grace_s);
  }
  while (true) {
    const bool gone = tree_gone(main, &main_ended, &main_status);
    if (main_ended && gone) break;
    if (main_ended && !leftovers_told) {
      leftovers_told = true;
      stop_leftovers(self, o);
      if (deadline == 0 || monotonic_s() + o.leftover_grace_s < deadline) deadline = monotonic_s() + o.leftover_grace_s;
    }
    if (deadline > 0 && monotonic_s() >= deadline) {
      kill_tree(main, &main_ended, &main_status, o);
      if (main_ended) break;
      deadline = 0;  // the command itself would not die: nothing more to do but wait
    }
    double wait_s = 0.5;  // also how often orphans that ended quietly are looked for
    if (deadline > 0) wait_s = std::min(wait_s, std::max(0.0, deadline - monotonic_s()));
    if (main_ended) wait_s = std::min(wait_s, 0.05);  // leftovers: look again soon
    struct timespec ts = {time_t(wait_s), long((wait_s - double(time_t(wait_s))) * 1e9)};
    siginfo_t info;
    const int sig = ::sigtimedwait(&set, &info, &ts);
    if (sig <= 0 || sig == SIGCHLD) continue;
    if (sig == kill_tree_signal() || (sig == parent_died_signal() && o.kill_at_once_on_parent_death)) {
      kill_tree(main, &main_ended, &main_status, o);
      if (main_ended) break;
    } else if (sig == parent_died_signal()) {
      stop(SIGTERM, o.stop_grace_s > 0 ? o.stop_grace_s : o.leftover_grace_s);
    } else if (sig == SIGUSR1 || sig == SIGUSR2) {
      if (!main_ended) ::kill(-main, sig);
    } else {
      stop(sig, o.stop_grace_s);
    }
  }
  return end_as(main_status);
}

}  // namespace sweep
