// The step's gradient reduction (gradient_reduction.h).
#include "gradient_reduction.h"

#include <cstring>
#include <vector>

#include "canonical_allreduce.h"  // canonical_allreduce

namespace sweep {

void reduce_gradients(Communicator& comm, const RunConfig& cfg, const LeafPlan& leaves, ZeroShards& zero, float* grads,
                      size_t n) {
  const bool gather = zero.stage < 2;  // ZeRO 2/3 read only their own shard of the sum
  if (leaves.sums_subtrees) {
    std::vector<const float*> partials;
    for (size_t i = 0; i < leaves.node_sums->size(); ++i) partials.push_back(leaves.node_sums->sum(i));
    if (cfg.native_reduction()) {  // this rank's subtrees added in order, then the library's sum
      std::memcpy(grads, partials[0], n * sizeof(float));
      for (size_t i = 1; i < partials.size(); ++i)
        for (size_t e = 0; e < n; ++e) grads[e] += partials[i][e];
      comm.allreduce_sum_native(grads, n);
    } else {
      canonical_allreduce(comm, partials, leaves.rank_covers, leaves.leaves_per_step, grads, n, zero.layout, gather,
                          &zero.reduce_workspace);
    }
  } else if (cfg.native_reduction()) {
    comm.allreduce_sum_native(grads, n);
  } else {
    canonical_allreduce(comm, grads, grads, n, zero.layout, gather, &zero.reduce_workspace);
  }
}

}  // namespace sweep
