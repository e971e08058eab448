// Which collective a hung run's ranks first disagree on, from what each rank left of its
// collectives: the ring its watchdog wrote when the rank stopped (collective_ring.h) and
// its heartbeat (heartbeat.h), which is all a rank that was stopped (SIGSTOP) or killed
// outright leaves. The sweep driver puts the verdict in the record (/hang) and in the
// run's state, as the PyTorch NCCL flight recorder's analyzer does with its ranks' dumps.
//
// Collectives of all ranks are matched by their number among such collectives (the
// `group` count: at the same point of a run the same on every rank; a rank's own `seq`
// also counts its point-to-point exchanges, which differ between ranks). The first one
// that some rank entered and another never did, or that ranks entered as different
// operations or sizes, is the verdict. Without one, a rank waiting in a point-to-point
// exchange is followed along the peers it waits on to a rank that waits in nothing: that
// rank never entered the exchange. A collective older than a rank's ring reaches is not
// judged on that rank (its entries are gone).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "collective_ring.h"  // RingEntry, HangForensics
#include "heartbeat.h"        // CollectiveBeat

namespace sweep {

/// What one rank left: its ring (oldest first) and its heartbeat, either, both or neither.
struct RankCollectives {
  std::optional<std::vector<RingEntry>> ring;
  std::optional<CollectiveBeat> beat;
};

/// The first collective the ranks disagree on.
struct CollectiveDisagreement {
  enum class Kind { none, missing, mismatch };
  Kind kind = Kind::none;
  RingEntry at;                 ///< as the lowest rank that entered it saw it (bytes -1: unknown)
  std::vector<int> entered;     ///< ranks that entered it, ascending
  std::vector<int> waiting;     ///< of those, the ones still inside it when they stopped
  std::vector<int> missing;     ///< ranks that never entered it (kind missing)
  std::vector<int> silent;      ///< ranks that left neither a ring nor a heartbeat
  std::vector<RingEntry> seen;  ///< kind mismatch: each entered rank's entry, by `entered`
  /// "rank 1 never entered collective #37 (allreduce, 4096 B, at step 3); ranks 0, 2 waited
  /// in it", "collective #37 at step 3 differs between the ranks: ranks 0, 2 entered
  /// allreduce (4096 B), rank 1 allgather (16 B)"; "" for none.
  std::string text() const;
};

/// The first disagreement among ranks 0 to ranks.size()-1 (index = rank).
CollectiveDisagreement first_disagreement(const std::vector<RankCollectives>& ranks);

/// The record's /hang section for `d` (nothing when it found none), with the ranks' rings.
std::optional<HangForensics> hang_forensics(const CollectiveDisagreement& d, const std::vector<RankCollectives>& ranks);

/// The rings as they stood when the first rank decided to stop (the earliest of `stopped`,
/// each ring's stop time; 0: unknown): what a rank entered after that is left out, and a
/// collective it left after that it was still inside. A rank stopped by hand and continued
/// by its launcher to be ended, or a peer that moved on while the first one took its stack,
/// then enters collectives that say nothing of the hang. No known stop time: as they are.
void cut_at_first_stop(std::vector<std::optional<std::vector<RingEntry>>>& rings, const std::vector<double>& stopped);

/// What the ranks of the run in `dir` left (rings and heartbeats changed since `since`,
/// seconds since the epoch; 0: any), for as many ranks as left either, the rings cut at
/// the first stop (cut_at_first_stop).
std::vector<RankCollectives> read_rank_collectives(const std::string& dir, long long since);

}  // namespace sweep
