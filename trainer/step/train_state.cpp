// A run's state between steps as a checkpoint holds it (train_state.h).
#include "train_state.h"

#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include "config_error.h"  // ConfigError
#include "flat_params.h"   // FlatParams
#include "spike_policy.h"  // SpikePolicy::undone_total
#include "text.h"          // join
#include "torch_compat.h"  // RNG state

namespace sweep {

KeptState keep_state(int64_t step, int64_t updates, Communicator& comm, const FlatParams& flat, const ZeroShards& zero,
                     const LossScaler& scaler) {
  const size_t n = size_t(flat.n);
  KeptState st;
  st.step = step;
  st.updates = updates;
  if (zero.stage == 3) {
    st.params = zero.gather_whole(comm, zero.param_shard);
  } else {
    st.params.resize(n);
    std::memcpy(st.params.data(), flat.params.data_ptr<float>(), n * sizeof(float));
  }
  if (zero.stage == 0) {
    st.m = zero.adam_m, st.v = zero.adam_v;
  } else {
    st.m = zero.gather_whole(comm, zero.adam_m);
    st.v = zero.gather_whole(comm, zero.adam_v);
  }
  st.loss_scale = scaler.scale;
  st.clean_steps = scaler.clean_steps;
  st.rng = compat::cpu_rng_state();
  return st;
}

TrainState snapshot_state(int64_t step, const std::string& run_id, const RunConfig& cfg, Communicator& comm,
                          const FlatParams& flat, const ZeroShards& zero, const LossScaler& scaler,
                          const StepRecorder& rec) {
  KeptState k = keep_state(step, 0, comm, flat, zero, scaler);
  TrainState st;
  st.run_id = run_id;
  st.math_id = math_id(cfg);
  st.step = step;
  st.params = std::move(k.params), st.m = std::move(k.m), st.v = std::move(k.v);
  st.loss_scale = k.loss_scale;
  st.clean_steps = k.clean_steps;
  st.rng = std::move(k.rng);
  st.metrics = rec.rows();
  st.checksums = rec.checksums();
  st.evals = rec.evals();
  return st;
}

int64_t restore_state(TrainState& st, FlatParams& flat, ZeroShards& zero, LossScaler& scaler, StepRecorder& rec) {
  const size_t n = size_t(flat.n);
  if (st.params.size() != n || st.m.size() != n || st.v.size() != n)
    throw std::runtime_error("checkpoint has " + std::to_string(st.params.size()) + " parameters, the model " +
                             std::to_string(n));
  rewind_state(st, flat, zero, scaler);
  rec.restore(std::move(st.metrics), std::move(st.checksums), std::move(st.evals));
  return rec.updates() - SpikePolicy::undone_total(st.decisions);
}

void rewind_state(const TrainState& st, FlatParams& flat, ZeroShards& zero, LossScaler& scaler) {
  const size_t n = size_t(flat.n);
  if (st.params.size() != n) throw std::runtime_error("rewind: the kept state does not fit the model");
  if (flat.params.defined()) std::memcpy(flat.params.data_ptr<float>(), st.params.data(), n * sizeof(float));
  if (zero.stage == 3)
    zero.param_shard.assign(st.params.begin() + long(zero.shard_begin),
                            st.params.begin() + long(zero.shard_begin + zero.shard_size));
  const long lo = zero.stage >= 1 ? long(zero.shard_begin) : 0;
  zero.adam_m.assign(st.m.begin() + lo, st.m.begin() + lo + long(zero.adam_m.size()));
  zero.adam_v.assign(st.v.begin() + lo, st.v.begin() + lo + long(zero.adam_v.size()));
  scaler.scale = st.loss_scale;
  scaler.clean_steps = st.clean_steps;
  compat::set_cpu_rng_state(st.rng);
}

namespace {

// The resuming run's lineage: the checkpoint's writer when that is another run.
std::optional<TrainState> with_lineage(std::optional<TrainState> st, const std::string& id, bool fork) {
  if (st && st->run_id != id) st->lineage = {fork ? "forked" : "resumed", st->run_id, st->step};
  return st;
}

}  // namespace

std::optional<TrainState> load_resume_state(const RunConfig& cfg, const std::string& resume_from, bool resume,
                                            const std::string& out_dir, const std::string& fork_from) {
  const std::string id = run_id(cfg), math = math_id(cfg);
  try {
    if (!fork_from.empty()) return with_lineage(load_checkpoint_at(fork_from, id, math, /*any_math=*/true), id, true);
    // elastic: any layout of the same math
    if (!resume_from.empty()) return with_lineage(load_checkpoint_at(resume_from, id, math), id, false);
    if (resume) return with_lineage(load_latest_checkpoint(out_dir, id, math), id, false);
    return std::nullopt;
  } catch (const CheckpointOfOtherMath& e) {
    // .../<run>/checkpoints/step_N/state.bin: the writer's config is <run>/config.yaml.
    namespace fs = std::filesystem;
    const fs::path config = fs::path(e.state_path).parent_path().parent_path().parent_path() / "config.yaml";
    std::string why = e.what();
    std::error_code ec;
    if (fs::is_regular_file(config, ec)) {
      try {
        const std::vector<std::string> keys = math_differences(load_run_config(config.string()), cfg);
        if (!keys.empty()) why += "; what differs from " + config.string() + ": " + join(keys, "; ");
      } catch (const std::exception&) {
        // An unreadable config: the refusal without the keys.
      }
    }
    throw ConfigError(why);
  }
}

}  // namespace sweep
