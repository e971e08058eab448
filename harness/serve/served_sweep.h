// One sweep directory as `sweep serve` keeps it: what each run is now (a scan of the
// run directories through the sweep's index, the running runs' steps from their partial
// records) and the sweep's report page, both made by a thread of its own and kept, so that
// a request never reads every record. A request is answered from what is kept; a reader
// who keeps asking keeps them fresh:
//   - the scan (scan_runs: each state file, records the index does not vouch for) runs at
//     most every kScanEveryS seconds, and never sooner after the last one than
//     kScanBackoff times as long as it took (100,000 runs: ~1.5 s a scan, one every ~8 s);
//     the running runs' steps are read every kScanEveryS seconds between scans;
//   - the report (load_sweep through the record cache, build_report, render_html) is
//     rebuilt when the scan finds a run whose state or record changed, at most once per
//     kBuildBackoff times the last build's time (100,000 runs: ~12 s a build);
//   - both stop while nobody has asked about the sweep for kIdleS seconds;
//   - a stop (the server's Ctrl-C) ends either between two runs: the scan saves no index,
//     the build keeps nothing, so nothing is left half-written.
// The scan also gives each finished run's sweep-level health flags (throughput_outlier)
// from the index it keeps, so that a run page reads no record but its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cmath>  // NAN
#include <condition_variable>
#include <cstdint>
#include <ctime>  // time_t
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sweep {

class SweepIndex;   // sweep_index.h
struct HealthFlag;  // run_health.h

/// Seconds between looks at a watched sweep; seconds without a request after which it is
/// no longer watched; how many times a scan's (a build's) duration must pass before the next.
inline constexpr double kScanEveryS = 1;
inline constexpr double kIdleS = 60;
inline constexpr double kScanBackoff = 5;
inline constexpr double kBuildBackoff = 3;

/// A running run and where it is (its partial record as of the writer's last flush).
struct LiveRun {
  std::string id;
  int64_t step = -1, steps = -1;  ///< -1: not readable yet
  double loss = NAN;
  std::string stall;  ///< stall_words: "" while it advances
  /// When its current attempt began (attempt_started: the run's state), seconds since the
  /// epoch; 0 when the state does not say.
  std::time_t started = 0;
  int attempt = 0;  ///< which attempt of the run this is (the state's attempts)
};

/// What a scan found: each run directory counted by the report's words, and the running runs.
struct SweepCounts {
  bool ready = false;  ///< a first scan has ended
  /// completed, running, stopped, failed, interrupted, diverged, damaged, missing (a run
  /// directory without a record), pending (a point of points.tsv with no run directory).
  size_t completed = 0, running = 0, stopped = 0, failed = 0, interrupted = 0, diverged = 0, damaged = 0, missing = 0,
         pending = 0;
  size_t total() const {
    return completed + running + stopped + failed + interrupted + diverged + damaged + missing + pending;
  }
  std::vector<LiveRun> live;  ///< the running runs, by id
  /// Of every run's id, state and accepted record digest, and the pending points: when it
  /// changes, the report is out of date.
  uint64_t fingerprint = 0;
};

/// A running run's figures as JSON members: "step":S,"steps":T,"loss":L,"stall":"...",
/// "started":EPOCH_S,"attempt":A (status.json's, each running run's and a run's own).
std::string live_fields_json(const LiveRun& l);

/// Where a running run is, as its page's progress row says it: "step 37 of 100, advancing,
/// 1m12s into attempt 1" (the elapsed time as `sweep status` says it, at `now`; left out
/// when the run's state does not say when the attempt began).
std::string progress_words(const LiveRun& l, std::time_t now);

/// The sweep's counts in the report's words ("3 completed, 1 running"; counts_text).
std::string counts_words(const SweepCounts& c);

class ServedSweep {
 public:
  /// Watches sweep directory `dir` (checked by the caller), served as `name`; `run_href` is
  /// what the report's run ids link to (run_href + id). Starts its thread.
  /// `test_build_pause_s` (tests only): a build loads one run at a time and pauses this
  /// long after each, so that a test can stop the server in the middle of one.
  ServedSweep(std::string dir, std::string name, std::string run_href, double test_build_pause_s = 0);
  ~ServedSweep();
  ServedSweep(const ServedSweep&) = delete;
  ServedSweep& operator=(const ServedSweep&) = delete;

  /// Ends its thread's work (at the next run a scan or build reads) and every wait of
  /// status() at once (the server is stopping).
  void stop();

  const std::string& dir() const { return dir_; }
  const std::string& name() const { return name_; }

  /// The last scan's counts (ready false before the first); marks the sweep watched.
  SweepCounts counts();
  /// The status as JSON (status_json) and its version: waits up to `wait_s` for one whose
  /// version is not `after` (a long poll: the page asks again as soon as it has an answer).
  std::pair<uint64_t, std::string> status(uint64_t after, double wait_s);
  /// The report page's HTML and its generation (1 for the first build); null before the
  /// first build ends, which this asks for.
  std::shared_ptr<const std::string> report(uint64_t* generation);
  /// Run `id`'s sweep-level health flags as of the last scan (waits up to `wait_s` for the
  /// first); none for a run that is not finished or not flagged.
  std::vector<HealthFlag> sweep_flags(const std::string& id, double wait_s);
  /// Run `id` as of the last look and the status version it belongs to (status()'s: waits
  /// up to `wait_s` for a version that is not `after`); false when the run is not running.
  bool live_run(const std::string& id, uint64_t after, double wait_s, LiveRun* out, uint64_t* version);

 private:
  using Clock = std::chrono::steady_clock;
  void loop();
  void watch();  // under mu_
  void scan();
  void read_live();
  std::map<std::string, LiveRun> live_before();  // the running runs at the last look, by id
  bool build();                                  // false: stopped before it ended, nothing kept
  void publish();                                // under mu_: the status JSON and its version

  std::string dir_, name_, run_href_;
  double test_build_pause_s_ = 0;
  std::atomic<bool> stopping_{false};  ///< stop(): read by the scan and the build between runs
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, want_report_ = false;
  Clock::time_point watched_{}, next_scan_{}, next_live_{}, next_build_{};
  SweepCounts counts_;
  std::string status_json_;
  uint64_t version_ = 0;
  std::shared_ptr<const std::string> report_;
  uint64_t generation_ = 0, report_fingerprint_ = 0;
  std::map<std::string, std::vector<HealthFlag>> flags_;  ///< the flagged finished runs, by id
  std::unique_ptr<SweepIndex> index_;                     ///< the thread's: what it read stays read between scans
  std::thread thread_;
};

}  // namespace sweep
