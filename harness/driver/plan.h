// `sweep plan`: the expanded grid as a table (only the columns that vary), each run's id,
// whether it is already done, and the cores it needs. Reads the sweep directory; never
// writes anything.
#pragma once

#include <string>
#include <vector>

#include "grid.h"

namespace sweep {

/// Counts over the points of a plan.
struct PlanCounts {
  size_t total = 0;
  size_t done = 0;        ///< completed record present
  size_t diverged = 0;    ///< recorded as diverged (never re-run)
  size_t pending = 0;     ///< will be started by `sweep run` (includes failed and interrupted)
  size_t at_rung = 0;     ///< stopped at a rung of a halving search that has not finished
  int64_t max_cores = 0;  ///< the largest run
};

/// Swept keys whose value is not the same at every point, in first-seen order.
std::vector<std::string> varying_columns(const std::vector<GridPoint>& points, const RunConfig& base);

/// Checks the data file every point names (data.path for data.kind tokens, text or hdf5)
/// before anything starts: a file missing or not regular is a ConfigError naming the grid
/// file, the key, the point and the path, for runs that start on this machine. Where
/// runs start elsewhere (Slurm, mpirun with hosts) a path this machine cannot see is
/// not an error: the returned notes say it could not be checked here.
std::vector<std::string> check_data_files(const SweepSpec& spec, const std::vector<GridPoint>& points);

/// The plan table of `e` against sweep directory `dir` (which may not exist).
std::string render_plan(const SweepSpec& spec, const Expansion& e, const std::string& dir,
                        PlanCounts* counts = nullptr);

}  // namespace sweep
