#include "data_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "cache_entry.h"  // CacheEntry: the hash kept for the same stat key
#include "run_files.h"    // hash_fd

namespace fs = std::filesystem;

namespace sweep {
namespace {

constexpr const char* kCacheMagic = "sweep-data-hash 2";

int64_t ns(const struct timespec& t) { return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; }

/// The cache entry's key: everything that a change of the contents changes.
std::string stat_key(const struct stat& st) {
  std::ostringstream k;
  k << st.st_dev << ' ' << st.st_ino << ' ' << st.st_size << ' ' << ns(st.st_mtim) << ' ' << ns(st.st_ctim);
  return k.str();
}

}  // namespace

DataFileId identify_data_file(const std::string& path, const std::string& cache_dir) {
  DataFileId id;
  std::error_code ec;
  id.path = fs::canonical(path, ec).string();
  if (ec) throw std::runtime_error(path + ": cannot resolve the data file (" + ec.message() + ")");
  const int fd = ::open(id.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(id.path + ": cannot open the data file (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(id.path + ": not a regular file");
  }
  id.size = int64_t(st.st_size);
  id.mtime_ns = ns(st.st_mtim);
  const std::string key = stat_key(st);
  const CacheEntry entry(cache_dir, kCacheMagic, "data", id.path);
  if (const auto cached = entry.read(key); cached && cached->rfind("xxh3:", 0) == 0 && cached->size() == 21) {
    ::close(fd);
    id.hash = *cached;
    return id;
  }
  try {
    id.hash = hash_fd(fd, id.path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  // Only what was read is cached: a file changed while it was hashed keeps no entry.
  struct stat after {};
  if (::stat(id.path.c_str(), &after) == 0 && stat_key(after) == key) entry.write(key, id.hash);
  return id;
}

}  // namespace sweep
