// A run's status as one word: what a record says of itself (its /status attribute) and
// what a sweep directory says of a run (runs/<id>/state, harness/driver/sweep_dir.h). One
// enum for both, so no reader compares the words as strings: the words are read and
// written here only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sweep {

enum class RunStatus : uint8_t {
  pending,      ///< not started (a sweep directory's word; no record says it)
  running,      ///< a record being written, or a run the driver started
  completed,    ///< trained to its last step
  diverged,     ///< stopped by a non-finite loss or a spike limit (train.on_nan); never re-run
  stopped,      ///< stopped at a halving search's rung, its checkpoint kept
  failed,       ///< ended without finishing its record (a crash, a hang, a kill)
  interrupted,  ///< the driver was stopped (SIGINT/SIGTERM) while it ran
  damaged,      ///< a completed record that is missing, unreadable or fails its digest
  stale,        ///< a completed or stopped record whose program or data file changed since
};

/// The word, as written to state files and records.
const char* status_name(RunStatus s);
/// The status a word names; nullopt for any other word (a newer writer's, a damaged file's).
std::optional<RunStatus> parse_status(std::string_view word);
/// parse_status of a record's or state file's word where an unknown word is read as
/// `otherwise`.
RunStatus status_or(std::string_view word, RunStatus otherwise);

/// Whether `word` (a record's /status, a failed run's status) names `s`: how every reader
/// compares a status read as text, so that a misspelt status is a compile error.
bool status_is(std::string_view word, RunStatus s);

/// A record whose figures are the run's: completed, diverged, or stopped at a rung.
bool is_finished(RunStatus s);

}  // namespace sweep
