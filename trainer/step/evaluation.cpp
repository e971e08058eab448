// The held-out loss (evaluation.h).
#include "evaluation.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "canonical_reduce.h"  // canonical_sum
#include "data_source.h"       // fill_eval
#include "device_model.h"      // DeviceModel
#include "flat_params.h"       // FlatParams
#include "leaf_plan.h"         // LeafPlan
#include "leaf_scope.h"        // LeafScopeGuard
#include "step_record.h"       // seconds_since
#include "watchdog.h"          // Watchdog
#include "zero_shards.h"       // ZeroShards

namespace sweep {

EvalRow evaluate(int64_t step, const EvalInputs& in) {
  const auto t0 = std::chrono::steady_clock::now();
  const RunConfig& cfg = in.cfg;
  const int rank = in.comm.rank();
  const int64_t accum = cfg.train.accum, micro_batches = in.comm.size() * accum;
  const int64_t leaf = cfg.train.leaf, per_micro_batch = in.leaves.leaves_per_micro_batch;
  in.zero.gather_params(in.comm, in.flat);
  in.flat.push_params();
  in.model.model().module().eval();
  std::vector<int64_t> tokens(static_cast<size_t>(cfg.train.micro_batch * (cfg.model.seq_len + 1)));
  std::vector<double> local(static_cast<size_t>(accum * per_micro_batch));
  std::vector<double> leaves(static_cast<size_t>(in.leaves.leaves_per_step));
  double total = 0;  // the batches' canonical sums, added in batch order
  int64_t targets = 0;
  for (int64_t e = 0; e < cfg.train.eval_batches; ++e) {
    in.dog.beat(step);
    for (int64_t k = 0; k < accum; ++k) {
      fill_eval(in.held_out, cfg, e, rank * accum + k, micro_batches, tokens.data());
      const torch::Tensor batch = in.model.batch(tokens.data());
      std::optional<compat::AutocastGuard> guard;
      in.model.autocast(guard);
      if (in.leaves.fused) {  // one pass, the loss of each leaf
        LeafScopeGuard on(&in.leaves.scope);
        const LossSum ls = in.model.model().loss(batch);
        in.model.check_loss(ls);
        std::copy_n(in.model.per_leaf(ls, per_micro_batch).to(torch::kDouble).cpu().contiguous().data_ptr<double>(),
                    per_micro_batch, &local[size_t(k * per_micro_batch)]);
        targets += ls.targets;
        continue;
      }
      for (int64_t l = 0; l < per_micro_batch; ++l) {  // one pass per leaf (the micro-batch is one without a leaf)
        const LossSum ls = in.model.model().loss(per_micro_batch == 1 ? batch : batch.narrow(0, l * leaf, leaf));
        in.model.check_loss(ls);
        local[size_t(k * per_micro_batch + l)] = ls.sum.item<double>();
        targets += ls.targets;
      }
    }
    in.comm.allgather(local.data(), local.size() * sizeof(double), leaves.data());
    total += canonical_sum(leaves);
  }
  in.model.model().module().train();
  in.zero.release_params(in.flat);
  in.comm.allreduce_sum_i64(&targets, 1);
  return EvalRow{step, total / double(targets), targets, seconds_since(t0)};
}

}  // namespace sweep
