#include "heartbeat.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "text.h"  // join

namespace sweep {
namespace {

constexpr int kVersion = 1;
constexpr size_t kLineBytes = 192;              // the whole line, its newline included
constexpr size_t kBodyBytes = kLineBytes - 14;  // then " sum %08x\n"
constexpr int kMaxRank = 1 << 20;               // dist.world_size's range

unsigned body_sum(const char* body) { return unsigned(XXH32(body, kBodyBytes, 0)); }

/// "rank 1" or "ranks 0, 2, 3".
std::string ranks_text(const std::vector<int>& ranks) {
  std::vector<std::string> items;
  items.reserve(ranks.size());
  for (int r : ranks) items.push_back(std::to_string(r));
  return (ranks.size() == 1 ? "rank " : "ranks ") + join(items);
}

std::optional<CollectiveBeat> parse_line(const char* line, size_t n) {
  if (n != kLineBytes || line[kLineBytes - 1] != '\n') return std::nullopt;
  unsigned sum = 0;
  if (std::sscanf(line + kBodyBytes, " sum %8x", &sum) != 1 || sum != body_sum(line)) return std::nullopt;
  const std::string body(line, kBodyBytes);
  CollectiveBeat b;
  int version = 0, op_at = -1;
  char state[4] = {};
  if (std::sscanf(body.c_str(), "sweep-heartbeat %d seq %lld group %lld step %lld %3s peer %d op %n", &version, &b.seq,
                  &b.group, &b.step, state, &b.peer, &op_at) != 6 ||
      op_at < 0 || version != kVersion)
    return std::nullopt;
  b.inside = std::strcmp(state, "in") == 0;
  b.op = body.substr(size_t(op_at));
  b.op.erase(b.op.find_last_not_of(' ') + 1);
  return b;
}

/// "collective #31 (allgather at step 2)", in the numbering of the rank that beat `b`.
std::string collective_text(const CollectiveBeat& b) {
  return "collective #" + std::to_string(b.seq) + " (" + b.op + " at step " + std::to_string(b.step) + ")";
}

/// Every rank is inside a collective, or the ranks wait on each other in a circle: a
/// rank whose heartbeat went stale while the others' stayed fresh stopped there.
std::string went_silent(const std::vector<std::optional<CollectiveBeat>>& beats) {
  double freshest = 0;
  for (const auto& b : beats)
    if (b) freshest = std::max(freshest, b->changed_s);
  std::vector<int> stale, live;
  for (int r = 0; r < int(beats.size()); ++r) {
    const auto& b = beats[size_t(r)];
    if (!b || !b->inside || b->changed_s <= 0) continue;
    (freshest - b->changed_s > kSilentAfterS ? stale : live).push_back(r);
  }
  if (stale.empty() || live.empty()) return "";
  const CollectiveBeat& first = *beats[size_t(stale.front())];
  const CollectiveBeat& waiter = *beats[size_t(live.front())];
  char lag[32];
  std::snprintf(lag, sizeof lag, "%.1f s", freshest - first.changed_s);
  return ranks_text(stale) + kWentSilent + collective_text(first).substr(std::strlen("collective #")) + " " + lag +
         " before the others' last heartbeat; " + ranks_text(live) + (live.size() == 1 ? " waits" : " wait") + " in " +
         collective_text(waiter);
}

}  // namespace

std::string heartbeat_path(const std::string& dir, int rank) {
  return dir + "/rank" + std::to_string(rank) + ".heartbeat";
}

HeartbeatWriter::HeartbeatWriter(const std::string& dir, int rank) {
  const int fd = ::open(heartbeat_path(dir, rank).c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  struct stat st;
  if (fd < 0) return;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {  // a planted FIFO or device: not written
    ::close(fd);
    return;
  }
  fd_ = fd;
  publish(0, 0, 0, false, -1, "none");
}

HeartbeatWriter::~HeartbeatWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void HeartbeatWriter::publish(long long seq, long long group, long long step, bool inside, int peer,
                              const char* op) noexcept {
  if (fd_ < 0) return;
  char line[kLineBytes + 1];
  int n = std::snprintf(line, kBodyBytes + 1, "sweep-heartbeat %d seq %lld group %lld step %lld %s peer %d op %s",
                        kVersion, seq, group, step, inside ? "in" : "out", peer, op ? op : "?");
  if (n < 0) return;
  n = std::min<int>(n, int(kBodyBytes));  // a longer name is cut, never the numbers before it
  std::memset(line + n, ' ', kBodyBytes - size_t(n));
  std::snprintf(line + kBodyBytes, 15, " sum %08x\n", body_sum(line));
  // Best effort, like a rank's note: a full disk leaves the last line there was.
  [[maybe_unused]] const ssize_t w = ::pwrite(fd_, line, kLineBytes, 0);
}

void HeartbeatWriter::touch() noexcept {
  if (fd_ < 0) return;
  [[maybe_unused]] const int r = ::futimens(fd_, nullptr);  // both times to now; best effort
}

std::optional<CollectiveBeat> read_heartbeat(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::optional<CollectiveBeat> beat;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    // A read that overlaps the writer's pwrite can copy half of each line; the next one
    // cannot, unless the writer publishes again meanwhile: a few tries, 1 ms apart.
    for (int attempt = 0; attempt < 20 && !beat; ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      char buf[kLineBytes + 2];
      const ssize_t got = ::pread(fd, buf, kLineBytes + 1, 0);
      if (got <= 0) break;  // empty: the writer opened it and has not written yet
      buf[got] = '\0';
      beat = parse_line(buf, size_t(got));
    }
    if (beat) beat->changed_s = double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) * 1e-9;
  }
  ::close(fd);
  return beat;
}

std::vector<std::optional<CollectiveBeat>> read_heartbeats(const std::string& dir, int world, long long since) {
  std::vector<std::optional<CollectiveBeat>> out(size_t(std::max(0, world)));
  for (int r = 0; r < world; ++r) {
    const std::string path = heartbeat_path(dir, r);
    struct stat st;
    if (since > 0 && (::lstat(path.c_str(), &st) != 0 || st.st_mtime < since)) continue;
    out[size_t(r)] = read_heartbeat(path);
  }
  return out;
}

int heartbeat_ranks(const std::string& dir) {
  int ranks = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  while (const dirent* e = ::readdir(d)) {
    int r = -1, end = 0;
    if (std::sscanf(e->d_name, "rank%7d.heartbeat%n", &r, &end) == 1 && end > 0 && e->d_name[end] == '\0' && r >= 0 &&
        r < kMaxRank)
      ranks = std::max(ranks, r + 1);
  }
  ::closedir(d);
  return ranks;
}

std::string absent_from_collective(const std::vector<std::optional<CollectiveBeat>>& beats) {
  const int world = int(beats.size());
  auto in_group = [](const CollectiveBeat& b) { return b.inside && b.peer < 0; };
  long long top = 0;  // the latest collective of all ranks that some rank waits in
  for (const auto& b : beats)
    if (b && in_group(*b)) top = std::max(top, b->group);
  std::set<int> absent, waiting, silent;
  if (top > 0) {
    // Such a collective ends on no rank before every rank has entered it: a rank that
    // counts fewer never entered it.
    for (int r = 0; r < world; ++r) {
      const auto& b = beats[size_t(r)];
      if (!b)
        silent.insert(r);
      else if (b->group < top)
        absent.insert(r);
      else if (in_group(*b) && b->group == top)
        waiting.insert(r);
    }
  } else {
    // Waits on one peer each: followed from peer to peer to a rank that waits in nothing.
    for (int r = 0; r < world; ++r) {
      const auto& b = beats[size_t(r)];
      if (!b || !b->inside || b->peer < 0 || b->peer == r) continue;
      std::set<int> seen{r};
      int p = b->peer;
      while (p < world && beats[size_t(p)] && beats[size_t(p)]->inside && beats[size_t(p)]->peer >= 0 &&
             seen.insert(p).second)
        p = beats[size_t(p)]->peer;
      if (p >= world || seen.count(p)) continue;  // out of range, or a cycle of waits
      if (!beats[size_t(p)])
        silent.insert(p), waiting.insert(r);
      else if (!beats[size_t(p)]->inside)
        absent.insert(p), waiting.insert(r);
    }
  }
  if (waiting.empty() || (absent.empty() && silent.empty())) return went_silent(beats);
  const std::string which = collective_text(*beats[size_t(*waiting.begin())]);
  const std::vector<int> w(waiting.begin(), waiting.end()), a(absent.begin(), absent.end()),
      s(silent.begin(), silent.end());
  const std::string wait_words = ranks_text(w) + (w.size() == 1 ? " waits" : " wait");
  if (a.empty()) return "no heartbeat from " + ranks_text(s) + "; " + wait_words + " in " + which;
  return ranks_text(a) + kNeverEntered + which.substr(std::strlen("collective #")) + "; " + wait_words + " in it" +
         (s.empty() ? "" : "; no heartbeat from " + ranks_text(s));
}

}  // namespace sweep
