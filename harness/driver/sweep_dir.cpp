#include "sweep_dir.h"

#include <fcntl.h>  // AT_FDCWD
#include <stdio.h>  // renameat2, RENAME_NOREPLACE
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "accepted_changes.h"  // accepted_hashes: changes `sweep accept` recorded
#include "atomic_file.h"       // write_file_atomically
#include "data_file.h"         // identify_data_file, sweep_cache_dir
#include "parallel_for.h"      // run directories read on every core
#include "program.h"           // program_digest, parse_json_string_array, added_files
#include "record.h"            // read_record, RecordError
#include "run_health.h"        // throughput_outliers: finished_runs' sweep-level flags
#include "sweep_index.h"       // SweepIndex
#include "sweep_records.h"     // record_problem, accepted_digest_problem
#include "text.h"              // join, printable

namespace fs = std::filesystem;

namespace sweep {
namespace {
const char* kProgramsMagic = "sweep-programs 2";

/// The lines of `<dir>/programs` after its magic line; none when it is missing or not ours
/// (an older file, whose lines name a command without how it ran, counts as none).
std::vector<std::string> declared_programs(const std::string& dir) {
  std::vector<std::string> lines;
  if (!regular_file_problem(dir + "/programs").empty()) return lines;
  std::ifstream in(dir + "/programs");
  std::string line;
  if (!std::getline(in, line) || line != kProgramsMagic) return lines;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(line);
  return lines;
}

/// A line of `<dir>/programs` for a grid's program, read back; nullopt for a trainer's
/// line or one that does not parse.
std::optional<DeclaredProgram> parse_declaration(const std::string& line) {
  if (line.empty() || line[0] != '[') return std::nullopt;
  std::vector<std::string> f;
  try {
    f = parse_json_string_array(line);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (f.size() != 4) return std::nullopt;
  return DeclaredProgram{f[0], f[1], f[2], f[3]};
}
}  // namespace

std::string run_dir(const std::string& dir, const std::string& id) { return dir + "/runs/" + id; }
std::string record_path(const std::string& dir, const std::string& id) { return run_dir(dir, id) + "/record.h5"; }

void write_run_state(const std::string& dir, RunState s) {
  check_real_directory(dir);  // never through a link planted in the run's place
  if (s.updated.empty()) s.updated = utc_now();
  std::string detail = s.detail;
  for (char& c : detail)
    if (c == '\n' || c == '\r') c = ' ';
  std::ostringstream o;
  o << kStateMagicLine << "\n"
    << "state: " << status_name(s.state) << "\n"
    << "failure: " << failure_class_name(s.failure) << "\n"
    << "attempts: " << s.attempts << "\n"
    << "updated: " << s.updated << "\n"
    << "detail: " << detail << "\n";
  // The attempts that hung, and where: "hangs: attempt 1 at step 5 on rank 1; attempt 2 at ...".
  if (!s.hangs.empty()) {
    o << "hangs: ";
    for (size_t i = 0; i < s.hangs.size(); ++i)
      o << (i ? "; " : "") << "attempt " << s.hangs[i].attempt << " at " << s.hangs[i].site;
    o << "\n";
  }
  const bool accepted = !s.digest.empty() && is_finished(s.state);
  if (accepted) o << "digest: " << s.digest << "\n";
  // What the driver accepted, also outside the run directory (which the run's program may
  // write): accepted/<id>, with the hash of the record's bytes. Gone while it runs again.
  write_accepted_record(dir, accepted ? s.digest : "");
  write_file_atomically(dir + "/state", o.str());
}

std::time_t attempt_started(const RunState& s) {
  struct tm t {};
  const char* end = strptime(s.updated.c_str(), "%Y-%m-%dT%H:%M:%SZ", &t);
  return end && *end == '\0' ? timegm(&t) : 0;
}

std::string attempt_age_words(std::time_t started, int attempt, std::time_t now) {
  const long long s = std::max<long long>(0, static_cast<long long>(now - started));
  return (s >= 60 ? std::to_string(s / 60) + "m" : std::string()) + std::to_string(s % 60) + "s into attempt " +
         std::to_string(attempt);
}

NextAction next_action(const RunState& s, const PointAsk& ask) {
  switch (s.state) {
    case RunStatus::completed:
      return NextAction::keep;
    case RunStatus::diverged:
      return NextAction::keep_failed;
    case RunStatus::damaged:
    case RunStatus::stale:
      return NextAction::start_over;
    case RunStatus::stopped:
      // A finished search's decision stands; one still going decides at its next rung; a
      // rung that asks for no more steps than it trained keeps it; otherwise (a later
      // rung, or a plain grid training to train.steps) it resumes from its checkpoint.
      if (ask.search_finished) return *ask.search_finished ? NextAction::keep : NextAction::await_rung;
      return ask.stop_at > 0 && s.stopped_at >= ask.stop_at ? NextAction::keep : NextAction::promote;
    case RunStatus::pending:
    case RunStatus::running:
    case RunStatus::failed:
    case RunStatus::interrupted:
      break;
  }
  return NextAction::run;
}

void note_declared_program(const std::string& dir, const std::string& argv_json) {
  std::vector<std::string> lines = declared_programs(dir);
  if (std::find(lines.begin(), lines.end(), argv_json) != lines.end()) return;
  lines.push_back(argv_json);
  std::string text = std::string(kProgramsMagic) + "\n";
  for (const std::string& l : lines) text += l + "\n";
  write_file_atomically(dir + "/programs", text);
}

std::string declared_trainer(const std::string& path) {
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(path, ec);
  return "trainer " + (ec ? path : real.string());
}

std::string program_declaration(const DeclaredProgram& p) {
  return json_string_array({p.argv_json, p.writes, p.cwd, p.pass_args});
}

std::vector<DeclaredProgram> declared_program(const std::string& dir, const std::string& argv_json) {
  std::vector<DeclaredProgram> out;
  for (const std::string& line : declared_programs(dir))
    if (auto d = parse_declaration(line); d && d->argv_json == argv_json) out.push_back(*d);
  return out;
}

bool program_declared(const std::string& dir, const std::string& line) {
  const std::vector<std::string> lines = declared_programs(dir);
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

namespace {

/// What read_run_state reads of a run directory before it looks at the index: its state
/// file and record.h5's identity. Safe to read for many runs at once.
struct RunFiles {
  std::map<std::string, std::string> fields;
  bool have_record = false;
  struct stat record {};
};

RunFiles read_run_files(const std::string& dir) {
  RunFiles f;
  f.fields = read_state_fields(dir);
  f.have_record = ::lstat((dir + "/record.h5").c_str(), &f.record) == 0;
  return f;
}

RunState run_state_of(const std::string& dir, const RunFiles& files, SweepIndex* index, const AcceptedHashes& accepted,
                      InputsLook* look);

}  // namespace

RunState read_run_state(const std::string& dir, SweepIndex* index) {
  // The sweep directory's accepted changes (`sweep accept`): <sweep>/runs/<id> is `dir`.
  const AcceptedHashes accepted = accepted_hashes(fs::path(dir).parent_path().parent_path().string());
  return run_state_of(dir, read_run_files(dir), index, accepted, nullptr);
}

namespace {

/// The "hangs:" line of a state file; an item not of the form "attempt N at SITE" is left out.
std::vector<AttemptHang> parse_hangs(const std::string& line) {
  std::vector<AttemptHang> out;
  size_t from = 0;
  while (from < line.size()) {
    size_t end = line.find("; ", from);
    if (end == std::string::npos) end = line.size();
    const std::string item = line.substr(from, end - from);
    from = end + 2;
    int attempt = 0, at = 0;
    if (std::sscanf(item.c_str(), "attempt %d at %n", &attempt, &at) == 1 && at > 0 && size_t(at) < item.size())
      out.push_back({attempt, item.substr(size_t(at))});
  }
  return out;
}

RunState run_state_of(const std::string& dir, const RunFiles& files, SweepIndex* index, const AcceptedHashes& accepted,
                      InputsLook* look) {
  RunState s;
  for (const auto& [k, v] : files.fields) {
    if (k == "state")
      s.state = status_or(v, RunStatus::pending);
    else if (k == "failure")
      s.failure = failure_class_from(v);
    else if (k == "attempts")
      s.attempts = std::atoi(v.c_str());
    else if (k == "updated")
      s.updated = v;
    else if (k == "detail")
      s.detail = v;
    else if (k == "digest")
      s.digest = v;
    else if (k == "hangs")
      s.hangs = parse_hangs(v);
  }
  // The digest kept outside the run directory, where the run's program cannot write, wins.
  if (const AcceptedRecord a = read_accepted_record(dir); !a.digest.empty()) s.digest = a.digest;
  // The record is the truth: a driver killed between the rename and its state write
  // leaves a stale "running"; a record deleted, truncated or changed after completion
  // leaves a stale "completed".
  const std::string id = fs::path(dir).filename().string();
  if (files.have_record) {
    // What the record says, from the index while the file is the one it read.
    const FileIdentity file = file_identity(files.record);
    const IndexedRecord* e = index ? index->find(id, file) : nullptr;
    IndexedRecord read;
    try {
      if (!e) {
        read = index_entry(dir, read_record(dir + "/record.h5"), file, index != nullptr);
        e = &read;
        if (index) index->put(id, read);
      }
      const RunStatus recorded = status_or(e->status, RunStatus::damaged);
      s.state = is_finished(recorded) ? recorded : RunStatus::damaged;
      if (s.state == RunStatus::stopped) s.stopped_at = e->last_step;
      if (s.state == RunStatus::diverged) s.failure = FailureClass::diverged;
      if (s.state == RunStatus::damaged) s.detail = "record.h5 has status '" + e->status + "'";
      std::string why = e->problem;
      if (why.empty()) why = accepted_digest_problem(s.digest, e->digest, e->schema_version);
      if (!why.empty()) s.state = RunStatus::damaged, s.detail = why;
      // A stopped run too: a halving search must not rank, or resume, a rung trained by a
      // program that has changed since.
      if (s.state == RunStatus::completed || s.state == RunStatus::stopped) {
        InputsChange c = inputs_changed(inputs_record(*e), accepted, look);
        if (!c.why.empty())
          s.state = RunStatus::stale, s.detail = c.why, s.changed = std::move(c.files), s.stopped_at = 0;
      }
    } catch (const RecordError& err) {
      s.state = RunStatus::damaged;
      s.detail = err.what();
      if (index) index->forget(id);
    } catch (const std::bad_alloc&) {
      // A record that asks for more memory than there is: damaged, and the rest of the
      // sweep goes on (one bad file must not wedge every `sweep run` and `sweep status`).
      s.state = RunStatus::damaged;
      s.detail = dir + "/record.h5: reading it needs more memory than there is; the record is damaged";
      if (index) index->forget(id);
    }
  } else if (s.done()) {
    if (index) index->forget(id);
    s.detail = std::string("recorded as ") + status_name(s.state) + " but record.h5 is gone";
    s.state = RunStatus::damaged;
  }
  return s;
}

/// program_digest of a recorded program's argv (its JSON), once per driver: a program's
/// files (an interpreter among them) are hashed once, however many runs it made.
std::string current_program_digest(const std::string& json, std::vector<std::string>* files) {
  static std::map<std::string, std::pair<std::string, std::vector<std::string>>> known;
  auto it = known.find(json);
  if (it == known.end()) {
    std::vector<std::string> argv;
    try {
      argv = parse_json_string_array(json);
    } catch (const std::exception&) {
      argv.clear();
    }
    // A path that is not here (a compute node's): the run itself would say so.
    const bool visible = !argv.empty() && std::all_of(argv.begin(), argv.end(), [](const std::string& a) {
      std::error_code ec;
      return a.find('/') == std::string::npos || fs::exists(a, ec);
    });
    const std::string digest = visible ? program_digest(argv) : "";
    it = known.emplace(json, std::make_pair(digest, program_files(argv))).first;
  }
  *files = it->second.second;
  return it->second.first;
}

}  // namespace

std::string data_changed(const Record& r) { return inputs_changed(r, AcceptedHashes{}).why; }

InputsChange inputs_changed(const Record& r, const AcceptedHashes& accepted, InputsLook* look) {
  InputsLook own;
  if (!look) look = &own;
  // The program (a grid's program:), as it was digested for the record: a changed script
  // trains other bits, like a changed data file.
  const std::string program = r.env("program"), digest = r.env("program.digest");
  // Each source file and data file with its hash (program.files, program.data): the one
  // that changed is named. Each answer is looked at once per look however many runs
  // share it; what does not parse is said as such.
  const auto looked_at =
      [&](const std::string& recorded,
          const std::string& env_key) -> const std::pair<std::vector<std::string>, std::vector<std::string>>& {
    auto it = look->files.find(recorded);
    if (it == look->files.end()) {
      std::vector<std::string> texts, paths;  // each change said, and its file
      try {
        for (const FileChange& c : changed_files(recorded, accepted))
          texts.push_back(c.text()), paths.push_back(c.path);
      } catch (const ConfigError& e) {
        texts = {"(" + env_key + " does not read: " + e.what() + ")"};
      }
      it = look->files.emplace(recorded, std::make_pair(std::move(texts), std::move(paths))).first;
    }
    return it->second;
  };
  for (const auto& [key, what] : {std::pair<std::string, std::string>{"program.files", "program file"},
                                  std::pair<std::string, std::string>{"program.data", "data file"}}) {
    const std::string recorded = r.env(key);
    if (recorded.empty()) continue;
    const auto& [changed, paths] = looked_at(recorded, key);
    if (!changed.empty())
      return {"its " + what + (changed.size() > 1 ? "s " : " ") + join(changed, ", ") + " changed since the run",
              paths};
  }
  // A file added to a directory or glob of program.files since the run.
  if (const std::string trees = r.env("program.trees"); !trees.empty()) {
    const std::string cache_key = trees + "\n" + r.env("program.files");
    auto it = look->added.find(cache_key);
    if (it == look->added.end()) {
      std::vector<std::string> added;
      try {
        added = added_files(trees, r.env("program.files"));
      } catch (const ConfigError& e) {
        added = {"(program.trees does not read: " + std::string(e.what()) + ")"};
      }
      it = look->added.emplace(cache_key, std::move(added)).first;
    }
    if (!it->second.empty()) return {"its program files changed since the run: " + join(it->second, ", "), {}};
  }
  // Without program.files (records of before it), the digest of argv's files.
  if (!program.empty() && !digest.empty() && r.env("program.files").empty()) {
    std::vector<std::string> files;
    const std::string now = current_program_digest(program, &files);
    if (!now.empty() && now != digest) {
      std::string names;
      for (const auto& f : files) names += (names.empty() ? "" : ", ") + printable(f);
      return {"its program changed since the run (" + digest + ", now " + now + "; its files: " + names + ")", files};
    }
  }
  // The training file, then the held-out file (data.eval_path).
  for (const std::string prefix : {"data.", "data.eval_"}) {
    const std::string file = r.env(prefix + "file"), hash = r.env(prefix + "hash");
    if (file.empty() || hash.empty()) continue;
    std::error_code ec;
    if (!fs::exists(file, ec)) continue;  // not visible here (a compute node's path): the run checks it
    try {
      const DataFileId now = identify_data_file(file, sweep_cache_dir());
      if (now.hash != hash)
        return {std::string("its ") + (prefix == "data." ? "data file " : "held-out data file ") + printable(file) +
                    " changed since the run (" + hash + ", now " + now.hash + ")",
                {file}};
    } catch (const std::runtime_error&) {
      // unreadable now: the re-run would say so; the record stays as it is
    }
  }
  return {};
}

std::string move_record_aside(const std::string& dir, const std::string& why) {
  const std::string rec = dir + "/record.h5";
  struct stat st;
  if (::lstat(rec.c_str(), &st) != 0) return "";
  const std::string base = rec + "." + why + "-" + utc_now();
  for (int n = 0; n < 1000; ++n) {
    std::string to = n ? base + "-" + std::to_string(n) : base;
    // link + unlink, not rename: rename would replace an existing file of that name.
    if (::link(rec.c_str(), to.c_str()) == 0) {
      if (::unlink(rec.c_str()) != 0)
        throw std::runtime_error(rec + ": cannot move the " + why + " record aside: " + std::strerror(errno));
      return to;
    }
    if (errno != EEXIST)
      throw std::runtime_error(rec + ": cannot move the " + why + " record aside: " + std::strerror(errno));
  }
  throw std::runtime_error(rec + ": cannot move the " + why + " record aside: too many earlier copies");
}

namespace {

/// rename(2) that never replaces what is at `to` (a directory rename would replace an
/// empty one); where the file system cannot say so atomically, a look first.
bool rename_noreplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno != EINVAL && errno != ENOSYS) return false;
  struct stat st;
  if (::lstat(to.c_str(), &st) == 0) return errno = EEXIST, false;
  return ::rename(from.c_str(), to.c_str()) == 0;
}

}  // namespace

std::string move_run_aside(const std::string& dir, const std::string& why) {
  // What the run's earlier training left: its rung records (record.h5.stopped-<time>,
  // which a resumed python program carries its rows on from), a partial record, its
  // checkpoints. All of it belongs to the record that goes aside.
  std::vector<std::string> rungs;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("record.h5.stopped-", 0) == 0) rungs.push_back(name);
  }
  std::sort(rungs.begin(), rungs.end());
  struct stat st;
  const auto here = [&](const std::string& name) { return ::lstat((dir + "/" + name).c_str(), &st) == 0; };
  // One suffix for all of it, free for every name it gives.
  const std::string base = why + "-" + utc_now();
  std::string suffix;
  for (int n = 0; n < 1000 && suffix.empty(); ++n) {
    const std::string s = n ? base + "-" + std::to_string(n) : base;
    bool free = !here("record.h5." + s) && !here("checkpoints." + s) && !here("record.h5.partial." + s);
    for (const std::string& r : rungs) free = free && !here("record.h5." + s + "." + r.substr(10));
    if (free) suffix = s;
  }
  if (suffix.empty())
    throw std::runtime_error(dir + ": cannot move the " + why + " run aside: too many earlier copies");
  // The record last: until it moves the run stays what it was, and a later `sweep run`
  // moves the rest.
  std::vector<std::pair<std::string, std::string>> moves;
  moves.reserve(rungs.size() + 3);
  // A rung record's new name must not start with record.h5.stopped-: the run's new
  // training would take its rows as its own.
  for (const std::string& r : rungs) moves.emplace_back(r, "record.h5." + suffix + "." + r.substr(10));
  if (here("record.h5.partial")) moves.emplace_back("record.h5.partial", "record.h5.partial." + suffix);
  if (here("checkpoints")) moves.emplace_back("checkpoints", "checkpoints." + suffix);
  if (here("record.h5")) moves.emplace_back("record.h5", "record.h5." + suffix);
  std::vector<std::string> moved;
  for (const auto& [from, to] : moves) {
    if (!rename_noreplace(dir + "/" + from, dir + "/" + to))
      throw std::runtime_error(dir + "/" + from + ": cannot move the " + why + " run's " + from + " aside to " + to +
                               ": " + std::strerror(errno));
    moved.push_back(to);
  }
  return join(moved, ", ");
}

std::unordered_map<std::string, RunState> scan_runs(const std::string& dir, SweepIndex* index,
                                                    const std::atomic<bool>* cancel) {
  std::optional<SweepIndex> own;
  if (!index) {
    own = SweepIndex::load_saying(dir);
    index = &*own;
  }
  std::vector<std::string> dirs;
  std::error_code ec;
  for (fs::directory_iterator it(dir + "/runs", ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) dirs.push_back(it->path().string());
  // Each run's state file and record identity on every core; the index and any record it
  // does not vouch for are read on this thread (HDF5 reads one file at a time).
  std::vector<RunFiles> files(dirs.size());
  parallel_for(dirs.size(), [&](size_t i) { files[i] = read_run_files(dirs[i]); });
  // The files many runs name are hashed once in this look; the next scan looks again.
  const AcceptedHashes accepted = accepted_hashes(dir);
  InputsLook look;
  std::unordered_map<std::string, RunState> out;
  out.reserve(dirs.size());
  for (size_t i = 0; i < dirs.size(); ++i) {
    if (cancel && cancel->load()) return out;  // (a part: forget_except would drop the rest)
    out.emplace(fs::path(dirs[i]).filename().string(), run_state_of(dirs[i], files[i], index, accepted, &look));
  }
  index->forget_except(out);
  index->save();
  return out;
}

FinishedRuns finished_runs(const std::unordered_map<std::string, RunState>& runs, const SweepIndex& index) {
  FinishedRuns r;
  for (const auto& [id, st] : runs)
    if (is_finished(st.state) || st.state == RunStatus::stale)
      if (const IndexedRecord* e = index.get(id)) r.done.emplace_back(id, e);
  std::sort(r.done.begin(), r.done.end());
  std::vector<ThroughputPeer> peers;
  peers.reserve(r.done.size());
  for (const auto& [id, e] : r.done) peers.push_back({e->throughput_group, e->tokens_per_s_median, e->shared_cores});
  r.outliers = throughput_outliers(peers);
  return r;
}

void write_points_file(const std::string& dir, const std::vector<GridPoint>& points) {
  std::string text = std::string(kPointsFileHead) + "\n";
  for (const auto& p : points) {
    text += p.id;
    text += '\t';
    for (size_t i = 0; i < p.values.size(); ++i) {
      std::string v = p.values[i].second;
      for (char& c : v)
        if (c == '\t' || c == '\n') c = ' ';
      text += (i ? " " : "") + p.values[i].first + "=" + v;
    }
    text += '\n';
  }
  write_file_atomically(dir + "/points.tsv", text);
}

std::string search_inputs(const SearchSpec& s, const std::vector<ConfigValue>& values) {
  std::string text;
  for (size_t i = 0; i < s.space.size() && i < values.size(); ++i)
    text += (i ? " " : "") + s.space[i].key + "=" + values[i].text;
  return text;
}

std::map<std::string, std::vector<std::string>> search_runs(const SearchSpec& s, const std::vector<GridPoint>& points) {
  std::map<std::string, std::vector<std::string>> ids_of;
  for (const GridPoint& p : points) {
    std::string inputs;
    for (const SearchDim& d : s.space)
      for (const auto& [k, v] : p.values)
        if (k == d.key) inputs += (inputs.empty() ? "" : " ") + k + "=" + v;
    ids_of[inputs].push_back(p.id);
  }
  return ids_of;
}

std::string search_log(const SweepSpec& spec, const std::vector<GridPoint>& points) {
  const SearchSpec& s = spec.search;
  std::string text = "# sweep search log: one decision per line; the same grid file gives the same lines\n";
  // A Pareto search names its objectives (the report draws their front); one that ranks
  // nothing keeps the header it always had.
  text += "search " + s.kind + " seed=" + std::to_string(s.seed) + " samples=" + std::to_string(s.samples) +
          (s.pareto() ? search_objective_words(s) : "") + " keys=";
  for (size_t i = 0; i < s.space.size(); ++i) text += (i ? "," : "") + s.space[i].key;
  text += "\n";
  // The points of one draw (its seeds) share its drawn values; a draw no point has was
  // dropped by exclude, or resolved to the run of an earlier one.
  const auto ids_of = search_runs(s, points);
  std::set<std::string> seen;
  for (int64_t i = 0; i < s.samples; ++i) {
    std::vector<ConfigValue> values;
    for (const SearchDim& d : s.space) values.push_back(draw(d, s.seed, i));
    const std::string inputs = search_inputs(s, values);
    text += "draw " + std::to_string(i) + ": " + inputs + " ->";
    auto it = ids_of.find(inputs);
    if (!seen.insert(inputs).second)
      text += " (the same as an earlier draw)";
    else if (it == ids_of.end())
      text += " (no run: excluded, or the same run as an earlier draw)";
    else
      for (const auto& id : it->second) text += " " + id;
    text += "\n";
  }
  return text;
}

}  // namespace sweep
