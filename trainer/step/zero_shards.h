// ZeRO sharding of the flat vectors: the slice of the parameter vector this rank owns, the
// AdamW moments it keeps, the gradient and parameter shards of stages 2 and 3, and the
// collectives that gather a whole vector from the shards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "canonical_allreduce.h"  // ShardLayout, Communicator
#include "optimizer.h"            // AdamWStep

namespace sweep {

struct FlatParams;  // flat_params.h

/// This rank's part of the optimizer state and, from ZeRO 2 on, of the gradient and
/// the parameters. Stage 0 keeps whole vectors; 1 shards the moments; 2 also the reduced
/// gradient; 3 also the parameters between steps.
struct ZeroShards {
  int64_t stage = 0;                    ///< dist.zero_stage
  ShardLayout layout;                   ///< every rank's shard of the flat vector
  size_t shard_begin = 0;               ///< this rank's first element of the flat vector
  size_t shard_size = 0;                ///< elements in this rank's shard
  std::vector<float> adam_m, adam_v;    ///< AdamW moments: the whole vector (ZeRO 0) or this rank's shard
  std::vector<float> grad_shard;        ///< ZeRO 2/3: this rank's shard of the reduced gradient
  std::vector<float> param_shard;       ///< ZeRO 3: this rank's shard of the parameters, between steps
  std::vector<float> reduce_workspace;  ///< canonical_allreduce's scratch, kept from step to step

  /// Lays `n` elements out over `world` ranks, for rank `rank` at ZeRO stage `zero_stage`:
  /// zero moments, and the gradient shard of stages 2 and 3.
  void plan(size_t n, int world, int rank, int64_t zero_stage);

  /// ZeRO 3: the whole parameter vector in `flat`, for a forward pass (collective).
  void gather_params(Communicator& comm, FlatParams& flat) const;
  /// ZeRO 3: drops the whole parameter vector again; this rank keeps its shard.
  void release_params(FlatParams& flat) const;
  /// Once the run has started: ZeRO 3 keeps only its shard of the parameters, ZeRO 2/3
  /// no whole gradient buffer between steps.
  void shard_buffers(FlatParams& flat);
  /// ZeRO 2/3, at the start of a step: a whole gradient buffer of zeros.
  void allocate_grads(FlatParams& flat) const;
  /// The reduced gradient this rank's optimizer reads, given the whole one in `grads`: all
  /// of it (ZeRO 0/1), or its shard copied out with the whole buffer released (2/3).
  /// Sets `size` to its elements.
  float* optimizer_gradient(FlatParams& flat, float* grads, size_t& size);
  /// One AdamW step of this rank's parameters from `g` (optimizer_gradient's), and at
  /// ZeRO 1/2 the updated shards gathered on every rank (collective).
  void adamw_update(Communicator& comm, FlatParams& flat, const float* g, const AdamWStep& hp);
  /// The whole vector of `n` elements that every rank's `shard` makes up (collective).
  std::vector<float> gather_whole(Communicator& comm, const std::vector<float>& shard) const;
  /// Bytes of the buffers this object holds (their capacity), for the memory figures.
  int64_t held_bytes() const;
};

}  // namespace sweep
