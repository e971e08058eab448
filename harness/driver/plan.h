// `sweep plan`: the expanded grid as a table (only the columns that vary), each run's id,
// whether it is already done, and the cores it needs. Reads the sweep directory; never
// writes anything.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grid.h"
#include "sweep_dir.h"  // RunState

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

/// The data-file check of check_data_files, one point at a time (expand_grid_each).
class DataFileCheck {
 public:
  explicit DataFileCheck(const SweepSpec& spec);
  /// The next kept point, in expansion order.
  void add(const GridPoint& p);
  /// After the last point: throws the ConfigError of the first point whose file is missing
  /// (runs on this machine), else returns the notes (runs elsewhere).
  std::vector<std::string> finish();

 private:
  const SweepSpec& spec_;
  bool elsewhere_;
  size_t points_ = 0;
  std::map<std::string, std::string> seen_;  ///< path -> problem ("" = fine), one look per path
  /// Each note and the first error as the text before and after the point count, which
  /// is known only after the last point.
  std::vector<std::pair<std::string, std::string>> notes_;
  std::string first_error_, first_error_rest_;
};

/// Checks the data file every point names (data.path for data.kind tokens, text or hdf5)
/// before anything starts: a file missing or not regular is a ConfigError naming the grid
/// file, the key, the point and the path, for runs that start on this machine. Where
/// runs start elsewhere (Slurm, mpirun with hosts) a path this machine cannot see is
/// not an error: the returned notes say it could not be checked here.
std::vector<std::string> check_data_files(const SweepSpec& spec, const std::vector<GridPoint>& points);

/// The plan table, formed one point at a time: each point leaves its id, state, cores and
/// swept values (a few dozen bytes), not its config, so `sweep plan` of a million points
/// holds about a tenth of what the points themselves take.
class PlanTable {
 public:
  /// Reads `dir` (which may not exist) once: its runs' states and a halving search's log.
  PlanTable(const SweepSpec& spec, const std::string& dir);
  /// The next point, in expansion order.
  void add(const GridPoint& p);
  /// The table, with the counts and notes of `e` (whose points, for a halving search, are
  /// the ones added). Written to `out` as it forms when given (and "" returned), else returned.
  std::string render(const Expansion& e, std::FILE* out = nullptr, PlanCounts* counts = nullptr);

 private:
  const SweepSpec& spec_;
  std::string dir_;
  std::unordered_map<std::string, RunState> runs_;
  bool stops_runs_ = false,
       search_done_ = false;                 // a halving or pbt search, which stops runs on its way; its log says done
  std::map<std::string, std::string> base_;  ///< the base config's canonical values
  PlanCounts counts_;
  std::vector<std::string> keys_;  ///< swept keys, first-seen order
  std::unordered_map<std::string, uint16_t> key_index_;
  std::vector<std::string> first_;  ///< each key's value at the first point
  std::vector<char> varies_;
  std::vector<char> in_point_;  ///< scratch: the keys the current point sets
  /// Per point: id '\0', then per swept value its key's index (2 bytes) and value '\0'.
  std::string cells_;
  std::vector<size_t> row_end_;
  std::vector<RunStatus> state_;
  std::vector<int64_t> cores_;
  std::vector<std::string> stale_;  ///< "id: why", said after the table
};

/// The plan table of `e` against sweep directory `dir` (which may not exist).
std::string render_plan(const SweepSpec& spec, const Expansion& e, const std::string& dir,
                        PlanCounts* counts = nullptr);

}  // namespace sweep
