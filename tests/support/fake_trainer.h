// What the harness's stand-ins for sweep-train share (the sweep_run, local executor and
// Slurm executor tests): reading the command line the driver gave, and writing the
// one-step record a real run of that config would leave.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "record.h"      // RecordWriter
#include "run_config.h"  // load_run_config, run_id, to_yaml, to_flat

namespace sweep_test {

/// The argument after `flag` in `argv`; "" when the flag is absent or last.
inline std::string flag_value(const std::vector<std::string>& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "" : *(it + 1);
}

/// Writes `record_path`, a finished record of one step with `loss`, for the run config
/// at `config_path`: its run id, YAML and keys as sweep-train records them.
inline void write_run_record(const std::string& config_path, const std::string& record_path,
                             const std::string& status = "completed", const std::string& failure = "",
                             double loss = sweep::StepMetrics{}.loss, const std::string& sweep_id = "") {
  const sweep::RunConfig c = sweep::load_run_config(config_path);
  sweep::RecordHeader h;
  h.run_id = sweep::run_id(c);
  h.sweep_id = sweep_id;
  h.config_yaml = sweep::to_yaml(c);
  h.config = sweep::to_flat(c);
  sweep::RecordWriter w(record_path, h);
  sweep::StepMetrics m;
  m.step = 1;
  m.loss = loss;
  w.append_step(m);
  w.finish(status, failure);
}

}  // namespace sweep_test
