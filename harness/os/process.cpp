#include "process.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "process_tree.h"  // kill_tree_signal

namespace sweep {
namespace {

ExitStatus decode(int status) {
  ExitStatus out;
  if (WIFEXITED(status)) out.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  return out;
}

/// fork + exec in a new process group, `out_fd` (or `log_path`) as stdout and stderr,
/// stdin from /dev/null, default signal handling. The child also gets the parent-death
/// signal: if the driver dies, even by SIGKILL, its direct child (sweep-train, mpiexec,
/// sweep-rank) gets SIGTERM and stops its run, instead of living on unsupervised and
/// racing the next driver for the run directory. `env`, when given, is the child's whole
/// environment; else it inherits the driver's.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path, int out_fd,
            const std::vector<std::string>* env = nullptr) {
  if (argv.empty()) throw std::runtime_error("cannot start an empty command");
  const std::string prog = resolve_program(argv[0]);
  if (prog.empty()) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(ENOENT));
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  if (env) {
    envp.reserve(env->size() + 1);
    for (const auto& e : *env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  int own_fd = -1;
  if (out_fd < 0) {
    own_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (own_fd < 0)
      throw std::runtime_error("cannot start " + argv[0] + ": log " + log_path + ": " + std::strerror(errno));
    out_fd = own_fd;
  }
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    if (own_fd >= 0) ::close(own_fd);
    throw std::runtime_error("cannot start " + argv[0] + ": pipe: " + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  // Block every signal across fork, so the child never runs the driver's handlers.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = ::fork();
  if (pid == 0) {  // child: async-signal-safe calls only
    ::setpgid(0, 0);
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the driver died before prctl took effect
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd < 0 || ::dup2(null_fd, STDIN_FILENO) < 0 || ::dup2(out_fd, STDOUT_FILENO) < 0 ||
        ::dup2(STDOUT_FILENO, STDERR_FILENO) < 0) {
      int e = errno;
      (void)!::write(err_pipe[1], &e, sizeof e);
      ::_exit(127);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (env)
      ::execve(prog.c_str(), args.data(), envp.data());
    else
      ::execv(prog.c_str(), args.data());
    int e = errno;
    (void)!::write(err_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  const int fork_errno = errno;
  if (pid > 0) ::setpgid(pid, pid);  // also here: no window in which the group does not exist
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::close(err_pipe[1]);
  if (own_fd >= 0) ::close(own_fd);
  if (pid < 0) {
    ::close(err_pipe[0]);
    throw std::runtime_error("cannot start " + argv[0] + ": fork: " + std::strerror(fork_errno));
  }
  int child_errno = 0;
  ssize_t n;
  while ((n = ::read(err_pipe[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  ::close(err_pipe[0]);
  if (n == sizeof child_errno) {  // exec failed: reap the child, say why
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(child_errno));
  }
  return pid;
}

}  // namespace

std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= dirs.size()) {
    size_t colon = dirs.find(':', pos);
    if (colon == std::string::npos) colon = dirs.size();
    std::string dir = dirs.substr(pos, colon - pos);
    std::string cand = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (::stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(cand.c_str(), X_OK) == 0) return cand;
    pos = colon + 1;
  }
  return "";
}

std::string ExitStatus::describe() const {
  if (signal) return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exit code " + std::to_string(code);
}

int ProcessRunner::start(const std::vector<std::string>& argv, const std::string& log_path) {
  int id = next_id_++;
  ended_.emplace_back(id, run(argv, log_path));
  return id;
}

std::vector<std::pair<int, ExitStatus>> ProcessRunner::wait_some(double) {
  auto out = std::move(ended_);
  ended_.clear();
  return out;
}

ExitStatus ProcessRunner::run(const std::vector<std::string>& argv, const std::string& log_path) {
  int id = start(argv, log_path);
  for (auto& e : wait_some(0)) held_.push_back(e);
  while (true) {
    for (auto it = held_.begin(); it != held_.end(); ++it)
      if (it->first == id) {
        ExitStatus st = it->second;
        held_.erase(it);
        return st;
      }
    for (auto& e : wait_some(1.0)) held_.push_back(e);
  }
}

int SpawnRunner::start(const std::vector<std::string>& argv, const std::string& log_path) {
  // Open the log here, so a failure is a message, not a child's exit 127.
  int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot start " + argv.at(0) + ": log " + log_path + ": " + std::strerror(errno));
  std::vector<std::string> boxed;
  if (!box_.empty()) {
    char grace[32];
    std::snprintf(grace, sizeof grace, "%g", grace_s_);
    boxed = {box_, "--grace", grace, "--"};
    boxed.insert(boxed.end(), argv.begin(), argv.end());
  }
  pid_t pid;
  try {
    pid = spawn(box_.empty() ? argv : boxed, log_path, fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  live_.push_back(pid);
  return pid;
}

std::vector<std::pair<int, ExitStatus>> SpawnRunner::wait_some(double wait_s) {
  std::vector<std::pair<int, ExitStatus>> out;
  const double deadline = monotonic_s() + wait_s;
  while (true) {
    // A box told to kill its tree that is still there (wedged): a real SIGKILL.
    for (auto& [id, at] : kill_sent_)
      if (at > 0 && monotonic_s() - at > 5 && std::find(live_.begin(), live_.end(), id) != live_.end())
        ::kill(-id, SIGKILL), at = 0;
    for (auto it = live_.begin(); it != live_.end();) {
      int status = 0;
      pid_t r = waitpid(*it, &status, WNOHANG | (box_.empty() ? 0 : WUNTRACED));
      if (r == *it && WIFSTOPPED(status)) {
        ::kill(*it, SIGCONT);  // a box stopped by its program would never end the run
        ++it;
        continue;
      }
      if (r == *it || (r < 0 && errno == ECHILD)) {
        out.emplace_back(*it, r == *it ? decode(status) : ExitStatus{});
        const int gone = *it;
        kill_sent_.erase(
            std::remove_if(kill_sent_.begin(), kill_sent_.end(), [gone](const auto& k) { return k.first == gone; }),
            kill_sent_.end());
        it = live_.erase(it);
      } else {
        ++it;
      }
    }
    if (!out.empty() || live_.empty() || monotonic_s() >= deadline) return out;
    // A signal cuts the sleep short (EINTR), so the driver reacts to Ctrl-C at once.
    struct timespec ts = {0, 20L * 1000 * 1000};
    if (nanosleep(&ts, nullptr) != 0 && errno == EINTR) return out;
  }
}

void SpawnRunner::signal_group(int id, int sig) {
  if (id <= 0) return;
  if (box_.empty() || std::find(live_.begin(), live_.end(), id) == live_.end()) {
    ::kill(-id, sig);
    return;
  }
  if (sig == SIGKILL) {
    ::kill(id, kill_tree_signal());
    ::kill(id, SIGCONT);
    kill_sent_.emplace_back(id, monotonic_s());
    return;
  }
  ::kill(-id, sig);
  if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) ::kill(id, SIGCONT);
}

Captured capture(const std::vector<std::string>& argv, double timeout_s) {
  CaptureOptions o;
  o.timeout_s = timeout_s;
  return capture(argv, o);
}

Captured capture(const std::vector<std::string>& argv, const CaptureOptions& o) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  pid_t pid;
  try {
    pid = spawn(argv, "", fds[1], o.env ? &*o.env : nullptr);
  } catch (...) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw;
  }
  ::close(fds[1]);
  Captured c;
  const double deadline = monotonic_s() + o.timeout_s;
  char buf[4096];
  while (true) {
    struct pollfd p = {fds[0], POLLIN, 0};
    int left_ms = int(std::max(0.0, deadline - monotonic_s()) * 1000);
    int r = ::poll(&p, 1, std::min(left_ms, 1000));
    if (r < 0 && errno == EINTR) continue;
    if (r > 0) {
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n > 0) {
        // Past the bound the output is still read (a child blocked on a full pipe would
        // never end) but no longer kept.
        const size_t room =
            o.max_output_bytes ? o.max_output_bytes - std::min(o.max_output_bytes, c.output.size()) : size_t(n);
        c.output.append(buf, std::min(room, size_t(n)));
        if (room < size_t(n)) c.truncated = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;  // EOF
    }
    if (monotonic_s() >= deadline) {
      ::kill(-pid, SIGKILL);
      c.timed_out = true;
      if (o.note_timeout) c.output += "\n(killed after " + std::to_string(int(o.timeout_s)) + " s)";
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  c.status = decode(status);
  return c;
}

std::string executable_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

}  // namespace sweep
