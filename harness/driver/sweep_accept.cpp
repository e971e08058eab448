#include "sweep_accept.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include "config_error.h"  // ConfigError
#include "data_file.h"     // identify_data_file, sweep_cache_dir
#include "run_files.h"     // utc_now
#include "sweep_dir.h"     // read_run_state, run_dir
#include "sweep_index.h"   // SweepIndex: the runs' program.files without reading each record
#include "sweep_lock.h"    // SweepLock: no driver decides on the file while it changes
#include "text.h"          // printable, join

namespace fs = std::filesystem;

namespace sweep {

namespace {

/// The runs of `dir` whose state a changed program file decides (completed, stopped, or
/// stale already), with the "<hash> <path>" items of their record's program.files. Reads
/// the index and the records it does not vouch for; writes nothing.
std::vector<std::pair<std::string, std::vector<std::string>>> judged_runs(const std::string& dir) {
  SweepIndex index = SweepIndex::load(dir);
  std::vector<std::string> ids;
  std::error_code ec;
  for (fs::directory_iterator it(dir + "/runs", ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) ids.push_back(it->path().filename().string());
  std::sort(ids.begin(), ids.end());
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const std::string& id : ids) {
    const RunState st = read_run_state(run_dir(dir, id), &index);
    if (st.state != RunStatus::completed && st.state != RunStatus::stopped && st.state != RunStatus::stale) continue;
    const IndexedRecord* e = index.get(id);
    if (!e) continue;
    const auto files = e->inputs.find("program.files");
    if (files == e->inputs.end() || files->second.empty()) continue;
    try {
      out.emplace_back(id, parse_json_string_array(files->second));
    } catch (const ConfigError&) {
      // Its program.files does not read: no file of it can be accepted (the run is stale).
    }
  }
  return out;
}

/// The path the records name for `given`: the file relative to the current directory, or
/// else the one recorded path that ends with it (after any '..' of it: as a grid file
/// names it).
std::string recorded_path(const std::string& given, const std::set<std::string>& recorded, const std::string& dir) {
  std::string path = fs::absolute(given).lexically_normal().string();
  if (recorded.count(path)) return path;
  // As the grid names it (../examples/train.py), or by its name alone: the part after any
  // '..', which the end of a recorded path must be.
  fs::path rest;
  for (const fs::path& part : fs::path(given).lexically_normal())
    if (part == "..")
      rest.clear();
    else if (!part.empty() && part != "." && part != "/")
      rest /= part;
  const std::string tail = "/" + rest.string();
  std::vector<std::string> ends;
  for (const std::string& r : recorded)
    if (!fs::path(given).is_absolute() && r.size() > tail.size() &&
        r.compare(r.size() - tail.size(), tail.size(), tail) == 0)
      ends.push_back(r);
  if (ends.size() == 1) return ends.front();
  if (ends.size() > 1)
    throw ConfigError("--files '" + printable(given) + "': names several files of the runs' programs (" +
                      printable(join(ends, ", ")) + "); give its path");
  std::vector<std::string> names;
  names.reserve(recorded.size());
  for (const std::string& r : recorded) names.push_back(fs::path(r).filename().string());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (names.size() > 8) names.resize(8), names.push_back("...");
  throw ConfigError("--files '" + printable(given) + "'" + (path == given ? "" : " (" + printable(path) + ")") +
                    ": not a file of any run's program in " + printable(dir) +
                    (recorded.empty() ? std::string(" (no run records a program file)")
                                      : " (their files: " + printable(join(names, ", ")) + ")") +
                    "; expected a source file the runs' records hold (program.files)");
}

/// What `sweep accept` would append for `files`, judged now; throws ConfigError as
/// accept_changes says.
std::vector<Acceptance> planned(const std::string& dir, const std::vector<std::string>& files) {
  std::string problem;
  read_acceptances(dir, &problem);
  if (!problem.empty()) throw ConfigError(problem + " (move it aside to accept anew)");
  const AcceptedHashes accepted = accepted_hashes(dir);
  const auto runs = judged_runs(dir);
  std::set<std::string> recorded;
  for (const auto& [id, items] : runs)
    for (const std::string& item : items) recorded.insert(item.substr(item.find(' ') + 1));
  const std::string at = utc_now();
  std::vector<Acceptance> out;
  std::set<std::string> done;
  for (const std::string& given : files) {
    const std::string path = recorded_path(given, recorded, dir);
    if (!done.insert(path).second) continue;  // named twice
    std::string now;
    try {
      now = identify_data_file(path, sweep_cache_dir()).hash;
    } catch (const std::runtime_error& e) {
      throw ConfigError("--files '" + printable(given) + "': " + e.what() +
                        "; a file that is gone or unreadable cannot be accepted");
    }
    std::map<std::string, int64_t> older;  // recorded hash -> runs
    for (const auto& [id, items] : runs)
      for (const std::string& item : items) {
        const size_t space = item.find(' ');
        if (item.compare(space + 1, std::string::npos, path) != 0) continue;
        const std::string hash = item.substr(0, space);
        if (accepted.current(path, hash) != now) ++older[hash];
      }
    if (older.empty())
      throw ConfigError("--files '" + printable(given) + "' (" + printable(path) +
                        "): every run that holds it recorded (or accepted) its hash now, " + now +
                        "; nothing to accept");
    for (const auto& [hash, n] : older) out.push_back({at, path, hash, now, n});
  }
  return out;
}

}  // namespace

std::vector<Acceptance> accept_changes(const std::string& dir, const std::vector<std::string>& files) {
  std::error_code ec;
  if (!fs::is_directory(dir + "/runs", ec))
    throw ConfigError(printable(dir) + ": not a sweep directory (no runs/ in it)");
  if (files.empty()) throw ConfigError("--files: expected the source files whose change to accept");
  planned(dir, files);  // bad input is said before the lock is taken
  // A driver running now has judged its runs; it would not see the change.
  SweepLock lock(dir);
  std::vector<Acceptance> out = planned(dir, files);
  append_acceptances(dir, out);
  return out;
}

}  // namespace sweep
