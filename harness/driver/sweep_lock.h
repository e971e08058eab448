// One driver per sweep directory: two drivers would start the same runs twice and race
// on their state files. The lock is an flock on <dir>/sweep.lock, so it goes away with
// the process that held it, however it ended. Taking it checks that flock excludes on
// that file system at all; runs on other hosts also need locks every host sees, which
// the mount says (locks_local_to_host).
#pragma once

#include <string>

namespace sweep {

class SweepLock {
 public:
  /// Takes the lock of sweep directory `dir` (created if needed). Throws ConfigError
  /// naming the holder (pid, host, start time) when another driver has it.
  explicit SweepLock(const std::string& dir);
  ~SweepLock();
  SweepLock(const SweepLock&) = delete;
  SweepLock& operator=(const SweepLock&) = delete;

  /// "pid 123 on host, since 2024-...Z" of the driver holding `dir`'s lock, or "" when none.
  static std::string holder(const std::string& dir);

  /// Why flock does not exclude on the file at `path`, which the caller holds locked
  /// through another open file description: a second one must get EWOULDBLOCK. "" when
  /// it does. (A file system whose flock is a no-op would let two drivers, or a driver
  /// and a run's writer, work on one directory unseen.)
  static std::string flock_problem(const std::string& path);

 private:
  int fd_ = -1;
};

/// Why flock locks on the file system holding `path` are kept to this host, by its mount
/// (`mountinfo`: the text of /proc/self/mountinfo): NFS mounted nolock or with
/// local_lock=flock|all, Lustre mounted localflock (or without flock, where flock fails).
/// "" when its locks reach every host that mounts it as far as the mount says (local
/// disks, NFSv4 and NFSv3 with lockd, Lustre -o flock, GPFS, ...).
std::string locks_local_in_mountinfo(const std::string& mountinfo, const std::string& path);
/// The same for this machine's /proc/self/mountinfo.
std::string locks_local_to_host(const std::string& path);

}  // namespace sweep
