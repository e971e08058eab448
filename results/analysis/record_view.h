// What `sweep show` says of one record, as (key, value) lines of plain text: what it is
// (verified, unverified, damaged, partial), its status, progress, the driver's word,
// lineage, figures, health, its own metrics, telemetry, summary, config and environment.
// The terminal prints the lines escaped (harness/cli), the served run page as a table
// (results/report/run_pages.h): one reading of a record for both, so they never disagree.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "record.h"      // Record
#include "run_health.h"  // HealthFlag

namespace sweep {

/// The sweep-level health flags (throughput_outlier) of run `run_id` of the sweep
/// directory `dir`, which need every run's figures (harness: sweep_level_flags).
using SweepFlagsFn = std::function<std::vector<HealthFlag>(const std::string& dir, const std::string& run_id)>;

/// One record as `sweep show` reads it.
struct RecordView {
  std::string path;               ///< the file read: record.h5 or record.h5.partial
  bool partial = false;           ///< only the partial record is there: the run has not completed
  Record record;                  ///< as read (unverified when partial or damaged)
  std::vector<HealthFlag> flags;  ///< the run's own flags, then the sweep's
  std::vector<std::pair<std::string, std::string>> lines;  ///< (key, value) in show's order, unescaped
};

/// Reads `path` (record.h5, a partial record, or a run directory holding either). A
/// damaged completed record is read unverified and says DAMAGED. Throws RecordError when
/// there is no record or it does not read at all. `sweep_flags` is asked only for a run
/// directory of a sweep (runs/<id>) whose record has an objective.
RecordView view_record(const std::string& path, const SweepFlagsFn& sweep_flags);

}  // namespace sweep
