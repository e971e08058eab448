#include "sweep_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "run_config.h"  // ConfigError
#include "sweep_dir.h"   // utc_now

namespace sweep {
namespace {
std::string lock_path(const std::string& dir) { return dir + "/sweep.lock"; }

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}
}  // namespace

SweepLock::SweepLock(const std::string& dir) {
  std::filesystem::create_directories(dir);
  // Never through a link: a planted sweep.lock -> some file would be truncated below.
  fd_ = ::open(lock_path(dir).c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd_ < 0 && errno == ELOOP)
    throw ConfigError(lock_path(dir) + " is a symbolic link; refusing to write through it (remove it, then run again)");
  if (fd_ < 0) throw ConfigError(lock_path(dir) + ": cannot open the lock file: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw ConfigError(lock_path(dir) + " is not a regular file; refusing to use it as the lock (remove it, then run again)");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    std::string who = read_all(lock_path(dir));
    ::close(fd_);
    fd_ = -1;
    throw ConfigError(dir + ": another sweep driver is running on this directory (" +
                      (who.empty() ? std::string("unknown process") : who) +
                      "); wait for it to finish or stop it (Ctrl-C / kill), then run again");
  }
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  std::string who = "pid " + std::to_string(::getpid()) + " on " + host + ", since " + utc_now() + "\n";
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, who.data(), who.size(), 0) < 0) {
    // The lock holds without the note; only the message to a second driver gets vaguer.
  }
}

SweepLock::~SweepLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

std::string SweepLock::holder(const std::string& dir) {
  int fd = ::open(lock_path(dir).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  std::string who;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    who = read_all(lock_path(dir));
    if (who.empty()) who = "unknown process";
  }
  ::close(fd);
  return who;
}

}  // namespace sweep
