#include "cache_entry.h"

#include <xxhash.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "hex.h"           // hex16
#include "record_cache.h"  // user_key, siphash24
#include "record_error.h"  // RecordError
#include "run_files.h"     // read_file_tail, replace_file

namespace fs = std::filesystem;

namespace sweep {
std::string sweep_cache_dir() {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  if (!env("SWEEP_CACHE_DIR").empty()) return env("SWEEP_CACHE_DIR");
  if (!env("XDG_CACHE_HOME").empty() && env("XDG_CACHE_HOME")[0] == '/') return env("XDG_CACHE_HOME") + "/sweep";
  if (!env("HOME").empty()) return env("HOME") + "/.cache/sweep";
  return "";
}

CacheEntry::CacheEntry(const std::string& cache_dir, const char* magic, const char* prefix, std::string subject)
    : dir_(cache_dir), magic_(magic), subject_(std::move(subject)) {
  if (!dir_.empty()) file_ = dir_ + "/" + prefix + "-" + hex16(XXH3_64bits(subject_.data(), subject_.size())) + ".txt";
}

std::string CacheEntry::tag(const std::string& key, const std::string& value) const {
  std::string why;
  const std::string k = user_key(&why);
  if (k.size() != 16) return "";  // no key: nothing is cached
  const std::string msg = magic_ + '\n' + subject_ + '\n' + key + '\n' + value + '\n';
  return hex16(siphash24(reinterpret_cast<const unsigned char*>(k.data()), msg.data(), msg.size()));
}

std::optional<std::string> CacheEntry::read(const std::string& key) const {
  if (file_.empty()) return std::nullopt;
  std::istringstream in(read_file_tail(file_, 1 << 16));  // a regular file only, never blocking
  std::string magic, subject, cached_key, value, cached_tag;
  if (!std::getline(in, magic) || magic != magic_ || !std::getline(in, subject) || subject != subject_ ||
      !std::getline(in, cached_key) || cached_key != key || !std::getline(in, value) || !std::getline(in, cached_tag) ||
      cached_tag.empty() || cached_tag != tag(key, value))
    return std::nullopt;
  return value;
}

void CacheEntry::write(const std::string& key, const std::string& value) const {
  const std::string t = file_.empty() ? "" : tag(key, value);
  if (t.empty()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  try {
    replace_file(file_, magic_ + '\n' + subject_ + '\n' + key + '\n' + value + '\n' + t + '\n', /*sync=*/false);
  } catch (const RecordError&) {
    // A cache entry is only a shortcut: the value stands without it.
  }
}

}  // namespace sweep
