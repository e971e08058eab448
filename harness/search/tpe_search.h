// Running a tpe search (search.h, tpe.h): the startup draws, then batch after batch of
// `search.parallel` trials proposed from the objectives of every earlier trial, each
// batch run by the sweep's own executor. The search keeps no state of its own: its
// trials are a pure function of the grid file and the records in the sweep directory, so
// running it again after an interruption replays every decision (the completed runs
// are skipped, the interrupted ones resumed) and goes on where it stopped.
#pragma once

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "grid.h"           // SweepSpec, GridPoint
#include "pareto.h"         // ParetoEntry
#include "record.h"         // Record
#include "search_metric.h"  // record_metric
#include "sweep_run.h"      // SweepSummary

namespace sweep {

/// One trial of the search as far as it went.
struct SearchTrial {
  std::vector<ConfigValue> values;   ///< one per key of search.space
  int64_t batch = 0;                 ///< 0 for the startup draws
  std::string source;                ///< "random" or "tpe (good G of N)"
  std::vector<std::string> run_ids;  ///< its runs (one per seed); none when excluded
  bool finished = false;             ///< every run has a completed or diverged record, or failed for good
  double loss = std::numeric_limits<double>::infinity();  ///< what TPE minimises (mode max negates)
  /// A Pareto search (SearchSpec::pareto): the mean over its runs of each metric and of
  /// each constraint's metric (NaN where a run has none), and how it is judged.
  std::vector<double> metric_values, constraint_values;
  ParetoEntry entry;
};

/// How a Pareto search judges a trial with these means (in the order of s.metrics and
/// s.constraints): each metric's loss (negated under max; +inf where not finite) and the
/// summed violation of its constraints.
ParetoEntry pareto_entry(const SearchSpec& s, const std::vector<double>& metric_values,
                         const std::vector<double>& constraint_values);

/// Every one of `metrics` of one run's record in `dir` (read once), NaN where run_metric
/// would give NaN.
std::vector<double> run_metrics(const std::string& dir, const std::string& id, const std::vector<std::string>& metrics);

/// The value of `metric` for one run's record in `dir`, or NaN when the run has no
/// completed record or the figure is not finite (a diverged run's included).
double run_metric(const std::string& dir, const std::string& id, const std::string& metric);

/// Runs every batch through `run_batch` (which runs the given points, skipping completed
/// ones) and writes <out>/search.log after each. Stops early when a batch was stopped by
/// a signal. Returns the summary of the whole search: runs completed now, runs that were
/// done before it started, and the runs failed at its end.
using RunBatch = std::function<SweepSummary(const std::vector<GridPoint>&)>;
SweepSummary run_tpe_search(SweepSpec spec, const std::string& out_dir, const RunBatch& run_batch);

/// The search.log of a tpe search: one line per decision with its inputs and run ids.
std::string tpe_log(const SweepSpec& spec, const std::vector<SearchTrial>& trials);

}  // namespace sweep
