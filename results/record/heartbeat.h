// Where each rank of a run is among its collectives, published for the others to read:
// <run>/rank<R>.heartbeat, rewritten in place each time the rank enters or leaves a
// collective (trainer/comm/watchdog.h), and read when a hang is diagnosed (by rank 0's
// watchdog, and by the driver once the run's processes are gone) to name the rank(s)
// that never entered the collective the others wait in.
//
// The file is one fixed-size line, a version and a checksum of the rest included:
//   sweep-heartbeat 1 seq 57 group 12 step 12 in peer -1 op allgather      ... sum 1a2b3c4d
// written by one pwrite at offset 0 (no allocation, no rename: about a microsecond, see
// tests/bench/README.md). The kernel finishes a pwrite whatever signal the writer gets,
// so a stopped or killed rank leaves its last line whole; a reader that catches one
// half-copied sees the checksum fail and reads again.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace sweep {

/// One rank's place among its collectives.
struct CollectiveBeat {
  long long seq = 0;     ///< collectives it entered, point-to-point ones included (its watchdog ring's numbering)
  long long group = 0;   ///< collectives of all ranks it entered: at the same point of the run, the same on every rank
  long long step = 0;    ///< the step it was at when it entered collective `seq`
  bool inside = false;   ///< it is still in collective `seq`
  int peer = -1;         ///< the one rank that collective waits on (a sendrecv's source); -1: all ranks
  std::string op;        ///< "allgather", "the gradient exchange (sendrecv)", ...
  double changed_s = 0;  ///< when the file last changed (its mtime, seconds since the epoch); 0: not read from a file
};

/// <dir>/rank<R>.heartbeat.
std::string heartbeat_path(const std::string& dir, int rank);

/// The writer side, owned by one rank's watchdog.
class HeartbeatWriter {
 public:
  /// Opens (creates or empties) rank `rank`'s heartbeat in `dir`, never through a link and
  /// only as a regular file, and publishes "no collective yet". Best effort, like a rank's
  /// note: when the file cannot be opened, publish does nothing.
  HeartbeatWriter(const std::string& dir, int rank);
  ~HeartbeatWriter();
  HeartbeatWriter(const HeartbeatWriter&) = delete;
  HeartbeatWriter& operator=(const HeartbeatWriter&) = delete;

  /// Rewrites the line (one pwrite; allocates nothing). From one thread at a time.
  void publish(long long seq, long long group, long long step, bool inside, int peer, const char* op) noexcept;

  /// Marks the rank alive without changing the line (the file's mtime only): its watchdog
  /// thread calls it every kAliveEveryS, so a stopped or dead process's heartbeat goes
  /// stale while its peers' stay fresh. Safe beside publish from another thread.
  void touch() noexcept;

 private:
  int fd_ = -1;
};

/// The heartbeat at `path`; nothing when it is missing, not a regular file, of another
/// version, or still torn after a few reads.
std::optional<CollectiveBeat> read_heartbeat(const std::string& path);

/// Ranks 0 to world-1's heartbeats in `dir`. A file last changed before `since` (seconds
/// since the epoch; 0: any) is an earlier attempt's and counts as missing.
std::vector<std::optional<CollectiveBeat>> read_heartbeats(const std::string& dir, int world, long long since = 0);

/// One more than the highest rank with a heartbeat file in `dir`; 0 when there is none.
int heartbeat_ranks(const std::string& dir);

/// The words inserted before the collective number in absent_from_collective's sentence;
/// what a reader of a cause looks for (harness/driver/repeated_hang.h).
inline constexpr const char* kNeverEntered = " never entered collective #";
/// The words of a rank that went silent inside the collective the others wait in.
inline constexpr const char* kWentSilent = " went silent inside collective #";

/// How often a live rank's watchdog touches its heartbeat, and how much older than the
/// freshest one a heartbeat must be for its rank to count as silent (stopped, dead, or not
/// scheduled). Relative to the freshest, so that clocks of other nodes do not matter.
inline constexpr double kAliveEveryS = 0.5;
inline constexpr double kSilentAfterS = 2.0;

/// Which ranks never entered the collective the others wait in, from every rank's beat
/// (index = rank): "rank 1 never entered collective #57 (allgather at step 12); ranks 0,
/// 2, 3 wait in it". A collective of all ranks that some rank waits in is the one the
/// ranks with a lower group count never entered; without one, a rank waiting on one peer
/// (a sendrecv) is followed along the peers they wait on to one that waits in nothing.
/// A rank without a beat is said to have none. When every rank is in the collective waited
/// in (or the ranks wait on each other in a circle), a rank whose heartbeat is stale by
/// kSilentAfterS is the one that stopped: "rank 1 went silent inside collective #31 (the
/// gradient exchange (sendrecv) at step 2) 4.1 s before the others' last heartbeat; rank 0
/// waits in collective #31 (...)". "" when no rank waits in a collective (a one-rank run,
/// a rank stuck before any) or every rank is in the one waited in and alive.
std::string absent_from_collective(const std::vector<std::optional<CollectiveBeat>>& beats);

}  // namespace sweep
