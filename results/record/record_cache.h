// A sweep directory's cache of decoded records, <dir>/record-cache/<run id>: each completed
// record that a reader of the whole sweep (report, compare of two sweeps, export, the live
// report) read and verified, kept in a form that decodes ~50x faster than HDF5, so that a
// report over 100,000 records does not read 100,000 HDF5 files again.
//
// Like the index (harness/driver/sweep_index.h) it is derived and never the source of
// truth:
// - An entry is used only while record.h5 has the identity (device, inode, size,
//   modification and change time) it had when it was read; an edit, a copy over it or
//   `touch -d` after an edit moves the change time, and the record is read again.
// - Unlike the index's checksum, an entry's tag is keyed: SipHash-2-4 under a secret of the
//   user's own (user_key), over the run id, that identity and the XXH3-128 of the entry. An
//   entry written or edited by anyone who does not hold that key (a hand edit, a forged
//   entry with its checksums recomputed, another user's cache) fails its tag, and the
//   record is read and the entry written anew, with one line on stderr. A confined program
//   (sweep-confine) cannot write here: only its own run directory is writable to it.
// - A record changed less than kSettleS seconds before it was read is not entered (a write
//   in the same timestamp tick would leave its identity unchanged).
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace sweep {

struct Record;  // record.h

/// What identifies one version of a file: replaced or rewritten, one of these changes.
struct FileIdentity {
  uint64_t dev = 0, ino = 0;
  int64_t size = -1, mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileIdentity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns;
  }
};
FileIdentity file_identity(const struct stat& st);

/// A file whose identity changed less than this many seconds before it was read is not
/// cached: a write in the same timestamp tick would leave its identity unchanged.
inline constexpr int64_t kSettleS = 2;

/// True when the file of identity `f` last changed kSettleS or more seconds ago.
bool settled(const FileIdentity& f);

/// SipHash-2-4 of `data` under the 16-byte key `key` (Aumasson and Bernstein's keyed PRF).
uint64_t siphash24(const unsigned char key[16], const void* data, size_t n);

/// The user's secret for the caches' tags: 16 random bytes kept as hex in
/// ${XDG_STATE_HOME:-$HOME/.local/state}/sweep/key, made (mode 0600) on first use. Empty
/// when there is none to be had (no home, a key file that is not the user's own regular
/// file of mode 0600, not writable), with `*why` saying so.
std::string user_key(std::string* why);

/// The bytes of `r` as the cache keeps them (everything read_record returns but its path).
std::string encode_record(const Record& r);
/// Decodes encode_record's bytes into `*r`; false when they do not decode. Without
/// `per_rank_rows`, Record::rank_step_time_s and rank_grad_norm are skipped (left empty).
bool decode_record(const char* data, size_t n, Record* r, bool per_rank_rows = true);

/// <dir>/record-cache of one sweep directory, for one reader process.
class RecordCache {
 public:
  /// The cache of sweep directory `dir`; off (get misses, put does nothing) without a key.
  explicit RecordCache(const std::string& dir);
  /// Fills `*r` with the cached record of run `id` if its record.h5 has identity `now`
  /// (keeping r->path; per_rank_rows as decode_record's). Safe to call from several
  /// threads at once.
  bool get(const std::string& id, const FileIdentity& now, Record* r, bool per_rank_rows = true);
  /// Enters `r`, run `id`'s record read and verified from a file of identity `file`; too
  /// fresh a file (settled()) is not entered. Never throws: a cache that cannot be written
  /// is left as it is.
  void put(const std::string& id, const FileIdentity& file, const Record& r);
  /// One line for stderr when entries were refused (damaged, edited, another key's), or
  /// the key is unusable; "" otherwise.
  std::string note() const;
  size_t hits() const { return hits_; }

 private:
  std::string dir_, key_, why_off_;
  std::atomic<size_t> hits_{0}, refused_{0};
  bool writable_ = true;
};

}  // namespace sweep
