// The step's gradient reduction (gradient_reduction.h).
#include "gradient_reduction.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "canonical_allreduce.h"  // canonical_allreduce
#include "optimizer.h"            // sum_of_squares, kNormBlock, lane_dot

namespace sweep {

double local_sum_of_squares(const LeafPlan& leaves, const float* grads, size_t n) {
  if (!leaves.sums_subtrees || leaves.node_sums->size() == 1)
    return sum_of_squares(leaves.sums_subtrees ? leaves.node_sums->sum(0) : grads, n);
  // Several subtree sums: added block by block into a block-sized buffer, then squared.
  std::vector<float> block(kNormBlock);
  double total = 0;
  for (size_t lo = 0; lo < n; lo += kNormBlock) {
    const size_t len = std::min(kNormBlock, n - lo);
    std::memcpy(block.data(), leaves.node_sums->sum(0) + lo, len * sizeof(float));
    for (size_t i = 1; i < leaves.node_sums->size(); ++i) {
      const float* p = leaves.node_sums->sum(i) + lo;
      for (size_t e = 0; e < len; ++e) block[e] += p[e];
    }
    total += lane_dot<double>(block.data(), block.data(), len);
  }
  return total;
}

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

int64_t count_unused_params(const std::vector<int64_t>& flags, const std::vector<ParamInfo>& table, int64_t step,
                            const std::string& find_unused) {
  int64_t unused = 0;
  std::string names;
  for (size_t i = 0; i < table.size() && i < flags.size(); ++i)
    if (!flags[i]) ++unused, names += (names.empty() ? "" : ", ") + table[i].name;
  if (unused && find_unused == "error")
    throw std::runtime_error("step " + std::to_string(step) + ": parameters without a gradient on every rank: " +
                             names + " (dist.find_unused: error; use zero to train them as zero-gradient)");
  return unused;
}

}  // namespace sweep
