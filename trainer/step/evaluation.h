// The held-out loss: a forward pass over train.eval_batches global batches of held-out
// sequences, summed leaf by leaf in the canonical order like the training loss.
#pragma once

#include <cstdint>

#include "communicator.h"  // Communicator
#include "record.h"        // EvalRow
#include "run_config.h"    // RunConfig

namespace sweep {

class DeviceModel;  // device_model.h
class TokenSource;  // data_source.h
class Watchdog;     // watchdog.h
struct FlatParams;  // flat_params.h
struct LeafPlan;    // leaf_plan.h
struct ZeroShards;  // zero_shards.h

/// What evaluate() reads and moves; every reference outlives the call.
struct EvalInputs {
  const RunConfig& cfg;
  const TokenSource& held_out;  ///< the run's held-out sequences
  Communicator& comm;
  Watchdog& dog;           ///< beaten once per evaluation batch
  const ZeroShards& zero;  ///< ZeRO 3 gathers the parameters for the passes
  FlatParams& flat;        ///< the parameters the model views
  DeviceModel& model;
  LeafPlan& leaves;  ///< the leaves the held-out losses are summed over, like the training loss's
};

/// The held-out loss after `step`, over every target of every rank (collective). The
/// model is in eval mode for the passes and in train mode again on return.
EvalRow evaluate(int64_t step, const EvalInputs& in);

}  // namespace sweep
