// The Slurm executor against a fake Slurm: final states become failure classes (a
// NODE_FAIL naming the node that failed), retries are resubmitted as a new array with
// --resume, a task Slurm forgot is lost, and Ctrl-C scancels every array and marks its
// runs interrupted. Plus the sbatch argv of launch.slurm.nodes. Against a simulated
// Slurm (SimSlurm: throttles, MaxArraySize, MaxJobCount, pending reasons): arrays of at
// most MaxArraySize with launch.parallel over all of them, one squeue per poll, the
// sweep's queue kept under MaxJobCount, an sbatch refusal, a job that can never start,
// and a driver that finds the arrays of one that died. SlurmCli against stand-in
// commands: one squeue and one sacct however many jobs.
#include "slurm_exec.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "config_error.h"  // ConfigError
#include "fake_trainer.h"  // write_run_record
#include "launch.h"        // spans_hosts
#include "record.h"
#include "slurm.h"       // sbatch_argv, describe_down_nodes
#include "slurm_jobs.h"  // append_slurm_job
#include "stop_signals.h"
#include "temp_dir.h"   // TempDirTest
#include "test_util.h"  // EXPECT_CONTAINS

namespace sweep {
namespace {

namespace fs = std::filesystem;

/// Plays Slurm: each submitted task ends in the state scripted for its run (by position
/// in submission order), writing a completed record for COMPLETED.
class FakeSlurm : public SlurmClient {
 public:
  std::vector<std::string> final_states;  ///< per task, in submission order over all arrays
  std::vector<int> exit_codes;            ///< per task, the batch script's exit code (absent: none written)
  std::vector<std::vector<std::string>> submitted;
  std::vector<std::string> scripts;
  std::vector<std::string> cancelled;
  bool forget = false;  ///< squeue and sacct know nothing

  std::string submit(const std::vector<std::string>& argv) override {
    submitted.push_back(argv);
    std::ifstream in(argv.back());
    std::string text((std::istreambuf_iterator<char>(in)), {}), line;
    scripts.push_back(text);
    std::string job = std::to_string(100 + submitted.size());
    std::stringstream ss(text);
    bool in_runs = false;
    int task = 0;
    while (std::getline(ss, line)) {
      if (line == "runs=(")
        in_runs = true;
      else if (line == ")")
        in_runs = false;
      else if (in_runs) {
        std::string dir = line.substr(3, line.size() - 4);  // "  '/path'"
        if (next_ < exit_codes.size()) std::ofstream(dir + "/slurm-exit") << exit_codes[next_] << "\n";
        std::string state = next_ < final_states.size() ? final_states[next_++] : "RUNNING";
        if (state == "COMPLETED") finish(dir);
        if (state == "COMPLETED-NORECORD") state = "COMPLETED";           // Slurm's word, but no record
        if (state == "RUNNING-RECORDED") finish(dir), state = "RUNNING";  // done, not yet seen to end
        states_[job + "_" + std::to_string(task++)] = state;
      }
    }
    return job;
  }
  SlurmAnswer queue(const std::vector<std::string>&) override {
    SlurmAnswer a;
    a.answered = true;
    if (!forget)
      for (const auto& [k, v] : states_) a.tasks[k] = {v, "None"};
    return a;
  }
  SlurmAnswer accounting(const std::vector<std::string>&) override { return {}; }  // no accounting
  void cancel(const std::vector<std::string>& jobs) override {
    cancelled.insert(cancelled.end(), jobs.begin(), jobs.end());
    for (auto& [k, v] : states_) v = "CANCELLED";
  }
  bool set_throttle(const std::string&, int) override { return true; }
  SlurmLimits limits() override { return {1001, 10000, true}; }
  std::string nodes_of(const std::string& job_task) override {
    asked_nodes.push_back(job_task);
    return "on n[1-2], down: n2 (down*: Not responding)";
  }
  std::vector<std::string> asked_nodes;  ///< nodes_of calls

 private:
  static void finish(const std::string& dir) {
    sweep_test::write_run_record(dir + "/config.yaml", dir + "/record.h5");
    std::ofstream(dir + "/slurm-exit") << "0\n";
  }
  std::map<std::string, std::string> states_;
  size_t next_ = 0;
};

class SlurmExec : public sweep_test::TempDirTest {
 protected:
  SlurmExec() : TempDirTest("slurm_exec_test") {}
  void SetUp() override {
    TempDirTest::SetUp();
    opt_.out_dir = (dir_ / "out").string();
    opt_.train_binary = "/opt/sweep/bin/sweep-train";
    opt_.rank_wrapper = "/opt/sweep/bin/sweep-rank";
    opt_.quiet = true;
    StopSignals::reset();
  }
  void grid(const std::string& launch) {
    spec_ = parse_grid("name: s\ngrid:\n  train.seed: [0, 1, 2, 3]\nlaunch: {launcher: slurm, parallel: 2, " + launch +
                           " slurm: {poll_s: 0.1}}\n",
                       "g.yaml");
    points_ = expand(spec_);
  }
  RunState state(int i) const { return read_run_state(run_dir(opt_.out_dir, points_[i].id)); }
  /// The sweep on `slurm`, stopped 300 ms in by a SIGTERM as Ctrl-C stops it.
  SweepSummary run_stopped(FakeSlurm& slurm) {
    std::thread ctrl_c([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::kill(::getpid(), SIGTERM);
    });
    SweepSummary s = run_sweep_slurm(spec_, points_, opt_, slurm);
    ctrl_c.join();
    return s;
  }
  SweepSpec spec_;
  std::vector<GridPoint> points_;
  SweepRunOptions opt_;
};

TEST_F(SlurmExec, FinalStatesBecomeClassesAndRetriesResubmitWithResume) {
  grid("retries: {node_fail: 1},");
  FakeSlurm slurm;
  slurm.final_states = {"COMPLETED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", /* the retry: */ "COMPLETED"};
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, slurm);
  ASSERT_EQ(slurm.submitted.size(), 2u);
  EXPECT_EQ(slurm.submitted[0][3], "--array=0-3%2");
  EXPECT_EQ(slurm.submitted[1][3], "--array=0-0%1");
  EXPECT_NE(slurm.scripts[0].find("resume=(0 0 0 0)"), std::string::npos);
  EXPECT_NE(slurm.scripts[1].find("resume=(1)"), std::string::npos) << "a retry continues from checkpoints";
  EXPECT_NE(slurm.scripts[1].find(points_[1].id), std::string::npos);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 2);
  EXPECT_EQ(s.retries, 1);
  EXPECT_EQ(state(0).state, RunStatus::completed);
  EXPECT_EQ(state(1).state, RunStatus::completed);
  EXPECT_EQ(state(1).attempts, 2);
  EXPECT_EQ(state(2).failure, FailureClass::oom);
  EXPECT_NE(state(2).detail.find("Slurm OUT_OF_MEMORY"), std::string::npos) << state(2).detail;
  EXPECT_EQ(state(3).failure, FailureClass::preempted);
  // Slurm is asked which node failed for the NODE_FAIL task alone.
  EXPECT_EQ(slurm.asked_nodes, (std::vector<std::string>{"101_1"}));
}

TEST_F(SlurmExec, ANodeFailureOutranksTheHangItCausesAndNamesTheNode) {
  // The ranks left on the healthy node wait for the dead one until their watchdog ends
  // them (exit 4, hang); Slurm's NODE_FAIL names the cause, and the node that failed.
  grid("");
  FakeSlurm slurm;
  slurm.final_states = {"NODE_FAIL", "FAILED", "COMPLETED", "COMPLETED"};
  slurm.exit_codes = {4, 4};
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, slurm);
  EXPECT_EQ(s.failed, 2);
  EXPECT_EQ(state(0).failure, FailureClass::node_fail);
  EXPECT_NE(state(0).detail.find("Slurm NODE_FAIL on n[1-2], down: n2 (down*: Not responding)"), std::string::npos)
      << state(0).detail;
  EXPECT_EQ(state(1).failure, FailureClass::hang) << "FAILED does not outrank the trainer's own word";
  EXPECT_EQ(state(1).detail.find("down:"), std::string::npos) << state(1).detail;
  EXPECT_EQ(slurm.asked_nodes, (std::vector<std::string>{"101_0"}));
}

TEST(SlurmArgv, NodesSpreadTheRanksEvenlyOrLeaveItToSlurm) {
  SlurmArray a;
  a.sweep_name = "n";
  a.sweep_dir = "/s";
  a.dirs = {"/s/runs/a"};
  a.resume = {false};
  LaunchSpec spec;
  auto shape = [&](int world, int nodes) {
    a.world = world;
    spec.slurm.nodes = nodes;
    const std::vector<std::string> argv = sbatch_argv(a, spec, "/s/slurm/batch-1.sh");
    std::string out;
    for (const auto& arg : argv)
      if (arg.rfind("--ntasks", 0) == 0 || arg.rfind("--nodes", 0) == 0) out += (out.empty() ? "" : " ") + arg;
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--no-requeue"), argv.end()) << "the driver retries, not Slurm";
    return out;
  };
  EXPECT_EQ(shape(2, 1), "--ntasks=2 --nodes=1");
  EXPECT_EQ(shape(2, 2), "--ntasks=2 --nodes=2 --ntasks-per-node=1");
  EXPECT_EQ(shape(4, 2), "--ntasks=4 --nodes=2 --ntasks-per-node=2");
  EXPECT_EQ(shape(3, 2), "--ntasks=3 --nodes=2");  // Slurm places them: 2 + 1
  EXPECT_EQ(shape(1, 2), "--ntasks=1 --nodes=1");  // never more nodes than ranks
  EXPECT_EQ(shape(12, 4), "--ntasks=12 --nodes=4 --ntasks-per-node=3");
}

TEST(SlurmParse, DownNodesAreNamedOnceWithTheirReason) {
  // sinfo -h -N -o %N|%T|%E: '*' is "not responding"; a node of two partitions is listed twice.
  EXPECT_EQ(describe_down_nodes("n1|allocated|none\nn2|down*|Not responding\nn2|down*|Not responding\n"),
            "n2 (down*: Not responding)");
  EXPECT_EQ(describe_down_nodes("n1|mixed*|none\nn3|drained|maintenance\nn4|idle|none\n"),
            "n1 (mixed*), n3 (drained: maintenance)");
  EXPECT_EQ(describe_down_nodes("n1|idle|none\n\ngarbage\n"), "");
}

TEST(SlurmArgv, NodesKeyIsValidatedAndReachesTheRankLogs) {
  auto launch = [](const std::string& slurm) {
    return parse_grid("name: s\nlaunch: {launcher: slurm, slurm: " + slurm + "}\n", "g.yaml").launch;
  };
  EXPECT_EQ(launch("{}").slurm.nodes, 1);
  EXPECT_EQ(launch("{nodes: 2}").slurm.nodes, 2);
  auto error_of = [&](const std::string& slurm) {
    try {
      launch(slurm);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of("{nodes: 0}"),
            "g.yaml:2:42: key 'launch.slurm.nodes': expected an integer in [1, 100000], got '0'");
  EXPECT_NE(error_of("{nodes: two}").find("key 'launch.slurm.nodes': expected an integer"), std::string::npos);
  EXPECT_NE(error_of("{node: 2}").find("(did you mean 'launch.slurm.nodes'?)"), std::string::npos);
  // Ranks that may run on several nodes log apart: logs/<host>/rank<r>.log.
  EXPECT_FALSE(spans_hosts(launch("{nodes: 1}")));
  EXPECT_TRUE(spans_hosts(launch("{nodes: 2}")));
}

TEST_F(SlurmExec, CompletedWithoutARecordIsNotSuccess) {
  grid("");
  FakeSlurm slurm;
  // The last task is COMPLETED per Slurm but left no record: lost, not completed.
  slurm.final_states = {"COMPLETED", "FAILED", "CANCELLED", "COMPLETED-NORECORD"};
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, slurm);
  EXPECT_EQ(s.completed, 1);
  EXPECT_EQ(s.failed, 3);
  EXPECT_EQ(state(1).failure, FailureClass::crashed);
  EXPECT_EQ(state(2).failure, FailureClass::cancelled);
  EXPECT_EQ(state(3).failure, FailureClass::lost);
}

TEST_F(SlurmExec, ATaskSlurmForgotIsLost) {
  grid("");
  FakeSlurm slurm;
  slurm.forget = true;
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, slurm);
  EXPECT_EQ(s.failed, 4);
  EXPECT_EQ(state(0).failure, FailureClass::lost);
}

TEST_F(SlurmExec, CtrlCCancelsEveryArrayAndMarksRunsInterrupted) {
  grid("grace_s: 0,");
  FakeSlurm slurm;  // every task stays RUNNING
  SweepSummary s = run_stopped(slurm);
  EXPECT_EQ(s.stop_signal, SIGTERM);
  EXPECT_EQ(slurm.cancelled, (std::vector<std::string>{"101"}));
  EXPECT_EQ(s.interrupted, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(state(i).state, RunStatus::interrupted);
}

TEST_F(SlurmExec, CtrlCLeavesARunThatCompletedBeforeTheScancelCompleted) {
  // The first run wrote its completed record, but no poll saw its task end before Ctrl-C:
  // its record decides (completed), not the scancel (it said "interrupted", and the next
  // `sweep run` found it already done).
  grid("grace_s: 0,");
  FakeSlurm slurm;
  slurm.final_states = {"RUNNING-RECORDED"};  // the others stay RUNNING
  SweepSummary s = run_stopped(slurm);
  EXPECT_EQ(s.stop_signal, SIGTERM);
  EXPECT_EQ(s.completed, 1);
  EXPECT_EQ(s.interrupted, 3);
  EXPECT_EQ(state(0).state, RunStatus::completed);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(state(i).state, RunStatus::interrupted);
}

/// A small Slurm: arrays whose tasks start in order within their `%` throttle (and
/// `capacity` over the cluster), run `run_polls` squeue calls and complete with a record;
/// MaxArraySize and MaxJobCount as sbatch enforces them; pending reasons per task.
/// It watches what a sweep must never do: more tasks running than launch.parallel, more
/// queued than MaxJobCount.
class SimSlurm : public SlurmClient {
 public:
  SlurmLimits lim{4, 10000, true};
  int run_polls = 2;    ///< squeue calls a task runs before it completes
  int capacity = 1000;  ///< tasks the cluster runs at once
  bool never_end = false;
  /// The message sbatch refuses submission n (0-based) with; "" = accepted.
  std::function<std::string(size_t)> refuse = [](size_t) { return std::string(); };
  /// The reason a pending task of run directory `dir` waits for ("" = none): a task with
  /// a reason never starts while it has it.
  std::function<std::string(const std::string&)> hold = [](const std::string&) { return std::string(); };
  /// The state task `task` of array `job` ends in; COMPLETED writes a completed record.
  std::function<std::string(const std::string&, size_t)> end_state = [](const std::string&, size_t) {
    return std::string("COMPLETED");
  };

  std::vector<std::vector<std::string>> submitted;  ///< argv of each accepted sbatch
  int refused = 0, queue_calls = 0, accounting_calls = 0, cancel_calls = 0, throttle_calls = 0;
  std::vector<std::string> cancelled;                ///< ids given to scancel
  int most_running = 0;                              ///< tasks of the sweep running at once, at most
  int most_queued = 0;                               ///< tasks pending or running at once, at most
  std::vector<std::vector<std::string>> queue_jobs;  ///< the jobs each squeue named

  struct Task {
    std::string dir, state = "PENDING", reason = "None";
    int polls = 0;
  };
  struct Array {
    std::string job;
    int throttle;
    std::vector<Task> tasks;
  };
  std::vector<Array> arrays;

  /// An array an earlier driver submitted, still known to Slurm.
  std::string seed(int throttle, const std::vector<std::string>& dirs, const std::string& state = "PENDING") {
    Array a{std::to_string(500 + arrays.size()), throttle, {}};
    for (const auto& d : dirs) {
      Task t;
      t.dir = d;
      t.state = state;
      a.tasks.push_back(t);
    }
    arrays.push_back(a);
    return a.job;
  }

  std::string submit(const std::vector<std::string>& argv) override {
    std::string spec;
    for (const auto& a : argv)
      if (a.rfind("--array=", 0) == 0) spec = a.substr(8);
    const int last = std::atoi(spec.substr(spec.find('-') + 1).c_str());
    const int throttle = std::atoi(spec.substr(spec.find('%') + 1).c_str());
    const std::string no = refuse(submitted.size() + refused);
    if (last + 1 > lim.max_array_size || !no.empty()) {
      ++refused;
      throw std::runtime_error("sbatch failed (exit code 1): sbatch: error: Batch job submission failed: " +
                               (no.empty() ? std::string("Invalid job array specification") : no) + "\n");
    }
    int queued = 0;
    for (const auto& a : arrays)
      for (const auto& t : a.tasks) queued += t.state == "PENDING" || t.state == "RUNNING";
    if (queued + last + 1 > lim.max_job_count)
      throw std::runtime_error("sbatch failed (exit code 1): sbatch: error: Slurm temporarily unable to accept job\n");
    submitted.push_back(argv);
    std::ifstream in(argv.back());
    std::string line;
    Array a{std::to_string(100 + submitted.size()), throttle, {}};
    bool in_runs = false;
    while (std::getline(in, line)) {
      if (line == "runs=(")
        in_runs = true;
      else if (line == ")")
        in_runs = false;
      else if (in_runs) {
        Task t;
        t.dir = line.substr(3, line.size() - 4);
        a.tasks.push_back(t);
      }
    }
    EXPECT_EQ(int(a.tasks.size()), last + 1);
    arrays.push_back(a);
    return a.job;
  }
  SlurmAnswer queue(const std::vector<std::string>& jobs) override {
    ++queue_calls;
    queue_jobs.push_back(jobs);
    step();
    SlurmAnswer out;
    out.answered = true;
    for (const auto& a : arrays)
      if (std::find(jobs.begin(), jobs.end(), a.job) != jobs.end())
        for (size_t i = 0; i < a.tasks.size(); ++i)
          out.tasks[a.job + "_" + std::to_string(i)] = {a.tasks[i].state, a.tasks[i].reason};
    return out;
  }
  SlurmAnswer accounting(const std::vector<std::string>&) override {
    ++accounting_calls;
    return {};
  }
  void cancel(const std::vector<std::string>& ids) override {
    ++cancel_calls;
    cancelled.insert(cancelled.end(), ids.begin(), ids.end());
    for (auto& a : arrays)
      for (size_t i = 0; i < a.tasks.size(); ++i)
        for (const auto& id : ids)
          if ((id == a.job || id == a.job + "_" + std::to_string(i)) &&
              (a.tasks[i].state == "PENDING" || a.tasks[i].state == "RUNNING"))
            a.tasks[i].state = "CANCELLED";
  }
  bool set_throttle(const std::string& job, int n) override {
    ++throttle_calls;
    EXPECT_GE(n, 1) << "a throttle of 0 is no limit at all";
    for (auto& a : arrays)
      if (a.job == job) a.throttle = n;
    return true;
  }
  SlurmLimits limits() override { return lim; }
  std::string nodes_of(const std::string&) override { return ""; }

 private:
  void step() {
    int running = 0;
    for (auto& a : arrays)
      for (size_t i = 0; i < a.tasks.size(); ++i) {
        Task& t = a.tasks[i];
        if (t.state != "RUNNING" || ++t.polls < run_polls || never_end) continue;
        t.state = end_state(a.job, i);
        if (t.state != "COMPLETED") continue;
        sweep_test::write_run_record(t.dir + "/config.yaml", t.dir + "/record.h5");
        std::ofstream(t.dir + "/slurm-exit") << "0\n";
      }
    for (auto& a : arrays)
      for (auto& t : a.tasks) running += t.state == "RUNNING";
    for (auto& a : arrays) {
      int mine = 0;
      for (auto& t : a.tasks) mine += t.state == "RUNNING";
      for (auto& t : a.tasks) {
        if (t.state != "PENDING") continue;
        if (const std::string why = hold(t.dir); !why.empty()) {
          t.reason = why;
          continue;
        }
        if (mine >= a.throttle || running >= capacity) {
          t.reason = mine >= a.throttle ? "JobArrayTaskLimit" : "Resources";
          continue;
        }
        t.state = "RUNNING", t.reason = "None", ++mine, ++running;
      }
    }
    int queued = 0;
    for (auto& a : arrays)
      for (auto& t : a.tasks) queued += t.state == "PENDING" || t.state == "RUNNING";
    most_running = std::max(most_running, running);
    most_queued = std::max(most_queued, queued);
  }
};

class SlurmScale : public SlurmExec {
 protected:
  /// A grid of `n` points (train.seed 0..n-1) with launch.parallel `parallel`.
  void seeds(int n, int parallel, const std::string& more = "") {
    spec_ = parse_grid("name: s\ngrid:\n  train.seed: {range: [0, " + std::to_string(n) +
                           "]}\nlaunch: {launcher: slurm, parallel: " + std::to_string(parallel) + ", " + more +
                           " slurm: {poll_s: 0.1}}\n",
                       "g.yaml");
    points_ = expand(spec_);
    ASSERT_EQ(int(points_.size()), n);
  }
  /// The size and throttle of each submitted array: "4%3 4%1 2%1".
  static std::string arrays_of(const SimSlurm& sim) {
    std::string out;
    for (const auto& argv : sim.submitted)
      for (const auto& a : argv)
        if (a.rfind("--array=0-", 0) == 0) {
          const int last = std::atoi(a.c_str() + 10);
          out += (out.empty() ? "" : " ") + std::to_string(last + 1) + a.substr(a.find('%'));
        }
    return out;
  }
  /// The first `n` runs as a driver that died left them: config written, state running
  /// after one attempt; their directories and ids appended to `dirs` and `ids`.
  void left_running(int n, std::vector<std::string>* dirs, std::vector<std::string>* ids) const {
    for (int i = 0; i < n; ++i) {
      const std::string d = run_dir(opt_.out_dir, points_[i].id);
      fs::create_directories(d + "/logs");
      std::ofstream(d + "/config.yaml") << to_yaml(points_[i].config);
      RunState st;
      st.state = RunStatus::running;
      st.attempts = 1;
      write_run_state(d, st);
      dirs->push_back(d), ids->push_back(points_[i].id);
    }
  }
  int count_state(RunStatus state) const {
    int n = 0;
    for (size_t i = 0; i < points_.size(); ++i) n += this->state(int(i)).state == state;
    return n;
  }
};

TEST_F(SlurmScale, ASweepBeyondMaxArraySizeGoesInArraysWithParallelOverAllOfThem) {
  // 1,040 runs on a cluster whose MaxArraySize is 1001 failed every run before; here
  // MaxArraySize is 4 and the sweep 10 runs, 3 at once over every array.
  seeds(10, 3);
  SimSlurm sim;
  SlurmCalls calls;
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, sim, &calls);
  EXPECT_EQ(s.completed, 10);
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(sim.refused, 0) << "no array beyond MaxArraySize was submitted";
  EXPECT_LE(sim.most_running, 3) << "launch.parallel holds over all arrays together";
  EXPECT_EQ(sim.most_running, 3) << "and is used";
  // Every array but the first starts only once the ones before may run all they have.
  EXPECT_EQ(arrays_of(sim).substr(0, 3), "4%3");
  int tasks = 0;
  for (const auto& a : sim.arrays) {
    tasks += int(a.tasks.size());
    EXPECT_LE(a.tasks.size(), 4u);
  }
  EXPECT_EQ(tasks, 10);
  // One squeue per poll for all the sweep's arrays, never one per run or per array.
  EXPECT_EQ(calls.squeue, calls.polls);
  EXPECT_EQ(sim.queue_calls, calls.squeue);
  EXPECT_EQ(calls.sacct, 0);
  EXPECT_EQ(calls.sbatch, int(sim.submitted.size()));
  size_t most_jobs = 0;
  for (const auto& jobs : sim.queue_jobs) most_jobs = std::max(most_jobs, jobs.size());
  EXPECT_GE(most_jobs, 2u) << "a poll names every live array at once";
  for (int i = 0; i < 10; ++i) EXPECT_EQ(state(i).state, RunStatus::completed) << i;
}

TEST_F(SlurmScale, ThrottlesAreRaisedAsEarlierArraysDrain) {
  // parallel 5, arrays of 4: the first gets 4, the second 1 of its 4; once the first has
  // ended, the second's throttle is raised (scontrol update) to 3, never past 5 in all.
  seeds(12, 5);
  SimSlurm sim;
  SlurmCalls calls;
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, sim, &calls);
  EXPECT_EQ(s.completed, 12);
  EXPECT_EQ(arrays_of(sim).substr(0, 7), "4%4 4%1");
  EXPECT_GT(sim.throttle_calls, 0);
  EXPECT_EQ(sim.arrays[1].throttle, 3);
  EXPECT_EQ(calls.scontrol, sim.throttle_calls + 1);  // + show config
  EXPECT_LE(sim.most_running, 5);
  EXPECT_EQ(sim.most_running, 5);
}

TEST_F(SlurmScale, TheSweepsQueueStaysUnderMaxJobCount) {
  seeds(30, 30);
  SimSlurm sim;
  sim.lim = {100, 12, true};  // MaxJobCount 12: the sweep keeps at most 12 - 1 queued
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, sim);
  EXPECT_EQ(s.completed, 30);
  EXPECT_LE(sim.most_queued, 11);
  EXPECT_GE(sim.submitted.size(), 3u);
}

TEST_F(SlurmScale, AnSbatchRefusalStopsTheSweepOnceAndWaitsForWhatWasSubmitted) {
  // The second array is refused (a QOS submit limit, a bad partition): one line with
  // Slurm's reason, the first array still runs to its end, and the rest are not started,
  // not crashed.
  seeds(10, 8);
  SimSlurm sim;
  sim.refuse = [](size_t n) {
    return n == 1 ? std::string("Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)")
                  : std::string();
  };
  testing::internal::CaptureStdout();
  opt_.quiet = false;
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, sim);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(s.completed, 4);
  EXPECT_EQ(s.failed, 0) << out;
  EXPECT_EQ(s.not_started, 6);
  EXPECT_CONTAINS(s.stop_reason, "Job violates accounting/QOS policy");
  EXPECT_EQ(sim.refused, 1) << "nothing is submitted after a refusal";
  size_t lines = 0;
  for (size_t at = 0; (at = out.find("sbatch refused", at)) != std::string::npos; ++at) ++lines;
  EXPECT_EQ(lines, 1u) << out;
  EXPECT_CONTAINS(out, "waiting for the 1 job arrays already submitted");
  EXPECT_EQ(count_state(RunStatus::completed), 4);
  EXPECT_EQ(count_state(RunStatus::pending), 6) << "never started: no attempt, no crash";
  for (size_t i = 0; i < points_.size(); ++i) EXPECT_NE(state(int(i)).failure, FailureClass::crashed);
}

TEST_F(SlurmScale, ARefusedFirstArrayStartsNothingAndSaysWhy) {
  seeds(6, 2, "");
  SimSlurm sim;
  sim.refuse = [](size_t) { return std::string("Invalid partition name specified"); };
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, sim);
  EXPECT_EQ(s.not_started, 6);
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(s.stop_reason,
            "sbatch refused a job array: sbatch failed (exit code 1): sbatch: error: Batch job submission failed: "
            "Invalid partition name specified");
  EXPECT_EQ(sim.queue_calls, 0);
  EXPECT_EQ(count_state(RunStatus::pending), 6);
}

TEST_F(SlurmScale, AJobThatCanNeverStartIsCancelledAndFailedWithSlurmsReason) {
  seeds(6, 4);
  SimSlurm sim;
  // Held for 100 polls, then (as if an admin changed the partition) let go: a driver that
  // waited would complete them.
  sim.hold = [&](const std::string&) { return std::string(sim.queue_calls < 100 ? "PartitionNodeLimit" : ""); };
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, sim);
  ASSERT_EQ(sim.submitted.size(), 1u) << "the rest of that shape is not submitted";
  EXPECT_EQ(sim.cancelled, (std::vector<std::string>{"101_0", "101_1", "101_2", "101_3"}));
  EXPECT_EQ(s.failed, 4);
  EXPECT_EQ(s.not_started, 2);
  EXPECT_CONTAINS(s.stop_reason, "PartitionNodeLimit");
  RunState st = state(0);
  EXPECT_EQ(st.state, RunStatus::failed);
  EXPECT_EQ(st.failure, FailureClass::config) << "not retried: waiting cannot help";
  EXPECT_CONTAINS(st.detail, "Slurm cannot start it: PartitionNodeLimit (job 101_0");
}

TEST_F(SlurmScale, AJobWaitingForANodeThatIsDownIsWaitedFor) {
  seeds(3, 3);
  SimSlurm sim;
  int held = 0;
  sim.hold = [&](const std::string&) {
    return ++held <= 9 ? std::string("ReqNodeNotAvail, UnavailableNodes:sweep-node2") : std::string();
  };
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, sim);
  EXPECT_EQ(s.completed, 3);
  EXPECT_TRUE(sim.cancelled.empty());
}

TEST_F(SlurmScale, CtrlCCancelsEveryArrayInOneScancel) {
  seeds(6, 6);
  SimSlurm sim;
  sim.lim.max_array_size = 2;
  sim.never_end = true;
  std::thread ctrl_c([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    ::kill(::getpid(), SIGTERM);
  });
  spec_.launch.grace_s = 0;
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, sim);
  ctrl_c.join();
  EXPECT_EQ(s.stop_signal, SIGTERM);
  EXPECT_EQ(sim.cancel_calls, 1);
  EXPECT_EQ(sim.cancelled, (std::vector<std::string>{"101", "102", "103"}));
  EXPECT_EQ(s.interrupted, 6);
}

TEST_F(SlurmScale, RetriesGoInANewArrayAcrossArrays) {
  seeds(5, 5, "retries: {node_fail: 1},");
  SimSlurm sim;
  sim.lim.max_array_size = 2;
  // The first task of the second array ends NODE_FAIL.
  sim.end_state = [](const std::string& job, size_t task) {
    return std::string(job == "102" && task == 0 ? "NODE_FAIL" : "COMPLETED");
  };
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, sim);
  EXPECT_EQ(s.completed, 5);
  EXPECT_EQ(s.retries, 1);
  EXPECT_EQ(sim.submitted.size(), 4u);  // 2 + 2 + 1, then the retry
  std::ifstream in(sim.submitted.back().back());
  const std::string script((std::istreambuf_iterator<char>(in)), {});
  EXPECT_CONTAINS(script, "resume=(1)");
}

TEST_F(SlurmScale, ADriverAfterOneThatDiedWaitsForItsArraysInsteadOfSubmittingAgain) {
  // An earlier driver submitted runs 0-3 as job 500 and was SIGKILLed: their states say
  // running, slurm-jobs names the array, Slurm still has it queued. Runs 4-5 it never
  // submitted.
  seeds(6, 6);
  fs::create_directories(opt_.out_dir + "/runs");
  SimSlurm sim;
  std::vector<std::string> dirs, ids;
  left_running(4, &dirs, &ids);
  const std::string job = sim.seed(4, dirs);
  append_slurm_job(opt_.out_dir, {job, 4, "batch-1.sh", ids});
  fs::create_directories(opt_.out_dir + "/slurm");
  std::ofstream(opt_.out_dir + "/slurm/batch-1.sh") << "#!/bin/bash\n";
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, sim);
  EXPECT_EQ(s.completed, 6);
  ASSERT_EQ(sim.submitted.size(), 1u) << "only the runs the earlier driver never submitted";
  EXPECT_EQ(arrays_of(sim), "2%2");
  EXPECT_EQ(sim.submitted[0].back(), opt_.out_dir + "/slurm/batch-2.sh") << "the earlier script stays";
  for (int i = 0; i < 4; ++i) EXPECT_EQ(state(i).attempts, 1) << "the same attempt, waited for";
  for (int i = 4; i < 6; ++i) EXPECT_EQ(state(i).attempts, 1);
  EXPECT_LE(sim.most_running, 6);
}

TEST_F(SlurmScale, ATaskThatEndedWhileNoDriverWatchedIsClassifiedFromWhatItLeft) {
  seeds(2, 2, "retries: 1,");
  fs::create_directories(opt_.out_dir + "/runs");
  SimSlurm sim;
  std::vector<std::string> dirs, ids;
  left_running(2, &dirs, &ids);
  // Both ended while no driver ran: one TIMEOUT (retried, resuming), one CANCELLED by
  // someone (not retried).
  const std::string job = sim.seed(2, dirs, "TIMEOUT");
  sim.arrays.back().tasks[1].state = "CANCELLED";
  append_slurm_job(opt_.out_dir, {job, 2, "batch-1.sh", ids});
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, sim);
  EXPECT_EQ(state(0).state, RunStatus::completed);
  EXPECT_EQ(state(0).attempts, 2);
  EXPECT_EQ(state(1).failure, FailureClass::cancelled);
  EXPECT_EQ(s.completed, 1);
  EXPECT_EQ(s.failed, 1);
  ASSERT_EQ(sim.submitted.size(), 1u);
  EXPECT_EQ(arrays_of(sim), "1%1");
}

TEST_F(SlurmScale, StatusSaysQueuedInSlurmWithTheReason) {
  seeds(3, 3);
  SimSlurm sim;
  const std::vector<std::string> ids = {points_[0].id, points_[1].id, points_[2].id};
  const std::string job = sim.seed(1, {"/x/a", "/x/b", "/x/c"});
  sim.arrays.back().tasks[2].state = "COMPLETED";
  fs::create_directories(opt_.out_dir);
  append_slurm_job(opt_.out_dir, {job, 1, "batch-1.sh", ids});
  const auto views = slurm_run_views(opt_.out_dir, ids, sim);  // one squeue; the sim starts task 0
  EXPECT_EQ(sim.queue_calls, 1);
  ASSERT_EQ(views.size(), 2u);
  EXPECT_FALSE(views.at(ids[0]).queued);
  EXPECT_EQ(views.at(ids[0]).detail, "running in Slurm (job 500_0)");
  EXPECT_TRUE(views.at(ids[1]).queued);
  EXPECT_EQ(views.at(ids[1]).detail, "queued in Slurm (job 500_1, JobArrayTaskLimit)");
  EXPECT_EQ(views.count(ids[2]), 0u) << "ended: the state file speaks";
}

TEST_F(SlurmScale, PlanShowsTheFirstArrayExactlyAndWritesNothing) {
  seeds(10, 3);
  SweepRunOptions opt = opt_;
  const SlurmPreview p = preview_slurm(spec_, points_, opt, {4, 10000, true});
  EXPECT_EQ(p.runs, 4u);
  EXPECT_EQ(p.arrays, 3u);
  EXPECT_EQ(std::count(p.argv.begin(), p.argv.end(), "--array=0-3%3"), 1);
  EXPECT_EQ(p.argv.back(), opt_.out_dir + "/slurm/batch-1.sh");
  EXPECT_CONTAINS(p.script, "runs=(\n  '" + run_dir(opt_.out_dir, points_[0].id) + "'\n");
  EXPECT_EQ(p.script.find(points_[4].id), std::string::npos) << "the first array only";
  EXPECT_FALSE(fs::exists(opt_.out_dir)) << "plan writes nothing";
  // What `sweep run` then submits first is what plan showed.
  SimSlurm sim;
  sim.lim = {4, 10000, true};
  run_sweep_slurm(spec_, points_, opt_, sim);
  ASSERT_FALSE(sim.submitted.empty());
  EXPECT_EQ(sim.submitted[0], p.argv);
  std::ifstream in(p.argv.back());
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), p.script);
}

TEST(SlurmJobsFile, LinesRoundTripAndALaterSubmissionWins) {
  sweep_test::TempDir dir("slurm_jobs_test");
  const std::string d = dir.path().string();
  EXPECT_TRUE(read_slurm_jobs(d).empty());
  append_slurm_job(d, {"12", 3, "batch-1.sh", {"a", "b", "c"}});
  append_slurm_job(d, {"13", 1, "batch-2.sh", {"b"}});
  std::ofstream(d + "/slurm-jobs", std::ios::app) << "14 1 batch-3.sh d";  // cut short by a kill
  const auto lines = read_slurm_jobs(d);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].runs, (std::vector<std::string>{"a", "b", "c"}));
  const auto latest = latest_slurm_tasks(lines);
  EXPECT_EQ(latest.at("b").key(), "13_0");
  EXPECT_EQ(latest.at("c").key(), "12_2");
  EXPECT_EQ(latest.at("c").throttle, 3);
  EXPECT_EQ(latest.count("d"), 0u);
}

/// SlurmCli against stand-ins for squeue, sacct and scontrol on PATH that log each call.
class SlurmCliCommands : public sweep_test::TempDirTest {
 protected:
  SlurmCliCommands() : TempDirTest("slurm_cli_test") {}
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir_ / "bin");
    old_path_ = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", ((dir_ / "bin").string() + ":" + old_path_).c_str(), 1);
  }
  void TearDown() override {
    ::setenv("PATH", old_path_.c_str(), 1);
    TempDirTest::TearDown();
  }
  /// A command `name` that logs its argv and prints `out`, exiting `rc`.
  void command(const std::string& name, const std::string& out, int rc = 0) {
    const fs::path p = dir_ / "bin" / name;
    std::ofstream(p) << "#!/bin/sh\necho \"$0 $*\" >>'" << (dir_ / "calls.log").string() << "'\nprintf '%s' '" << out
                     << "'\nexit " << rc << "\n";
    fs::permissions(p, fs::perms::owner_all);
  }
  std::vector<std::string> calls() const {
    std::ifstream in(dir_ / "calls.log");
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) {
      const std::string prog = l.substr(0, l.find(' '));  // "$0": the stand-in's full path
      out.push_back(prog.substr(prog.rfind('/') + 1) + l.substr(prog.size()));
    }
    return out;
  }
  std::string old_path_;
};

TEST_F(SlurmCliCommands, OneSqueueAndOneSacctHoweverManyJobs) {
  command("squeue", "101_0|RUNNING|None\n101_[1-3%2]|PENDING|JobArrayTaskLimit\n102_0|COMPLETED|None\n");
  command("sacct", "103_0|COMPLETED\n103_0.batch|COMPLETED\n");
  command("scontrol", "MaxArraySize            = 50\nMaxJobCount             = 10000\n");
  SlurmCli cli;
  const SlurmAnswer q = cli.queue({"101", "102", "103"});
  EXPECT_TRUE(q.answered);
  EXPECT_EQ(q.tasks.size(), 5u);
  EXPECT_EQ(q.tasks.at("101_3").reason, "JobArrayTaskLimit");
  const SlurmAnswer a = cli.accounting({"103", "104"});
  EXPECT_EQ(a.tasks.at("103_0").state, "COMPLETED");
  EXPECT_EQ(cli.limits().max_array_size, 50);
  EXPECT_EQ(calls(),
            (std::vector<std::string>{"squeue --noheader --states=all --jobs=101,102,103 --format=%i|%T|%r",
                                      "sacct --noheader --parsable2 --allocations --jobs=103,104 --format=JobID,State",
                                      "scontrol show config"}));
}

TEST_F(SlurmCliCommands, AForgottenSingleJobIsAnAnswerAFailureIsNot) {
  command("squeue", "slurm_load_jobs error: Invalid job id specified\n", 1);
  SlurmCli cli;
  const SlurmAnswer q = cli.queue({"99"});
  EXPECT_TRUE(q.answered);
  EXPECT_TRUE(q.tasks.empty());
  command("squeue", "slurm_load_jobs error: Socket timed out on send/recv operation\n", 1);
  EXPECT_FALSE(cli.queue({"99"}).answered);
  command("scontrol", "slurm_load_ctl_conf error: Unable to contact slurm controller\n", 1);
  EXPECT_FALSE(cli.limits().read);
  EXPECT_EQ(cli.limits().max_array_size, 1001);
}

}  // namespace
}  // namespace sweep
