// A small tmpfs mounted at a directory for one test, unmounted when it goes out of scope:
// what the full-disk tests fill. Mounting needs root; a test skips where it cannot.
#pragma once

#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace sweep_test {

class SmallDisk {
 public:
  /// Creates `at` and mounts a tmpfs of `size` (tmpfs's size=, e.g. "2m") there.
  SmallDisk(const std::filesystem::path& at, const char* size) : at_(at) {
    std::filesystem::create_directories(at_);
    const std::string options = std::string("size=") + size;
    if (::mount("tmpfs", at_.c_str(), "tmpfs", 0, options.c_str()) == 0)
      mounted_ = true;
    else
      error_ = std::strerror(errno);
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(at_.c_str(), MNT_DETACH);
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  bool mounted() const { return mounted_; }
  /// Why the mount failed (strerror), "" when it did not.
  const std::string& error() const { return error_; }

 private:
  std::filesystem::path at_;
  bool mounted_ = false;
  std::string error_;
};

}  // namespace sweep_test
