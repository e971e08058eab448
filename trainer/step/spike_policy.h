// train.spike_policy: what the loop does when a step's loss spikes. The loss is judged
// before the step's update, by the loss_spike rule (run_health.h) against the finite
// losses of the steps before it: the same bits on every rank and every layout, so every
// rank and every layout of a global batch decides alike. `skip` leaves out the step's
// update; `rewind` also goes back to the state of the last checkpoint (kept in memory),
// leaving out the global batches since then, as large runs do after a spike. Each
// decision goes into the checkpoints (a resumed run keeps them) and the record's summary.
// LibTorch-free: the loop hands it numbers and states.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint.h"  // TrainState, SpikeDecision
#include "run_config.h"  // TrainConfig

namespace sweep {

class SpikePolicy {
 public:
  explicit SpikePolicy(const TrainConfig& t) : policy_(t.spike_policy), limit_(t.spike_limit) {}

  bool rewinds() const { return policy_ == "rewind"; }

  /// A resumed run: the decisions its checkpoint carries; with rewind, that checkpoint is
  /// also the state to go back to. `updates`: the optimizer updates it had taken.
  void resume(const TrainState& st, int64_t updates);
  /// rewind: `st` (a checkpoint being written, or the initial state) is now the state a
  /// spike goes back to; `updates` were taken by then. Its rows are not kept.
  void keep_point(const TrainState& st, int64_t updates);
  /// The state a rewind goes back to.
  const TrainState& point() const { return point_; }

  /// The decision for `step`, whose loss is `loss`, judged against the rows before it
  /// (`history`), with `updates` taken so far; nullopt when the loss did not spike, the
  /// policy is none, or train.spike_limit decisions were taken (it prints that once).
  /// A decision is kept; the caller carries it out.
  std::optional<SpikeDecision> decide(int64_t step, double loss, const std::vector<StepMetrics>& history,
                                      int64_t updates, bool root);

  const std::vector<SpikeDecision>& decisions() const { return decisions_; }
  /// Updates taken but undone by rewinds, over all decisions.
  int64_t undone() const { return undone_total(decisions_); }
  static int64_t undone_total(const std::vector<SpikeDecision>& ds);

  /// The record's summary attributes for the decisions (results/SCHEMA.md): spike_decisions,
  /// spike_decision.<k>, spike_skipped_steps and spike_skipped_samples. `samples(step)`
  /// gives the sample indices of a step's global batch, in order. None without decisions.
  std::vector<std::pair<std::string, std::string>> summary(
      const std::function<std::vector<int64_t>(int64_t)>& samples) const;

  /// One decision in a sentence, for the log and the record.
  static std::string describe(const SpikeDecision& d);

 private:
  std::string policy_;
  int64_t limit_;
  std::vector<SpikeDecision> decisions_;
  TrainState point_;
  int64_t point_updates_ = 0;
  bool told_limit_ = false;
};

}  // namespace sweep
