// The Slurm executor against a fake Slurm: final states become failure classes (a
// NODE_FAIL naming the node that failed), retries are resubmitted as a new array with
// --resume, a task Slurm forgot is lost, and Ctrl-C scancels every array and marks its
// runs interrupted. Plus the sbatch argv of launch.slurm.nodes.
#include "slurm_exec.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "config_error.h"  // ConfigError
#include "fake_trainer.h"  // write_run_record
#include "launch.h"        // spans_hosts
#include "record.h"
#include "slurm.h"  // sbatch_argv, describe_down_nodes
#include "stop_signals.h"
#include "temp_dir.h"  // TempDirTest

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
        if (state == "COMPLETED-NORECORD") state = "COMPLETED";  // Slurm's word, but no record
        states_[job + "_" + std::to_string(task++)] = state;
      }
    }
    return job;
  }
  std::map<std::string, std::string> states(const std::vector<std::string>&) override {
    return forget ? std::map<std::string, std::string>{} : states_;
  }
  void cancel(const std::vector<std::string>& jobs) override {
    cancelled.insert(cancelled.end(), jobs.begin(), jobs.end());
    for (auto& [k, v] : states_) v = "CANCELLED";
  }
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
  EXPECT_EQ(slurm.submitted[1][3], "--array=0-0%2");
  EXPECT_NE(slurm.scripts[0].find("resume=(0 0 0 0)"), std::string::npos);
  EXPECT_NE(slurm.scripts[1].find("resume=(1)"), std::string::npos) << "a retry continues from checkpoints";
  EXPECT_NE(slurm.scripts[1].find(points_[1].id), std::string::npos);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 2);
  EXPECT_EQ(s.retries, 1);
  EXPECT_EQ(state(0).state, "completed");
  EXPECT_EQ(state(1).state, "completed");
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
  std::thread ctrl_c([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(::getpid(), SIGTERM);
  });
  SweepSummary s = run_sweep_slurm(spec_, points_, opt_, slurm);
  ctrl_c.join();
  EXPECT_EQ(s.stop_signal, SIGTERM);
  EXPECT_EQ(slurm.cancelled, (std::vector<std::string>{"101"}));
  EXPECT_EQ(s.interrupted, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(state(i).state, "interrupted");
}

}  // namespace
}  // namespace sweep
