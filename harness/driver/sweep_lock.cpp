#include "sweep_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "config_error.h"  // ConfigError
#include "run_files.h"     // take_lock_file, lock_file_holder

namespace sweep {
namespace {
std::string lock_path(const std::string& dir) { return dir + "/sweep.lock"; }
}  // namespace

SweepLock::SweepLock(const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::string who;
  try {
    fd_ = take_lock_file(lock_path(dir), &who);
  } catch (const RecordError& e) {  // a planted link or special file, or an I/O error
    throw ConfigError(e.what());
  }
  if (fd_ < 0)
    throw ConfigError(dir + ": another sweep driver is running on this directory (" + who +
                      "); wait for it to finish or stop it (Ctrl-C / kill), then run again");
  if (const std::string why = flock_problem(lock_path(dir)); !why.empty()) {
    ::close(fd_);
    fd_ = -1;
    throw ConfigError(dir + ": " + why +
                      "; sweep needs a file system whose flock works (a local disk, NFS with working locks, Lustre "
                      "mounted -o flock, GPFS)");
  }
}

std::string SweepLock::flock_problem(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return "cannot open " + path + " a second time to check its lock: " + std::strerror(errno);
  std::string why;
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0)
    why = "flock does not exclude here: a second open of " + path + " took the lock this driver holds";
  else if (errno != EWOULDBLOCK)
    why = "flock fails here (" + std::string(std::strerror(errno)) + ")";
  ::close(fd);  // releases what it may have taken
  return why;
}

namespace {

/// A mountinfo field with its octal escapes ("\040" for a space) decoded.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool octal = s[i] == '\\' && i + 3 < s.size() && s.find_first_not_of("01234567", i + 1) >= i + 4;
    if (octal) {
      out += char(std::stoi(s.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool has_option(const std::string& options, const std::string& opt) {
  std::stringstream ss(options);
  for (std::string o; std::getline(ss, o, ',');)
    if (o == opt) return true;
  return false;
}

}  // namespace

std::string locks_local_in_mountinfo(const std::string& mountinfo, const std::string& path) {
  // "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue": the
  // mount point is field 5, the fs type and super options follow the " - ".
  std::string best_point, fstype, options;
  std::stringstream in(mountinfo);
  for (std::string line; std::getline(in, line);) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::stringstream head(line.substr(0, dash)), tail(line.substr(dash + 3));
    std::string f[6];
    for (auto& x : f) head >> x;
    std::string type, source, super;
    tail >> type >> source >> super;
    const std::string point = unescape(f[4]);
    const bool under =
        path == point || point == "/" ||
        (path.size() > point.size() && path.compare(0, point.size(), point) == 0 && path[point.size()] == '/');
    // The last of equal mount points is the one on top.
    if (!under || point.size() < best_point.size()) continue;
    best_point = point, fstype = type, options = f[5] + "," + super;
  }
  if (fstype == "nfs" || fstype == "nfs4") {
    for (const char* o : {"nolock", "local_lock=flock", "local_lock=all"})
      if (has_option(options, o))
        return "its NFS mount (" + best_point + ") has " + o + ": flock locks there are seen by this host alone";
  }
  if (fstype == "lustre") {
    if (has_option(options, "localflock"))
      return "its Lustre mount (" + best_point + ") has localflock: flock locks there are seen by this host alone";
    if (!has_option(options, "flock"))
      return "its Lustre mount (" + best_point + ") lacks the flock option: flock there fails or is local";
  }
  return "";
}

std::string locks_local_to_host(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  std::error_code ec;
  const std::string real = std::filesystem::weakly_canonical(path, ec).string();
  return locks_local_in_mountinfo(text, ec ? path : real);
}

SweepLock::~SweepLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

std::string SweepLock::holder(const std::string& dir) { return lock_file_holder(lock_path(dir)); }

}  // namespace sweep
