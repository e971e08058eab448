// The training loop: one run from its config to its record, on every rank of a job.
#pragma once

#include <string>

#include "communicator.h"
#include "run_config.h"

namespace sweep {

class Models;  // sweep/trainer.h

/// Options of one training process that are not part of the run's math.
struct TrainOptions {
  std::string out_dir;   ///< the run directory; rank 0 writes out_dir/record.h5
  std::string sweep_id;  ///< recorded for grouping; empty for a lone run
  bool quiet = false;    ///< no per-step log lines
  bool resume = false;   ///< continue from the newest complete checkpoint in out_dir, if any
  /// Continue from this checkpoint (a run directory or .../checkpoints/step_N), which may
  /// come from another layout of the same math (elastic resume); "" = none.
  std::string resume_from;
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

/// How a run ended; also the record's status.
enum class RunStatus { completed, diverged, stopped };

/// Trains `cfg` on the ranks of `comm` (its size must equal dist.world_size) and, on
/// rank 0, writes the record; the model of kind cfg.model.kind comes from `models`.
/// Throws ConfigError for bad config or data (a kind `models` lacks), before anything is
/// written; other failures throw after the record is marked failed.
RunStatus train(const RunConfig& cfg, const TrainOptions& opt, Communicator& comm, const Models& models);

}  // namespace sweep
