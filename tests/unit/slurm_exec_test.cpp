// The Slurm executor against a fake Slurm: final states become failure classes,
// retries are resubmitted as a new array with --resume, a task Slurm forgot is lost,
// and Ctrl-C scancels every array and marks its runs interrupted.
#include "slurm_exec.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "fake_trainer.h"  // write_run_record
#include "record.h"
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
