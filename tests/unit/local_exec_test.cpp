// The local executor with real child processes standing in for sweep-train: parallel
// slots, retries by failure class (with --resume), launch.timeout_s, Ctrl-C, the lock,
// state files, `sweep plan` and `sweep status` data.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "atomic_file.h"      // write_file_atomically
#include "collective_ring.h"  // write_collective_ring: a stopped rank's ring
#include "fake_trainer.h"     // flag_value, write_run_record
#include "heartbeat.h"        // HeartbeatWriter
#include "plan.h"
#include "record.h"
#include "run_files.h"  // utc_now
#include "stop_signals.h"
#include "sweep_records.h"  // read_points_file
#include "sweep_run.h"
#include "temp_dir.h"   // TempDirTest
#include "test_util.h"  // EXPECT_CONTAINS, read_file

namespace sweep {
namespace {

namespace fs = std::filesystem;
using sweep_test::flag_value;

/// A one-step record of loss 1 in run directory `out`, from its config.yaml.
void write_record(const std::string& out, const std::string& status) {
  sweep_test::write_run_record(out + "/config.yaml", out + "/record.h5", status,
                               status == "diverged" ? "loss is NaN" : "", 1.0);
}

/// Real processes (so signals, groups and timing are real) that behave per run and attempt:
///   ok / slow-ok   write a completed record, exit 0 (slow: after 0.4 s)
///   diverge        write a diverged record, exit 1
///   exit1 / exit2 / exit4   exit with that code, no record
///   kill9          killed by SIGKILL
///   hang           sleep; ignores SIGTERM when "hang-hard"
class ScriptedRunner : public ProcessRunner {
 public:
  std::map<std::string, std::vector<std::string>> plan;  ///< run id -> behaviour per attempt (last repeats)
  std::vector<std::vector<std::string>> calls;
  int live = 0, max_live = 0;
  std::atomic<int> hanging{0};  ///< "hang" and "hang-hard" attempts started (read from other threads)

  int start(const std::vector<std::string>& argv, const std::string& log) override {
    calls.push_back(argv);
    const std::string out = flag_value(argv, "--out");
    const std::string id = fs::path(out).filename().string();
    int attempt = attempts_[id]++;
    const auto& list = plan[id];
    std::string b = list.empty() ? "ok" : list[std::min<size_t>(attempt, list.size() - 1)];
    std::string sh = "exit 0";
    if (b == "ok" || b == "slow-ok") write_record(out, "completed"), sh = b == "ok" ? "exit 0" : "sleep 0.4";
    if (b == "diverge") write_record(out, "diverged"), sh = "exit 1";
    if (b == "exit1") sh = "exit 1";
    if (b == "exit2") sh = "echo bad config; exit 2";
    if (b == "exit4") sh = "exit 4";
    if (b == "kill9") sh = "kill -9 $$";
    if (b == "hang") sh = "sleep 30";
    if (b == "hang-hard") sh = "trap '' TERM; sleep 30";
    int pid = real_.start({"/bin/sh", "-c", sh}, log);
    max_live = std::max(max_live, ++live);
    if (b == "hang" || b == "hang-hard") ++hanging;
    return pid;
  }
  std::vector<std::pair<int, ExitStatus>> wait_some(double wait_s) override {
    auto out = real_.wait_some(wait_s);
    live -= int(out.size());
    return out;
  }
  void signal_group(int id, int sig) override { real_.signal_group(id, sig); }
  int launches(const std::string& id) const {
    auto it = attempts_.find(id);
    return it == attempts_.end() ? 0 : it->second;
  }

 private:
  SpawnRunner real_;
  std::map<std::string, int> attempts_;
};

class Executor : public sweep_test::TempDirTest {
 protected:
  Executor() : TempDirTest("local_exec_test") {}
  void SetUp() override {
    TempDirTest::SetUp();
    opt_.out_dir = (dir_ / "out").string();
    opt_.train_binary = "/bin/false";
    opt_.quiet = true;
    opt_.poll_s = 0.02;
    StopSignals::reset();
  }
  void grid(const std::string& launch, int points = 4) {
    std::string seeds;
    for (int i = 0; i < points; ++i) seeds += (i ? ", " : "") + std::to_string(i);
    spec_ = parse_grid(
        "name: ex\nbase: {train: {steps: 3}}\ngrid:\n  train.seed: [" + seeds + "]\nlaunch: " + launch + "\n",
        "g.yaml");
    points_ = expand(spec_);
  }
  std::string id(int i) const { return points_[i].id; }
  RunState state(int i) const { return read_run_state(run_dir(opt_.out_dir, id(i))); }

  SweepSpec spec_;
  std::vector<GridPoint> points_;
  SweepRunOptions opt_;
};

TEST_F(Executor, RunsAtMostParallelAtOnce) {
  grid("{parallel: 2, slots: 8}", 5);
  ScriptedRunner r;
  for (int i = 0; i < 5; ++i) r.plan[id(i)] = {"slow-ok"};
  SweepSummary s = run_sweep(spec_, points_, opt_, r);
  EXPECT_EQ(s.completed, 5);
  EXPECT_EQ(r.max_live, 2);  // two at once, never more: not one after another (no wall-clock bound, which load breaks)
  for (int i = 0; i < 5; ++i) EXPECT_EQ(state(i).state, RunStatus::completed);
}

TEST_F(Executor, SlotsLimitCoresNotJustRuns) {
  // Two ranks each (behind mpiexec in real life) on 2 slots: one run at a time.
  spec_ = parse_grid(
      "name: ex\nbase: {dist: {world_size: 2}}\ngrid:\n  train.seed: [0, 1, 2]\nlaunch: {parallel: 3, slots: 2}\n",
      "g.yaml");
  points_ = expand(spec_);
  opt_.mpiexec = "/usr/bin/mpiexec";
  opt_.rank_wrapper = "/opt/sweep-rank";
  ScriptedRunner r;
  for (auto& p : points_) r.plan[p.id] = {"slow-ok"};
  SweepSummary s = run_sweep(spec_, points_, opt_, r);
  EXPECT_EQ(s.completed, 3);
  EXPECT_EQ(r.max_live, 1);
  ASSERT_FALSE(r.calls.empty());
  EXPECT_EQ(r.calls[0][0], "/usr/bin/mpiexec");
  EXPECT_NE(std::find(r.calls[0].begin(), r.calls[0].end(), "/opt/sweep-rank"), r.calls[0].end());
}

TEST_F(Executor, RetriesByClassWithResumeAndGivesUp) {
  grid("{retries: {crashed: 2, hang: 1}}", 5);
  ScriptedRunner r;
  r.plan[id(0)] = {"kill9", "ok"};     // retried once, then completes
  r.plan[id(1)] = {"exit1"};           // crashed every time: 1 + 2 attempts, failed
  r.plan[id(2)] = {"exit2"};           // bad config: never retried
  r.plan[id(3)] = {"diverge"};         // diverged: never retried
  r.plan[id(4)] = {"exit4", "exit4"};  // hang: 1 retry allowed
  SweepSummary s = run_sweep(spec_, points_, opt_, r);
  EXPECT_EQ(r.launches(id(0)), 2);
  EXPECT_EQ(r.launches(id(1)), 3);
  EXPECT_EQ(r.launches(id(2)), 1);
  EXPECT_EQ(r.launches(id(3)), 1);
  EXPECT_EQ(r.launches(id(4)), 2);
  EXPECT_EQ(s.completed, 1);
  EXPECT_EQ(s.failed, 4);
  EXPECT_EQ(s.retries, 1 + 2 + 1);
  // The retry continues from checkpoints.
  for (const auto& c : r.calls) {
    if (flag_value(c, "--out") == run_dir(opt_.out_dir, id(0))) {
      EXPECT_EQ(std::count(c.begin(), c.end(), "--resume"), c == r.calls[0] ? 0 : 1);
    }
  }
  EXPECT_EQ(state(0).state, RunStatus::completed);
  EXPECT_EQ(state(0).attempts, 2);
  EXPECT_EQ(state(1).state, RunStatus::failed);
  EXPECT_EQ(state(1).failure, FailureClass::crashed);
  EXPECT_EQ(state(1).attempts, 3);
  EXPECT_EQ(state(2).failure, FailureClass::config);
  EXPECT_EQ(state(3).state, RunStatus::diverged);
  EXPECT_EQ(state(4).failure, FailureClass::hang);
  // The failed run's log names each attempt.
  std::ifstream log(run_dir(opt_.out_dir, id(1)) + "/logs/rank0.log");
  std::string text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_CONTAINS(text, "=== sweep: attempt 3 of run " + id(1) + " (--resume)");
}

TEST_F(Executor, TimeoutStopsARunWithTermThenKill) {
  grid("{timeout_s: 0.3, grace_s: 0.3, parallel: 2, retries: {timeout: 1}}", 3);
  ScriptedRunner r;
  r.plan[id(0)] = {"hang"};       // ends on SIGTERM
  r.plan[id(1)] = {"hang-hard"};  // ignores SIGTERM: needs the SIGKILL
  auto t0 = std::chrono::steady_clock::now();
  SweepSummary s = run_sweep(spec_, points_, opt_, r);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 10);
  EXPECT_EQ(s.completed, 1);
  EXPECT_EQ(s.failed, 2);
  EXPECT_EQ(r.launches(id(0)), 2);  // retried once for timeout
  EXPECT_EQ(state(0).failure, FailureClass::timeout);
  EXPECT_EQ(state(1).failure, FailureClass::timeout);
  EXPECT_CONTAINS(state(1).detail, "signal 9");
  EXPECT_CONTAINS(state(0).detail, "signal 15");
}

TEST_F(Executor, InterruptStopsEveryRunAndTheNextRunStartsOnlyThose) {
  grid("{parallel: 2, grace_s: 0.5}", 5);
  ScriptedRunner r;
  r.plan[id(0)] = {"ok"};
  for (int i = 1; i < 5; ++i) r.plan[id(i)] = {"hang-hard", "ok"};
  // Ctrl-C once runs 1 and 2 hang (so run 0 has completed: two at once), however slow the
  // machine: a fixed 500 ms caught a loaded TSan build with one run started.
  std::thread ctrl_c([&r] {
    const auto t0 = std::chrono::steady_clock::now();
    while (r.hanging.load() < 2 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ::kill(::getpid(), SIGINT);
  });
  SweepSummary s = run_sweep(spec_, points_, opt_, r);
  ctrl_c.join();
  EXPECT_EQ(s.stop_signal, SIGINT);
  EXPECT_EQ(s.completed, 1);
  EXPECT_EQ(s.interrupted, 2);
  EXPECT_EQ(s.not_started, 2);
  EXPECT_EQ(state(1).state, RunStatus::interrupted);
  EXPECT_EQ(state(2).state, RunStatus::interrupted);
  EXPECT_EQ(state(3).state, RunStatus::pending);
  EXPECT_EQ(r.live, 0) << "every run ended before the driver returned";

  // Again: the completed run is skipped, the interrupted ones resume, the others start.
  StopSignals::reset();
  ScriptedRunner again;
  s = run_sweep(spec_, points_, opt_, again);
  EXPECT_EQ(again.calls.size(), 4u);
  EXPECT_EQ(again.launches(id(0)), 0);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.completed, 4);
  for (const auto& c : again.calls) {
    bool was_interrupted = flag_value(c, "--out") == run_dir(opt_.out_dir, id(1)) ||
                           flag_value(c, "--out") == run_dir(opt_.out_dir, id(2));
    EXPECT_EQ(std::count(c.begin(), c.end(), "--resume"), was_interrupted ? 1 : 0);
  }
}

TEST_F(Executor, SecondDriverOnTheSameDirIsRefused) {
  grid("{}", 1);
  SweepSession first(spec_, points_, opt_);
  try {
    SweepSession second(spec_, points_, opt_);
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(), "another sweep driver is running on this directory (pid " + std::to_string(::getpid()));
  }
  EXPECT_CONTAINS(SweepLock::holder(opt_.out_dir), "pid " + std::to_string(::getpid()));
}

TEST_F(Executor, LockIsFreeAfterTheDriver) {
  grid("{}", 1);
  { SweepSession s(spec_, points_, opt_); }
  EXPECT_EQ(SweepLock::holder(opt_.out_dir), "");
  SweepSession again(spec_, points_, opt_);  // no throw
}

TEST_F(Executor, PlanShowsVaryingColumnsStateAndCoresWithoutWriting) {
  spec_ = parse_grid(
      "name: p\nbase: {train: {steps: 3}}\ngrid:\n  train.lr: [0.1, 0.2]\n  dist.world_size: [1, 2]\n"
      "  train.steps: [3]\n",
      "g.yaml");
  Expansion e = expand_grid(spec_);
  points_ = e.points;
  std::string text = render_plan(spec_, e, opt_.out_dir);
  EXPECT_FALSE(fs::exists(opt_.out_dir));
  EXPECT_CONTAINS(text, "sweep p: 4 runs in " + opt_.out_dir + " (0 done, 4 to run)");
  EXPECT_CONTAINS(text, "id                state        cores  train.lr  dist.world_size\n");
  EXPECT_EQ(text.find("train.steps"), std::string::npos) << "a column that never varies is left out";
  EXPECT_CONTAINS(text, points_[1].id + "  pending      2      0.1       2\n");
  EXPECT_CONTAINS(text, "largest run 2 cores");

  ScriptedRunner r;
  r.plan[points_[1].id] = {"exit1"};
  run_sweep(spec_, points_, opt_, r);
  PlanCounts c;
  text = render_plan(spec_, e, opt_.out_dir, &c);
  EXPECT_EQ(c.done, 3u);
  EXPECT_EQ(c.pending, 1u);
  EXPECT_CONTAINS(text, points_[0].id + "  done ");
  EXPECT_CONTAINS(text, points_[1].id + "  failed ");
}

TEST_F(Executor, PlanColumnsCountTheBaseValueOfPointsThatDoNotSweepAKey) {
  // warmup is swept only by the include (so the grid's points show the base's 0 there);
  // clip_norm is one value, but not the base's, which the includes keep: a column;
  // weight_decay is swept to its base value everywhere it is written: no column.
  spec_ = parse_grid(
      "name: p\nbase: {train: {steps: 3, weight_decay: 0.1, clip_norm: 1}}\ngrid:\n  train.lr: [0.1, 0.2]\n"
      "  train.clip_norm: [0.5]\n  train.weight_decay: [0.1]\ninclude:\n  - {train.warmup: 2}\n  - "
      "{train.weight_decay: 0.1}\n",
      "g.yaml");
  PlanTable streamed(spec_, opt_.out_dir);
  Expansion e = expand_grid_each(spec_, [&](GridPoint&& p) { streamed.add(p); });
  EXPECT_TRUE(e.points.empty()) << "expand_grid_each keeps no point";
  const std::string text = streamed.render(e);
  EXPECT_EQ(text, render_plan(spec_, expand_grid(spec_), opt_.out_dir));
  EXPECT_CONTAINS(text, "id                state        cores  train.lr  train.clip_norm  train.warmup\n");
  EXPECT_EQ(text.find("weight_decay"), std::string::npos) << text;
  const auto points = expand_grid(spec_).points;
  ASSERT_EQ(points.size(), 4u);
  EXPECT_CONTAINS(text, points[0].id + "  pending      1      0.1       0.5              0\n");
  EXPECT_CONTAINS(text, points[2].id + "  pending      1      0.001     1                2\n");  // the base's
}

TEST_F(Executor, PointsFileAndStatesAreReadBack) {
  grid("{}", 2);
  ScriptedRunner r;
  r.plan[id(1)] = {"exit1"};
  run_sweep(spec_, points_, opt_, r);
  auto pts = read_points_file(opt_.out_dir);
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[0].first, id(0));
  EXPECT_EQ(pts[0].second, "train.seed=0");
  auto runs = scan_runs(opt_.out_dir);
  EXPECT_EQ(runs.at(id(0)).state, RunStatus::completed);
  EXPECT_EQ(runs.at(id(1)).state, RunStatus::failed);
  EXPECT_EQ(runs.at(id(1)).detail, "exit code 1");
  EXPECT_FALSE(runs.at(id(1)).updated.empty());
}

TEST_F(Executor, AtomicWritesNeverReplaceADevice) {
  // `sweep report -o /dev/null` as root must not turn /dev/null into a file. Through a
  // symlink, so a regression replaces only the link.
  fs::create_directories(dir_);
  const fs::path link = dir_ / "null";
  fs::create_symlink("/dev/null", link);
  write_file_atomically(link.string(), "report");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  write_file_atomically((dir_ / "plain").string(), "text");
  EXPECT_TRUE(fs::is_regular_file(dir_ / "plain"));
}

TEST(ClassifyAttempt, ExitCodesAndRecords) {
  std::string d;
  ExitStatus st;
  st.code = 2;
  EXPECT_EQ(classify_attempt(st, "/nonexistent", &d), FailureClass::config);
  st.code = 4;
  EXPECT_EQ(classify_attempt(st, "/nonexistent", &d), FailureClass::hang);
  st.code = 1;
  EXPECT_EQ(classify_attempt(st, "/nonexistent", &d), FailureClass::crashed);
  st.code = 0;
  EXPECT_EQ(classify_attempt(st, "/nonexistent", &d), FailureClass::lost);
  EXPECT_EQ(d, "exit code 0 but no record");
  st.code = -1;
  st.signal = 9;
  EXPECT_EQ(classify_attempt(st, "/nonexistent", &d), FailureClass::crashed);
  EXPECT_CONTAINS(d, "signal 9");
}

// What Open MPI 4.1 printed here (tests/cluster) for one attempt in three when every process
// of node sweep-node2 was killed mid-run: the daemon's agent exited before its link broke,
// so mpirun said it could not start the daemon, naming no host.
TEST(ClassifyAttempt, ADaemonLostMidRunThatMpirunCallsAStartFailureIsTheNodeThatWentAway) {
  sweep_test::TempDir tmp("sweep_classify_");
  const fs::path run = tmp.path() / "run";
  fs::create_directories(run / "logs/node-a");
  fs::create_directories(run / "logs/node-b");
  fs::create_directories(run / "logs/node-c");
  auto write_log = [&](const fs::path& p, const std::string& text, bool old) {
    std::ofstream(p) << text;
    if (old) fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::hours(2));
  };
  const std::string stopped =
      "step 40 loss 1.5\nsweep-train: rank 0: stopped by SIGTERM at step 44 while waiting for the other ranks in "
      "allreduce (the launcher ends every rank once one has exited); exiting (143)\n";
  auto launcher = [&](const std::string& started) {
    write_log(run / "logs/launcher.log",
              "=== sweep: attempt 1 of run r at 2026-01-01T00:00:00Z ===\nearlier attempt\n"
              "=== sweep: attempt 2 of run r (--resume) at " +
                  started +
                  " ===\n---\nORTE was unable to reliably start one or more daemons.\nThis usually is caused by:\n",
              false);
  };
  launcher(utc_now());
  write_log(run / "logs/node-a/rank0.log", stopped, false);
  write_log(run / "logs/node-b/rank1.log", "", true);
  write_log(run / "logs/node-c/rank2.log", stopped, false);
  ExitStatus st;
  st.code = 9;
  std::string d;
  EXPECT_EQ(classify_attempt(st, run.string(), &d), FailureClass::node_fail) << d;
  EXPECT_CONTAINS(d, "node node-b was lost");
  // Two hosts unaccounted for: both are named, as one of them.
  write_log(run / "logs/node-c/rank2.log", "step 40 loss 1.5\n", false);
  EXPECT_EQ(classify_attempt(st, run.string(), &d), FailureClass::node_fail) << d;
  EXPECT_CONTAINS(d, "one of nodes node-b, node-c was lost");
  // A rank stopped in an earlier attempt proves nothing about this one: a start failure.
  write_log(run / "logs/node-a/rank0.log", stopped, true);
  EXPECT_EQ(classify_attempt(st, run.string(), &d), FailureClass::crashed) << d;
  EXPECT_CONTAINS(d, "mpirun could not start on every host");
  // No rank stopped by the launcher at all: the same.
  write_log(run / "logs/node-a/rank0.log", "step 40 loss 1.5\n", false);
  EXPECT_EQ(classify_attempt(st, run.string(), &d), FailureClass::crashed) << d;
  EXPECT_CONTAINS(d, "mpirun could not start on every host");
}

// Rank 0 stopped (it wrote no cause) while rank 1 never entered the collective it waits
// in: the heartbeats this attempt left say so; an earlier attempt's say nothing.
TEST(ClassifyAttempt, AHangWithoutACauseIsLocatedByTheHeartbeatsOfThisAttempt) {
  sweep_test::TempDir tmp("sweep_classify_");
  const fs::path run = tmp.path() / "run";
  fs::create_directories(run / "logs");
  std::ofstream(run / "logs/launcher.log") << "=== sweep: attempt 2 of run r (--resume) at " << utc_now() << " ===\n";
  {
    HeartbeatWriter rank0(run.string(), 0), rank1(run.string(), 1);
    rank0.publish(35, 20, 3, true, -1, "allreduce");
    rank1.publish(34, 19, 3, false, -1, "allgather");
  }
  ExitStatus st;
  st.code = 4;
  std::string d;
  EXPECT_EQ(classify_attempt(st, run.string(), &d), FailureClass::hang) << d;
  EXPECT_CONTAINS(d, "; rank 1 never entered collective #35 (allreduce at step 3); rank 0 waits in it");
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(run / "rank1.heartbeat", old);
  EXPECT_EQ(classify_attempt(st, run.string(), &d), FailureClass::hang) << d;
  EXPECT_CONTAINS(d, "no heartbeat from rank 1; rank 0 waits in collective #35");
  fs::last_write_time(run / "rank0.heartbeat", old);
  EXPECT_EQ(classify_attempt(st, run.string(), &d), FailureClass::hang) << d;
  EXPECT_EQ(d.find("collective #"), std::string::npos) << d;
}

// The rings the ranks wrote as they stopped, merged with the heartbeat of the one that
// wrote none (stopped): the first collective they disagree on comes first in the detail,
// and the partial record keeps it (/hang, read back by the e2e test). An earlier attempt's
// ring or heartbeat says nothing.
TEST(ClassifyAttempt, AHangsFirstDisagreementAmongTheRanksRingsComesFirstInTheDetail) {
  sweep_test::TempDir tmp("sweep_classify_");
  const fs::path run = tmp.path() / "run";
  fs::create_directories(run / "logs");
  std::ofstream(run / "logs/launcher.log") << "=== sweep: attempt 1 of run r at " << utc_now() << " ===\n";
  {
    RecordHeader h;
    h.run_id = "0123456789abcdef";
    RecordWriter w((run / "record.h5").string(), h);
  }  // rank 0 wrote no cause
  std::vector<RingEntry> ring;
  for (long long n = 1; n <= 35; ++n)
    ring.push_back(RingEntry{n, n, 1 + n / 12, -1, 8, "allreduce", 10.0 + n, 10.5 + n});
  ring.back().end_s = -1;  // rank 0 waits in #35
  ASSERT_TRUE(write_collective_ring(run.string(), 0, ring));
  {
    HeartbeatWriter rank0(run.string(), 0), rank1(run.string(), 1);
    rank0.publish(35, 35, 3, true, -1, "allreduce");
    rank1.publish(34, 34, 3, false, -1, "allreduce");  // finished #34, then stopped
  }
  ExitStatus st;
  st.code = 4;
  std::string d;
  EXPECT_EQ(classify_attempt(st, run.string(), &d), FailureClass::hang) << d;
  EXPECT_EQ(d.rfind("hang: rank 1 never entered collective #35 (allreduce, 8 B, at step 3); rank 0 waited in it; ", 0),
            0u)
      << d;
  EXPECT_CONTAINS(read_record_status((run / "record.h5").string()).failure,
                  "rank 1 never entered collective #35 (allreduce at step 3)");  // the heartbeats' words
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(2);
  // Without rank 0's ring (an earlier attempt's) the heartbeats alone say it, sizes unknown.
  fs::last_write_time(collective_ring_path(run.string(), 0), old);
  EXPECT_EQ(classify_attempt(st, run.string(), &d), FailureClass::hang) << d;
  EXPECT_EQ(d.rfind("hang: rank 1 never entered collective #35 (allreduce, at step 3); rank 0 waited in it; ", 0), 0u)
      << d;
  fs::last_write_time(run / "rank0.heartbeat", old);
  EXPECT_EQ(classify_attempt(st, run.string(), &d), FailureClass::hang) << d;
  EXPECT_EQ(d.find("hang: "), std::string::npos) << d;
}

TEST(ProgressBar, CountsAndEta) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    Progress p(6, 1, 0, /*tty=*/false, f, /*every_s=*/0);
    p.started();
    p.started();
    EXPECT_EQ(p.status(), "[####....................] 1/6 done, 2 running, 0 failed");
    p.ended(true);
    p.ended(false);
    EXPECT_CONTAINS(p.status(), "2/6 done, 0 running, 1 failed, ETA ");
    p.line("a run line");
    // What a program printed, quoted in a FAILED line: shown, never acted on.
    p.line("FAILED    x: crashed (last line: \x1b[2J\x1b]0;pwned\x07 \u202eevil)");
    p.tick();
  }
  std::fclose(f);
  std::string out(buf, len);
  free(buf);
  EXPECT_EQ(out.find('\r'), std::string::npos) << "no carriage returns without a terminal";
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_EQ(out.find('\x07'), std::string::npos) << out;
  EXPECT_CONTAINS(out, "(last line: \\x1b[2J\\x1b]0;pwned\\x07 \\u{202e}evil)\n");
  EXPECT_CONTAINS(out, "a run line\n");
  EXPECT_CONTAINS(out, "progress: 2/6 done, 0 running, 1 failed");
  EXPECT_EQ(format_duration(65), "1m05s");
  EXPECT_EQ(format_duration(7300), "2h01m");
}

}  // namespace
}  // namespace sweep
