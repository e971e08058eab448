#include "data_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "record_cache.h"  // user_key, siphash24
#include "run_files.h"     // hash_fd, read_file_tail, replace_file

namespace fs = std::filesystem;

namespace sweep {
namespace {

constexpr const char* kCacheMagic = "sweep-data-hash 2";

int64_t ns(const struct timespec& t) { return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; }

std::string hex(unsigned long long v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", v);
  return buf;
}

/// The cache entry's key: everything that a change of the contents changes.
std::string stat_key(const struct stat& st) {
  std::ostringstream k;
  k << st.st_dev << ' ' << st.st_ino << ' ' << st.st_size << ' ' << ns(st.st_mtim) << ' ' << ns(st.st_ctim);
  return k.str();
}

/// The tag that vouches for an entry: SipHash-2-4 under the user's key (record_cache.h)
/// over its path, stat key and hash, so an entry rewritten by anyone without the key (a
/// run's program, another user) is not taken. "" when there is no key: nothing is cached.
std::string entry_tag(const std::string& path, const std::string& key, const std::string& hash) {
  std::string why;
  const std::string k = user_key(&why);
  if (k.size() != 16) return "";
  const std::string msg = std::string(kCacheMagic) + '\n' + path + '\n' + key + '\n' + hash + '\n';
  return hex(siphash24(reinterpret_cast<const unsigned char*>(k.data()), msg.data(), msg.size()));
}

}  // namespace

std::string sweep_cache_dir() {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  if (!env("SWEEP_CACHE_DIR").empty()) return env("SWEEP_CACHE_DIR");
  if (!env("XDG_CACHE_HOME").empty() && env("XDG_CACHE_HOME")[0] == '/') return env("XDG_CACHE_HOME") + "/sweep";
  if (!env("HOME").empty()) return env("HOME") + "/.cache/sweep";
  return "";
}

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
  const std::string entry =
      cache_dir.empty() ? "" : cache_dir + "/data-" + hex(XXH3_64bits(id.path.data(), id.path.size())) + ".txt";
  if (!entry.empty()) {
    // A regular file of ours, read without blocking (a FIFO or device there is no entry).
    std::istringstream in(read_file_tail(entry, 1 << 16));
    std::string magic, cached_path, cached_key, cached_hash, cached_tag;
    if (std::getline(in, magic) && magic == kCacheMagic && std::getline(in, cached_path) &&
        std::getline(in, cached_key) && std::getline(in, cached_hash) && std::getline(in, cached_tag) &&
        cached_path == id.path && cached_key == key && cached_hash.rfind("xxh3:", 0) == 0 && cached_hash.size() == 21 &&
        !cached_tag.empty() && cached_tag == entry_tag(id.path, key, cached_hash)) {
      ::close(fd);
      id.hash = cached_hash;
      return id;
    }
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
  const std::string tag = entry.empty() ? "" : entry_tag(id.path, key, id.hash);
  if (!tag.empty() && ::stat(id.path.c_str(), &after) == 0 && stat_key(after) == key) {
    fs::create_directories(cache_dir, ec);
    try {
      replace_file(entry, std::string(kCacheMagic) + '\n' + id.path + '\n' + key + '\n' + id.hash + '\n' + tag + '\n',
                   /*sync=*/false);
    } catch (const RecordError&) {
      // A cache entry is only a shortcut: the hash stands without it.
    }
  }
  return id;
}

}  // namespace sweep
