// The step's gradient reduction: every rank's micro-batch gradients summed into one, in
// the canonical order (or by the communication library's native sum when the run asks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "communicator.h"  // Communicator
#include "leaf_plan.h"     // LeafPlan
#include "run_config.h"    // RunConfig
#include "zero_shards.h"   // ZeroShards

namespace sweep {

/// Sums the gradients of every rank into `grads` (the flat gradient buffer, `n` floats):
/// from `grads` itself, or from the leaf plan's node sums when it sums subtrees. ZeRO 0/1
/// get the whole sum on every rank; 2/3 only their shard's part is certain to be
/// complete (collective).
/// This rank's own gradient before the reduction, as a square sum: its micro-batches'
/// gradients summed (in `grads`, or the leaf plan's node sums when it sums subtrees),
/// added in a fixed order. For /ranks/grad_norm: a rank whose data or replica went wrong
/// stands out before the reduction averages it away.
double local_sum_of_squares(const LeafPlan& leaves, const float* grads, size_t n);

void reduce_gradients(Communicator& comm, const RunConfig& cfg, const LeafPlan& leaves, ZeroShards& zero, float* grads,
                      size_t n);

/// The parameter tensors no micro-batch of any rank reached this step, from the summed
/// flags (1 per tensor that got a gradient, in `table` order). Throws with dist.find_unused
/// error when there are any.
int64_t count_unused_params(const std::vector<int64_t>& flags, const std::vector<ParamInfo>& table, int64_t step,
                            const std::string& find_unused);

}  // namespace sweep
