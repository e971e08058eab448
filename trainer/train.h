// The training loop: one run from its config to its record, on every rank of a job.
#pragma once

#include <string>

#include "communicator.h"
#include "run_config.h"
#include "train_options.h"  // TrainOptions, RunStatus

namespace sweep {

class Models;     // sweep/trainer.h
class ModelArgs;  // sweep/trainer.h

/// The run config a model factory is called for (the built-in models read all of it; the
/// public ModelArgs hands out only a model's keys).
const RunConfig& run_config_of(const ModelArgs& args);

/// Trains `cfg` on the ranks of `comm` (its size must equal dist.world_size) and, on
/// rank 0, writes the record; the model of kind cfg.model.kind comes from `models`.
/// Throws ConfigError for bad config or data (a kind `models` lacks), before anything is
/// written; other failures throw after the record is marked failed.
RunStatus train(const RunConfig& cfg, const TrainOptions& opt, Communicator& comm, const Models& models);

}  // namespace sweep
