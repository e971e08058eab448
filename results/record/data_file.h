// What identifies a data file in a run's record: its path, size, modification time and a
// hash of its contents. Hashing a large file at every run start would cost seconds, so the
// hash is cached per machine, keyed by what changes when the contents may have: size,
// mtime and ctime (a rewrite changes ctime even when the mtime is set back), device and
// inode. Torch-free: sweep-train records it, the driver checks completed runs against it.
#pragma once

#include <cstdint>
#include <string>

#include "cache_entry.h"  // sweep_cache_dir: where the callers keep the cache

namespace sweep {

struct DataFileId {
  std::string path;      ///< absolute, symbolic links resolved
  int64_t size = 0;      ///< bytes
  int64_t mtime_ns = 0;  ///< modification time, ns since the epoch
  std::string hash;      ///< "xxh3:" and 16 hex digits: XXH3-64 of the whole file
};

/// Identifies `path` (a regular file), hashing it unless the cache under `cache_dir`
/// ("" = no cache) holds its hash for the same (device, inode, size, mtime, ctime). The
/// cache is one tagged entry per data file (cache_entry.h); an unreadable, stale or forged entry
/// is ignored and rewritten, and a cache that cannot be written only costs the re-hash.
/// Throws std::runtime_error naming the file when it cannot be read.
DataFileId identify_data_file(const std::string& path, const std::string& cache_dir);

}  // namespace sweep
