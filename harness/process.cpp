#include "process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>

extern char** environ;

namespace sweep {
namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

ExitStatus decode(int status) {
  ExitStatus out;
  if (WIFEXITED(status)) out.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  return out;
}

/// posix_spawn with a new process group; `out_fd` (or `log_path`) becomes stdout+stderr.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path, int out_fd) {
  if (argv.empty()) throw std::runtime_error("cannot start an empty command");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (out_fd >= 0)
    posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  else
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group: a terminal's SIGINT reaches the driver only, and the driver can
  // signal a run's every process at once. Default signal handling and mask in the child.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  // spawnp: a bare name such as "mpiexec" or "srun" is looked up on PATH.
  int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

}  // namespace

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
  // posix_spawn reports a log it cannot open only as exit 127; check here for a message.
  int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot start " + argv.at(0) + ": log " + log_path + ": " + std::strerror(errno));
  pid_t pid;
  try {
    pid = spawn(argv, log_path, fd);
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
  const double deadline = now_s() + wait_s;
  while (true) {
    for (auto it = live_.begin(); it != live_.end();) {
      int status = 0;
      pid_t r = waitpid(*it, &status, WNOHANG);
      if (r == *it || (r < 0 && errno == ECHILD)) {
        out.emplace_back(*it, r == *it ? decode(status) : ExitStatus{});
        it = live_.erase(it);
      } else {
        ++it;
      }
    }
    if (!out.empty() || live_.empty() || now_s() >= deadline) return out;
    // A signal cuts the sleep short (EINTR), so the driver reacts to Ctrl-C at once.
    struct timespec ts = {0, 20 * 1000 * 1000};
    if (nanosleep(&ts, nullptr) != 0 && errno == EINTR) return out;
  }
}

void SpawnRunner::signal_group(int id, int sig) {
  if (id > 0) ::kill(-id, sig);
}

Captured capture(const std::vector<std::string>& argv, double timeout_s) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  pid_t pid;
  try {
    pid = spawn(argv, "", fds[1]);
  } catch (...) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw;
  }
  ::close(fds[1]);
  Captured c;
  const double deadline = now_s() + timeout_s;
  char buf[4096];
  while (true) {
    struct pollfd p = {fds[0], POLLIN, 0};
    int left_ms = int(std::max(0.0, deadline - now_s()) * 1000);
    int r = ::poll(&p, 1, std::min(left_ms, 1000));
    if (r < 0 && errno == EINTR) continue;
    if (r > 0) {
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n > 0) {
        c.output.append(buf, size_t(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;  // EOF
    }
    if (now_s() >= deadline) {
      ::kill(-pid, SIGKILL);
      c.output += "\n(killed after " + std::to_string(int(timeout_s)) + " s)";
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
