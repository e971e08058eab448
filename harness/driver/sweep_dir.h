// The layout of a sweep directory and the small text files the driver keeps in it:
//   <dir>/points.tsv            the points of the grid last run (for `sweep status`)
//   <dir>/grid.yaml             the grid last run, command-line overrides applied (grid_overrides.h)
//   <dir>/sweep.lock            held by the running driver (sweep_lock.h)
//   <dir>/records.index         what reading each record found, by file identity (sweep_index.h)
//   <dir>/runs/<id>/config.yaml the run's resolved config
//   <dir>/runs/<id>/state       what the driver last knew about the run (versioned)
//   <dir>/runs/<id>/record.h5   the record (.partial while unfinished)
//   <dir>/runs/<id>/logs/       rank<r>.log per rank, launcher.log for mpiexec/srun
//   <dir>/runs/<id>/lineage     one line for a run `sweep resume`/`sweep fork` started:
//                               "forked from run P at step S: train.lr: ..." (`sweep status`)
//   <dir>/runs/<id>/rank<r>.failure  a note from a rank whose watchdog fired (trainer/comm/watchdog.h)
//   <dir>/runs/<id>/rank<r>.heartbeat  where rank r is among its collectives (results/record/heartbeat.h)
//   <dir>/runs/<id>/rank<r>.collectives  rank r's last collectives, written as it stopped (collective_ring.h)
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>  // time_t
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grid.h"
#include "launch_config.h"  // FailureClass
#include "run_files.h"      // utc_now
#include "run_status.h"     // RunStatus

namespace sweep {
struct Record;         // record.h
class SweepIndex;      // sweep_index.h
struct IndexedRecord;  // sweep_index.h
struct HealthFlag;     // run_health.h
}  // namespace sweep

namespace sweep {

/// The grid last run here, as it ran (SweepSpec::resolved).
inline constexpr const char* kGridFile = "grid.yaml";

/// Version of the state and points files; readers ignore files of another version.
inline constexpr int kStateVersion = 1;

std::string run_dir(const std::string& dir, const std::string& id);

/// Path of the record of run `id` in sweep directory `dir`.
std::string record_path(const std::string& dir, const std::string& id);

/// A hang of one attempt of a run, and where it was (repeated_hang.h's HangSite::text()).
struct AttemptHang {
  int attempt = 0;
  std::string site;  ///< "step 5 on rank 1"
};

/// What the driver knows about one run.
struct RunState {
  /// pending, running, completed, diverged, failed, interrupted, stopped (at a halving
  /// search's rung; a later rung moves its record aside and resumes it), damaged (a
  /// completed record that is missing, unreadable or fails its digest: the next
  /// `sweep run` moves it aside, never deleting it, and runs the point again) or stale (a
  /// completed or stopped record whose program or data file changed since, unless `sweep
  /// accept` took the change: kept aside the same way, and re-run from step 0)
  RunStatus state = RunStatus::pending;
  FailureClass failure = FailureClass::none;  ///< why the last attempt failed
  int attempts = 0;                           ///< attempts started, over all invocations
  std::string detail;                         ///< e.g. "killed by signal 9 (Killed)", "Slurm TIMEOUT"
  std::string updated;                        ///< UTC time of the last change, ISO 8601
  /// state "stopped" (a halving search's rung: record.h5 has status stopped, and a
  /// checkpoint is kept): the last step it trained. Read from the record, never stored.
  int64_t stopped_at = 0;
  /// The digest of the record the driver accepted when the run completed (or stopped at a
  /// rung); "" otherwise. Readers take only a record with this digest as the run's
  /// (record_problem in sweep_records.h).
  std::string digest;
  /// The attempts that hung where the cause located the hang (repeated_hang.h): a hang
  /// that repeats at the same site is deterministic and not retried. Over all invocations.
  std::vector<AttemptHang> hangs;
  /// state "stale": the files whose change made it so (program, data), as recorded.
  std::vector<std::string> changed;
  /// A verified record.h5 is there: the run is never started again.
  bool done() const { return state == RunStatus::completed || state == RunStatus::diverged; }
};

/// What `sweep run` does next with a point: the one rule that `sweep run` follows and that
/// `sweep plan` and `sweep status` report, decided from the run's state alone and what this
/// invocation asks of a halving search's rung.
enum class NextAction : uint8_t {
  run,          ///< start it, or resume it from its checkpoints (pending, failed, interrupted, running)
  promote,      ///< stopped below the rung asked: its rung record goes aside and it resumes
  start_over,   ///< damaged or stale: its record (and checkpoints) go aside, and it runs from step 0
  keep,         ///< completed, or stopped where it was asked to stop: nothing to do
  keep_failed,  ///< diverged: a verified record that is a failure of the sweep; never re-run
  await_rung,   ///< stopped at the rung of a halving search that has not decided yet (plan only)
};

/// What the invocation asks of a point beyond its config.
struct PointAsk {
  /// The step a halving search's rung stops the point at; 0 for its own train.steps.
  int64_t stop_at = 0;
  /// A halving search's plan: whether the search has finished (its log says "done"). A
  /// stopped run of a finished search is kept; of one still going, it awaits the search.
  /// Unset for a plain grid (a stopped run resumes) and for `sweep run` (stop_at says).
  std::optional<bool> search_finished;
};

NextAction next_action(const RunState& s, const PointAsk& ask = {});

/// When the run's current attempt began: its state's `updated` (written as the attempt
/// started), seconds since the epoch; 0 when that does not read as a UTC time.
std::time_t attempt_started(const RunState& s);
/// How long ago an attempt began, as `sweep status` and `sweep serve` say it: "1m12s into
/// attempt 1" (`now` - `started`, never below 0).
std::string attempt_age_words(std::time_t started, int attempt, std::time_t now);

/// Writes runs/<id>/state atomically.
void write_run_state(const std::string& run_dir, RunState s);
/// Reads runs/<id>/state; a missing or unreadable file gives "pending". The record is
/// the truth: when record.h5 is there it is read and verified (its digest), and its own
/// status wins over a stale state file; a state that says done without a verified
/// record becomes "damaged".
/// With `index`, a record whose file is the one the index entry read is not read again,
/// and what is read is entered (sweep_index.h).
RunState read_run_state(const std::string& run_dir, SweepIndex* index = nullptr);

/// Moves a run's record.h5 aside to record.h5.<why>-<UTC time>[-n] (never deleting it;
/// `why` is damaged or stale) and returns the new path, or "" when there was no record.h5.
std::string move_record_aside(const std::string& run_dir, const std::string& why = "damaged");

/// Moves aside everything a run's training left, for a run that starts over from step 0
/// (its record stale or damaged), never deleting any of it, all with one suffix
/// `why`-<UTC time>[-n]: record.h5 to record.h5.<suffix>, checkpoints/ to
/// checkpoints.<suffix>, record.h5.partial to record.h5.partial.<suffix>, and each earlier
/// rung record record.h5.stopped-T to record.h5.<suffix>.stopped-T (so the new training
/// carries on none of their rows). Returns the new names, comma-separated ("" when there
/// was nothing); throws std::runtime_error when one cannot be moved.
std::string move_run_aside(const std::string& run_dir, const std::string& why);

struct AcceptedHashes;  // program.h

/// Why a record's inputs no longer match, and the files that changed.
struct InputsChange {
  /// "its program file P (was OLD, now NEW) changed since the run", "its data file P
  /// changed since the run (OLD, now NEW)", ...; "" when they match, it names none, or
  /// they are not visible here.
  std::string why;
  std::vector<std::string> files;  ///< the changed files, as recorded (none for an added one)
};

/// What inputs_changed found of the files records name, by what they name: one look at a
/// sweep (a scan_runs) hashes the files its runs share once, and the next look sees them
/// as they are then (a search, stage after stage, sees an edit made meanwhile).
struct InputsLook {
  /// A recorded program.files or program.data -> each change said, and its path.
  std::map<std::string, std::pair<std::vector<std::string>, std::vector<std::string>>> files;
  std::map<std::string, std::vector<std::string>> added;  ///< program.trees and .files -> files added
};

/// What changed of the files a record names (environment program.files, program.trees,
/// program.data, or program.digest without them; data.file, data.eval_file), taking the
/// changes in `accepted` as none. `look`: shared by the runs of one look (none: its own).
InputsChange inputs_changed(const Record& r, const AcceptedHashes& accepted, InputsLook* look = nullptr);

/// inputs_changed(r, none accepted).why.
std::string data_changed(const Record& r);

/// Every run directory under <dir>/runs with its state, by run id. One directory listing.
/// Records are looked up in `index`, or in the sweep's own index (<dir>/records.index,
/// loaded, brought up to date and saved) when none is given. `cancel` (a server that is
/// stopping): when it is set, the scan ends before the next run's record, returns what it
/// has and saves nothing.
std::unordered_map<std::string, RunState> scan_runs(const std::string& dir, SweepIndex* index = nullptr,
                                                    const std::atomic<bool>* cancel = nullptr);

/// The runs whose records are the sweep's (completed, stale, diverged or stopped: what
/// load_sweep takes as its runs) that have an index entry, sorted by id, with their
/// sweep-level health flags (throughput_outlier), all from the index: no record is read.
struct FinishedRuns {
  std::vector<std::pair<std::string, const IndexedRecord*>> done;
  std::vector<std::vector<HealthFlag>> outliers;  ///< parallel to done
};
FinishedRuns finished_runs(const std::unordered_map<std::string, RunState>& runs, const SweepIndex& index);

/// Writes <dir>/points.tsv: every point's id and swept values.
void write_points_file(const std::string& dir, const std::vector<GridPoint>& points);

/// What a grid declared of its program: the command (its argv as the record's environment
/// `program` holds it) and how it ran, in the spelling of the record's environment:
/// `program.writes` (a JSON array, or "off" unconfined), `program.cwd` and
/// `program.pass_args` ("true" or "false").
struct DeclaredProgram {
  std::string argv_json, writes, cwd, pass_args;
};

/// The line of `<dir>/programs` that declares `p`.
std::string program_declaration(const DeclaredProgram& p);

/// Notes in `<dir>/programs` that a grid run in sweep directory `dir` declared `line` (a
/// program_declaration, or a declared_trainer line). `sweep reproduce` re-runs unasked
/// only a program its record's sweep directory noted, and runs it as noted there: a record
/// from elsewhere, or one written to name another command or another confinement, cannot
/// make it run one, or run one unconfined.
void note_declared_program(const std::string& dir, const std::string& line);

/// The line of `<dir>/programs` for a launch.trainer program: "trainer PATH", its path
/// with every link resolved, as the trainer records itself (environment `trainer`).
std::string declared_trainer(const std::string& path);

/// The declarations of `<dir>/programs` for the command `argv_json`, in the order the grid
/// runs noted them; none when no grid run declared it (or the file is from a version of
/// sweep that did not note how a program ran).
std::vector<DeclaredProgram> declared_program(const std::string& dir, const std::string& argv_json);

/// Whether `<dir>/programs` holds `line` exactly (a declared_trainer line).
bool program_declared(const std::string& dir, const std::string& line);

/// The decision log of a search (search.kind other than grid), written to <dir>/search.log
/// by the driver: a header naming kind, seed, samples and keys, then one line per decision
/// with its inputs and the run ids it made ("draw 3: train.lr=0.002 ... -> id id"). No
/// time or host in it: the same grid file gives the same log on every machine.
std::string search_log(const SweepSpec& spec, const std::vector<GridPoint>& points);

/// "train.lr=0.001 train.clip_norm=1.5": a draw's values of the search's keys, as written.
std::string search_inputs(const SearchSpec& s, const std::vector<ConfigValue>& values);

/// The run ids of `points` by their search_inputs: a draw's runs (one per seed).
std::map<std::string, std::vector<std::string>> search_runs(const SearchSpec& s, const std::vector<GridPoint>& points);

// Read back by read_points_file (sweep_records.h), which every reader shares.

}  // namespace sweep
