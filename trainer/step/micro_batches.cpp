// The micro-batches of one step on this rank (micro_batches.h).
#include "micro_batches.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "checksum.h"    // flat_checksum, tensor_checksum
#include "leaf_scope.h"  // LeafScopeGuard
#include "text.h"        // join

namespace sweep {

int64_t MicroBatchPasses::compute(int64_t step, Prefetcher& batches, std::vector<double>& local_losses,
                                  double scale_used, int64_t tokens) {
  nonfinite_module_.clear();
  probed_ = false;
  routed_ = {};
  share_digests_.clear();
  share_part_digests_.assign(step <= cfg_.dist.diagnose_step ? size_t(cfg_.train.accum) : 0, {});
  const int64_t targets = leaves_.sums_subtrees ? compute_leaves(step, batches, local_losses, scale_used, tokens)
                                                : compute_tree(step, batches, local_losses, scale_used, tokens);
  for (auto& parts : share_part_digests_)  // one part: its digest; several: the digest of theirs, in order
    share_digests_.push_back(parts.size() == 1 ? parts[0]
                                               : tensor_checksum(reinterpret_cast<const float*>(parts.data()),
                                                                 parts.size() * sizeof(uint64_t) / sizeof(float)));
  return targets;
}

void MicroBatchPasses::share_part(int64_t step, int64_t k, int64_t part, float* g, size_t n) {
  // Test-only: a bad device (or a transient fault) computes the rank's first share wrong;
  // the share's own digest shows it, on whichever rank computes that share.
  if (faults_ && k == 0 && part == 0) faults_->local_gradient(step, g, n);
  if (!share_part_digests_.empty()) share_part_digests_[size_t(k)].push_back(flat_checksum(g, n));
}

int64_t MicroBatchPasses::compute_tree(int64_t step, Prefetcher& batches, std::vector<double>& local_losses,
                                       double scale_used, int64_t tokens) {
  const int64_t accum = cfg_.train.accum;
  float* grads = flat_.grads.data_ptr<float>();
  int64_t targets = 0;
  for (int64_t k = 0; k < accum; ++k) {
    const torch::Tensor batch = model_.batch(batches.next());
    flat_.zero_grads();
    targets += forward_backward(step, k, 0, batch, scale_used, tokens, &local_losses[size_t(k)]);
    flat_.pull_grads();
    share_part(step, k, 0, grads, size_t(flat_.n));
    if (k + 1 < accum) tree_.push(grads);  // the last leaf stays where it is
  }
  tree_.finish_with_last(grads);
  model_.check_params_unchanged(flat_, step);
  return targets;
}

int64_t MicroBatchPasses::forward_backward(int64_t step, int64_t k, int64_t row0, const torch::Tensor& batch,
                                           double scale_used, int64_t tokens, double* losses) {
  torch::AutoGradMode grad_on(true);
  std::optional<compat::AutocastGuard> guard;
  model_.autocast(guard);
  // Test-only: the rows of the sample fault.nan_sample poisons, when this batch holds it.
  ForwardProbe probe;
  std::vector<int64_t> ids;
  if (faults_ && faults_->nan_sample_at(step)) {
    ids = samples(step, k, row0, batch.size(0));
    for (size_t r = 0; r < ids.size(); ++r)
      if (ids[r] == faults_->nan_sample()) probe.poison_rows.push_back(int64_t(r));
  }
  LossSum ls;
  {
    std::optional<ForwardProbeGuard> probing;  // none on a normal step
    if (!probe.poison_rows.empty()) probing.emplace(&probe);
    ls = model_.model().loss(batch);
  }
  model_.check_loss(ls);
  if (!ls.sum.requires_grad())
    throw std::runtime_error(model_.error("loss() returned a tensor that depends on no parameter"));
  // A model without the probe's embedding hook gets the sample's NaN in its loss.
  const bool nan = faults_ && (faults_->nan_loss(step, k) || (!probe.poison_rows.empty() && !probe.poisoned));
  // Token-weighted: each leaf's summed loss over the whole global batch's token count, so
  // the leaves add up to the global mean (rescaled after the reduction when the model's
  // targets are not all the tokens).
  torch::Tensor loss = ls.sum / double(tokens);
  if (nan) loss = loss * std::numeric_limits<double>::quiet_NaN();  // test-only
  int64_t count = 1;
  if (leaves_.fused) {
    // Each leaf's loss over the step's tokens, like the whole micro-batch's (the NaN of a
    // test fault reaches all of them).
    torch::Tensor per = model_.per_leaf(ls, leaves_.leaves_per_micro_batch) / double(tokens);
    if (nan) per = per * std::numeric_limits<double>::quiet_NaN();
    count = leaves_.leaves_per_micro_batch;
    std::copy_n(per.to(torch::kDouble).cpu().contiguous().data_ptr<double>(), count, losses);
  } else {
    losses[0] = loss.item<double>();
  }
  if (!probed_ && std::any_of(losses, losses + count, [](double x) { return !std::isfinite(x); })) {
    if (ids.empty()) ids = samples(step, k, row0, batch.size(0));
    find_nonfinite_module(batch, probe, ids);
  }
  (loss_scaled_ ? loss * scale_used : loss).backward();
  return ls.targets;
}

std::vector<int64_t> MicroBatchPasses::samples(int64_t step, int64_t k, int64_t row0, int64_t rows) const {
  if (!sampler_) return {};
  const int64_t accum = cfg_.train.accum, micro_batches = cfg_.dist.world_size * accum;
  const std::vector<int64_t> all = sampler_->samples(data_batch_ ? data_batch_(step) : step - 1,
                                                     int64_t(leaves_.data_rank(rank_)) * accum + k, micro_batches);
  const auto lo = std::min(all.size(), size_t(row0)), hi = std::min(all.size(), size_t(row0 + rows));
  return {all.begin() + lo, all.begin() + hi};
}

void MicroBatchPasses::find_nonfinite_module(const torch::Tensor& batch, ForwardProbe& probe,
                                             const std::vector<int64_t>& ids) {
  probed_ = true;
  torch::NoGradGuard no_grad;
  LeafScopeGuard plain(nullptr);  // the plain layers: the leaf step's sums stay as they are
  routed_ = model_.model().take_routed_tokens();
  probe.watch = true;
  {
    ForwardProbeGuard on(&probe);
    model_.model().loss(batch);
  }
  model_.model().take_routed_tokens();  // the probe's routing is not the step's
  if (probe.first.name.empty()) return;
  std::vector<std::string> rows;
  for (int64_t r : probe.first.rows)
    rows.push_back(size_t(r) < ids.size() ? std::to_string(ids[size_t(r)]) : "row " + std::to_string(r));
  nonfinite_module_ = "first non-finite module: " +
                      describe(probe.first, "its output non-finite for sample" +
                                                std::string(rows.size() == 1 ? " " : "s ") + join(rows, ", "));
}

RoutedTokens MicroBatchPasses::take_routed_tokens() {
  RoutedTokens now = model_.model().take_routed_tokens();
  if (routed_.counts.empty()) return now;
  RoutedTokens all = std::move(routed_);
  routed_ = {};
  for (size_t i = 0; i < all.counts.size() && i < now.counts.size(); ++i) all.counts[i] += now.counts[i];
  return all;
}

int64_t MicroBatchPasses::compute_leaves(int64_t step, Prefetcher& batches, std::vector<double>& local_losses,
                                         double scale_used, int64_t tokens) {
  const int64_t per_micro_batch = leaves_.leaves_per_micro_batch;
  const int64_t accum = cfg_.train.accum, leaf = cfg_.train.leaf;
  const int64_t first = int64_t(leaves_.data_rank(rank_)) * accum * per_micro_batch;  // dist.diagnose_rotate: another's
  float* grads = flat_.grads.data_ptr<float>();
  const size_t n = size_t(flat_.n);
  LeafScope& scope = leaves_.scope;
  leaves_.node_sums->clear();
  int64_t targets = 0;
  for (int64_t k = 0; k < accum; ++k) {
    const torch::Tensor batch = model_.batch(batches.next());
    const int64_t lo = first + k * per_micro_batch;
    if (!leaves_.fused) {  // one forward and backward per leaf, each gradient a leaf of the tree
      for (int64_t l = 0; l < per_micro_batch; ++l) {
        flat_.zero_grads();
        const torch::Tensor chunk = per_micro_batch == 1 ? batch : batch.narrow(0, l * leaf, leaf);
        targets += forward_backward(step, k, per_micro_batch == 1 ? 0 : l * leaf, chunk, scale_used, tokens,
                                    &local_losses[size_t(k * per_micro_batch + l)]);
        flat_.pull_grads();
        share_part(step, k, l, grads, n);
        leaves_.node_sums->push({lo + l, 1}, grads);
      }
      continue;
    }
    // One pass: the leaf-aware layers fold each leaf's gradient into the sums of the
    // micro-batch's subtrees, the first in the gradient buffer, the others beside it.
    scope.nodes = canonical_cover(leaves_.leaves_per_step, lo, lo + per_micro_batch);
    std::vector<std::vector<float>>& extra = leaves_.extra_node_sums;
    if (extra.size() + 1 < scope.nodes.size()) extra.resize(scope.nodes.size() - 1);
    scope.bufs = {grads};
    for (size_t j = 1; j < scope.nodes.size(); ++j) {
      extra[j - 1].assign(n, 0.0f);
      scope.bufs.push_back(extra[j - 1].data());
    }
    for (auto& node : scope.nodes) node.lo -= lo;
    scope.params = flat_.params.data_ptr<float>();
    scope.written.assign(flat_.table.size(), 0);
    std::fill(leaves_.autograd_grads.begin(), leaves_.autograd_grads.end(), 0);
    flat_.zero_grads();
    {
      LeafScopeGuard on(&scope);
      targets += forward_backward(step, k, 0, batch, scale_used, tokens, &local_losses[size_t(k * per_micro_batch)]);
    }
    for (size_t i = 0; i < leaves_.autograd_grads.size(); ++i)
      if (leaves_.autograd_grads[i])
        throw std::runtime_error(model_.error(
            "parameter '" + flat_.table[i].name +
            "' got its gradient from a plain LibTorch op, but the model says it is leaf-aware; build it from the "
            "layers of sweep/leaf.h, or let leaf_aware() return false"));
    for (size_t j = 0; j < scope.nodes.size(); ++j) {
      share_part(step, k, int64_t(j), scope.bufs[j], n);
      leaves_.node_sums->push({lo + scope.nodes[j].lo, scope.nodes[j].count}, scope.bufs[j]);
    }
  }
  model_.check_params_unchanged(flat_, step);
  return targets;
}

}  // namespace sweep
