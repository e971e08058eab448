// SweepSession (shared by every executor) and the attempt classifier.
#include "sweep_run.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "launcher_log.h"  // launcher_finding
#include "record.h"        // read_record, mark_partial_failed
#include "report.h"  // load_sweep, render_html

namespace fs = std::filesystem;

namespace sweep {
namespace {

std::string describe_point(const GridPoint& p) {
  std::string s;
  for (const auto& [k, v] : p.values) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s.empty() ? "(base)" : s;
}

}  // namespace

void write_report(const std::string& dir, const std::string& title, const std::string& out_path) {
  write_file_atomically(out_path, render_html(title, load_sweep(dir)));
}

FailureClass classify_attempt(const ExitStatus& st, const std::string& run_dir, std::string* detail) {
  const std::string rec = run_dir + "/record.h5";
  std::error_code ec;
  if (fs::exists(rec, ec)) {
    try {
      Record r = read_record(rec);
      if (r.status == "completed") {
        char buf[64];
        std::snprintf(buf, sizeof buf, "final loss %.6g", r.steps.empty() ? 0.0 : r.steps.back().loss);
        *detail = buf;
        return FailureClass::none;
      }
      *detail = "recorded as " + r.status + (r.failure.empty() ? "" : ": " + r.failure);
      return r.status == "diverged" ? FailureClass::diverged : FailureClass::crashed;
    } catch (const RecordError& e) {
      *detail = std::string("unreadable record: ") + e.what();
      return FailureClass::crashed;
    }
  }
  *detail = st.describe();
  if (st.ok()) {
    *detail = "exit code 0 but no record";
    return FailureClass::lost;
  }
  if (st.signal == 0 && st.code == 2) return *detail += " (bad config)", FailureClass::config;
  // Post-mortem: the launcher names a rank that died outright (it wrote nothing itself);
  // the partial record has rank 0's view, with any note a stuck rank left. Both go into
  // the run's state and, for a later reader of the file, into the partial record.
  const std::string finding = launcher_finding(latest_attempt_output(run_dir + "/logs/launcher.log"));
  std::string recorded;
  try {
    RecordStatus rs = read_record_status(rec);
    if (rs.partial && rs.status == "failed") recorded = rs.failure;
  } catch (const RecordError&) {
    // No partial record (the run died before writing one) or an unreadable one.
  }
  std::string cause = recorded;
  if (!finding.empty() && recorded.find(finding) == std::string::npos)
    cause = finding + (recorded.empty() ? "" : "; " + recorded);
  if (cause.empty()) cause = "the run ended (" + st.describe() + ") before finishing its record";
  if (cause != recorded) mark_partial_failed(rec, cause);  // a no-op without a partial
  if (!finding.empty() || !recorded.empty()) *detail += "; " + cause;
  const bool hang = (st.signal == 0 && st.code == 4) || cause.find("(dist.timeout_s)") != std::string::npos;
  if (hang) return *detail += " (a rank made no progress)", FailureClass::hang;
  return FailureClass::crashed;
}

SweepSession::SweepSession(const SweepSpec& spec, const std::vector<GridPoint>& points, const SweepRunOptions& opt)
    : spec_(spec), opt_(opt) {
  fs::create_directories(opt_.out_dir + "/runs");
  lock_ = std::make_unique<SweepLock>(opt_.out_dir);
  write_points_file(opt_.out_dir, points);
  total_ = points.size();
  size_t done = 0;
  std::vector<std::string> skipped_lines;
  const auto known = scan_runs(opt_.out_dir);  // one listing, not a stat per point
  for (const GridPoint& p : points) {
    RunTask t;
    t.point = &p;
    t.dir = run_dir(opt_.out_dir, p.id);
    auto it = known.find(p.id);
    if (it != known.end()) t.state = it->second;
    if (t.state.done()) {
      // A record is never overwritten, so a diverged run is not re-run either; but it is
      // still a failure of the sweep, not a completed point.
      if (t.state.state == "completed")
        ++sum_.skipped, ++done;
      else
        ++sum_.failed;
      skipped_lines.push_back(label(t) + ": already " +
                              (t.state.state == "completed" ? "completed" : "recorded as " + t.state.state) +
                              ", skipped");
      continue;
    }
    // A state file says whether an earlier attempt may have left checkpoints; a partial
    // record without one (a driver killed hard) says the same.
    if (it != known.end() && t.state.attempts == 0 && fs::exists(t.dir + "/record.h5.partial")) t.state.attempts = 1;
    tasks_.push_back(std::move(t));
  }
  progress_ = std::make_unique<Progress>(total_, done, size_t(sum_.failed), opt_.tty, stdout, opt_.progress_every_s);
  if (!opt_.quiet)
    for (const auto& l : skipped_lines) progress_->line(l);
}

std::string SweepSession::label(const RunTask& t) const { return t.point->id + " " + describe_point(*t.point); }

void SweepSession::prepare(RunTask& t) {
  fs::create_directories(t.dir + "/logs");
  write_file_atomically(t.dir + "/config.yaml", to_yaml(t.point->config));
}

void SweepSession::attempt_started(RunTask& t, const std::string& log) {
  ++t.state.attempts;
  t.state.state = "running";
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

bool SweepSession::attempt_ended(RunTask& t, FailureClass c, const std::string& detail, const std::string& log) {
  t.state.failure = c;
  t.state.detail = detail;
  if (c == FailureClass::none) {
    t.state.state = "completed";
    write_run_state(t.dir, t.state);
    ++sum_.completed;
    progress_->ended(true);
    if (!opt_.quiet) progress_->line("completed " + label(t) + (detail.empty() ? "" : ", " + detail));
    return false;
  }
  if (c == FailureClass::interrupted) {
    t.state.state = "interrupted";
    write_run_state(t.dir, t.state);
    ++sum_.interrupted;
    progress_->retried();
    if (!opt_.quiet) progress_->line("stopped   " + label(t) + " (interrupted; the next `sweep run` starts it again)");
    return false;
  }
  const int allowed = retries_for(spec_.launch, c);
  if (t.retries_used < allowed) {
    ++t.retries_used;
    ++sum_.retries;
    t.state.state = "failed";
    write_run_state(t.dir, t.state);
    progress_->retried();
    if (!opt_.quiet)
      progress_->line("retrying  " + label(t) + ": " + failure_class_name(c) + " (" + detail + "), retry " +
                      std::to_string(t.retries_used) + " of " + std::to_string(allowed) + ", log: " + log);
    return true;
  }
  t.state.state = c == FailureClass::diverged ? "diverged" : "failed";
  write_run_state(t.dir, t.state);
  ++sum_.failed;
  progress_->ended(false);
  if (!opt_.quiet)
    progress_->line("FAILED    " + label(t) + ": " + failure_class_name(c) + " (" + detail + "), log: " + log);
  return false;
}

SweepSummary SweepSession::finish() {
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
