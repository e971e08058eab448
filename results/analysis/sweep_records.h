// A sweep directory read back: every run's record, and for each run without a completed
// one what its partial record, its lock and its log say. Every reader of a sweep (report,
// compare of two sweeps, export, status) starts here.
#pragma once

#include <cmath>  // NAN
#include <cstdint>
#include <string>
#include <vector>

#include "record.h"  // Record

namespace sweep {

/// A run directory without a completed record, or whose record says it did not complete.
struct FailedRun {
  std::string run_id;    ///< the run directory's name
  std::string status;    ///< diverged | failed | running | missing | unreadable | damaged
  std::string cause;     ///< the record's failure attribute, else the reader's sentence
  std::string problem;   ///< the matching entry of SweepRecords::problems ("" for diverged)
  std::string log_tail;  ///< last lines of runs/<id>/logs/rank0.log ("" when there is none)
  /// A running run's progress, from its partial record as of the writer's last flush:
  /// the last recorded step (0 before the first), train.steps and that step's loss.
  int64_t step = -1, steps = -1;
  double loss = NAN;
};

/// The records of a sweep directory and what could not be read.
struct SweepRecords {
  std::vector<Record> runs;           ///< completed (or diverged) records, ordered by run id
  std::vector<std::string> problems;  ///< one sentence per run dir without a readable record
  std::vector<FailedRun> failed;      ///< every run that did not complete, diverged ones included
  double wall_time_s = -1;            ///< first config.yaml written to last record written; -1 unknown
  std::string search_log;             ///< <dir>/search.log of a search ("" for a grid)
};

/// Reads `<dir>/runs/*/record.h5`. Missing or partial records become problems and
/// failed runs (with the status a partial record holds and the tail of the run's log).
/// A run whose partial record says running while a process holds its run.lock is a
/// running run (status "running", with its progress), not a problem; one that says
/// running with nobody holding the lock was stopped without finishing ("interrupted").
SweepRecords load_sweep(const std::string& dir);

}  // namespace sweep
