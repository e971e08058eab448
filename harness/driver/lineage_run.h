// `sweep resume` and `sweep fork`: a run of a sweep directory continued, inside that
// directory, from one of its checkpoints: on another layout of the same math (resume), or
// with changed keys (fork). The new run's record names its parent run and step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launch.h"      // LocalLaunch
#include "process.h"     // ProcessRunner
#include "run_config.h"  // RunConfig, FlatConfig

namespace sweep {

struct LineageOptions {
  std::string run_dir;  ///< <sweep dir>/runs/<id>: the parent
  /// resume: the layout to continue on (0 = as the parent had it, or derived); the global
  /// batch must hold, as for `sweep reproduce`.
  int64_t world_size = 0, accum = 0, micro_batch = 0;
  /// fork: the parent's checkpoint after this step, and the KEY=VALUE changes.
  int64_t from_step = 0;
  std::vector<std::string> set;
  LocalLaunch launch;          ///< sweep-train and mpiexec
  bool trainer_given = false;  ///< launch.train_binary was chosen (--trainer)
};

struct LineageResult {
  std::string out_dir;             ///< the run directory that trained
  bool completed = false;          ///< its record.h5 is there with status completed
  std::vector<std::string> lines;  ///< what to print
};

/// Continues the unfinished run in `opt.run_dir` from its newest complete checkpoint: in
/// place on its own layout, or as a new run of the sweep (its own id) on another one.
/// Throws ConfigError (exit 2, nothing written) for a run that completed, has no
/// checkpoint, was trained by a grid's program or in a container, or a layout that
/// breaks the global batch.
LineageResult resume_run(const LineageOptions& opt, ProcessRunner& runner);

/// The config of a fork of run `parent_id` (config `parent`) after step `step` with
/// `changes`, checked as a whole: a new train.lr is a step change of the parent's schedule
/// at `step` (train.lr_switch_step, train.lr_before_switch: what a grid run of these keys
/// trains bit for bit), and train.fork_parent and train.fork_step make its id its own, so a
/// fork is never a grid point. `sweep fork` and a pbt search's exploits both make theirs here.
RunConfig fork_config(const RunConfig& parent, const std::string& parent_id, int64_t step, const FlatConfig& changes);

/// Starts a new run of the sweep from the parent's checkpoint after `opt.from_step`, with
/// the parent's config changed by `opt.set`. Throws ConfigError for a missing checkpoint,
/// a bad or model key, or changes that leave the run id as it was.
LineageResult fork_run(const LineageOptions& opt, ProcessRunner& runner);

}  // namespace sweep
