// The training loop: one run from its config to its record.
#pragma once

#include <string>

#include "run_config.h"

namespace sweep {

/// Options of one training process that are not part of the run's math.
struct TrainOptions {
  std::string out_dir;   ///< the run directory; the record goes to out_dir/record.h5
  std::string sweep_id;  ///< recorded for grouping; empty for a lone run
  bool quiet = false;    ///< no per-step log lines
  bool resume = false;   ///< continue from the newest complete checkpoint in out_dir, if any
};

/// How a run ended; also the record's status.
enum class RunStatus { completed, diverged };

/// Trains `cfg` and writes its record. Throws on failure (the record is then finished
/// with status "failed" and the cause).
RunStatus train(const RunConfig& cfg, const TrainOptions& opt);

}  // namespace sweep
