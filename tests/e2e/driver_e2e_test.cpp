// The sweep driver end to end with the real `sweep` and `sweep-train`: parallel local
// runs, Ctrl-C then resume (counting launches through a wrapper trainer), retries of a
// killed run, the lock, `sweep status`, and container wrapping through a stand-in runtime.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "e2e_util.h"   // E2eTest, completed_records, wait_for, tiny_model
#include "sweep_dir.h"  // read_run_state

namespace fs = std::filesystem;

namespace {

using sweep_test::bin;
using sweep_test::read_file;

std::vector<std::string> lines(const fs::path& p) {
  std::vector<std::string> out;
  std::ifstream in(p);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

/// The run id in a launch line: the directory after --out.
std::string out_id(const std::string& launch) {
  auto at = launch.find("--out ");
  std::string dir = launch.substr(at + 6, launch.find(' ', at + 6) - at - 6);
  return fs::path(dir).filename().string();
}

class DriverE2E : public sweep_test::E2eTest {
 protected:
  DriverE2E() : E2eTest("driver_e2e") {}
  void SetUp() override {
    E2eTest::SetUp();
    // A trainer that records each launch, then becomes the real one.
    // Counts the runs it starts, not sweep's question for its model kinds.
    wrapper_ = write("count-train", "#!/bin/sh\n[ \"$1\" = --describe-models ] || echo \"$*\" >> '" +
                                        (dir_ / "launches").string() + "'\nexec '" + bin("sweep-train") + "' \"$@\"\n");
    fs::permissions(wrapper_, fs::perms::owner_all);
  }
  std::map<std::string, sweep::Record> completed(const fs::path& sweep_dir) {
    return sweep_test::completed_records(sweep_dir);
  }
  std::string wrapper_;
};

/// Six small runs; `steps` sets how long each takes.
std::string six_runs(int steps, const std::string& extra = "") {
  return "name: six\n"
         "base:\n" +
         sweep_test::tiny_model("  ") + "  train: {steps: " + std::to_string(steps) +
         ", micro_batch: 2, lr: 3.0e-3, checkpoint_every: 20, log_every: 50}\n"
         "grid:\n"
         "  train.lr: [1.0e-3, 3.0e-3]\n"
         "seeds: 3\n"
         "launch: {parallel: 2, slots: 2, grace_s: 5" +
         extra + "}\n";
}

TEST_F(DriverE2E, SixRunsTwoAtATimeLocally) {
  std::string grid = write("six.yaml", six_runs(10));
  const fs::path out = dir_ / "out";
  auto st = sweep_cli({"run", grid, "--out", out.string(), "--trainer", wrapper_}, "run.log");
  ASSERT_TRUE(st.ok()) << read_file(dir_ / "run.log");
  EXPECT_CONTAINS(read_file(dir_ / "run.log"), "sweep six: 6 completed, 0 already done, 0 failed; report: ");
  auto recs = completed(out);
  ASSERT_EQ(recs.size(), 6u);
  for (const auto& [id, r] : recs) {
    EXPECT_EQ(r.status, "completed");
    EXPECT_EQ(r.run_id, id);
    EXPECT_EQ(r.steps.size(), 10u);
    EXPECT_TRUE(fs::exists(out / "runs" / id / "logs" / "rank0.log"));
    EXPECT_EQ(sweep::read_run_state((out / "runs" / id).string()).state, "completed");
  }
  EXPECT_EQ(lines(dir_ / "launches").size(), 6u);
  EXPECT_TRUE(fs::exists(out / "report.html"));

  // `sweep status` and `sweep plan` see the same.
  ASSERT_TRUE(sweep_cli({"status", out.string()}, "status.log").ok());
  EXPECT_CONTAINS(read_file(dir_ / "status.log"), "no driver running");
  EXPECT_CONTAINS(read_file(dir_ / "status.log"), "6 runs: 6 completed");
  ASSERT_TRUE(sweep_cli({"plan", grid, "--out", out.string()}, "plan.log").ok());
  EXPECT_CONTAINS(read_file(dir_ / "plan.log"), "(6 done, 0 to run)");
}

TEST_F(DriverE2E, CtrlCStopsEveryRunAndTheRerunStartsOnlyUnfinishedOnes) {
  std::string grid = write("six.yaml", six_runs(400));
  const fs::path out = dir_ / "out";
  sweep::SpawnRunner runner;
  int driver = runner.start(sweep_argv({"run", grid, "--out", out.string(), "--trainer", wrapper_}),
                            (dir_ / "first.log").string());
  // Wait until the first pair is done and the second pair is running.
  auto t0 = std::chrono::steady_clock::now();
  while (lines(dir_ / "launches").size() < 4 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_GE(lines(dir_ / "launches").size(), 4u) << read_file(dir_ / "first.log");

  // A second driver on the same directory is refused while the first runs.
  auto second = sweep_cli({"run", grid, "--out", out.string(), "--trainer", wrapper_}, "second.log");
  EXPECT_EQ(second.code, 2);
  EXPECT_CONTAINS(read_file(dir_ / "second.log"), "another sweep driver is running on this directory (pid ");
  ASSERT_TRUE(sweep_cli({"status", out.string()}, "status.log").ok());
  EXPECT_CONTAINS(read_file(dir_ / "status.log"), "driver running (pid ");
  EXPECT_CONTAINS(read_file(dir_ / "status.log"), "running");

  ::kill(driver, SIGINT);
  sweep::ExitStatus st = sweep_test::wait_for(runner, driver);
  EXPECT_EQ(st.code, 128 + SIGINT) << read_file(dir_ / "first.log");
  EXPECT_CONTAINS(read_file(dir_ / "first.log"), "interrupted");
  // Every run was stopped: nothing of this sweep is still alive.
  // ("[/]" keeps pgrep's own shell, whose command line holds the pattern, from matching.)
  EXPECT_NE(std::system(("pgrep -f '[/]" + out.string().substr(1) + "' >/dev/null").c_str()), 0);

  auto done_first = completed(out);
  std::set<std::string> launched_first;
  for (const auto& l : lines(dir_ / "launches")) launched_first.insert(out_id(l));
  std::set<std::string> interrupted;
  for (const auto& id : launched_first)
    if (sweep::read_run_state((out / "runs" / id).string()).state == "interrupted") interrupted.insert(id);
  EXPECT_FALSE(interrupted.empty());
  EXPECT_EQ(done_first.size() + interrupted.size(), launched_first.size());

  // Again: exactly the unfinished runs start, the interrupted ones with --resume.
  const size_t before = lines(dir_ / "launches").size();
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", out.string(), "--trainer", wrapper_}, "again.log").ok())
      << read_file(dir_ / "again.log");
  auto all = lines(dir_ / "launches");
  std::vector<std::string> again(all.begin() + long(before), all.end());
  EXPECT_EQ(again.size(), 6 - done_first.size());
  for (const auto& l : again) {
    std::string id = out_id(l);
    EXPECT_EQ(done_first.count(id), 0u) << "completed run started again: " << id;
    EXPECT_EQ(l.find("--resume") != std::string::npos, interrupted.count(id) > 0) << l;
  }
  EXPECT_EQ(completed(out).size(), 6u);
  EXPECT_CONTAINS(read_file(dir_ / "again.log"), "already done");
}

TEST_F(DriverE2E, AKilledRunIsRetriedThenMarkedFailedWhileTheOthersFinish) {
  std::string grid = write("kill.yaml",
                           "name: kill\n"
                           "base:\n" +
                               sweep_test::tiny_model("  ") +
                               "  train: {steps: 6, micro_batch: 2, checkpoint_every: 2}\n"
                               "grid:\n"
                               "  fault.kill_step: [0, 4]\n"
                               "  train.seed: [0, 1]\n"
                               "launch: {parallel: 2, retries: {crashed: 1}}\n");
  const fs::path out = dir_ / "out";
  auto st = sweep_cli({"run", grid, "--out", out.string(), "--trainer", wrapper_}, "run.log");
  EXPECT_EQ(st.code, 1) << read_file(dir_ / "run.log");
  const std::string log = read_file(dir_ / "run.log");
  EXPECT_CONTAINS(log, "sweep kill: 2 completed, 0 already done, 2 failed (2 retries)");
  EXPECT_CONTAINS(log, "retrying ");
  EXPECT_CONTAINS(log, "crashed (killed by signal 9");
  std::map<std::string, int> launches;
  for (const auto& l : lines(dir_ / "launches")) ++launches[out_id(l)];
  int failed = 0;
  for (const auto& [id, n] : launches) {
    auto s = sweep::read_run_state((out / "runs" / id).string());
    if (s.state == "failed") {
      ++failed;
      EXPECT_EQ(n, 2) << id;
      EXPECT_EQ(s.failure, sweep::FailureClass::crashed);
      EXPECT_EQ(s.attempts, 2);
    } else {
      EXPECT_EQ(s.state, "completed");
      EXPECT_EQ(n, 1) << id;
    }
  }
  EXPECT_EQ(failed, 2);
  EXPECT_EQ(completed(out).size(), 2u);
}

using DriverMpi = DriverE2E;

// A rank killed outright leaves no word of its own: the driver takes it from mpirun's
// output. A stuck rank's watchdog leaves a note that rank 0 folds into the record. Either
// way the run's state and its partial record say failed, with the rank and the cause.
TEST_F(DriverMpi, ADeadOrStuckRankIsNamedInTheRunStateAndThePartialRecord) {
  std::string grid = write("faults.yaml",
                           "name: faults\n"
                           "base:\n" +
                               sweep_test::tiny_model("  ") +
                               "  train: {steps: 6, micro_batch: 2}\n"
                               "  dist: {world_size: 2, timeout_s: 3}\n"
                               "  fault: {kill_rank: 1, hang_rank: 1}\n"
                               "zip:\n"
                               "  fault.kill_step: [3, 0]\n"
                               "  fault.hang_step: [0, 3]\n"
                               "launch: {parallel: 1, slots: 2}\n");
  const fs::path out = dir_ / "out";
  const auto t0 = std::chrono::steady_clock::now();
  auto st = sweep_cli({"run", grid, "--out", out.string()}, "run.log");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(st.code, 1) << read_file(dir_ / "run.log");
  EXPECT_LT(took, 2 * (3 + 15)) << "each run ends within dist.timeout_s plus start-up";
  EXPECT_TRUE(completed(out).empty());
  int killed = 0, hung = 0;
  for (const auto& e : fs::directory_iterator(out / "runs")) {
    auto s = sweep::read_run_state(e.path().string());
    EXPECT_EQ(s.state, "failed") << e.path();
    auto rs = sweep::read_record_status((e.path() / "record.h5").string());
    EXPECT_TRUE(rs.partial);
    EXPECT_EQ(rs.status, "failed");
    if (s.failure == sweep::FailureClass::hang) {
      ++hung;
      const std::string stuck = "rank 1: no progress for 3 s (dist.timeout_s) at step 3 while computing";
      EXPECT_CONTAINS(s.detail, stuck);
      EXPECT_CONTAINS(rs.failure, stuck);
    } else {
      ++killed;
      EXPECT_EQ(s.failure, sweep::FailureClass::crashed);
      EXPECT_CONTAINS(s.detail, "rank 1 exited on signal 9 (Killed)");
      EXPECT_CONTAINS(rs.failure, "rank 1 exited on signal 9 (Killed); rank 0: stopped by SIGTERM at step 3");
    }
  }
  EXPECT_EQ(killed, 1);
  EXPECT_EQ(hung, 1);
  EXPECT_CONTAINS(read_file(dir_ / "run.log"), "rank 1 exited on signal 9 (Killed)");
}

TEST_F(DriverE2E, ContainerRuntimeWrapsEveryRank) {
  // Stands in for apptainer/docker: records its argv, then runs what follows the image.
  const std::string standin = (dir_ / "fake-runtime").string();
  std::ofstream(standin) << "#!/bin/bash\n"
                            "printf '%s\\n' \"$*\" >> '"
                         << (dir_ / "runtime-argv").string()
                         << "'\n"
                            "while [ $# -gt 0 ] && [ \"$1\" != test-image ]; do shift; done\n"
                            "shift\nexec \"$@\"\n";
  fs::permissions(standin, fs::perms::owner_all);
  for (std::string runtime : {"apptainer", "docker"}) {
    std::string grid = write(runtime + ".yaml",
                             "name: boxed\n"
                             "base:\n" +
                                 sweep_test::tiny_model("  ") +
                                 "  train: {steps: 3, micro_batch: 2}\n"
                                 "grid:\n"
                                 "  dist.world_size: [1, 2]\n"
                                 "launch:\n"
                                 "  slots: 2\n"
                                 "  container: {runtime: " +
                                 runtime + ", command: '" + standin +
                                 "', image: test-image, binds: [/tmp], trainer: '" + bin("sweep-train") + "'}\n");
    const fs::path out = dir_ / ("out-" + runtime);
    auto st = sweep_cli({"run", grid, "--out", out.string()}, runtime + ".log");
    ASSERT_TRUE(st.ok()) << read_file(dir_ / (runtime + ".log"));
    auto recs = completed(out);
    ASSERT_EQ(recs.size(), 2u);
    for (const auto& [id, r] : recs) {
      EXPECT_EQ(r.status, "completed");
      EXPECT_TRUE(fs::exists(out / "runs" / id / "logs" / "rank0.log")) << id;
      if (r.world_size == 2) {
        EXPECT_TRUE(fs::exists(out / "runs" / id / "logs" / "rank1.log")) << "per-rank logs";
      }
    }
  }
  auto argv = lines(dir_ / "runtime-argv");
  ASSERT_EQ(argv.size(), 6u) << "one container per rank: 1 + 2 ranks, two runtimes";
  const std::string sweep_dir = (dir_ / "out-apptainer").string();
  EXPECT_CONTAINS(argv[0], "exec --bind " + sweep_dir + ":" + sweep_dir + " --bind /tmp --pwd " + sweep_dir +
                               " test-image " + bin("sweep-train") + " --config ");
  bool docker_env = false;
  for (const auto& a : argv) {
    EXPECT_EQ(a.find("@SWEEP_RANK_ENV@"), std::string::npos) << a;
    if (a.rfind("run --rm --network=host", 0) == 0 && a.find("-e OMPI_COMM_WORLD_RANK") != std::string::npos)
      docker_env = true;
  }
  EXPECT_TRUE(docker_env) << "docker ranks get the launcher's variables";
}

}  // namespace

// The README's promise as users meet it: sweeps/invariance.yaml, run as shipped (world
// size 1, 2, 4 x ZeRO 0-3 at one global batch), gives a report with exactly one
// bit-identical class holding all 11 runs.
TEST_F(DriverMpi, TheShippedInvarianceSweepFormsExactlyOneBitIdenticalClass) {
  const std::string grid = std::string(SWEEP_SOURCE_DIR) + "/sweeps/invariance.yaml";
  const fs::path out = dir_ / "out";
  auto st = sweep_cli({"run", grid, "--out", out.string(), "--quiet"}, "run.log");
  ASSERT_TRUE(st.ok()) << read_file(dir_ / "run.log");
  EXPECT_CONTAINS(read_file(dir_ / "run.log"), "11 completed, 0 already done, 0 failed");
  st = sweep_cli({"report", out.string(), "--format", "json", "-o", (dir_ / "report.json").string()}, "report.log");
  ASSERT_TRUE(st.ok()) << read_file(dir_ / "report.log");
  const std::string json = read_file(dir_ / "report.json");
  const auto classes = json.find("\"classes\":[{");  // the list of classes (runs also name theirs)
  ASSERT_NE(classes, std::string::npos) << json.substr(0, 400);
  const std::string section = json.substr(classes, json.find(']', json.find("\"runs\"", classes)) - classes);
  // One class: one "name", and its runs list names every run.
  size_t names = 0;
  for (size_t at = section.find("\"name\""); at != std::string::npos; at = section.find("\"name\"", at + 1)) ++names;
  EXPECT_EQ(names, 1u) << section;
  EXPECT_EQ(json.find("\"C2\""), std::string::npos) << "a second equivalence class";
  size_t runs = 0;
  for (const auto& e : fs::directory_iterator(out / "runs")) {
    ++runs;
    EXPECT_NE(section.find(e.path().filename().string()), std::string::npos) << e.path().filename() << " not in C1";
  }
  EXPECT_EQ(runs, 11u);
}
