// One sweep directory as `sweep serve` keeps it (served_sweep.h).
#include "served_sweep.h"

#include <algorithm>  // sort, max
#include <exception>
#include <filesystem>
#include <map>

#include "record.h"         // read_partial_progress
#include "report.h"         // build_report, render_html, json_string
#include "report_format.h"  // counts_text
#include "run_files.h"      // RunLock::holder: a running run's process holds its lock
#include "run_health.h"     // HealthFlag
#include "stall.h"          // stall_words
#include "sweep_dir.h"      // scan_runs, finished_runs, RunState
#include "sweep_index.h"    // SweepIndex: records not read again while unchanged
#include "sweep_records.h"  // SweepLoader, read_points_file, sweep_name
#include "text.h"           // significant

namespace fs = std::filesystem;

namespace sweep {
namespace {

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::chrono::steady_clock::duration after_s(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

/// FNV-1a, 64 bits: a change detector over text this process made, not a defence.
void mix(uint64_t* h, const std::string& s) {
  for (unsigned char c : s) *h = (*h ^ c) * 1099511628211ULL;
  *h = (*h ^ 0xff) * 1099511628211ULL;  // a separator, so "ab"+"c" is not "a"+"bc"
}

/// The word a reader of records uses for a run the driver's state names (the report's:
/// load_sweep's), so that the page's counts agree with the report's.
size_t* count_of(SweepCounts* c, RunStatus state, const std::string& run_dir) {
  switch (state) {
    case RunStatus::completed:
    case RunStatus::stale:
      return &c->completed;
    case RunStatus::diverged:
      return &c->diverged;
    case RunStatus::stopped:
      return &c->stopped;
    case RunStatus::failed:
      return &c->failed;
    case RunStatus::damaged:
      return &c->damaged;
    case RunStatus::interrupted:
      return &c->interrupted;
    case RunStatus::running:
      // "running" with nobody holding the run's lock: it stopped without finishing.
      return RunLock::holder(run_dir).empty() ? &c->interrupted : &c->running;
    case RunStatus::pending:
      break;
  }
  // No word from the driver (a run directory it has not started, or one another program
  // wrote): what its partial record says, as load_sweep reads it.
  try {
    const RecordStatus st = read_record_status(run_dir + "/record.h5");
    if (status_or(st.status, RunStatus::failed) == RunStatus::running)
      return RunLock::holder(run_dir).empty() ? &c->interrupted : &c->running;
    if (st.partial) return &c->failed;  // failed, or ended without its record completed
  } catch (const RecordError&) {
    // no record at all
  }
  return &c->missing;
}

/// Where run `id` is now; where it was at the last look (`before`, by id) when its partial
/// record cannot be read right now (caught mid-update: asked again at the next look).
/// `st`: the run's state as the scan read it; null between scans (when it began is kept
/// from the last look).
LiveRun read_live_run(const std::string& dir, const std::string& id, const RunState* st,
                      const std::map<std::string, LiveRun>& before) {
  LiveRun l;
  l.id = id;
  const auto was = before.find(id);
  if (st)
    l.started = attempt_started(*st), l.attempt = st->attempts;
  else if (was != before.end())
    l.started = was->second.started, l.attempt = was->second.attempt;
  try {
    const RecordProgress p = read_partial_progress(run_dir(dir, id) + "/record.h5");
    l.step = p.step, l.steps = p.steps, l.loss = p.loss, l.stall = stall_words(p);
  } catch (const std::exception&) {
    if (was != before.end()) l = was->second;
  }
  return l;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return significant(v, 6);
}

}  // namespace

std::string live_fields_json(const LiveRun& l) {
  return "\"step\":" + std::to_string(l.step) + ",\"steps\":" + std::to_string(l.steps) +
         ",\"loss\":" + json_number(l.loss) + ",\"stall\":" + json_string(l.stall) +
         ",\"started\":" + std::to_string(static_cast<long long>(l.started)) +
         ",\"attempt\":" + std::to_string(l.attempt);
}

std::string progress_words(const LiveRun& l, std::time_t now) {
  std::string s = l.step < 0 ? "no step recorded yet"
                             : "step " + std::to_string(l.step) + " of " + std::to_string(l.steps) +
                                   (l.stall.empty() ? ", advancing" : l.stall);
  if (l.started > 0) s += ", " + attempt_age_words(l.started, l.attempt, now);
  return s;
}

std::string counts_words(const SweepCounts& c) {
  ReportModel m;  // (only its counts: counts_text's words and order)
  m.completed = c.completed, m.running = c.running, m.stopped = c.stopped, m.failed = c.failed;
  m.interrupted = c.interrupted, m.diverged = c.diverged, m.damaged = c.damaged, m.missing = c.missing;
  m.pending = c.pending;
  return report_fmt::counts_text(m);
}

/// Runs a build loads between two looks at a stop: a few tens of milliseconds of reading.
constexpr size_t kLoadChunk = 256;

ServedSweep::ServedSweep(std::string dir, std::string name, std::string run_href, double test_build_pause_s)
    : dir_(std::move(dir)),
      name_(std::move(name)),
      run_href_(std::move(run_href)),
      test_build_pause_s_(test_build_pause_s) {
  watched_ = Clock::now();
  publish();
  thread_ = std::thread([this] { loop(); });
}

ServedSweep::~ServedSweep() {
  stop();
  thread_.join();
}

void ServedSweep::stop() {
  stopping_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

void ServedSweep::watch() { watched_ = Clock::now(); }

SweepCounts ServedSweep::counts() {
  std::lock_guard<std::mutex> lock(mu_);
  watch();
  cv_.notify_all();  // a sweep nobody watched is looked at now
  return counts_;
}

std::pair<uint64_t, std::string> ServedSweep::status(uint64_t after, double wait_s) {
  std::unique_lock<std::mutex> lock(mu_);
  watch();
  cv_.notify_all();
  cv_.wait_for(lock, after_s(wait_s), [&] { return stop_ || version_ != after; });
  return {version_, status_json_};
}

std::shared_ptr<const std::string> ServedSweep::report(uint64_t* generation) {
  std::lock_guard<std::mutex> lock(mu_);
  watch();
  want_report_ = true;
  cv_.notify_all();
  *generation = generation_;
  return report_;
}

std::vector<HealthFlag> ServedSweep::sweep_flags(const std::string& id, double wait_s) {
  std::unique_lock<std::mutex> lock(mu_);
  watch();
  cv_.notify_all();
  cv_.wait_for(lock, after_s(wait_s), [&] { return stop_ || counts_.ready; });
  const auto it = flags_.find(id);
  return it == flags_.end() ? std::vector<HealthFlag>{} : it->second;
}

bool ServedSweep::live_run(const std::string& id, uint64_t after, double wait_s, LiveRun* out, uint64_t* version) {
  std::unique_lock<std::mutex> lock(mu_);
  watch();
  cv_.notify_all();
  cv_.wait_for(lock, after_s(wait_s), [&] { return stop_ || version_ != after; });
  *version = version_;
  for (const LiveRun& l : counts_.live)
    if (l.id == id) return *out = l, true;
  return false;
}

void ServedSweep::publish() {
  const SweepCounts& c = counts_;
  std::string running;
  for (const LiveRun& l : c.live)
    running +=
        std::string(running.empty() ? "" : ",") + "{\"id\":" + json_string(l.id) + "," + live_fields_json(l) + "}";
  std::string body = "\"sweep\":" + json_string(name_) + ",\"ready\":" + (c.ready ? "true" : "false") +
                     ",\"total\":" + std::to_string(c.total()) + ",\"counts\":{";
  const std::pair<const char*, size_t> words[] = {
      {"completed", c.completed}, {"running", c.running},         {"stopped", c.stopped},
      {"failed", c.failed},       {"interrupted", c.interrupted}, {"diverged", c.diverged},
      {"damaged", c.damaged},     {"missing", c.missing},         {"pending", c.pending}};
  for (size_t i = 0; i < std::size(words); ++i)
    body += std::string(i ? "," : "") + "\"" + words[i].first + "\":" + std::to_string(words[i].second);
  body += "},\"counts_text\":" + json_string(c.ready ? counts_words(c) : "reading the run directories") +
          ",\"running\":[" + running + "],\"report\":" + std::to_string(generation_);
  uint64_t v = 1469598103934665603ULL;
  mix(&v, body);
  v &= (uint64_t{1} << 53) - 1;  // a whole number a page's JavaScript holds exactly
  if (v == 0) v = 1;             // 0 is what a page that has seen nothing asks after
  if (v == version_) return;
  version_ = v;
  status_json_ = "{\"version\":" + std::to_string(v) + "," + body + "}\n";
  cv_.notify_all();
}

void ServedSweep::scan() {
  // (What the index read stays read between scans.)
  if (!index_) index_ = std::make_unique<SweepIndex>(SweepIndex::load_saying(dir_));
  SweepCounts c;
  const std::map<std::string, LiveRun> before = live_before();
  const auto runs = scan_runs(dir_, index_.get(), &stopping_);
  if (stopping_) return;  // (a part of the runs: nothing published)
  std::vector<std::pair<std::string, const RunState*>> ids;
  ids.reserve(runs.size());
  for (const auto& [id, st] : runs) ids.emplace_back(id, &st);
  std::sort(ids.begin(), ids.end());
  uint64_t fp = 1469598103934665603ULL;
  for (const auto& [id, st] : ids) {
    size_t* n = count_of(&c, st->state, run_dir(dir_, id));
    ++*n;
    // A running run that has recorded its first step changes the report too: its row gets
    // the step that the page then advances in place.
    if (n == &c.running) c.live.push_back(read_live_run(dir_, id, st, before));
    mix(&fp, id), mix(&fp, n != &c.running ? status_name(st->state) : c.live.back().step > 0 ? "stepping" : "running");
    mix(&fp, st->digest);
  }
  for (const auto& [id, values] : read_points_file(dir_))
    if (!runs.count(id)) ++c.pending, mix(&fp, id);
  c.fingerprint = fp;
  c.ready = true;
  // Each finished run's sweep-level flags, from what the index holds of every finished run.
  std::map<std::string, std::vector<HealthFlag>> flags;
  const FinishedRuns finished = finished_runs(runs, *index_);
  for (size_t i = 0; i < finished.done.size(); ++i)
    if (!finished.outliers[i].empty()) flags.emplace(finished.done[i].first, finished.outliers[i]);
  std::lock_guard<std::mutex> lock(mu_);
  counts_ = std::move(c);
  flags_ = std::move(flags);
  publish();
}

std::map<std::string, LiveRun> ServedSweep::live_before() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, LiveRun> out;
  for (const LiveRun& l : counts_.live) out[l.id] = l;
  return out;
}

void ServedSweep::read_live() {
  const std::map<std::string, LiveRun> before = live_before();
  std::vector<LiveRun> live;
  live.reserve(before.size());
  for (const auto& [id, l] : before) live.push_back(read_live_run(dir_, id, nullptr, before));
  std::lock_guard<std::mutex> lock(mu_);
  if (counts_.live.size() == live.size()) counts_.live = std::move(live);  // (unless a scan came between)
  publish();
}

bool ServedSweep::build() {
  uint64_t fingerprint;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fingerprint = counts_.fingerprint;
  }
  std::string html;
  {
    // load_sweep in pieces, looking at a stop between them (Ctrl-C during a build of
    // 100,000 records ends it within a piece, not after ~12 s). Each cache entry a piece
    // writes is whole (written aside, then renamed), so a stopped build leaves nothing
    // half-written.
    SweepRecords records;
    SweepLoader loader(dir_);
    const size_t chunk = test_build_pause_s_ > 0 ? 1 : kLoadChunk;
    for (size_t at = 0; at < loader.ids().size(); at += chunk) {
      if (stopping_) return false;
      loader.load(at, at + chunk, &records);
      if (test_build_pause_s_ > 0) std::this_thread::sleep_for(after_s(test_build_pause_s_));
    }
    if (stopping_) return false;
    loader.finish(&records);
    // Titled as `sweep report` titles it: the sweep's own name, else the directory's.
    std::string title = sweep_name(records.runs);
    if (title.empty()) title = fs::path(dir_).filename().string();
    if (title.empty()) title = name_;
    const ReportModel model = build_report(title, records);
    if (stopping_) return false;
    html = render_html(records, model, run_href_);
  }
  auto page = std::make_shared<const std::string>(std::move(html));
  std::lock_guard<std::mutex> lock(mu_);
  report_ = std::move(page);
  report_fingerprint_ = fingerprint;
  ++generation_;
  publish();
  return true;
}

void ServedSweep::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const Clock::time_point now = Clock::now();
    const bool watched = seconds(now - watched_) < kIdleS;
    // One thing per turn, then look again: a scan first (the counts), the report when the
    // scan found it out of date, the running runs' steps in between.
    if (watched && now >= next_scan_) {
      lock.unlock();
      scan();
      const double took = seconds(Clock::now() - now);
      lock.lock();
      next_scan_ = Clock::now() + after_s(std::max(kScanEveryS, kScanBackoff * took));
      next_live_ = Clock::now() + after_s(kScanEveryS);
      continue;
    }
    const bool stale = !report_ || report_fingerprint_ != counts_.fingerprint;
    if (watched && want_report_ && counts_.ready && stale && now >= next_build_) {
      lock.unlock();
      try {
        build();
      } catch (const std::exception& e) {
        // One failed build leaves the last page up; said once per failure on stderr.
        std::fprintf(stderr, "sweep serve: %s: the report could not be built: %s\n", dir_.c_str(), e.what());
      }
      const double took = seconds(Clock::now() - now);
      lock.lock();
      next_build_ = Clock::now() + after_s(std::max(1.0, kBuildBackoff * took));
      continue;
    }
    if (watched && !counts_.live.empty() && now >= next_live_) {
      lock.unlock();
      read_live();
      lock.lock();
      next_live_ = Clock::now() + after_s(kScanEveryS);
      continue;
    }
    Clock::time_point wake = now + after_s(kScanEveryS);
    if (watched) wake = std::min(wake, next_scan_);
    if (watched && !counts_.live.empty()) wake = std::min(wake, next_live_);
    if (watched && want_report_ && counts_.ready && stale) wake = std::min(wake, next_build_);
    cv_.wait_until(lock, wake);
  }
}

}  // namespace sweep
