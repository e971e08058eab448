// A run's state between steps as a checkpoint holds it (train_state.h).
#include "train_state.h"

#include <cstring>
#include <stdexcept>
#include <utility>

#include "flat_params.h"   // FlatParams
#include "torch_compat.h"  // RNG state

namespace sweep {

TrainState snapshot_state(int64_t step, const std::string& run_id, const RunConfig& cfg, Communicator& comm,
                          const FlatParams& flat, const ZeroShards& zero, const LossScaler& scaler,
                          const StepRecorder& rec) {
  const size_t n = size_t(flat.n);
  TrainState st;
  st.run_id = run_id;
  st.math_id = math_id(cfg);
  st.step = step;
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
  std::memcpy(flat.params.data_ptr<float>(), st.params.data(), n * sizeof(float));
  const long lo = zero.stage >= 1 ? long(zero.shard_begin) : 0;
  zero.adam_m.assign(st.m.begin() + lo, st.m.begin() + lo + long(zero.adam_m.size()));
  zero.adam_v.assign(st.v.begin() + lo, st.v.begin() + lo + long(zero.adam_v.size()));
  scaler.scale = st.loss_scale;
  scaler.clean_steps = st.clean_steps;
  compat::set_cpu_rng_state(st.rng);
  rec.restore(std::move(st.metrics), std::move(st.checksums), std::move(st.evals));
  return rec.updates();
}

}  // namespace sweep
