#include "collective_ring.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace sweep {
namespace {

constexpr int kVersion = 2;              // 2 added "stopped T" to the first line
constexpr int kMaxRank = 1 << 20;        // dist.world_size's range
constexpr size_t kMaxEntries = 1 << 16;  // far above any ring (watchdog.h): a longer file is not one
constexpr size_t kMaxFileBytes = 16 << 20;

unsigned text_sum(const std::string& text) { return unsigned(XXH32(text.data(), text.size(), 0)); }

bool write_all(int fd, const std::string& text) {
  for (size_t at = 0; at < text.size();) {
    const ssize_t n = ::write(fd, text.data() + at, text.size() - at);
    if (n <= 0) return false;
    at += size_t(n);
  }
  return true;
}

}  // namespace

std::string collective_ring_path(const std::string& dir, int rank) {
  return dir + "/rank" + std::to_string(rank) + ".collectives";
}

bool write_collective_ring(const std::string& dir, int rank, const std::vector<RingEntry>& ring,
                           double stopped_s) noexcept {
  try {
    char stopped[48];
    std::snprintf(stopped, sizeof stopped, " stopped %.6f", stopped_s);
    std::string text = "sweep-collectives " + std::to_string(kVersion) + " rank " + std::to_string(rank) + " entries " +
                       std::to_string(ring.size()) + stopped + "\n";
    for (const RingEntry& e : ring) {
      char line[256];
      std::snprintf(line, sizeof line, "seq %lld group %lld step %lld peer %d bytes %lld start %.6f end %.6f op ",
                    e.seq, e.group, e.step, e.peer, e.bytes, e.start_s, e.end_s < 0 ? -1.0 : e.end_s);
      std::string op = e.op;
      std::replace(op.begin(), op.end(), '\n', ' ');
      text += line + op + "\n";
    }
    char sum[32];
    std::snprintf(sum, sizeof sum, "sum %08x\n", text_sum(text));
    text += sum;
    const std::string path = collective_ring_path(dir, rank), tmp = path + ".tmp";
    ::unlink(tmp.c_str());  // an earlier attempt's, or a planted link: removed, never followed
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    const bool ok = write_all(fd, text);
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
      ::unlink(tmp.c_str());
      return false;
    }
    return true;
  } catch (...) {
    return false;  // out of memory while the rank stops: no ring, as for a rank killed outright
  }
}

std::optional<std::vector<RingEntry>> read_collective_ring(const std::string& path, int rank, double* stopped_s) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::string text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && size_t(st.st_size) <= kMaxFileBytes) {
    text.resize(size_t(st.st_size));
    size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n <= 0) break;
      got += size_t(n);
    }
    text.resize(got);
  }
  ::close(fd);
  // The checksum covers every line before it.
  const size_t last = text.size() > 1 ? text.rfind('\n', text.size() - 2) : std::string::npos;
  if (text.empty() || text.back() != '\n' || last == std::string::npos) return std::nullopt;
  unsigned sum = 0;
  if (std::sscanf(text.c_str() + last + 1, "sum %8x", &sum) != 1 || sum != text_sum(text.substr(0, last + 1)))
    return std::nullopt;
  std::istringstream in(text.substr(0, last + 1));
  std::string line;
  int version = 0, of = -1;
  size_t entries = 0;
  double stopped = 0;  // version 1 did not say
  if (!std::getline(in, line) ||
      std::sscanf(line.c_str(), "sweep-collectives %d rank %d entries %zu stopped %lf", &version, &of, &entries,
                  &stopped) < 3 ||
      version < 1 || version > kVersion || of != rank || entries > kMaxEntries || !std::isfinite(stopped))
    return std::nullopt;
  std::vector<RingEntry> ring;
  while (std::getline(in, line)) {
    RingEntry e;
    int op_at = -1;
    if (std::sscanf(line.c_str(), "seq %lld group %lld step %lld peer %d bytes %lld start %lf end %lf op %n", &e.seq,
                    &e.group, &e.step, &e.peer, &e.bytes, &e.start_s, &e.end_s, &op_at) != 7 ||
        op_at < 0)
      return std::nullopt;
    e.op = line.substr(size_t(op_at));
    ring.push_back(std::move(e));
  }
  if (ring.size() != entries) return std::nullopt;
  if (stopped_s) *stopped_s = version >= 2 ? stopped : 0;
  return ring;
}

std::vector<std::optional<std::vector<RingEntry>>> read_collective_rings(const std::string& dir, int world,
                                                                         long long since,
                                                                         std::vector<double>* stopped) {
  std::vector<std::optional<std::vector<RingEntry>>> out(size_t(std::max(0, world)));
  if (stopped) stopped->assign(out.size(), 0.0);
  for (int r = 0; r < world; ++r) {
    const std::string path = collective_ring_path(dir, r);
    struct stat st;
    if (since > 0 && (::lstat(path.c_str(), &st) != 0 || st.st_mtime < since)) continue;
    out[size_t(r)] = read_collective_ring(path, r, stopped ? &(*stopped)[size_t(r)] : nullptr);
  }
  return out;
}

int collective_ring_ranks(const std::string& dir) {
  int ranks = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  while (const dirent* e = ::readdir(d)) {
    int r = -1, end = 0;
    if (std::sscanf(e->d_name, "rank%7d.collectives%n", &r, &end) == 1 && end > 0 && e->d_name[end] == '\0' && r >= 0 &&
        r < kMaxRank)
      ranks = std::max(ranks, r + 1);
  }
  ::closedir(d);
  return ranks;
}

}  // namespace sweep
