// Who may write a run directory, and how its files are opened, so that no crash, kill,
// second process or planted link can damage a record:
// - one writer per run directory: `RunLock`, an flock on <run>/run.lock held by the
//   process that writes the run (sweep-train's rank 0), taken before any file of the run
//   is opened; it goes away with that process however it ends;
// - a run directory entry that is a symbolic link or a special file is refused;
// - files are created exclusively and never through a symbolic link.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "record_error.h"  // RecordError

namespace sweep {

/// Writing the run directory is refused: an unsafe entry, or another writer.
class RunRefused : public RecordError {
 public:
  using RecordError::RecordError;
};

/// Another live process holds the run directory's lock.
class RunBusy : public RunRefused {
 public:
  using RunRefused::RunRefused;
};

/// An exclusive flock on the file at `path` (created if needed; never through a
/// symbolic link, RunRefused then or when it is not a regular file), taken without
/// waiting; the file then names its holder ("pid 1 on host, since 2024-...Z"). Returns the
/// fd, whose closing releases the lock, or -1 with `*holder` saying who has it.
/// RecordError for other failures, with the errno text. The one mechanism behind
/// RunLock and the sweep driver's lock.
int take_lock_file(const std::string& path, std::string* holder);

/// Who holds the lock file at `path`, "" when nobody does. Never blocks and never
/// creates the file.
std::string lock_file_holder(const std::string& path);

/// Where rank `rank`'s log of the run in `run_dir` is: logs/rank<r>.log, or for a run whose
/// ranks spanned hosts logs/<host>/rank<r>.log (sweep-rank --per-host). The flat path when
/// there is neither.
std::string rank_log_path(const std::string& run_dir, int rank);

/// Where the checkpoint after step `step` of the run in `run_dir` lives:
/// <run_dir>/checkpoints/step_<step, 10 digits>. It is complete once a DONE file is in it.
std::string checkpoint_dir(const std::string& run_dir, int64_t step);

/// The file in a checkpoint's directory that names what a fork continues from: the XXH3
/// checksums of its parameters, Adam's moments and RNG state, and its step (written before
/// DONE). Unlike state.bin (which holds each step's wall time) it is the same in every
/// directory that trained the same bits.
inline constexpr const char* kCheckpointDigestFile = "digest";

/// The digest of the complete checkpoint `dir` (checkpoint_dir): 16 hex digits of XXH3 of
/// its kCheckpointDigestFile; "" when it is incomplete or has none (an older trainer's).
std::string checkpoint_digest(const std::string& dir);

/// The complete checkpoints of the run in `run_dir` (step_N directories holding DONE), as
/// (step, directory), oldest first; empty when there are none.
std::vector<std::pair<int64_t, std::string>> complete_checkpoints(const std::string& run_dir);

/// The lock of one run directory (<run_dir>/run.lock).
class RunLock {
 public:
  /// Creates `run_dir` if needed, refuses unsafe entries (check_run_entries) and takes
  /// the lock. Throws RunBusy naming the holder (pid, host, start time) when another
  /// process has it, RecordError when the lock file cannot be opened safely.
  explicit RunLock(const std::string& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  /// "pid 123 on host, since 2024-...Z" of the process writing `run_dir`, or "" when
  /// nobody does. Never blocks and never creates the lock file.
  static std::string holder(const std::string& run_dir);

 private:
  int fd_ = -1;
};

/// Throws RunRefused when `dir` is there but is not a directory of its own (a symbolic
/// link planted in its place, a file): sweep never writes through one.
void check_real_directory(const std::string& dir);

/// Throws RunRefused when an entry of `run_dir` that sweep writes (record.h5 and its
/// .partial, run.lock, state, config.yaml, checkpoints/, logs/, tmp/ and every file in it) is
/// a symbolic link or a special file (FIFO, device, socket), or has the wrong kind (a
/// directory where a file belongs). Missing entries are fine.
void check_run_entries(const std::string& run_dir);

/// "" when `path` is a regular file (following links, as opening it would); otherwise
/// why not: "no such file", "is a directory", "is a FIFO (named pipe)", ... Never opens
/// the path, so a FIFO cannot block the caller.
std::string regular_file_problem(const std::string& path);

/// At most the last `max_bytes` of `path` when it is a regular file (following links);
/// "" when it is missing, unreadable or anything else (a FIFO, /dev/zero, a directory).
/// Opened non-blocking and checked after the open, so a file a program swaps in can
/// neither block the reader nor make it read without end.
std::string read_file_tail(const std::string& path, size_t max_bytes);

/// Opens `path` for writing, created exclusively (O_EXCL: fails when anything, even a
/// dangling symbolic link, is there) with mode 0644. Returns the fd; throws RecordError
/// with the errno text.
int create_exclusive(const std::string& path);

/// Writes all of `n` bytes to `fd`; throws RecordError naming `path` and the errno
/// text (ENOSPC: "No space left on device").
void write_all(int fd, const void* data, size_t n, const std::string& path);

/// fsync of a file or directory; errors are reported like write_all's.
void sync_path(const std::string& path);

/// runs/<id>/state, the driver's word on a run (harness/driver/sweep_dir.h, RunState): a
/// magic line "sweep-run-state 1", then "key: value" lines (state, failure, attempts,
/// updated, detail, digest, hangs), key by key. Empty when the file is missing, not a small
/// regular file, or not of this form.
std::map<std::string, std::string> read_state_fields(const std::string& run_dir);
inline constexpr const char* kStateMagicLine = "sweep-run-state 1";
inline constexpr const char* kAcceptedMagicLine = "sweep-accepted 1";
inline constexpr const char* kAcceptedDir = "accepted";

/// The digest of the record the driver accepted for run directory `run_dir`, or "" when it
/// noted none (a sweep directory of an older version, a run not completed by a driver). A
/// record.h5 whose digest differs (or that has none) is not the record the run ended with.
/// Read from the sweep's accepted/<id> (outside the run directory, which the run's program
/// may write), else from the digest line of runs/<id>/state (sweeps of earlier versions).
std::string accepted_record_digest(const std::string& run_dir);

/// What the driver accepted for a run, kept in <sweep>/accepted/<id>: the record's digest
/// and the hash of its bytes ("xxh3:<16 hex> <size>"), so a reader checks the bytes before
/// any HDF5 code parses them (a flipped bit can crash the HDF5 library itself).
struct AcceptedRecord {
  std::string digest, bytes;
};
/// <sweep>/accepted/<id> for a run directory <sweep>/runs/<id>; "" for any other directory.
std::string accepted_record_path(const std::string& run_dir);
/// What accepted_record_path holds; empty fields when it is missing or not of this form.
AcceptedRecord read_accepted_record(const std::string& run_dir);
/// Notes `digest` and the hash of run_dir/record.h5's bytes as accepted (atomically);
/// with an empty digest, removes the note. A run directory outside runs/ has none.
void write_accepted_record(const std::string& run_dir, const std::string& digest);
/// "xxh3:<16 hex> <size>" of the regular file `path`'s bytes; throws RecordError.
std::string file_bytes_hash(const std::string& path);

/// The XXH3-64 of what is left to read from `fd`, as "xxh3:" and 16 hex digits. Throws
/// std::runtime_error naming `path` when a read fails.
std::string hash_fd(int fd, const std::string& path);

/// Replaces `path` with `text` atomically: written to a temporary beside it, created
/// exclusively (nothing planted at that name is opened or followed), fsynced when `sync`,
/// then renamed over `path`. Throws RecordError; the temporary is gone either way.
void replace_file(const std::string& path, const std::string& text, bool sync);

/// The current UTC time as 2024-01-31T12:00:00Z.
std::string utc_now();

}  // namespace sweep
