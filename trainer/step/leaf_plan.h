// Leaves (docs/design.md): how a step's global batch splits into the leaves of the
// canonical tree (train.leaf), which subtrees of that tree each rank sums, and where
// those subtree sums accumulate.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "canonical_reduce.h"  // NodeAccumulator, TreeNode
#include "leaf_scope.h"        // LeafScope
#include "record.h"            // ParamInfo
#include "run_config.h"        // RunConfig

namespace sweep {

/// The leaves of a step and the path the micro-batches take to them. Without train.leaf
/// a micro-batch is one leaf.
struct LeafPlan {
  int64_t leaves_per_micro_batch = 1;  ///< train.micro_batch / train.leaf; 1 without a leaf
  int64_t leaves_per_step = 1;         ///< leaves of the global batch, all ranks together
  /// The rank's leaves are not one subtree of the canonical tree, or a micro-batch holds
  /// several leaves: the micro-batches' gradients go into node_sums as subtree sums, and
  /// the reduction takes every rank's cover. Otherwise they fold into one TreeAccumulator.
  bool sums_subtrees = false;
  /// One forward and backward per micro-batch through the leaf-aware layers (on the host),
  /// instead of one per leaf.
  bool fused = false;
  std::unique_ptr<NodeAccumulator> node_sums;      ///< this rank's subtree sums (sums_subtrees only)
  std::vector<std::vector<TreeNode>> rank_covers;  ///< rank r's subtrees of the canonical tree, at r
  /// dist.diagnose_rotate mod world: rank r computes the shares (micro-batches) of rank
  /// data_rank(r); 0 = its own.
  int64_t rotate = 0;
  int world = 1;  ///< ranks the plan is for
  /// The rank whose shares rank `r` computes.
  int data_rank(int r) const { return int((r + rotate) % world); }
  LeafScope scope;  ///< the fused path's micro-batch (sweep/leaf.h)
  /// The fused path's subtree sums past the first of a micro-batch (that one is the
  /// gradient buffer).
  std::vector<std::vector<float>> extra_node_sums;
  /// Per parameter tensor: a plain LibTorch op (autograd) gave it a gradient this
  /// micro-batch, which the fused path forbids.
  std::vector<int64_t> autograd_grads;

  /// Plans the leaves of `cfg` over `world` ranks for a model with the parameters `table`
  /// (`n` floats in all); `fusable` = the model is leaf-aware and runs on the host.
  /// The fused path's layers set `(*grad_flags)[i]` for each parameter they write.
  void plan(const RunConfig& cfg, int world, const std::vector<ParamInfo>& table, int64_t n, bool fusable,
            std::vector<int64_t>* grad_flags);
};

}  // namespace sweep
