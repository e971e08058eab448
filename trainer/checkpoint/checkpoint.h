// Checkpoints: everything a run needs to continue bit-identically. A checkpoint is
// <run dir>/checkpoints/step_<N>/state.bin and is complete only once the DONE marker
// beside it exists; readers ignore anything without it.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "record.h"  // StepMetrics, ChecksumRow

namespace sweep {

/// Version of state.bin; readers take this one and every earlier one. Version 2 adds the
/// math id, so a checkpoint resumes any layout of the same math (elastic resume); version 3
/// the held-out evaluation rows; version 4 the run's lineage, so a forked run resumed in
/// place still names its parent; version 5 the spike decisions; version 6 where each
/// decision's rise began and the data it skipped, and the states kept for rewinds. The
/// state itself has always been layout-free: parameters and both AdamW moments in the canonical flat order
/// (gathered from the shards), the scaler, the RNG, the record rows.
inline constexpr uint32_t kCheckpointVersion = 6;

/// What train.spike_policy did at a step whose loss spiked (before the step's update).
struct SpikeDecision {
  int64_t step = 0;    ///< the step whose loss spiked; its update was not taken
  std::string action;  ///< "skip" (only this step's update) or "rewind"
  /// rewind: the checkpoint step whose state the run went back to (steps back_to + 1 to
  /// `step` are skipped); skip: step - 1
  int64_t back_to = 0;
  int64_t undone = 0;  ///< rewind: the updates taken after back_to that the rewind undid
  double loss = 0;     ///< the spiking loss
  double median = 0;   ///< the median of the losses it was judged against
  /// train.spike_rewind_steps: the first step whose loss rose in the climb that ended in
  /// the spike (version 6); 0 otherwise
  int64_t rise = 0;
  int64_t skip = 0;  ///< global batches of data left out after `step` (train.spike_skip; version 6)
};

/// A state kept in memory for a rewind (train.spike_rewind_steps): the state after `step`,
/// whole vectors as a checkpoint holds them, without the record's rows.
struct KeptState {
  int64_t step = 0;
  int64_t updates = 0;              ///< optimizer updates taken by then
  std::vector<float> params, m, v;  ///< flat parameters and AdamW moments
  double loss_scale = 1;            ///< fp16 scaler
  int64_t clean_steps = 0;          ///< fp16 scaler
  std::string rng;                  ///< LibTorch CPU generator state
};

/// The state after `step` completed steps.
struct TrainState {
  std::string run_id;                    ///< the run that wrote it
  std::string math_id;                   ///< run_config.h math_id: which runs may resume it ("" in version 1)
  int64_t step = 0;                      ///< optimizer steps completed
  std::vector<float> params, m, v;       ///< flat parameters and AdamW moments
  double loss_scale = 1;                 ///< fp16 scaler
  int64_t clean_steps = 0;               ///< fp16 scaler
  std::string rng;                       ///< LibTorch CPU generator state
  std::vector<StepMetrics> metrics;      ///< record rows so far, replayed into the new record
  std::vector<ChecksumRow> checksums;    ///< record rows so far
  std::vector<EvalRow> evals;            ///< held-out evaluations so far (version 3)
  RecordLineage lineage;                 ///< the writer's own parent, if any (version 4)
  std::vector<SpikeDecision> decisions;  ///< train.spike_policy's decisions so far (version 5)
  std::vector<KeptState> kept;           ///< train.spike_rewind_steps: the states a rewind may go back to (version 6)
};

/// A checkpoint of another math than the run that would resume from it: neither its run
/// id nor its math id matches. The caller can name the keys that differ (math_differences)
/// from the config of the run that wrote it.
class CheckpointOfOtherMath : public std::runtime_error {
 public:
  CheckpointOfOtherMath(const std::string& what, std::string state_path)
      : std::runtime_error(what), state_path(std::move(state_path)) {}
  std::string state_path;  ///< .../checkpoints/step_N/state.bin
};

/// Writes the checkpoint of `s` under `run_dir` and keeps only the newest `keep`.
/// `test_crash_midway` (fault.crash_in_checkpoint_step, test-only) _exits after part of
/// state.bin is on disk, before DONE.
void save_checkpoint(const std::string& run_dir, const TrainState& s, int keep = 2, bool test_crash_midway = false);

/// The newest complete checkpoint under `run_dir`, or nullopt when there is none.
/// Throws CheckpointOfOtherMath when it belongs to another math (neither `run_id` nor
/// `math_id` matches), std::runtime_error when it cannot be read.
std::optional<TrainState> load_latest_checkpoint(const std::string& run_dir, const std::string& run_id,
                                                 const std::string& math_id = "");

/// The checkpoint at `path`: a checkpoint directory (.../checkpoints/step_N), or the
/// newest complete one of a run directory or its checkpoints/ directory. For resuming on another layout: it must
/// hold the same math (`math_id`; else CheckpointOfOtherMath), and be complete. Throws
/// std::runtime_error otherwise.
/// `any_math` (a fork): a checkpoint of any math is taken; the model must still match.
TrainState load_checkpoint_at(const std::string& path, const std::string& run_id, const std::string& math_id,
                              bool any_math = false);

}  // namespace sweep
