// One rank's ring of its last collectives, as its watchdog leaves it when the rank stops
// (a timeout, or the launcher's signal: trainer/comm/watchdog.h): <run>/rank<R>.collectives,
// read by the sweep driver once the run's processes are gone, which merges the ranks'
// rings (results/analysis/hang_verdict.h) and names the first collective where they
// disagree, as the PyTorch NCCL flight recorder's analyzer does with its dumps.
//
// The file is text, a version in its first line and a checksum in its last:
//   sweep-collectives 2 rank 1 entries 2 stopped 1765432101.250000
//   seq 811 group 204 step 40 peer -1 bytes 4096 start 1765432098.100000 end 1765432098.100310 op allreduce
//   seq 812 group 204 step 40 peer 2 bytes 65536 start 1765432098.100400 end -1 op the gradient exchange (sendrecv)
//   sum 1a2b3c4d
// Times are seconds since the epoch (the ranks' clocks, so comparable on one host; end -1:
// the rank was still inside). `stopped` is when the rank decided to stop (its timeout, or
// the signal it got): a rank that a launcher continues (SIGCONT before its SIGTERM) or
// whose peers move on meanwhile enters collectives after that, which the merge leaves out
// (hang_verdict.h). Version 1 files, without it, are read as stopped at 0 (unknown). Written to a temporary name and
// renamed, never through a link.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace sweep {

/// One collective a rank entered.
struct RingEntry {
  long long seq = 0;    ///< its number among every collective this rank entered, point-to-point ones included (from 1)
  long long group = 0;  ///< collectives of all ranks this rank had entered, this one included: the same on every rank
                        ///< at the same point
  long long step = 0;   ///< the step the rank was at
  int peer = -1;        ///< the one rank it waits on (a sendrecv's source); -1: a collective of all ranks
  long long bytes = 0;  ///< what this rank sends
  std::string op;       ///< "allreduce", "the gradient exchange (sendrecv)", ...
  double start_s = 0;   ///< when it entered, seconds since the epoch
  double end_s = -1;    ///< when it left; < 0: still inside when the ring was written
  bool inside() const { return end_s < 0; }
  bool of_all_ranks() const { return peer < 0; }
};

/// <dir>/rank<R>.collectives.
std::string collective_ring_path(const std::string& dir, int rank);

/// Writes rank `rank`'s ring (oldest first) to <dir>/rank<R>.collectives. Best effort, like
/// a rank's note: false when it could not (a full disk, a directory on a lost node).
/// `stopped_s`: when the rank decided to stop (seconds since the epoch; 0: unknown).
bool write_collective_ring(const std::string& dir, int rank, const std::vector<RingEntry>& ring,
                           double stopped_s = 0) noexcept;

/// The ring at `path`, oldest first; nothing when it is missing, not a regular file, of
/// another version or rank, or damaged (its checksum or count does not hold).
/// `stopped_s`, when given, gets the ring's stop time (0 for a version 1 file).
std::optional<std::vector<RingEntry>> read_collective_ring(const std::string& path, int rank,
                                                           double* stopped_s = nullptr);

/// Ranks 0 to world-1's rings in `dir`. A file last changed before `since` (seconds since
/// the epoch; 0: any) is an earlier attempt's and counts as missing. `stopped`, when
/// given, gets each ring's stop time (0: none or unknown).
std::vector<std::optional<std::vector<RingEntry>>> read_collective_rings(const std::string& dir, int world,
                                                                         long long since = 0,
                                                                         std::vector<double>* stopped = nullptr);

/// One more than the highest rank with a ring file in `dir`; 0 when there is none.
int collective_ring_ranks(const std::string& dir);

/// What the driver keeps of a hang in the record (the group /hang, results/SCHEMA.md): the
/// verdict on the ranks' merged rings and the rings themselves.
struct HangForensics {
  std::string verdict;           ///< one line: "rank 1 never entered collective #37 (allreduce, ...); ..."
  std::string kind;              ///< "missing" (ranks never entered it) or "mismatch" (ranks entered different ones)
  long long collective = 0;      ///< its number, as the lowest rank that entered it numbers it (RingEntry::seq)
  long long group = 0;           ///< its number among the collectives of all ranks (RingEntry::group)
  std::vector<int> entered;      ///< ranks that entered it
  std::vector<int> missing;      ///< ranks that never did (kind "missing")
  std::vector<int> ring_rank;    ///< the merged rings, one row per entry: whose it is
  std::vector<RingEntry> rings;  ///< and the entry, each rank's oldest first
};

}  // namespace sweep
