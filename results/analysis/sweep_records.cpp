#include "sweep_records.h"

#include <sys/stat.h>  // file times for the wall time

#include <algorithm>   // sort, max
#include <cstdio>      // snprintf
#include <cstdlib>     // strtod
#include <exception>   // std::exception for damaged records
#include <filesystem>  // listing runs/
#include <fstream>     // log tails, search.log
#include <iterator>    // istreambuf_iterator
#include <map>
#include <memory>  // unique_ptr
#include <set>
#include <sstream>       // config text lines
#include <system_error>  // error_code for non-throwing listing

#include "checksum.h"        // run_id_of_config
#include "diagnosis_file.h"  // newest_diagnosis
#include "parallel_for.h"    // cached records decoded, and chunks freed, on every core
#include "record_cache.h"    // RecordCache: records read before, not read again
#include "run_files.h"  // RunLock::holder (is a running record still being written), rank_log_path, accepted_record_digest
#include "run_status.h"  // status_is
#include "stall.h"       // stall_words
#include "text.h"        // printable, valid_utf8

namespace sweep {
namespace {

namespace fs = std::filesystem;

double mtime(const fs::path& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return -1;
  return double(st.st_mtim.tv_sec) + 1e-9 * double(st.st_mtim.tv_nsec);
}

// A run dir without a completed record: what its partial record says, else why not.
FailedRun describe_unfinished(const fs::path& run_dir, const std::string& problem) {
  FailedRun f;
  f.run_id = run_dir.filename().string();
  f.problem = problem;
  f.cause = problem;
  const fs::path rec = run_dir / "record.h5";
  std::error_code ec;
  if (!fs::exists(rec, ec) && !fs::exists(rec.string() + kPartialSuffix, ec)) {
    f.status = "missing";
  } else if (fs::exists(rec, ec)) {
    // A completed record that no longer reads or verifies: `sweep run` moves it aside
    // and runs the point again.
    f.status = "damaged";
  } else {
    try {
      RecordStatus st = read_record_status(rec.string());
      f.status = st.status.empty() ? "unreadable" : st.status;
      if (!st.failure.empty()) f.cause = st.failure;
      // A run that died between writing its final status and the rename: not complete.
      if (st.partial && (status_is(st.status, RunStatus::completed) || status_is(st.status, RunStatus::diverged))) {
        f.status = "failed";
        f.cause =
            "the run ended (status " + st.status + ") but its record was never completed: only " + st.path + " exists";
      }
      if (!st.run_id.empty()) f.run_id = st.run_id;
      if (st.partial && status_is(st.status, RunStatus::running)) {
        if (RunLock::holder(run_dir.string()).empty()) {
          f.status = "interrupted";
          f.cause = "its record says running, but no process holds " + (run_dir / "run.lock").string() +
                    ": the run stopped without finishing its record; `sweep run` resumes it";
        } else {
          f.problem.clear();  // a healthy run in progress is not a problem
          f.cause = "running";
          try {
            const RecordProgress p = read_partial_progress(rec.string());
            f.step = p.step, f.steps = p.steps, f.loss = p.loss;
            char buf[96];
            std::snprintf(buf, sizeof buf, ": step %lld of %lld, loss %.6g", static_cast<long long>(p.step),
                          static_cast<long long>(p.steps), p.loss);
            f.cause += p.step > 0 ? buf : ": no step recorded yet";
            f.cause += stall_words(p);  // a run that stopped advancing says so, as `sweep status` does
          } catch (const RecordError&) {
            f.cause += ": no step readable yet";  // before the first flush, or caught mid-update
          }
        }
      }
    } catch (const std::exception&) {
      f.status = "unreadable";
    }
  }
  // The driver's word decides, as it does for `sweep run` and `sweep status`: a run it
  // failed is failed (with its reason), whatever files its attempts left.
  const auto state = read_state_fields(run_dir.string());
  const auto said = [&](const char* key) {
    const auto it = state.find(key);
    return it == state.end() ? std::string() : it->second;
  };
  // The same for a run it stopped on a Ctrl-C: its attempt's partial record says failed
  // (the driver marks it so), but the run is interrupted, and the next `sweep run` resumes it.
  const std::string driver = said("state");
  if ((status_is(driver, RunStatus::failed) || status_is(driver, RunStatus::interrupted)) &&
      !status_is(f.status, RunStatus::running)) {
    f.status = driver;
    if (!said("detail").empty()) f.cause = said("detail");
  }
  f.log_tail = log_tail(rank_log_path(run_dir.string(), 0));
  return f;
}

bool id_like(const std::string& name) {
  return name.size() == 16 && name.find_first_not_of("0123456789abcdef") == std::string::npos;
}

/// The (section.key, value) pairs of a canonical run config's text: sections at column 0,
/// keys at column 2 (deeper maps left out), values as written.
std::map<std::string, std::string> config_text_pairs(const std::string& text) {
  std::map<std::string, std::string> out;
  std::string section, line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] != ' ') {
      section = line.substr(0, line.find(':'));
      continue;
    }
    if (line.size() < 3 || line[1] != ' ' || line[2] == ' ') continue;
    const size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    out[section + "." + line.substr(2, colon - 2)] = line.substr(colon + 2);
  }
  return out;
}

/// Whether two config values say the same: equal text (either may be in double quotes),
/// or numbers of equal value ("1e-3" and "0.001").
std::string unquoted(const std::string& v) {
  return v.size() >= 2 && v.front() == '"' && v.back() == '"' ? v.substr(1, v.size() - 2) : v;
}

bool same_value(const std::string& quoted_a, const std::string& quoted_b) {
  const std::string a = unquoted(quoted_a), b = unquoted(quoted_b);  // a program may keep YAML's quotes
  if (a == b) return true;
  char* ea = nullptr;
  char* eb = nullptr;
  const double x = std::strtod(a.c_str(), &ea), y = std::strtod(b.c_str(), &eb);
  return !a.empty() && !b.empty() && !*ea && !*eb && x == y;
}

}  // namespace

namespace {
// Enough of a log to show the error and what led to it, without pasting a whole run.
constexpr size_t kLogTailLines = 15;
constexpr size_t kLogTailBytes = 4096;
}  // namespace

std::string log_tail(const std::string& log) {
  std::string text = read_file_tail(log, kLogTailBytes + 1);            // a FIFO or a device: no tail
  if (text.size() > kLogTailBytes) text.erase(0, text.find('\n') + 1);  // the first line was cut
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) return text;
  size_t cut = text.size();
  for (size_t lines = 0; lines < kLogTailLines && cut != std::string::npos && cut > 0; ++lines)
    cut = text.rfind('\n', cut - 1);
  return cut == std::string::npos ? text : text.substr(cut + 1);
}

std::string steps_problem(const Record& r) {
  // The steps a record's rows name: what every figure is read by.
  if (r.steps.empty())
    return status_is(r.status, RunStatus::completed)
               ? "record.h5 is completed but holds no training step (a run records each step "
                 "it trained)"
               : "";
  for (size_t i = 1; i < r.steps.size(); ++i)
    if (r.steps[i].step <= r.steps[i - 1].step)
      return "record.h5's steps do not increase: step " + std::to_string(r.steps[i].step) + " follows step " +
             std::to_string(r.steps[i - 1].step) + " (row " + std::to_string(i + 1) + ")";
  if (r.steps.front().step < 1)
    return "record.h5's first step is " + std::to_string(r.steps.front().step) + " (steps count from 1)";
  const auto declared = r.config.find("train.steps");
  char* end = nullptr;
  const long long steps = declared == r.config.end() ? 0 : std::strtoll(declared->second.c_str(), &end, 10);
  if (steps > 0 && end && !*end && r.steps.back().step > steps)
    return "record.h5 records step " + std::to_string(r.steps.back().step) + ", beyond its config's train.steps " +
           std::to_string(steps);
  return "";
}

std::string record_content_problem(const std::string& run_dir, const Record& r) {
  const std::string name = fs::path(run_dir).filename().string();
  if (!id_like(name)) return "";
  if (r.run_id != name)
    return "record.h5 names run '" + printable(r.run_id) + "', not this run " + name +
           " (a training program must record the run id of its config: XXH3-64 of the config file's text)";
  if (run_id_of_config(r.config_yaml) != name)
    return "record.h5's config does not hash to its run id " + name +
           " (the config it holds is not the one the run was started with)";
  const auto pairs = config_text_pairs(r.config_yaml);
  for (const auto& [key, value] : r.config) {
    const auto it = pairs.find(key);
    // (Lists, maps and escaped strings are written differently in the two forms.)
    if (it == pairs.end() || it->second.find_first_of("[{\\") != std::string::npos) continue;
    if (!same_value(it->second, value))
      return "record.h5 shows " + printable(key) + " = " + printable(value) +
             ", but the config its run id names says " + printable(it->second);
  }
  return steps_problem(r);
}

std::string accepted_digest_problem(const std::string& accepted, const std::string& digest, int64_t schema_version) {
  if (accepted.empty() || digest == accepted) return "";
  return "record.h5 is not the record this run completed with: its digest is " +
         (digest.empty() ? std::string("missing") : printable(digest)) + ", the driver accepted " +
         printable(accepted) + " (schema version " + std::to_string(schema_version) + ")";
}

std::string record_problem(const std::string& run_dir, const Record& r) {
  if (std::string why = record_content_problem(run_dir, r); !why.empty()) return why;
  if (!id_like(fs::path(run_dir).filename().string())) return "";
  return accepted_digest_problem(accepted_record_digest(run_dir), r.digest, r.schema_version);
}

Record read_run_record(const std::string& path) {
  Record r;
  try {
    r = read_record(path);
  } catch (const RecordError& e) {
    // A run with no completed record: say what the run is, in the word every reader uses.
    const fs::path dir = fs::path(path).parent_path();
    std::error_code ec;
    if (fs::exists(path, ec) || !fs::is_directory(dir, ec)) throw;
    const FailedRun f = describe_unfinished(dir, e.what());
    if (f.status == "missing") throw;
    throw RecordError(path + ": no completed record: the run is " + f.status + " (" + f.cause +
                      "); nothing to read until `sweep run` completes it");
  }
  const std::string why = record_problem(fs::path(path).parent_path().string(), r);
  if (!why.empty()) throw RecordError(path + ": damaged record: " + why);
  return r;
}

Record read_run_record_or_partial(const std::string& path, std::string* unfinished) {
  unfinished->clear();
  std::string record = path;
  const std::string suffix = kPartialSuffix;
  if (is_partial_path(record)) record.resize(record.size() - suffix.size());
  std::error_code ec;
  const std::string partial = record + suffix;
  if (fs::exists(record, ec) || !fs::exists(partial, ec)) return read_run_record(record);
  if (const std::string why = regular_file_problem(partial); !why.empty()) throw RecordError(partial + ": " + why);
  Record r = read_record_unverified(partial);  // RecordError when it does not read at all
  const FailedRun f = describe_unfinished(fs::path(record).parent_path(), "");
  *unfinished = "no completed record: the run is " + f.status + (f.cause.empty() ? "" : " (" + f.cause + ")");
  return r;
}

std::string sweep_name(const std::vector<Record>& runs) {
  std::map<std::string, size_t> named;  // ordered: of names as common, the first
  for (const Record& r : runs)
    if (!r.sweep_id.empty() && valid_utf8(r.sweep_id)) ++named[r.sweep_id];
  std::string best;
  size_t most = 0;
  for (const auto& [name, n] : named)
    if (n > most) best = name, most = n;
  return best;
}

std::vector<std::pair<std::string, std::string>> read_points_file(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string path = dir + "/points.tsv";
  if (!regular_file_problem(path).empty()) return out;  // absent, a link to elsewhere, a FIFO: none
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line != kPointsFileHead) return out;
  while (std::getline(in, line)) {
    auto tab = line.find('\t');
    if (tab != std::string::npos) out.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return out;
}

SweepLoader::SweepLoader(const std::string& dir, const LoadOptions& opt)
    : dir_(dir), opt_(opt), cache_(std::make_unique<RecordCache>(dir)) {
  const fs::path runs_dir = fs::path(dir) / "runs";
  std::error_code ec;
  if (!fs::exists(runs_dir, ec)) return;  // a sweep that has not started any run yet
  fs::directory_iterator it(runs_dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) run_dirs_.push_back(it->path());
  }
  if (ec) problems_.push_back(runs_dir.string() + ": cannot list the run directories (" + ec.message() + ").");
  std::sort(run_dirs_.begin(), run_dirs_.end());
  ids_.reserve(run_dirs_.size());
  for (const auto& d : run_dirs_) ids_.push_back(d.filename().string());
}

SweepLoader::~SweepLoader() = default;

bool SweepLoader::named_by_run_id() const { return std::all_of(ids_.begin(), ids_.end(), id_like); }

void SweepLoader::load(size_t from, size_t to, SweepRecords* out) {
  to = std::min(to, run_dirs_.size());
  if (from >= to) return;
  // A record read and verified before, unchanged since, comes from the cache (decoded on
  // every core first): only the rule that reads runs/<id>/state (the digest the driver
  // accepted) is applied again.
  struct Found {
    FileIdentity file;
    bool regular = false, cached = false;
    Record record;
    double started = -1;   // config.yaml's modification time
    std::string accepted;  // a cached record's run: the digest the driver accepted
  };
  std::vector<Found> found(to - from);
  parallel_for(found.size(), [&](size_t k) {
    Found& f = found[k];
    const fs::path& d = run_dirs_[from + k];
    const std::string& id = ids_[from + k];
    f.record.path = (d / "record.h5").string();
    struct stat st {};
    f.regular = ::lstat(f.record.path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
    if (f.regular) f.file = file_identity(st);
    f.cached = f.regular && cache_->get(id, f.file, &f.record, opt_.per_rank_rows);
    if (f.cached && id_like(id)) f.accepted = accepted_record_digest(d.string());
    f.started = mtime(d / "config.yaml");
  });
  for (size_t k = 0; k < found.size(); ++k) {
    const fs::path& d = run_dirs_[from + k];
    const std::string path = (d / "record.h5").string(), &id = ids_[from + k];
    std::string problem;
    try {
      struct stat st {};
      const bool regular = found[k].regular, cached = found[k].cached;
      const FileIdentity file = found[k].file;
      Record r = std::move(found[k].record);
      if (cached) {
        problem = id_like(id) ? accepted_digest_problem(found[k].accepted, r.digest, r.schema_version) : "";
      } else {
        r = read_record(path);
        problem = record_problem(d.string(), r);
      }
      // record.h5 is a finished run's: any other status is not one the driver accepts.
      if (problem.empty() && !status_is(r.status, RunStatus::completed) && !status_is(r.status, RunStatus::diverged) &&
          !status_is(r.status, RunStatus::stopped))
        problem = "record.h5 has status '" + printable(r.status) +
                  "' (a finished record says completed, diverged or stopped)";
      if (problem.empty() && !cached && regular && ::lstat(path.c_str(), &st) == 0 && file_identity(st) == file)
        cache_->put(id, file, r);  // (not a file replaced while it was read)
      if (!opt_.per_rank_rows) r.rank_step_time_s = {}, r.rank_grad_norm = {};  // as a cached one has them
      if (problem.empty())
        out->runs.push_back(std::move(r));
      else
        problem = path + ": damaged record: " + problem;
    } catch (const RecordError& e) {
      problem = e.what();
    } catch (const std::exception& e) {
      // One damaged record must not hide the rest of the sweep.
      problem = path + ": damaged record (" + e.what() + "); re-run the point to replace it";
    }
    if (!problem.empty()) {
      out->failed.push_back(describe_unfinished(d, problem));
      if (!out->failed.back().problem.empty()) out->problems.push_back(problem);
    } else if (!status_is(out->runs.back().status, RunStatus::completed) &&
               !status_is(out->runs.back().status, RunStatus::stopped)) {
      // (A run a halving search stopped at a rung is a result of the search, not a failure.)
      const Record& r = out->runs.back();
      out->failed.push_back({r.run_id, r.status, r.failure, "", log_tail(rank_log_path(d.string(), 0))});
    }
    // (record.h5's modification time, as mtime() would give it: seconds, then nanoseconds.)
    const int64_t seconds = found[k].file.mtime_ns / 1000000000, nanos = found[k].file.mtime_ns % 1000000000;
    const double started = found[k].started,
                 ended = found[k].regular ? double(seconds) + 1e-9 * double(nanos) : mtime(path);
    if (started >= 0 && (first_ < 0 || started < first_)) first_ = started;
    if (ended > last_) last_ = ended;
  }
}

void SweepLoader::finish(SweepRecords* out) {
  out->problems.insert(out->problems.begin(), problems_.begin(), problems_.end());
  if (first_ >= 0 && last_ >= first_) out->wall_time_s = last_ - first_;
  if (const std::string note = cache_->note(); !note.empty()) std::fprintf(stderr, "sweep: %s\n", note.c_str());
  // The points of the last grid run here that have no run directory yet: counted like
  // `sweep status` counts them (pending), so every reader adds up to the same runs.
  const std::set<std::string> have(ids_.begin(), ids_.end());
  for (const auto& [id, values] : read_points_file(dir_))
    if (!have.count(id)) out->pending.push_back(id);
  // Each run's newest diagnosis: one lstat a run, a read only where there is one.
  for (const std::string& id : ids_) {
    const std::string run = (fs::path(dir_) / "runs" / id).string();
    struct stat st;
    if (::lstat((run + "/diagnose").c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (std::string line = newest_diagnosis(run); !line.empty()) out->diagnoses.emplace_back(id, std::move(line));
  }
  std::sort(out->diagnoses.begin(), out->diagnoses.end());
  // A search's decisions (a regular file of sane size; anything else is left out).
  std::error_code ec;
  const std::string log = (fs::path(dir_) / "search.log").string();
  if (fs::exists(log, ec) && regular_file_problem(log).empty() && fs::file_size(log, ec) < (8u << 20) && !ec) {
    std::ifstream in(log, std::ios::binary);
    out->search_log.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // (Almost always in order already: run directories are named by run id.)
  const auto by_id = [](const Record& a, const Record& b) { return a.run_id < b.run_id; };
  if (!std::is_sorted(out->runs.begin(), out->runs.end(), by_id))
    std::stable_sort(out->runs.begin(), out->runs.end(), by_id);
}

void keep_stubs(SweepRecords* part, SweepRecords* into) {
  for (Record& r : part->runs) {
    Record stub;
    stub.run_id = std::move(r.run_id), stub.status = std::move(r.status), stub.verified = r.verified;
    into->runs.push_back(std::move(stub));
  }
  for (auto& f : part->failed) into->failed.push_back(std::move(f));
  for (auto& p : part->problems) into->problems.push_back(std::move(p));
  // The rest freed on every core, as it was decoded (one thread freeing what two made
  // spends most of its time in the allocator).
  parallel_for(part->runs.size(), [&](size_t i) { part->runs[i] = Record(); });
  *part = SweepRecords();
}

SweepRecords load_sweep(const std::string& dir, const LoadOptions& opt) {
  SweepRecords out;
  SweepLoader loader(dir, opt);
  loader.load(0, loader.ids().size(), &out);
  loader.finish(&out);
  return out;
}

}  // namespace sweep
