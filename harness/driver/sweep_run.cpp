// SweepSession (shared by every executor) and the attempt classifier.
#include "sweep_run.h"

#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "atomic_file.h"    // write_file_atomically
#include "hang_verdict.h"   // first_disagreement: the collective a hang's ranks first disagree on
#include "heartbeat.h"      // absent_from_collective: the rank a hang waits for
#include "launcher_log.h"   // launcher_finding, launcher_lost_host
#include "program.h"        // recorded_writes
#include "record.h"         // read_record, mark_partial_failed
#include "repeated_hang.h"  // note_hang: a hang that repeats is not retried
#include "report.h"         // load_sweep, render_html
#include "run_files.h"      // check_run_entries, rank_log_path
#include "run_health.h"     // run_health, run_figures for the line of a completed run
#include "run_status.h"     // status_is
#include "stop_signals.h"   // StopSignals::release
#include "sweep_records.h"  // record_problem
#include "text.h"           // split, join

namespace fs = std::filesystem;

namespace sweep {
namespace {

/// A supervisor's note that it ended what a run's command left behind (process_tree.h):
/// never the cause of a failure, which is the command's own last line.
bool supervisor_note(const std::string& line) {
  return (line.rfind("sweep-box: ", 0) == 0 || line.rfind("sweep-rank: ", 0) == 0) &&
         line.find(" outlived the run's command (") != std::string::npos;
}

/// The last non-empty line of a text file within its last 64 KiB (supervisor notes left
/// out), or "".
std::string last_line(const std::string& path) {
  std::istringstream in(read_file_tail(path, size_t{64} * 1024));  // regular files only, never blocking
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty() && !supervisor_note(line)) last = line;
  return last;
}

std::string describe_point(const GridPoint& p) {
  std::string s;
  for (const auto& [k, v] : p.values) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s.empty() ? "(base)" : s;
}

}  // namespace

void write_report(const std::string& dir, const std::string& title, const std::string& out_path) {
  write_file_atomically(out_path, render_html(title, load_sweep(dir)));
}

namespace {

/// A training program's own last word: "PROGRAM: error: ..." or "PROGRAM: run failed: ..."
/// (train_main names itself after its executable), or any "sweep-train: ..." line.
bool trainer_line(const std::string& line) {
  if (line.rfind("sweep-train: ", 0) == 0) return true;
  const size_t colon = line.find(": ");
  if (colon == std::string::npos || colon == 0 || line.find(' ') < colon) return false;
  const std::string rest = line.substr(colon + 2);
  return rest.rfind("error: ", 0) == 0 || rest.rfind("run failed: ", 0) == 0;
}

/// "node H (rank 1) was lost: ..." for the host a launcher lost, with the ranks that ran
/// there by rank 0's partial record (environment rank_hosts).
std::string lost_node_finding(const std::string& host, const std::string& partial) {
  std::vector<std::string> ranks;
  try {
    const std::vector<std::string> hosts = split(read_record_unverified(partial).env("rank_hosts"), ',');
    for (size_t r = 0; r < hosts.size(); ++r)
      if (hosts[r] == host) ranks.push_back(std::to_string(r));
  } catch (const RecordError&) {
    // No partial record yet: the node is named without its ranks.
  }
  if (host.rfind("one of ", 0) == 0)
    return "one of nodes " + host.substr(7) +
           " was lost: an Open MPI daemon went away mid-run (mpirun does not say which; the other nodes' ranks were "
           "stopped by it)";
  return "node " + host +
         (ranks.empty() ? std::string()
                        : std::string(ranks.size() == 1 ? " (rank " : " (ranks ") + join(ranks, ",") + ")") +
         " was lost: its Open MPI daemon and ranks went away mid-run";
}

/// When this attempt began, from the driver's "=== sweep: attempt N of run ID at TIME ==="
/// line that opens `attempt_text`; 0 when it has none.
std::time_t attempt_start(const std::string& attempt_text) {
  std::tm tm{};
  const size_t at = attempt_text.find(" at ");
  if (attempt_text.rfind("=== sweep: attempt ", 0) != 0 || at == std::string::npos || attempt_text.find('\n') < at)
    return 0;
  if (!strptime(attempt_text.c_str() + at + 4, "%Y-%m-%dT%H:%M:%SZ", &tm)) return 0;
  return timegm(&tm);
}

/// The host a daemon of this attempt was lost on, when mpirun said only that it could
/// not "reliably start" a daemon (what Open MPI 4 says when a daemon's agent process
/// exits before its link breaks, even mid-run). Evidence that the daemons had started:
/// ranks of this attempt that the launcher stopped ("stopped by SIGTERM" or "SIGINT" at
/// the end of a rank log written since the attempt began); their hosts were not lost.
/// The hosts of the run (rank 0's partial record, else the per-host log folders) that
/// none of them accounts for are: one is named, several are "one of ...". "" without
/// such evidence (then nothing ran: a start failure, said as one).
std::string host_lost_after_start(const std::string& run_dir, const std::string& attempt_text) {
  const std::time_t began = attempt_start(attempt_text);
  if (began == 0) return "";
  std::set<std::string> alive, hosts;
  std::error_code ec;
  for (fs::directory_iterator h(run_dir + "/logs", ec), end; !ec && h != end; h.increment(ec)) {
    std::error_code e2;
    if (!h->is_directory(e2) || h->is_symlink(e2)) continue;
    const std::string host = h->path().filename().string();
    hosts.insert(host);
    for (fs::directory_iterator f(h->path(), e2); !e2 && f != end; f.increment(e2)) {
      struct stat st {};
      const std::string path = f->path().string();
      if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_mtime < began) continue;
      const std::string last = last_line(path);
      if (last.find(": stopped by SIGTERM ") != std::string::npos ||
          last.find(": stopped by SIGINT ") != std::string::npos)
        alive.insert(host);
    }
  }
  if (alive.empty()) return "";
  try {
    const std::vector<std::string> rank_hosts =
        split(read_record_unverified(run_dir + "/record.h5.partial").env("rank_hosts"), ',');
    if (!rank_hosts.empty() && !rank_hosts.front().empty()) hosts = {rank_hosts.begin(), rank_hosts.end()};
  } catch (const RecordError&) {
    // No partial record: the per-host log folders name the hosts.
  }
  std::vector<std::string> lost;
  for (const std::string& h : hosts)
    if (!alive.count(h)) lost.push_back(h);
  if (lost.size() <= 1) return lost.empty() ? "" : lost.front();
  return "one of " + join(lost, ", ");
}

}  // namespace

namespace {

/// A program that failed on a write its box denies ("Permission denied", EACCES, is what
/// Landlock answers): which path, and what would allow it. "" for any other last line.
std::string confinement_hint(const std::string& said) {
  if (said.find("Permission denied") == std::string::npos && said.find("Read-only file system") == std::string::npos)
    return "";
  std::string path;
  if (const auto q = said.rfind(": '"); q != std::string::npos && said.back() == '\'')
    path = said.substr(q + 3, said.size() - q - 4);  // Python's "... Permission denied: 'out/x.pt'"
  return " (a program may write only its run directory ($SWEEP_RUN_DIR), its TMPDIR and what program.writes "
         "grants; " +
         (path.empty() ? std::string("to let it write elsewhere") : "to let it write " + printable(path)) +
         ", add that directory to program.writes, or write under $SWEEP_RUN_DIR)";
}

/// A record the run must not keep (not its own, not naming its program, not stopped where
/// the search asked): kept, never deleted, but moved aside at once, so no reader counts it;
/// the same on every attempt.
FailureClass refuse_record(const std::string& run_dir, std::string* detail) {
  try {
    *detail += "; moved aside to " + move_record_aside(run_dir);
  } catch (const std::exception& e) {
    *detail += std::string("; cannot move it aside: ") + e.what();
  }
  return FailureClass::config;
}

/// What the record a finished attempt left says: its figures where it completed or
/// stopped where asked, a refusal where it is not the run's, else its status.
FailureClass classify_record(const ExitStatus& st, const std::string& run_dir, std::string* detail,
                             const std::string& program, int64_t stop_at) {
  const std::string rec = run_dir + "/record.h5";
  try {
    Record r = read_record(rec);
    // Not this run's record (a program of one's own that got its run id wrong, or wrote
    // another run's config): a failure of the program, the same on every attempt. Kept,
    // never deleted, but moved aside at once, so no reader counts it.
    if (const std::string why = record_problem(run_dir, r); !why.empty()) {
      *detail = why;
      return refuse_record(run_dir, detail);
    }
    // A grid's program: its record must say which program made it, or reproduce could not.
    if (!program.empty()) {
      const std::string named = r.env("program");
      if (named != program) {
        *detail = "the record does not name the program that ran (environment 'program' is " +
                  (named.empty() ? std::string("missing") : "'" + printable(named.substr(0, 200)) + "'") +
                  ", expected '" + printable(program) +
                  "'); write it with python/sweep_record or sweep/record_writer.h, which copy SWEEP_PROGRAM";
        // Kept, never deleted, but not left where the next sweep would count it as done.
        return refuse_record(run_dir, detail);
      }
    }
    // The rung a search asked for (stop_at) is a contract: a run that stops unasked, at
    // another step, or trains past it would make the records disagree with the
    // search's decisions, and the same on every attempt.
    const int64_t last = r.steps.empty() ? 0 : r.steps.back().step;
    std::string broken;
    if (status_is(r.status, RunStatus::stopped) && stop_at <= 0)
      broken = "the record says stopped after step " + std::to_string(last) +
               ", but no search asked this run to stop (a run of a plain grid trains to train.steps)";
    else if (status_is(r.status, RunStatus::stopped) && last != stop_at)
      broken = "the record says stopped after step " + std::to_string(last) + ", but the search asked for step " +
               std::to_string(stop_at) + " (the stop_at file)";
    else if (status_is(r.status, RunStatus::completed) && stop_at > 0 && last > stop_at)
      broken = "the run trained to step " + std::to_string(last) + " though the search asked it to stop after step " +
               std::to_string(stop_at) + " (the stop_at file; a program that declares stop support must honour it)";
    if (!broken.empty()) {
      *detail = broken;
      return refuse_record(run_dir, detail);
    }
    if (status_is(r.status, RunStatus::completed)) {
      // The run's figures and its own health flags (the sweep-level ones need the whole
      // sweep: status and the report add them).
      const std::string flags = health_names(run_health(r));
      *detail = figures_text(run_figures(r)) + "; health: " + (flags.empty() ? "ok" : flags);
      return FailureClass::none;
    }
    if (status_is(r.status, RunStatus::stopped)) {  // a halving search's rung: the run may be resumed later
      // sweep-train says where it stopped; a program's writer (python/sweep, record_writer.h)
      // leaves the failure empty, and the line must not start with it.
      *detail = (r.failure.empty() ? "stopped by the search at step " + std::to_string(last) : r.failure) + "; " +
                figures_text(run_figures(r));
      return FailureClass::none;
    }
    *detail = "recorded as " + r.status + (r.failure.empty() ? "" : ": " + r.failure);
    return status_is(r.status, RunStatus::diverged) ? FailureClass::diverged : FailureClass::crashed;
  } catch (const RecordError& e) {
    *detail = std::string("unreadable record: ") + e.what();
    // The program finished and says it succeeded, yet its record is not one sweep reads
    // (a newer schema version, a missing dataset): every attempt would do the same.
    if (st.ok()) return *detail = "exit code 0 but an invalid record: " + std::string(e.what()), FailureClass::config;
    return FailureClass::crashed;
  }
}

}  // namespace

FailureClass classify_attempt(const ExitStatus& st, const std::string& run_dir, std::string* detail,
                              const std::string& program, int64_t stop_at) {
  const std::string rec = run_dir + "/record.h5";
  std::error_code ec;
  if (fs::exists(rec, ec)) return classify_record(st, run_dir, detail, program, stop_at);
  *detail = st.describe();
  if (st.ok()) {
    *detail = "exit code 0 but no record";
    return FailureClass::lost;
  }
  if (st.signal == 0 && st.code == 2) return *detail += " (bad config)", FailureClass::config;
  // 3: the trainer refused the run directory (another writer, a planted link): retrying
  // cannot help, and the trainer's one line says why.
  if (st.signal == 0 && st.code == 3) {
    const std::string why = last_line(rank_log_path(run_dir, 0));
    return *detail += " (refused" + (why.empty() ? std::string() : ": " + why) + ")", FailureClass::config;
  }
  // Post-mortem: the launcher names a rank that died outright (it wrote nothing itself);
  // the partial record has rank 0's view, with any note a stuck rank left. Both go into
  // the run's state and, for a later reader of the file, into the partial record.
  const std::string said_by_launcher = latest_attempt_output(run_dir + "/logs/launcher.log");
  std::string finding = launcher_finding(said_by_launcher);
  std::string recorded;
  try {
    RecordStatus rs = read_record_status(rec);
    if (rs.partial && status_is(rs.status, RunStatus::failed)) recorded = rs.failure;
  } catch (const RecordError&) {
    // No partial record (the run died before writing one) or an unreadable one.
  }
  // A node that went away: named with its ranks, which rank 0's partial record lists.
  std::string lost_host = launcher_lost_host(said_by_launcher);
  if (lost_host.empty() && said_by_launcher.find("unable to reliably start one or more daemons") != std::string::npos)
    lost_host = host_lost_after_start(run_dir, said_by_launcher);
  if (!lost_host.empty()) finding = lost_node_finding(lost_host, rec + ".partial");
  std::string cause = recorded;
  if (!finding.empty() && recorded.find(finding) == std::string::npos)
    cause = finding + (recorded.empty() ? "" : "; " + recorded);
  bool trainer_said = false;
  if (cause.empty()) {
    // Nothing recorded (the disk may be full): the trainer's own last line says why.
    const std::string said = last_line(rank_log_path(run_dir, 0));
    // A grid's program speaks its own language (a Python traceback's last line, ...): its
    // last line is the cause either way.
    trainer_said = trainer_line(said) || (!program.empty() && !said.empty());
    cause = "the run ended (" + st.describe() + ") before finishing its record" +
            (trainer_said ? ": " + said : std::string());
  }
  if (!program.empty()) cause += confinement_hint(cause);
  const bool hang = (st.signal == 0 && st.code == 4) || cause.find("(dist.timeout_s)") != std::string::npos;
  // A hang whose cause does not say which rank never entered the collective the others
  // wait in (rank 0 was the stopped one, or wrote nothing): the heartbeats the ranks left
  // in this attempt say it, now that every process of the run is gone.
  std::string absent;
  const long long since = static_cast<long long>(attempt_start(said_by_launcher));
  if (hang && cause.find(kNeverEntered) == std::string::npos && cause.find(kWentSilent) == std::string::npos) {
    absent = absent_from_collective(read_heartbeats(run_dir, heartbeat_ranks(run_dir), since));
    if (!absent.empty()) cause += "; " + absent;
  }
  // The rings the ranks wrote as they stopped, merged: the first collective they disagree
  // on, said first in the run's state and kept in the record's /hang (hang_verdict.h). A
  // lost node outranks the hang it causes.
  std::optional<HangForensics> forensics;
  if (hang && lost_host.empty()) {
    const std::vector<RankCollectives> left = read_rank_collectives(run_dir, since);
    forensics = hang_forensics(first_disagreement(left), left);
  }
  if (cause != recorded || forensics)
    mark_partial_failed(rec, cause, forensics ? &*forensics : nullptr);  // a no-op without a partial
  if (!finding.empty() || !recorded.empty() || trainer_said || !absent.empty()) *detail += "; " + cause;
  if (forensics) *detail = "hang: " + forensics->verdict + "; " + *detail;
  if (!lost_host.empty()) return *detail += " (a node was lost)", FailureClass::node_fail;
  // The ranks' parameters parted: the same run parts the same way again (a fault, or a
  // kernel that is not deterministic), so it is a class of its own that is never retried.
  if (cause.find("desync at step ") != std::string::npos) return *detail += " (deterministic)", FailureClass::desync;
  if (hang) return *detail += " (a rank made no progress)", FailureClass::hang;
  return FailureClass::crashed;
}

SweepSession::SweepSession(const SweepSpec& spec, const std::vector<GridPoint>& points, const SweepRunOptions& opt)
    : spec_(spec), opt_(opt) {
  // Every run's files go under runs/: a link planted there would put them elsewhere.
  check_real_directory(opt_.out_dir + "/runs");
  fs::create_directories(opt_.out_dir + "/runs");
  if (!opt_.lock_held) lock_ = std::make_unique<SweepLock>(opt_.out_dir);
  if (!spec_.program.argv.empty())
    note_declared_program(opt_.out_dir,
                          program_declaration({spec_.program.json, recorded_writes(spec_.program), spec_.program.cwd,
                                               spec_.program.pass_args ? "true" : "false"}));
  if (!spec_.launch.trainer.empty()) note_declared_program(opt_.out_dir, declared_trainer(spec_.launch.trainer));
  write_points_file(opt_.out_dir, points);
  // The grid as it ran, overrides applied: a later `sweep plan` or `sweep run` of it, or a
  // reader of the directory, sees what ran here without the command line that said it.
  if (!spec_.resolved.empty()) write_file_atomically(opt_.out_dir + "/" + kGridFile, spec_.resolved);
  if (spec_.search.kind == "random") write_file_atomically(opt_.out_dir + "/search.log", search_log(spec_, points));
  total_ = points.size();
  size_t done = 0;
  std::vector<std::string> skipped_lines;
  const auto known = scan_runs(opt_.out_dir);  // one listing, not a stat per point
  for (const GridPoint& p : points) {
    RunTask t;
    t.point = &p;
    t.dir = run_dir(opt_.out_dir, p.id);
    // A link (or a file) planted where the run's directory goes: nothing is written
    // through it, not even the run's state; the run fails and the sweep goes on.
    try {
      check_real_directory(t.dir);
    } catch (const RunRefused& e) {
      ++sum_.failed;
      skipped_lines.push_back("FAILED    " + label(t) + ": " + e.what());
      continue;
    }
    auto it = known.find(p.id);
    if (it != known.end()) t.state = it->second;
    if (opt_.feed) {  // decided when the feed hands it out (admit)
      task_of_[p.id] = tasks_.size();
      tasks_.push_back(std::move(t));
      continue;
    }
    if (const auto stop = opt_.stop_at.find(p.id); stop != opt_.stop_at.end()) t.stop_at = stop->second;
    std::string line;
    const Admit a = decide(t, &line);
    if (!line.empty()) skipped_lines.push_back(std::move(line));
    if (a == Admit::done) ++done;
    if (a != Admit::queue) continue;
    // A state file says whether an earlier attempt may have left checkpoints; a partial
    // record without one (a driver killed hard) says the same.
    if (it != known.end() && t.state.attempts == 0 && fs::exists(t.dir + "/record.h5.partial")) t.state.attempts = 1;
    tasks_.push_back(std::move(t));
  }
  // With a feed the bar counts the runs fed so far (admit adds each).
  if (opt_.feed) total_ = 0;
  progress_ = std::make_unique<Progress>(total_, done, size_t(sum_.failed), opt_.tty, stdout, opt_.progress_every_s);
  if (opt_.report_every_s > 0 && !opt_.report_binary.empty())
    live_ = std::make_unique<LiveReport>(std::vector<std::string>{opt_.report_binary, "report", opt_.out_dir, "-o",
                                                                  opt_.out_dir + "/report.html", "--title", spec_.name},
                                         opt_.out_dir + "/report.log", opt_.report_every_s);
  if (!opt_.quiet)
    for (const auto& l : skipped_lines) progress_->line(l);
}

std::string SweepSession::label(const RunTask& t) const { return t.point->id + " " + describe_point(*t.point); }

SweepSession::Admit SweepSession::decide(RunTask& t, std::string* line) {
  const NextAction next = next_action(t.state, {t.stop_at, std::nullopt});
  if (next == NextAction::keep || next == NextAction::keep_failed) {
    // A record is never overwritten, so a diverged run is not re-run either; but it is
    // still a failure of the sweep, not a completed point.
    const RunStatus was = t.state.state;
    if (next == NextAction::keep)
      ++sum_.skipped, sum_.skipped_runs.push_back(t.point->id);
    else
      ++sum_.failed;
    *line = label(t) +
            (was == RunStatus::stopped
                 ? ": already stopped at step " + std::to_string(t.state.stopped_at)
                 : std::string(": already ") + (was == RunStatus::completed ? "" : "recorded as ") + status_name(was)) +
            ", skipped";
    return next == NextAction::keep ? Admit::done : Admit::failed;
  }
  if (next == NextAction::promote) {
    // Promoted: the rung's record is kept beside the run, and the run resumes from the
    // checkpoint its stop left.
    const std::string at = std::to_string(t.state.stopped_at);
    try {
      const std::string aside = move_record_aside(t.dir, "stopped");
      t.state.state = RunStatus::pending;
      t.state.attempts = std::max(1, t.state.attempts);
      t.state.detail = "promoted from step " + at + "; its rung record moved aside to " + aside;
      write_run_state(t.dir, t.state);
    } catch (const std::exception& e) {
      ++sum_.failed;
      *line = label(t) + ": stopped at step " + at + ", cannot move its record aside: " + e.what();
      return Admit::failed;
    }
    *line = label(t) + ": promoted from step " + at + ", resuming";
    return Admit::queue;
  }
  if (next == NextAction::start_over) {
    // A completed record that is gone, unreadable or fails its digest, or a completed or
    // stopped one whose program or data file changed since: the run starts over from
    // step 0. Its record goes aside (never deleted) with what its training left (its
    // checkpoints, its earlier rung records), which the new training must not resume.
    const RunStatus was = t.state.state;
    std::string note =
        was == RunStatus::stale ? t.state.detail : "its completed record is damaged (" + t.state.detail + ")";
    try {
      const std::string aside = move_run_aside(t.dir, status_name(was));
      if (!aside.empty()) note += "; moved aside to " + aside;
      t.state.state = RunStatus::pending;
      t.state.detail = note;
      t.state.attempts = 0;  // nothing to resume (sweep-train's --resume)
      t.state.hangs.clear();
      write_run_state(t.dir, t.state);
    } catch (const std::exception& e) {
      // Cannot move it (read-only directory, ...): report it and leave the file as it is.
      ++sum_.failed;
      *line = label(t) + ": " + note + "; cannot move it aside: " + e.what();
      return Admit::failed;
    }
    *line = label(t) + ": " + note + "; running it again";
    return Admit::queue;
  }
  return Admit::queue;
}

RunTask* SweepSession::admit(const FedRun& run) {
  const auto it = task_of_.find(run.id);
  if (it == task_of_.end()) return nullptr;  // refused at the start (a link in its place), and said so
  RunTask& t = tasks_[it->second];
  t.stop_at = run.stop_at;
  t.retries_used = 0;  // each rung has the retries the grid allows
  std::string line;
  const Admit a = decide(t, &line);
  if (!line.empty() && !opt_.quiet) progress_->line(line);
  if (a != Admit::queue) return nullptr;
  ++total_;
  progress_->add();
  // A partial record without a state file's attempts: a driver killed hard left it.
  if (t.state.attempts == 0 && fs::exists(t.dir + "/record.h5.partial")) t.state.attempts = 1;
  return &t;
}

void SweepSession::prepare(RunTask& t) {
  check_run_entries(t.dir);  // no link or special file where the run's files go
  std::error_code ec;
  fs::create_directories(t.dir + "/logs", ec);
  if (ec) throw std::runtime_error(t.dir + "/logs: cannot create: " + ec.message());
  write_file_atomically(t.dir + "/config.yaml", to_yaml(t.point->config));
  // A fork a search made says so where `sweep fork`'s does (`sweep status`).
  if (const TrainConfig& train = t.point->config.train; !train.fork_parent.empty())
    write_file_atomically(t.dir + "/lineage", "forked from run " + train.fork_parent + " at step " +
                                                  std::to_string(train.fork_step) + ": " + describe_point(*t.point) +
                                                  "\n");
  // The trainer reads its rung's stop from the run directory (every launcher carries it).
  if (t.stop_at > 0)
    write_file_atomically(t.dir + "/stop_at", std::to_string(t.stop_at) + "\n");
  else if (fs::remove(t.dir + "/stop_at", ec); ec)
    throw std::runtime_error(t.dir + "/stop_at: cannot remove: " + ec.message());
}

std::string fork_source(const std::string& sweep_dir, const RunTask& t) {
  const TrainConfig& train = t.point->config.train;
  if (train.fork_parent.empty() || !complete_checkpoints(t.dir).empty()) return "";
  return checkpoint_dir(run_dir(sweep_dir, train.fork_parent), train.fork_step);
}

void SweepSession::attempt_started(RunTask& t, const std::string& log) {
  ++t.state.attempts;
  t.state.state = RunStatus::running;
  t.state.detail.clear();
  write_run_state(t.dir, t.state);
  std::ofstream(log, std::ios::app) << "=== sweep: attempt " << t.state.attempts << " of run " << t.point->id
                                    << (t.resume() && t.state.attempts > 1 ? " (--resume)" : "") << " at " << utc_now()
                                    << " ===\n";
  progress_->started();
  if (!opt_.quiet)
    progress_->line("started   " + label(t) +
                    (t.state.attempts > 1 ? " (attempt " + std::to_string(t.state.attempts) + ")" : ""));
}

void SweepSession::attempt_adopted(RunTask& t, const std::string& where) {
  progress_->started();
  if (!opt_.quiet && !where.empty()) progress_->line("waiting   " + label(t) + " (" + where + ")");
}

void SweepSession::save_state(RunTask& t) {
  // The record is the truth and the run has ended: a state file that cannot be written
  // (full disk, read-only directory) is reported, and the sweep goes on.
  try {
    write_run_state(t.dir, t.state);
  } catch (const std::exception& e) {
    progress_->line("sweep: warning: run " + t.point->id + ": its state (" + status_name(t.state.state) +
                    ") was not saved: " + e.what());
  }
}

bool SweepSession::attempt_ended(RunTask& t, FailureClass c, const std::string& said, const std::string& log) {
  // A hang where an earlier attempt of the run hung is deterministic: said first, and the
  // run is not retried (repeated_hang.h).
  const std::string repeated = c == FailureClass::hang ? note_hang(t.state, said) : "";
  const std::string detail = repeated.empty() ? said : repeated + "; " + said;
  t.state.failure = c;
  t.state.detail = detail;
  // The record accepted as the run's, by its digest: what readers later take as the run's.
  t.state.digest.clear();
  if (c == FailureClass::none || c == FailureClass::diverged) {
    try {
      t.state.digest = read_record_digest(t.dir + "/record.h5");
    } catch (const std::exception&) {
      // Unreadable a moment after classify_attempt read it: noted as none; readers then
      // verify the record by its own digest alone.
    }
  }
  if (c == FailureClass::none) {
    bool stopped = false;
    try {
      stopped = t.stop_at > 0 && status_is(read_record_status(t.dir + "/record.h5").status, RunStatus::stopped);
    } catch (const RecordError&) {
      // classify_attempt read it a moment ago; a reader's hiccup leaves it "completed".
    }
    t.state.state = stopped ? RunStatus::stopped : RunStatus::completed;
    if (stopped) t.state.stopped_at = t.stop_at;  // a feed may promote it from there in this session
    save_state(t);
    ++sum_.completed;
    sum_.completed_runs.push_back(t.point->id);
    progress_->ended(true);
    if (!opt_.quiet)
      progress_->line((stopped ? "stopped   " : "completed ") + label(t) + (detail.empty() ? "" : ", " + detail));
    return false;
  }
  if (c == FailureClass::interrupted) {
    t.state.state = RunStatus::interrupted;
    save_state(t);
    ++sum_.interrupted;
    progress_->retried();
    if (!opt_.quiet) progress_->line("stopped   " + label(t) + " (interrupted; the next `sweep run` starts it again)");
    return false;
  }
  const int allowed = repeated.empty() ? retries_for(spec_.launch, c) : 0;
  if (t.retries_used < allowed) {
    ++t.retries_used;
    ++sum_.retries;
    t.state.state = RunStatus::failed;
    save_state(t);
    progress_->retried();
    if (!opt_.quiet)
      progress_->line("retrying  " + label(t) + ": " + failure_class_name(c) + " (" + detail + "), retry " +
                      std::to_string(t.retries_used) + " of " + std::to_string(allowed) + ", log: " + log);
    return true;
  }
  t.state.state = c == FailureClass::diverged ? RunStatus::diverged : RunStatus::failed;
  save_state(t);
  ++sum_.failed;
  if (c == FailureClass::diverged) sum_.diverged_dirs.push_back(t.dir);
  progress_->ended(false);
  if (!opt_.quiet)
    progress_->line("FAILED    " + label(t) + ": " + failure_class_name(c) + " (" + detail + "), log: " + log);
  return false;
}

void SweepSession::tick() {
  progress_->tick();
  if (live_) live_->tick([&](const std::string& warning) { progress_->line(warning); });
}

SweepSummary SweepSession::finish() {
  if (live_) live_->stop();  // a rewrite in flight ends (or is killed) before the last one
  // Every run has ended and its state is written: from here a signal may end the
  // driver at once (the report is written atomically, so it is whole or absent).
  StopSignals::release();
  progress_->finish();
  sum_.report_path = opt_.out_dir + "/report.html";
  // The runs and their states stand whatever happens to the report; a report that
  // cannot be written must not turn a finished sweep into an error.
  try {
    write_report(opt_.out_dir, spec_.name, sum_.report_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sweep: warning: report not written: %s (try `sweep report %s`)\n", e.what(),
                 opt_.out_dir.c_str());
    sum_.report_path = "(not written)";
  }
  return sum_;
}

}  // namespace sweep
