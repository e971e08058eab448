// The start-of-run communication self-test: how fast this job's links move a buffer the
// size of the gradient, with the native all-reduce and with the canonical reduction.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "communicator.h"

namespace sweep {

/// Bandwidth of one collective, with the nccl-tests formulas: algbw = bytes / time;
/// busbw = algbw x 2(W-1)/W for an all-reduce (the canonical reduce-scatter + all-gather
/// moves the same bytes, so the same factor applies).
struct CommBandwidth {
  double seconds = 0;     ///< median time of one call
  double algbw_GBps = 0;  ///< bytes / seconds / 1e9
  double busbw_GBps = 0;  ///< algbw x 2(W-1)/W
};

/// bytes / seconds and the all-reduce bus factor for `world` ranks.
CommBandwidth allreduce_bandwidth(size_t bytes, double seconds, int world);

/// Every rank's host name, in rank order (collective; names cut at 63 bytes).
std::vector<std::string> rank_hosts(Communicator& comm);

/// The first rank on another host than rank 0's, or -1 when every rank shares its host.
int first_remote_rank(const std::vector<std::string>& hosts);

/// Times `iters` native all-reduces and canonical reductions of n floats (collective).
/// Returns key/value pairs for the record's /summary, e.g. "comm.native.busbw_GBps".
/// When the ranks span hosts (`hosts`, from rank_hosts), it also times an exchange of the
/// same n floats between rank 0 and the first rank on another host, both ways at once:
/// "comm.internode.GBps" is the bytes one side sends over the seconds
/// ("comm.internode.pair" names the two ranks and hosts).
std::vector<std::pair<std::string, std::string>> comm_self_test(Communicator& comm, size_t n, int iters = 3,
                                                                const std::vector<std::string>& hosts = {});

}  // namespace sweep
