// Running a sweep: lay out the sweep directory, run every point not yet completed,
// write the report.
#pragma once

#include <string>

#include "grid.h"
#include "process.h"

namespace sweep {

/// Settings of one `sweep run`.
struct SweepRunOptions {
  std::string out_dir;        ///< sweep directory; default sweep-out/<name>
  std::string train_binary;   ///< path of sweep-train
  bool quiet = false;         ///< no per-run progress lines
};

/// What happened to the points of a sweep.
struct SweepSummary {
  int completed = 0;  ///< ran now and completed
  int skipped = 0;    ///< already had a completed record
  int failed = 0;     ///< ended without a completed record, or diverged
  std::string report_path;
};

/// Path of the record of run `id` in sweep directory `dir`.
std::string record_path(const std::string& dir, const std::string& id);

/// Runs every point of `spec` through `runner`, then writes <out>/report.html.
SweepSummary run_sweep(const SweepSpec& spec, const std::vector<GridPoint>& points, const SweepRunOptions& opt,
                       ProcessRunner& runner);

/// Writes the HTML report of sweep directory `dir` to `out_path`.
void write_report(const std::string& dir, const std::string& title, const std::string& out_path);

}  // namespace sweep
