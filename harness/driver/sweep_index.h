// A sweep directory's index, <dir>/records.index: what reading and verifying each
// completed record found, keyed by the record file's identity (device, inode, size,
// modification and change times), so that `sweep run`'s skip check, `sweep plan` and
// `sweep status` do not read again the records that have not changed.
//
// The index is derived and never the source of truth. An entry is used only while the
// record file has the identity it had when it was read; anything that rewrites or replaces
// the file (an edit, a copy, `touch -d` to restore the old time: the change time moves)
// makes the entry miss, and the record is read and verified again. A missing index is
// built from the records; a damaged, truncated, hand-edited (its checksum line no longer
// matches) or foreign-version one is rebuilt, with one line on stderr saying so. An entry
// for a file changed in the same clock tick as it was read could hide the change, so a
// record changed less than kIndexSettleS seconds before it was read is not entered.
// `sweep verify DIR` reads and verifies every record whatever the index says.
#pragma once

#include <sys/stat.h>

#include <cmath>  // NAN
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include "record_cache.h"  // FileIdentity, file_identity, settled, kSettleS

namespace sweep {

struct Record;  // record.h

/// Version of the index file; an index of another version is rebuilt.
inline constexpr const char* kIndexHead = "sweep-index 3";
/// The index's name in a sweep directory.
inline constexpr const char* kIndexFile = "records.index";
/// A record whose change time is less than this many seconds before it was read is not
/// entered: a write in the same timestamp tick would leave its identity unchanged.
inline constexpr int64_t kIndexSettleS = kSettleS;

/// One verified record as the index keeps it: what its readers need without reading it.
struct IndexedRecord {
  FileIdentity file;
  std::string digest;  ///< its stored digest, which its contents were verified against
  std::string status;  ///< its status attribute (completed, diverged, stopped, ...)
  int64_t schema_version = 0;
  bool verified = false;  ///< false only for schema version 1 (no digest to check)
  int64_t last_step = 0;  ///< its last step (0 without steps)
  std::string problem;    ///< record_content_problem(): "" when it is its run directory's record
  /// The environment values data_changed() reads (program, data file and their hashes).
  std::map<std::string, std::string> inputs;
  /// Figures for `sweep status` (run_figures, run_health, throughput_peer).
  std::string objective_name;
  double objective = NAN, tokens_per_s_median = NAN;
  std::string health;            ///< run_health's names, space-separated
  std::string throughput_group;  ///< ThroughputPeer::group
  bool shared_cores = false;     ///< ThroughputPeer::shared_cores
  /// Read long enough after its file last changed to be saved (kIndexSettleS); a fresher
  /// entry serves this process only.
  bool settled = false;
};

/// The entry for `r`, read (and verified) now from a file of identity `file`, in
/// `run_dir`. Without `figures`, what a run's state needs only (no objective, health or
/// throughput figures: the reader keeps no index to remember them in).
IndexedRecord index_entry(const std::string& run_dir, const Record& r, const FileIdentity& file, bool figures = true);

/// A Record holding only what `e` keeps of the environment: for data_changed().
Record inputs_record(const IndexedRecord& e);

class SweepIndex {
 public:
  /// Reads <dir>/records.index. A missing index is empty; an unusable one is empty and
  /// note() says why in one line.
  static SweepIndex load(const std::string& dir);
  /// load(), then its note, if any, as one line on stderr ("sweep: DIR/records.index: ...").
  static SweepIndex load_saying(const std::string& dir);
  /// An index that remembers nothing and is saved whole (`sweep verify`).
  static SweepIndex empty(const std::string& dir);

  /// The entry of run `id` if its record file still has identity `now`.
  const IndexedRecord* find(const std::string& id, const FileIdentity& now) const;
  /// The entry of run `id`, whatever its file's identity now (what this process read).
  const IndexedRecord* get(const std::string& id) const {
    const auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : &it->second;
  }
  /// Enters `e` for run `id`; saved only when its file last changed kIndexSettleS or more
  /// before now.
  void put(const std::string& id, IndexedRecord e);
  /// Forgets run `id` (its record is gone or damaged).
  void forget(const std::string& id);
  /// Forgets every run that is not a key of `runs` (its directory is gone).
  template <class Map>
  void forget_except(const Map& runs) {
    for (auto it = entries_.begin(); it != entries_.end();)
      if (runs.count(it->first)) {
        ++it;
      } else {
        it = entries_.erase(it);
        changed_ = true;
      }
  }
  /// Writes the index back atomically when it changed; a directory that cannot be
  /// written (someone else's sweep, a read-only mount) keeps the old one, silently.
  void save();

  const std::string& note() const { return note_; }
  size_t size() const { return entries_.size(); }
  size_t hits() const { return hits_; }

 private:
  std::string dir_, note_;
  std::unordered_map<std::string, IndexedRecord> entries_;
  mutable size_t hits_ = 0;
  bool changed_ = false;
};

/// The text of an index holding `entries` (sorted by run id), checksum line included.
std::string index_text(const std::unordered_map<std::string, IndexedRecord>& entries);

}  // namespace sweep
