// One entry of sweep's per-machine cache (sweep_cache_dir()): a value that is slow to
// compute (a data file's hash, an image directory's digest) kept under a key that changes
// whenever the value may have (the stat fields of what was read), and vouched for by a
// SipHash-2-4 tag under the user's key (record_cache.h), so that an entry written by
// anyone without that key (a run's program, another user) is never taken.
//
// The file is five lines: the kind's magic, the subject (an absolute path), the key, the
// value and the tag. Reading never blocks (a FIFO planted at its name is no entry) and
// writing is best effort: a cache entry is only a shortcut.
#pragma once

#include <optional>
#include <string>

namespace sweep {

/// Where sweep keeps per-machine caches: $SWEEP_CACHE_DIR, else $XDG_CACHE_HOME/sweep
/// (absolute), else $HOME/.cache/sweep; "" when none is known (nothing is cached).
std::string sweep_cache_dir();

/// One kind of entry ("sweep-data-hash 2", "data") for one subject (an absolute path).
struct CacheEntry {
  /// The entry's file in `cache_dir` ("" = no cache: nothing is read or written), named by
  /// `prefix` and a hash of `subject`.
  CacheEntry(const std::string& cache_dir, const char* magic, const char* prefix, std::string subject);

  /// The value stored under `key`: nothing when there is no entry, it is of another kind,
  /// subject or key, or its tag is not the user's.
  std::optional<std::string> read(const std::string& key) const;

  /// Stores `value` under `key` (atomically replaced, not synced); best effort.
  void write(const std::string& key, const std::string& value) const;

 private:
  std::string tag(const std::string& key, const std::string& value) const;

  std::string dir_, file_, magic_, subject_;
};

}  // namespace sweep
