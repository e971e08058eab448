// Running an asha search (search.h: kind asha): asynchronous successive halving (Li et
// al., "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020), made
// deterministic. Rungs are a halving search's (min_steps ... train.steps, eta apart).
// Trials enter rung 0 in trial order. A rung takes its results in the order its trials
// entered it, never in the order they arrived: once the first n of them have results,
// the best floor(n/eta) of those n (ties: the lower trial number) enter the next rung, in
// rank order, if they have not already. A decision therefore depends on results that come
// earlier in a fixed order, and on nothing that is still running or was timed, so any
// launch.parallel, any arrival order and a driver started again after a kill reach the
// same decisions and the same records.
//
// Workers never wait for a whole rung, as synchronous halving's do: a free worker takes
// the first trial of the highest rung that is waiting to train, else the next trial not
// yet started. It waits only when neither exists, that is when a promotion waits for a
// result earlier in the order that is still running.
//
// search.log is rewritten from the records after every result: per rung, the results in
// the rung's order and the promotions they decided, then "done". Like halving's, it keeps
// no state of its own.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "grid.h"          // SweepSpec, GridPoint
#include "halving_plan.h"  // HalvingTrial
#include "sweep_run.h"     // SweepSummary, RunFeed

namespace sweep {

/// The decisions of an asha search over `trials` trials with `rung_steps` (the last is
/// train.steps), from `result(trial, rung)`: the trial's metric at that rung's step,
/// NaN for the worst (failed, diverged, not finite), nullopt while it has none.
struct AshaPlan {
  std::vector<std::vector<size_t>> entered;  ///< per rung: the trials in the order they entered it
  std::vector<size_t> taken;                 ///< per rung: how many of them have their result taken
  std::vector<std::string> lines;            ///< the decisions, rung by rung, for search.log
  bool done = false;                         ///< every trial that entered a rung has its result there
};
AshaPlan asha_decide(size_t trials, const std::vector<int64_t>& rung_steps, int64_t eta, bool maximize,
                     const std::string& metric, const std::function<std::optional<double>(size_t, size_t)>& result);

/// The metric of run `id` in `dir` at step `steps`: from its record when that went at
/// least so far (completed or stopped), else from a rung record a promotion moved aside
/// (record.h5.stopped-*); NaN when it diverged or the figure is not finite; nullopt when
/// no record of the run reached the step.
std::optional<double> asha_rung_result(const std::string& dir, const std::string& id, int64_t steps,
                                       const std::string& metric);

/// Runs `points` fed by `feed` (SweepRunOptions::feed) until it has nothing more.
using RunFed = std::function<SweepSummary(const std::vector<GridPoint>&, RunFeed&)>;

/// Runs the search and writes <out>/search.log as results come. Stops early on a stop
/// signal, and when a run failed for good (after the grid's retries): the decisions that
/// wait for its result are not taken, search.log and stderr name it and the summary
/// counts it failed; `sweep run` again retries it and goes on. The summary counts runs
/// once each, however many rungs they trained.
SweepSummary run_asha_search(const SweepSpec& spec, const std::vector<GridPoint>& points, const std::string& out_dir,
                             const RunFed& run_fed);

}  // namespace sweep
