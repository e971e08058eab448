// The micro-batches of one step on this rank: a forward and backward of each (or of each
// of its leaves), their gradients folded into the canonical tree or into the leaf plan's
// subtree sums, and each leaf's loss.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "canonical_reduce.h"  // TreeAccumulator
#include "device_model.h"      // DeviceModel
#include "faults.h"            // FaultInjector
#include "flat_params.h"       // FlatParams
#include "leaf_plan.h"         // LeafPlan
#include "prefetcher.h"        // Prefetcher
#include "run_config.h"        // RunConfig

namespace sweep {

/// What one step's micro-batches need, held for the run; every reference outlives it.
class MicroBatchPasses {
 public:
  /// `faults` may be null (no test fault on); `loss_scaled`: the fp16 loss scale is on.
  MicroBatchPasses(const RunConfig& cfg, int rank, DeviceModel& model, FlatParams& flat, LeafPlan& leaves,
                   const FaultInjector* faults, bool loss_scaled)
      : cfg_(cfg),
        rank_(rank),
        model_(model),
        flat_(flat),
        leaves_(leaves),
        faults_(faults),
        loss_scaled_(loss_scaled),
        tree_(size_t(flat.n)) {}

  /// Forward and backward of this rank's train.accum micro-batches from `batches`, their
  /// gradients summed into the flat gradient buffer (LeafPlan::sums_subtrees off) or into
  /// the leaf plan's node sums (on). Each leaf's loss over the step's `tokens` goes to
  /// `local_losses` (accum x leaves_per_micro_batch). Returns this rank's target count.
  int64_t compute(int64_t step, Prefetcher& batches, std::vector<double>& local_losses, double scale_used,
                  int64_t tokens);

 private:
  /// One micro-batch per leaf of the tree, summed by the TreeAccumulator.
  int64_t compute_tree(int64_t step, Prefetcher& batches, std::vector<double>& local_losses, double scale_used,
                       int64_t tokens);
  /// A run with leaves or a rank whose leaves are not one subtree: the rank's subtree
  /// sums end in the leaf plan's node sums.
  int64_t compute_leaves(int64_t step, Prefetcher& batches, std::vector<double>& local_losses, double scale_used,
                         int64_t tokens);
  /// One forward and backward of `batch` (one or more leaves) with autocast and the
  /// checks; `losses` gets each leaf's loss over `tokens`. Returns the targets.
  int64_t forward_backward(int64_t step, int64_t k, const torch::Tensor& batch, double scale_used, int64_t tokens,
                           double* losses);

  const RunConfig& cfg_;
  const int rank_;
  DeviceModel& model_;
  FlatParams& flat_;
  LeafPlan& leaves_;
  const FaultInjector* faults_;
  const bool loss_scaled_;
  TreeAccumulator tree_;  // the micro-batches' gradients, when they are the tree's leaves
};

}  // namespace sweep
