// What one training process is asked to do besides the run's math (where to write, resume,
// device, stop) and how a run ends: shared by the loop (train.h) and its parts, which need
// these and not the loop.
#pragma once

#include <cstdint>
#include <string>

#include "run_status.h"  // RunStatus: how a run ended (completed, diverged or stopped), its record's status

namespace sweep {

/// Options of one training process that are not part of the run's math.
struct TrainOptions {
  std::string out_dir;   ///< the run directory; rank 0 writes out_dir/record.h5
  std::string sweep_id;  ///< recorded for grouping; empty for a lone run
  bool quiet = false;    ///< no per-step log lines
  bool resume = false;   ///< continue from the newest complete checkpoint in out_dir, if any
  /// Continue from this checkpoint (a run directory or .../checkpoints/step_N), which may
  /// come from another layout of the same math (elastic resume); "" = none.
  std::string resume_from;
  /// Start from this checkpoint of another run whose math may differ (`sweep fork`: a
  /// lower lr after a spike); the model must be the same. The record names it as parent.
  std::string fork_from;
  /// Where forward and backward run: "cpu", or "cuda" (GPU local_rank % GPU count). The
  /// flat parameter and gradient buffers, reduction and optimizer stay on the host. It
  /// changes the bits, so the record's environment names it; it is not in the run id.
  std::string device = "cpu";
  int local_rank = 0;  ///< this rank's index on its node (from the launcher)
  /// Stop after this step, with a checkpoint, and finish the record as `stopped` (a rung
  /// of a halving search, which may resume it later); 0 or >= train.steps = run to the
  /// end. The learning-rate schedule stays that of train.steps, so a stopped run resumed
  /// to the end is the run trained straight through.
  int64_t stop_at = 0;
};

}  // namespace sweep
