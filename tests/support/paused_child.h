// A test's second process that stops half-way: the child runs `body`, which calls
// pause() where the parent should act (say, while the child holds a record open), and
// goes on when the parent calls finish(). HDF5 refuses a second, differently locked open
// of a file inside one process, so a reader and a writer in one test need two processes.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace sweep_test {

class PausedChild {
 public:
  using Body = std::function<void(const std::function<void()>& pause)>;

  /// Forks; the child runs `body` and exits 0 when it returns, 1 when it throws or its
  /// pause cannot talk to the parent.
  explicit PausedChild(const Body& body) {
    if (::pipe(up_) != 0 || ::pipe(down_) != 0) return;
    pid_ = ::fork();
    if (pid_ != 0) return;
    int rc = 1;
    try {
      body([this] {
        char c = 'p';
        if (::write(up_[1], &c, 1) != 1 || ::read(down_[0], &c, 1) != 1) throw 0;
      });
      rc = 0;
    } catch (...) {
    }
    ::_exit(rc);
  }
  ~PausedChild() { finish(); }
  PausedChild(const PausedChild&) = delete;
  PausedChild& operator=(const PausedChild&) = delete;

  /// Parent: waits until the child reaches pause(); false when it ended without.
  bool wait_paused() {
    char c = 0;
    ::close(up_[1]), up_[1] = -1;  // so the read ends when the child exits early
    return pid_ > 0 && ::read(up_[0], &c, 1) == 1;
  }

  /// Parent: lets the child go on and returns its exit code (-1 when it did not exit).
  int finish() {
    if (pid_ <= 0) return -1;
    char c = 'g';
    if (::write(down_[1], &c, 1) != 1) {
      // The child is gone already: waitpid says how it ended.
    }
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, 0);
    pid_ = -1;
    for (int* fd : {&up_[0], &up_[1], &down_[0], &down_[1]})
      if (*fd >= 0) ::close(*fd), *fd = -1;
    code_ = r > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return code_;
  }

 private:
  int up_[2] = {-1, -1}, down_[2] = {-1, -1};
  pid_t pid_ = -1;
  int code_ = -1;
};

}  // namespace sweep_test
