// A run's state between steps as a checkpoint holds it: taken on every rank (snapshot)
// and put back when a run resumes (restore).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint.h"    // TrainState
#include "communicator.h"  // Communicator
#include "optimizer.h"     // LossScaler
#include "run_config.h"    // RunConfig
#include "step_record.h"   // StepRecorder
#include "zero_shards.h"   // ZeroShards

namespace sweep {

struct FlatParams;  // flat_params.h

/// The state after `step` of the run `run_id`: whole vectors, whatever the ZeRO stage, so
/// a run can resume on any layout. Collective: every rank helps gather; rank 0 writes it.
TrainState snapshot_state(int64_t step, const std::string& run_id, const RunConfig& cfg, Communicator& comm,
                          const FlatParams& flat, const ZeroShards& zero, const LossScaler& scaler,
                          const StepRecorder& rec);

/// The state after `step` for a rewind (train.spike_rewind_steps): as snapshot_state
/// takes it, without the record's rows; `updates` taken by then. Collective.
KeptState keep_state(int64_t step, int64_t updates, Communicator& comm, const FlatParams& flat, const ZeroShards& zero,
                     const LossScaler& scaler);

/// Puts `st` back: the parameters into `flat`, this rank's part of the moments into
/// `zero`, the loss scale, the CPU generator, and the record's rows so far (moved out of
/// `st`). Returns the optimizer updates taken so far (steps not skipped, less those a
/// rewind undid). Throws when `st` holds another
/// number of parameters than the model.
int64_t restore_state(TrainState& st, FlatParams& flat, ZeroShards& zero, LossScaler& scaler, StepRecorder& rec);

/// A rewind (train.spike_policy): puts the parameters, this rank's part of the moments,
/// the loss scale and the CPU generator of `st` back, mid-step (the parameters whole, or
/// with ZeRO 3 into this rank's shard and the gathered vector while it is there). The
/// record's rows stay as they are.
void rewind_state(const TrainState& st, FlatParams& flat, ZeroShards& zero, LossScaler& scaler);

/// The state a run of `cfg` resumes from, or nullopt: the checkpoint at `resume_from` (any
/// layout of the same math) when given, else with `resume` the newest of `out_dir`. A
/// checkpoint of another math is bad input (ConfigError: exit 2, nothing left behind),
/// naming what differs (math_differences) when the config.yaml of the run that wrote it
/// is beside its checkpoints/. `fork_from`, when given, is taken whatever its math. The
/// state's lineage is set to the resuming run's: the checkpoint's run as parent when it
/// is another run ("forked" from fork_from, else "resumed"), else the lineage it carried.
std::optional<TrainState> load_resume_state(const RunConfig& cfg, const std::string& resume_from, bool resume,
                                            const std::string& out_dir, const std::string& fork_from = "");

}  // namespace sweep
