// train.spike_policy: what the loop does when a step's loss spikes. The loss is judged
// before the step's update, by the loss_spike rule (run_health.h) against the finite
// losses of the steps before it: the same bits on every rank and every layout, so every
// rank and every layout of a global batch decides alike. `skip` leaves out the step's
// update; `rewind` also goes back to the state of the last checkpoint (kept in memory),
// leaving out the global batches since then, as large runs do after a spike. With
// train.spike_rewind_steps it keeps the states of the last N step boundaries instead and
// goes back to the newest one from before the climb that ended in the spike began: the
// weights the rising loss had not yet damaged. train.spike_factor replaces the flag's rule
// by a threshold over the losses the policy kept; train.spike_skip leaves out data after
// the spike (PaLM goes back ~100 steps and skips 200-500 batches). Each decision, and the
// kept states, go into the checkpoints (a resumed run decides as the straight run would)
// and the decisions into the record's summary.
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
  explicit SpikePolicy(const TrainConfig& t)
      : policy_(t.spike_policy),
        limit_(t.spike_limit),
        factor_(t.spike_factor),
        window_(t.spike_window),
        ring_steps_(t.spike_rewind_steps),
        skip_(t.spike_skip) {}

  bool rewinds() const { return policy_ == "rewind"; }
  /// rewind with train.spike_rewind_steps: the state after every step is kept (keep_step).
  bool keeps_states() const { return rewinds() && ring_steps_ > 0; }
  /// keeps_states: `k`, the state after its step (keep_state, train_state.h), is kept;
  /// states more than train.spike_rewind_steps steps older are dropped.
  void keep_step(KeptState k);
  /// The states kept (keeps_states), oldest first: what a checkpoint carries.
  const std::vector<KeptState>& kept() const { return kept_; }

  /// The 0-based index of the global batch of data `step` trains on: step - 1, plus the
  /// batches train.spike_skip left out at the decisions before it.
  int64_t data_batch(int64_t step) const;

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
  /// spike_decision.<k>, spike_skipped_steps and spike_skipped_samples. `samples(b)`
  /// gives the sample indices of the 0-based global batch b (data_batch), in order. None
  /// without decisions.
  std::vector<std::pair<std::string, std::string>> summary(
      const std::function<std::vector<int64_t>(int64_t)>& samples) const;

  /// One decision in a sentence, for the log and the record.
  static std::string describe(const SpikeDecision& d);

 private:
  bool spiked(double loss, const std::vector<StepMetrics>& kept_rows, const std::vector<StepMetrics>& history,
              double* median) const;
  std::vector<StepMetrics> kept_rows(const std::vector<StepMetrics>& history) const;
  void take_kept(const std::vector<StepMetrics>& rows, int64_t step, double loss, int64_t updates, SpikeDecision& d);

  std::string policy_;
  int64_t limit_;
  double factor_;       // train.spike_factor; 0: the loss_spike rule
  int64_t window_;      // train.spike_window
  int64_t ring_steps_;  // train.spike_rewind_steps; 0: the last checkpoint
  int64_t skip_;        // train.spike_skip
  std::vector<SpikeDecision> decisions_;
  std::vector<KeptState> kept_;  // keeps_states: oldest first
  TrainState point_;
  int64_t point_updates_ = 0;
  bool told_limit_ = false;
};

}  // namespace sweep
