// The leaves of a step and the subtrees each rank sums (leaf_plan.h).
#include "leaf_plan.h"

namespace sweep {

void LeafPlan::plan(const RunConfig& cfg, int world, const std::vector<ParamInfo>& table, int64_t n, bool fusable,
                    std::vector<int64_t>* grad_flags) {
  const int64_t accum = cfg.train.accum, leaf = cfg.train.leaf;
  leaves_per_micro_batch = leaf > 0 ? cfg.train.micro_batch / leaf : 1;
  leaves_per_step = int64_t(world) * accum * leaves_per_micro_batch;
  autograd_grads.assign(table.size(), 0);
  rank_covers.clear();
  this->world = world;
  rotate = cfg.dist.diagnose_rotate % world;
  bool one_subtree = true;
  for (int s = 0; s < world; ++s) {
    const int64_t d = data_rank(s);
    rank_covers.push_back(
        canonical_cover(leaves_per_step, d * accum * leaves_per_micro_batch, (d + 1) * accum * leaves_per_micro_batch));
    one_subtree = one_subtree && rank_covers.back().size() == 1;
  }
  // Without a leaf and with each rank's micro-batches one subtree (a power-of-two
  // accumulation), the original path: its bits and its copies are the same as ever. A
  // rotation takes the general path, whose reduction places each rank's subtrees.
  sums_subtrees = leaf > 0 || !one_subtree || rotate != 0;
  if (!sums_subtrees) return;
  node_sums = std::make_unique<NodeAccumulator>(size_t(n), leaves_per_step);
  // One pass per micro-batch through the leaf-aware layers, on the host; a model of plain
  // layers (or a device) gets one pass per leaf.
  fused = leaf > 0 && fusable;
  if (!fused) return;
  scope.leaves = leaves_per_micro_batch;
  for (const auto& p : table) scope.offsets.push_back(p.offset), scope.numels.push_back(p.numel);
  scope.n = n;
  scope.used = grad_flags;
}

}  // namespace sweep
