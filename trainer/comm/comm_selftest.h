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

/// Times `iters` native all-reduces and canonical reductions of n floats (collective).
/// Returns key/value pairs for the record's /summary, e.g. "comm.native.busbw_GBps".
std::vector<std::pair<std::string, std::string>> comm_self_test(Communicator& comm, size_t n, int iters = 3);

}  // namespace sweep
