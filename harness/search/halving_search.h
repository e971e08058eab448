// Running a halving search (search.h: kind halving): successive halving in Hyperband's
// brackets, the budget being train.steps. Every rung of every bracket runs at once, each
// run stopping after its rung's steps with a checkpoint (its record says `stopped`); the
// best 1/eta of a rung's trials, by `metric` at that rung's step, are promoted and resume
// from their checkpoints, so a promoted run's final record is the run trained straight
// through. Like a tpe search it keeps no state of its own: each decision is a function of
// the grid file and of the records (read as of the rung's step), so running it again after
// an interruption reaches the same decisions and goes on.
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "compare.h"       // truncate_record
#include "grid.h"          // SweepSpec, GridPoint
#include "halving_plan.h"  // check_halving, halving_trials
#include "record.h"        // Record
#include "sweep_dir.h"     // RunState
#include "sweep_run.h"     // SweepSummary

namespace sweep {

/// The value of `metric` of run `id` in `dir` after step `steps`, from its record (stopped
/// at or after that step, or completed); NaN when there is none, it diverged, failed or
/// the figure is not finite.
double rung_metric(const std::string& dir, const std::string& id, int64_t steps, const std::string& metric);

/// Whether run `id` in `dir` has a result for a rung of `steps` steps: a record stopped at
/// or after that step or completed (the metric may still be NaN), or a diverged one (the
/// worst). A failed run, or one that never ran, has none.
bool has_rung_result(const std::string& dir, const std::string& id, int64_t steps);

/// The one line a search run again prints when the program of some of its trials changed
/// since they ran (a run of theirs is stale: stopped at a rung or finished): "sweep:
/// train.py changed since 5 of 9 trials ran: they start over from step 0 (...)"; "" when
/// none did.
std::string stale_trials_line(const std::vector<HalvingTrial>& trials,
                              const std::unordered_map<std::string, RunState>& runs);

/// search.log's line for each trial, halving's and asha's alike: "trial J: INPUTS -> ID ...".
std::string trial_lines(const std::vector<HalvingTrial>& trials);

/// Runs `points` with the runs named in the map stopping after those steps.
using RunRung = std::function<SweepSummary(const std::vector<GridPoint>&, const std::map<std::string, int64_t>&)>;

/// Runs the search stage by stage (stage t runs rung t of every bracket that has one) and
/// writes <out>/search.log after each stage. Stops early when a stage was stopped by a
/// signal, and before ranking a stage in which a run failed for good (search.log and
/// stderr name it; the summary counts it failed). The summary counts runs, each once, not
/// the rungs they trained: 4 trials of one seed that train 7 rungs are 4 completed.
SweepSummary run_halving_search(const SweepSpec& spec, const std::vector<GridPoint>& points, const std::string& out_dir,
                                const RunRung& run_rung);

}  // namespace sweep
