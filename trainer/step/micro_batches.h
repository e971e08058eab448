// The micro-batches of one step on this rank: a forward and backward of each (or of each
// of its leaves), their gradients folded into the canonical tree or into the leaf plan's
// subtree sums, and each leaf's loss.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "canonical_reduce.h"  // TreeAccumulator
#include "data_source.h"       // Sampler
#include "device_model.h"      // DeviceModel
#include "faults.h"            // FaultInjector
#include "flat_params.h"       // FlatParams
#include "forward_probe.h"     // ForwardProbe
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

  /// The sampler the batches come from (what names a micro-batch's samples); it outlives
  /// this.
  /// The sampler that says which samples a step's micro-batches hold, and the global batch
  /// a step trains on (step - 1, past the batches a spike decision left out).
  void set_sampler(const Sampler* sampler, std::function<int64_t(int64_t)> data_batch) {
    sampler_ = sampler, data_batch_ = std::move(data_batch);
  }
  /// "first non-finite module: embed (...)" of the last compute(): the first module whose
  /// output went non-finite in the first micro-batch of this rank whose loss did, found by
  /// running that micro-batch's forward once more with a ForwardProbe watching; "" when no
  /// loss went non-finite here (or the model reports no modules).
  const std::string& nonfinite_module() const { return nonfinite_module_; }
  /// The model's routed tokens of the last compute() (Model::take_routed_tokens), without
  /// the probe's forward.
  RoutedTokens take_routed_tokens();
  /// At dist.diagnose_step: the digest of each of this rank's micro-batches' gradient (its
  /// shares, in order), as computed before any sum over micro-batches; empty on other
  /// steps. A micro-batch of several leaves: the digest of its leaves' (or subtree sums')
  /// digests in leaf order, the same on every layout that keeps the micro-batch.
  const std::vector<uint64_t>& share_digests() const { return share_digests_; }

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
  /// `row0`: the batch's first row in its micro-batch (a leaf's chunk starts past 0).
  int64_t forward_backward(int64_t step, int64_t k, int64_t row0, const torch::Tensor& batch, double scale_used,
                           int64_t tokens, double* losses);
  /// Share `k`'s gradient `g` (`n` floats), one part of several (`part` of the share's
  /// parts): the fault of a bad device or a transient one strikes the rank's first share,
  /// and at dist.diagnose_step the part's digest is kept.
  void share_part(int64_t step, int64_t k, int64_t part, float* g, size_t n);
  /// The samples of `rows` rows from `row0` of this rank's micro-batch `k` at `step`.
  std::vector<int64_t> samples(int64_t step, int64_t k, int64_t row0, int64_t rows) const;
  /// Runs `batch`'s forward again with `probe` watching (no gradient, outside any leaf
  /// step) and keeps what it found in nonfinite_module_; `ids`: the batch's samples.
  void find_nonfinite_module(const torch::Tensor& batch, ForwardProbe& probe, const std::vector<int64_t>& ids);

  const RunConfig& cfg_;
  const int rank_;
  DeviceModel& model_;
  FlatParams& flat_;
  LeafPlan& leaves_;
  const FaultInjector* faults_;
  const bool loss_scaled_;
  TreeAccumulator tree_;  // the micro-batches' gradients, when they are the tree's leaves
  const Sampler* sampler_ = nullptr;
  std::function<int64_t(int64_t)> data_batch_;
  std::string nonfinite_module_;         // see nonfinite_module()
  bool probed_ = false;                  // this step's forward was probed already (once a step is enough)
  RoutedTokens routed_;                  // what the step routed before a probe's forward
  std::vector<uint64_t> share_digests_;  // see share_digests()
  std::vector<std::vector<uint64_t>> share_part_digests_;  // at dist.diagnose_step: each share's parts
};

}  // namespace sweep
