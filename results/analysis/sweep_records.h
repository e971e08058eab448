// A sweep directory read back: every run's record, and for each run without a completed
// one what its partial record, its lock and its log say. Every reader of a sweep (report,
// compare of two sweeps, export, status) starts here.
#pragma once

#include <cmath>  // NAN
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
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

/// The last lines of a run's log (at most 15 lines, 4 KiB): enough to show an error and
/// what led to it without pasting a whole run; "" when `log` is missing or not a regular file.
std::string log_tail(const std::string& log);

/// The one rule by which the driver and every reader take a readable, digest-verified
/// record as the record of run directory `run_dir`: "" when it is; otherwise why not, and
/// the record is damaged (the driver moves it aside; readers count it as damaged, never as
/// what its status says). Where `run_dir` is named like a run id (runs/<id> of a sweep):
///   - the record names that run id;
///   - its config text hashes to that id (the id is XXH3-64 of the config the driver
///     wrote), and the config pairs it shows (train.lr, ...) agree with that text, so a
///     record cannot claim another run's settings;
///   - where the driver noted the digest of the record it accepted (runs/<id>/state), the
///     record has that digest: a record relabelled as an old, digest-less version, or
///     replaced by another valid one, is not the record the run completed with.
std::string record_problem(const std::string& run_dir, const Record& r);

/// What is wrong with the steps a record's rows name: none in a completed record, steps
/// that do not increase or start below 1, a step beyond its config's train.steps; "" when
/// none is. Every figure (objective, curves, compare) is read by step.
std::string steps_problem(const Record& r);

/// record_problem's rules that the record's own contents decide (its run id, its config),
/// without the last one (the digest the driver accepted, which runs/<id>/state holds).
std::string record_content_problem(const std::string& run_dir, const Record& r);

/// record_problem's last rule alone: "" when `accepted` (the digest runs/<id>/state notes)
/// is empty or is `digest`, the stored digest of a record of `schema_version`.
std::string accepted_digest_problem(const std::string& accepted, const std::string& digest, int64_t schema_version);

/// read_record(path), then record_problem() of the run directory that holds it: throws
/// RecordError ("PATH: damaged record: ...") for a record that is not its run's. For the
/// readers of one record (compare, reproduce).
Record read_run_record(const std::string& path);

/// For readers that compare evidence (`sweep compare` of two records): read_run_record of
/// `path`, or, when the run has no completed record but its partial one (record.h5.partial
/// beside `path`, or `path` itself ending in .partial), that partial record as of its
/// writer's last flush, unverified: a failed or stopped run's rows are where the evidence
/// is. `*unfinished` is then the run's word ("no completed record: the run is failed
/// (CAUSE)"), else "". A damaged completed record still throws RecordError.
Record read_run_record_or_partial(const std::string& path, std::string* unfinished);

/// The records of a sweep directory and what could not be read.
struct SweepRecords {
  std::vector<Record> runs;           ///< completed (or diverged) records, ordered by run id
  std::vector<std::string> problems;  ///< one sentence per run dir without a readable record
  std::vector<FailedRun> failed;      ///< every run that did not complete, diverged ones included
  double wall_time_s = -1;            ///< first config.yaml written to last record written; -1 unknown
  std::string search_log;             ///< <dir>/search.log of a search ("" for a grid)
  /// Points of points.tsv with no run directory yet: runs the driver has not started.
  std::vector<std::string> pending;
  /// (run id, its newest `sweep diagnose` verdict line) for each run that has one, in run
  /// id order (diagnosis_file.h: kept beside the record, never in it).
  std::vector<std::pair<std::string, std::string>> diagnoses;
};

/// The sweep's own name (the grid's `name`, which the driver gives each run and its record
/// keeps as sweep_id): the one most of `runs` name, the first in order among as many; ""
/// when none names one. A report made by hand is titled with it, not with the directory's name.
std::string sweep_name(const std::vector<Record>& runs);

/// The first line of `<dir>/points.tsv`, the driver's list of the points of the last grid
/// it ran here: one line per point, "<run id>\t<k=v k=v>".
inline constexpr const char* kPointsFileHead = "sweep-points 1";

/// Reads points.tsv back: (id, "k=v k=v"); empty when absent, of another version, or not a
/// regular file.
std::vector<std::pair<std::string, std::string>> read_points_file(const std::string& dir);

/// Reads `<dir>/runs/*/record.h5`. Missing or partial records become problems and
/// failed runs (with the status a partial record holds and the tail of the run's log).
/// A run whose partial record says running while a process holds its run.lock is a
/// running run (status "running", with its progress), not a problem; one that says
/// running with nobody holding the lock was stopped without finishing ("interrupted").
/// What load_sweep keeps of each record.
struct LoadOptions {
  /// Record::rank_step_time_s and rank_grad_norm, which comparing runs never reads (a
  /// tenth of a record's memory, a third of its allocations).
  bool per_rank_rows = true;
};

SweepRecords load_sweep(const std::string& dir, const LoadOptions& opt = {});

/// What a reader that reads a sweep in pieces keeps of a piece it has done with: moves
/// part's failed runs and problems into `into`, and of each record the run id, status and
/// verified flag (what pairing runs and counting them read); the rest of `part` is freed.
void keep_stubs(SweepRecords* part, SweepRecords* into);

class RecordCache;  // record_cache.h

/// load_sweep in pieces, for a reader that need not hold every record at once (compare of
/// two sweeps of 100,000 runs, export): load() ranges of ids(), then finish() once. A range
/// may be loaded again (export reads the sweep twice); what finish() adds does not count
/// it twice. load_sweep(dir) is load(0, ids().size()) then finish().
class SweepLoader {
 public:
  SweepLoader(const std::string& dir, const LoadOptions& opt = {});
  ~SweepLoader();
  SweepLoader(const SweepLoader&) = delete;
  SweepLoader& operator=(const SweepLoader&) = delete;
  /// The run directories' names, sorted.
  const std::vector<std::string>& ids() const { return ids_; }
  /// Every name is a run id (16 hex digits), so each readable record's run id is its
  /// directory's name (record_problem), and two sweeps pair their runs by name.
  bool named_by_run_id() const;
  /// Reads the run directories ids()[from, to): appends to out->runs, failed, problems.
  void load(size_t from, size_t to, SweepRecords* out);
  /// What follows the last load: the listing's problems (first), the wall time, the
  /// pending points, the search log, the order of out->runs, and the cache's note.
  void finish(SweepRecords* out);

 private:
  std::string dir_;
  LoadOptions opt_;
  std::unique_ptr<RecordCache> cache_;
  std::vector<std::filesystem::path> run_dirs_;
  std::vector<std::string> ids_, problems_;
  double first_ = -1, last_ = -1;
};

}  // namespace sweep
