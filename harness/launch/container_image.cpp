#include "container_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "cache_entry.h"   // CacheEntry: the digest kept for the same fingerprint
#include "config_error.h"  // ConfigError
#include "data_file.h"     // identify_data_file
#include "hex.h"           // hex16
#include "run_files.h"     // hash_fd

namespace fs = std::filesystem;

namespace sweep {
namespace {

constexpr const char* kCacheMagic = "sweep-image-digest 2";  // 1 had no tag

int64_t ns(const struct timespec& t) { return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; }

struct Entry {
  std::string rel;  ///< path relative to the image's root
  struct stat st;
};

/// Every entry under `root` (links not followed), sorted bytewise by relative path.
std::vector<Entry> walk(const fs::path& root) {
  std::vector<Entry> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
  if (ec) throw std::runtime_error(root.string() + ": cannot read the image directory (" + ec.message() + ")");
  const size_t cut = root.string().size() + 1;
  for (; it != end; it.increment(ec)) {
    if (ec) throw std::runtime_error(root.string() + ": cannot read the image directory (" + ec.message() + ")");
    Entry e;
    const std::string path = it->path().string();
    e.rel = path.substr(cut);
    if (::lstat(path.c_str(), &e.st) != 0)
      throw std::runtime_error(path + ": cannot stat (" + std::strerror(errno) + ")");
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.rel < b.rel; });
  return out;
}

/// The contents of a regular file as 16 hex digits; "unreadable:SIZE" when it cannot be read.
std::string file_hash(const std::string& path, const struct stat& st) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "unreadable:" + std::to_string(st.st_size);
  std::string h;
  try {
    h = hash_fd(fd, path).substr(5);  // without "xxh3:"
  } catch (const std::runtime_error&) {
    h = "unreadable:" + std::to_string(st.st_size);
  }
  ::close(fd);
  return h;
}

void feed(XXH3_state_t* s, const std::string& text) { XXH3_64bits_update(s, text.c_str(), text.size() + 1); }

std::string digest_of(const fs::path& root, const std::vector<Entry>& entries) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  char mode[16];
  for (const Entry& e : entries) {
    feed(state, e.rel);
    std::snprintf(mode, sizeof mode, "%o", static_cast<unsigned>(e.st.st_mode));
    feed(state, mode);
    const std::string path = (root / e.rel).string();
    if (S_ISLNK(e.st.st_mode)) {
      std::error_code ec;
      feed(state, fs::read_symlink(path, ec).string());
    } else if (S_ISREG(e.st.st_mode)) {
      feed(state, file_hash(path, e.st));
    }
  }
  const unsigned long long h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return "xxh3:" + hex16(h);
}

/// What changes when an entry's contents may have: inode, size, mtime, ctime, mode.
std::string fingerprint(const std::vector<Entry>& entries) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  for (const Entry& e : entries) {
    feed(state, e.rel);
    const int64_t f[] = {int64_t(e.st.st_dev),  int64_t(e.st.st_ino), int64_t(e.st.st_mode),
                         int64_t(e.st.st_size), ns(e.st.st_mtim),     ns(e.st.st_ctim)};
    XXH3_64bits_update(state, f, sizeof f);
  }
  const unsigned long long h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hex16(h);
}

std::string cached_directory_digest(const std::string& dir, const std::string& cache_dir) {
  const fs::path root = fs::canonical(dir);
  const std::vector<Entry> entries = walk(root);
  const std::string key = fingerprint(entries);
  const CacheEntry entry(cache_dir, kCacheMagic, "image", root.string());
  if (auto cached = entry.read(key); cached && cached->rfind("xxh3:", 0) == 0) return *cached;
  std::string digest = digest_of(root, entries);
  // Only what was read is cached: an image changed while it was hashed keeps no entry.
  if (fingerprint(walk(root)) == key) entry.write(key, digest);
  return digest;
}

bool under(const fs::path& p, const fs::path& dir) {
  auto d = dir.begin();
  for (auto it = p.begin(); d != dir.end(); ++it, ++d)
    if (it == p.end() || *it != *d) return false;
  return true;
}

}  // namespace

std::string directory_image_digest(const std::string& dir) {
  const fs::path root = fs::canonical(dir);
  return digest_of(root, walk(root));
}

std::string container_image_digest(const ContainerSpec& c, const std::string& cache_dir) {
  if (c.runtime.empty() || c.runtime == "docker" || c.runtime == "podman") return "";
  std::error_code ec;
  if (fs::is_directory(c.image, ec)) return cached_directory_digest(c.image, cache_dir);
  if (fs::is_regular_file(c.image, ec)) return identify_data_file(c.image, cache_dir).hash;
  return "";
}

std::vector<std::string> container_run_env(const ContainerSpec& c, const std::string& digest) {
  if (c.runtime.empty()) return {};
  std::error_code ec;
  std::string image = c.image;
  if (c.runtime != "docker" && c.runtime != "podman" && fs::exists(image, ec))
    image = fs::absolute(image, ec).lexically_normal().string();
  return {"SWEEP_CONTAINER_RUNTIME=" + c.runtime, "SWEEP_CONTAINER_IMAGE=" + image, "SWEEP_CONTAINER_DIGEST=" + digest};
}

void check_charliecloud_image(const ContainerSpec& c, const std::string& sweep_dir, const std::string& source) {
  std::error_code ec;
  if (c.runtime != "charliecloud" || !fs::is_directory(c.image, ec)) return;
  const std::string at = source + ": key 'launch.container.image': ";
  std::vector<std::string> targets = {sweep_dir};
  for (const auto& b : c.binds) {
    const size_t colon = b.find(':');
    targets.push_back(colon == std::string::npos ? b : b.substr(colon + 1));
  }
  for (const auto& t : targets) {
    const fs::path dst = fs::path(t).lexically_normal();
    if (under(dst, "/tmp") || fs::is_directory(fs::path(c.image) / dst.relative_path(), ec)) continue;
    throw ConfigError(at + "ch-run binds " + dst.string() + " into the image " + c.image +
                      ", which has no such directory, and ch-run cannot create one in a read-only image: create "
                      "it (mkdir -p " +
                      (fs::path(c.image) / dst.relative_path()).string() + ", or SWEEP_IMAGE_MOUNTS=" + dst.string() +
                      " containers/build-charliecloud-image.sh), or use a sweep directory under /tmp, which ch-run "
                      "binds itself");
  }
  if (!c.trainer.empty() && c.trainer.front() == '/' &&
      !fs::exists(fs::path(c.image) / fs::path(c.trainer).relative_path(), ec))
    throw ConfigError(source + ": key 'launch.container.trainer': " + c.trainer + " is not in the image " + c.image);
}

std::string container_difference(const RecordedContainer& was, const ContainerSpec& now,
                                 const std::string& now_digest) {
  const std::string prefix = "warning: container: ";
  const std::string recorded =
      was.runtime + " image " + was.image + (was.digest.empty() ? "" : " (" + was.digest + ")");
  if (was.runtime.empty() && now.runtime.empty()) return "";
  if (now.runtime.empty())
    return prefix + "the record ran in the " + recorded +
           "; this re-run runs on the host, whose libraries may give other bits (--container " + was.runtime +
           " --image " + was.image + " runs it there)";
  const std::string here = now.runtime + " image " + now.image + (now_digest.empty() ? "" : " (" + now_digest + ")");
  if (was.runtime.empty())
    return prefix + "the record ran on the host; this re-run runs in the " + here +
           ", whose libraries may give other bits";
  if (was.digest != now_digest)
    return prefix + "the record ran in the " + recorded + "; this re-run uses the " + here +
           ": another image, whose libraries may give other bits";
  return "";
}

}  // namespace sweep
