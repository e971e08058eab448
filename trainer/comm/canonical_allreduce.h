// The cross-rank half of docs/design.md's canonical reduction: ranks' partial sums combined
// with the canonical pairwise tree over r, so the result has the bits of one process
// summing all M = W*A micro-batch gradients, whatever W is. Plus the gradient norm, with
// the bits of sum_of_squares over the whole vector.
#pragma once

#include <cstddef>
#include <vector>

#include "canonical_reduce.h"  // TreeNode
#include "communicator.h"      // Communicator
#include "optimizer.h"         // kNormBlock, sum_of_squares

namespace sweep {

/// How a flat vector of n elements is split over W ranks: shard s is
/// [offsets[s], offsets[s+1]). Shards are contiguous, in rank order and cover [0, n); every
/// boundary is a multiple of `align` except those equal to n. Shards hold whole
/// align-blocks and differ by at most one block (the earlier ranks get the extra ones; the
/// shard holding the last, partial block may be the smaller). When n has fewer than W
/// blocks the trailing shards are empty.
struct ShardLayout {
  size_t n = 0;                 ///< elements in the whole vector
  size_t align = kNormBlock;    ///< block size that interior boundaries are multiples of
  std::vector<size_t> offsets;  ///< W + 1 boundaries, offsets[0] = 0, offsets[W] = n

  /// Number of shards (W).
  int world() const { return int(offsets.size()) - 1; }
  /// First element of shard s.
  size_t begin(int s) const { return offsets[size_t(s)]; }
  /// One past the last element of shard s.
  size_t end(int s) const { return offsets[size_t(s) + 1]; }
  /// Elements in shard s (may be 0).
  size_t size(int s) const { return end(s) - begin(s); }
};

/// Splits n elements into `world` shards as described at ShardLayout. The default align
/// keeps every gradient-norm block inside one shard (needed by sharded_sum_of_squares).
/// Throws std::invalid_argument when world < 1 or align == 0.
ShardLayout shard_layout(size_t n, int world, size_t align = kNormBlock);

/// Sums the ranks' `partial` vectors (n floats each) into `out` with the canonical tree over
/// ranks, i.e. tree(lo,hi) = tree(lo,lo+P) + tree(lo+P,hi), P the largest power of two
/// < hi-lo. When each partial is the TreeAccumulator sum of A consecutive leaves (rank r:
/// leaves r*A .. r*A+A-1) and A is a power of two, `out` is bit-identical to one process
/// running TreeAccumulator over all W*A leaves; W need not be a power of two.
///
/// Data movement: all-to-all (rank s receives shard s of every partial), a local tree over
/// the W pieces, then — if `gather` — a ring all-gather, so every rank holds all of `out`.
/// The all-to-all and the tree go in chunks of up to 1 MiB per piece (chunk c of every
/// shard is exchanged, then summed while in cache); a rank's own piece is read in place,
/// never copied. Chunking does not change a bit: the tree is elementwise.
/// With gather = false only shard rank() of `out` is written (ZeRO 2/3). Each rank sends and
/// receives about 2(W-1)/W * n floats, like a ring all-reduce.
///
/// `out` may be `partial` (in place) but must not otherwise overlap it. `workspace` (W
/// chunks of up to 1 MiB, grown on demand) can be passed to avoid allocating on every call.
/// Collective; `layout` must be shard_layout(n, comm.size(), ...) on every rank.
void canonical_allreduce(Communicator& comm, const float* partial, float* out, size_t n, const ShardLayout& layout,
                         bool gather = true, std::vector<float>* workspace = nullptr);

/// The general form, for ranks whose leaves are not one subtree of the canonical tree
/// (any world_size x accum x micro_batch of a global batch of `leaves` leaves): rank s holds
/// the sums of the subtrees `nodes[s]` (its NodeAccumulator: the canonical cover of its
/// leaves), this rank's in `partials` (nodes[rank()].size() vectors of n floats), and
/// `nodes` over all ranks partition [0, leaves): in rank order, or in any order of the
/// ranks (a rank that computes another's shares, dist.diagnose_rotate) with the same bits. `out` gets the canonical
/// tree over all the leaves, bit-identical to one process running TreeAccumulator over
/// them. A rank sends each of its nodes' pieces, so k nodes cost it k times the bytes of
/// one partial (1 node per rank, as with a power-of-two accumulation, is the form above).
/// `out` may be partials[0]. Collective; every rank passes the same `nodes` and `leaves`.
void canonical_allreduce(Communicator& comm, const std::vector<const float*>& partials,
                         const std::vector<std::vector<TreeNode>>& nodes, int64_t leaves, float* out, size_t n,
                         const ShardLayout& layout, bool gather = true, std::vector<float>* workspace = nullptr);

/// In place: shard s of `data` (n floats, indexed globally) is valid on rank s on entry
/// and everywhere on return (ZeRO 1-3 parameter gather). Collective.
void allgather_shards(Communicator& comm, float* data, const ShardLayout& layout);

/// The sum of squares of a vector sharded by `layout`, bit-identical to sum_of_squares over
/// the whole vector on one process: each rank computes the double partials of the kNormBlock
/// blocks in its shard (with sum_of_squares itself), the block partials are all-gathered and
/// added in block order. `g` is indexed globally; only this rank's shard of it is read.
/// Requires layout.align to be a multiple of kNormBlock. Collective; every rank gets the result.
double sharded_sum_of_squares(Communicator& comm, const float* g, const ShardLayout& layout);

/// The same, for a rank that holds only its shard: `shard` is element layout.begin(rank()).
double shard_sum_of_squares(Communicator& comm, const float* shard, const ShardLayout& layout);

/// A slice of a flat vector: `size` elements from `offset` (a parameter tensor).
struct Slice {
  size_t offset = 0, size = 0;
};

/// The square sum of each slice of a vector, in double, with the same bits whether the
/// vector is held whole or sharded: each slice is cut at the kNormBlock boundaries, each
/// piece summed by lane_dot, and the pieces added in flat order. The rank holds `size`
/// elements from `begin` (`g` points at element `begin`); when `sharded`, every shard
/// boundary is a multiple of kNormBlock (shard_layout's default) and the pieces are
/// all-gathered (collective). Not sharded: `g` holds every slice, and nothing is sent.
/// Throws std::invalid_argument when a slice is outside what the ranks hold or a shard
/// boundary cuts a block.
std::vector<double> slice_sums_of_squares(Communicator& comm, const float* g, size_t begin, size_t size,
                                          const std::vector<Slice>& slices, bool sharded);

}  // namespace sweep
