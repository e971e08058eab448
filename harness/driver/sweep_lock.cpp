#include "sweep_lock.h"

#include <unistd.h>

#include <filesystem>

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
}

SweepLock::~SweepLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

std::string SweepLock::holder(const std::string& dir) { return lock_file_holder(lock_path(dir)); }

}  // namespace sweep
