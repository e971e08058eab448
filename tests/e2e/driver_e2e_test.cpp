// The sweep driver end to end with the real `sweep` and `sweep-train`: parallel local
// runs, Ctrl-C then resume (counting launches through a wrapper trainer), retries of a
// killed run, the lock, `sweep status`, and container wrapping through a stand-in runtime.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "e2e_util.h"        // E2eTest, completed_records, wait_for, tiny_model
#include "halving_search.h"  // truncate_record
#include "record.h"          // read_partial_progress
#include "run_files.h"       // RunLock::holder
#include "sweep_dir.h"       // read_run_state

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
  /// Runs a search's grid into two fresh directories (`name`0 and `name`1, two runs at a
  /// time as its launch says): their records and search.log files, for replay checks.
  bool run_twice(const std::string& grid, const std::string& name, std::map<std::string, sweep::Record> runs[2],
                 std::string logs[2], std::string* why) {
    for (int k = 0; k < 2; ++k) {
      const fs::path out = dir_ / (name + std::to_string(k));
      const std::string log = name + std::to_string(k) + ".log";
      if (!sweep_cli({"run", grid, "--out", out.string(), "--quiet"}, log).ok())
        return *why = read_file(dir_ / log), false;
      runs[k] = completed(out);
      logs[k] = read_file(out / "search.log");
    }
    return true;
  }
  /// Starts `sweep run grid --out out --quiet` and sends it SIGINT once out/search.log
  /// holds `mark`; false (with the driver's output in `why`) when it ended before that.
  bool interrupt_search_at(const std::string& grid, const fs::path& out, const std::string& mark, std::string* why) {
    sweep::SpawnRunner runner;
    const fs::path log = dir_ / "stopped.log";
    const int driver = runner.start(sweep_argv({"run", grid, "--out", out.string(), "--quiet"}), log.string());
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::pair<int, sweep::ExitStatus>> ended;
    while (ended.empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120)) {
      std::error_code ec;
      if (fs::exists(out / "search.log", ec) && read_file(out / "search.log").find(mark) != std::string::npos) break;
      ended = runner.wait_some(0.02);
    }
    if (!ended.empty()) return *why = "the search ended before its log said '" + mark + "': " + read_file(log), false;
    ::kill(driver, SIGINT);
    const sweep::ExitStatus st = sweep_test::wait_for(runner, driver);
    if (st.code != 128 + SIGINT)
      return *why = "the interrupted driver exited " + st.describe() + ": " + read_file(log), false;
    return true;
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
    EXPECT_EQ(sweep::read_run_state((out / "runs" / id).string()).state, sweep::RunStatus::completed);
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

/// A random search of three draws, two runs at a time; `seed` is the search's.
std::string random_search(int seed) {
  return "name: rs\n"
         "base:\n" +
         sweep_test::tiny_model("  ") +
         "  train: {steps: 6, micro_batch: 2, schedule: cosine, log_every: 50}\n"
         "search:\n"
         "  kind: random\n"
         "  samples: 3\n"
         "  seed: " +
         std::to_string(seed) +
         "\n"
         "  space:\n"
         "    train.lr: {loguniform: [1.0e-3, 1.0e-2]}\n"
         "    train.clip_norm: {uniform: [0.5, 2.0]}\n"
         "launch: {parallel: 2, slots: 2}\n";
}

// The search replays: the same file run into two directories, two runs at a time, gives
// the same decision log and bit-identical runs; another search seed draws other points.
TEST_F(DriverE2E, StrayProgramAndContainerVariablesNeverReachARecord) {
  // Variables that name a grid's program or an image, left in the caller's environment:
  // the runs of a plain grid must not record them, nor reproduce run what they name.
  const fs::path planted = dir_ / "PLANTED";
  ::setenv("SWEEP_PROGRAM", ("[\"/bin/sh\", \"-c\", \"touch " + planted.string() + "\"]").c_str(), 1);
  ::setenv("SWEEP_PROGRAM_DIGEST", "xxh3:0000000000000000", 1);
  ::setenv("SWEEP_PROGRAM_WRITES", "off", 1);
  ::setenv("SWEEP_CONTAINER_RUNTIME", "docker", 1);
  const fs::path out = dir_ / "out";
  const std::string grid =
      write("one.yaml", "name: one\nbase:\n" + sweep_test::tiny_model("  ") + "  train: {steps: 2, micro_batch: 2}\n");
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", out.string(), "--quiet"}, "one.log").ok()) << read("one.log");
  const auto recs = completed(out);
  ASSERT_EQ(recs.size(), 1u);
  const sweep::Record& r = recs.begin()->second;
  EXPECT_EQ(r.env("program"), "");
  EXPECT_EQ(r.env("program.digest"), "");
  EXPECT_EQ(r.env("program.writes"), "");
  EXPECT_EQ(r.env("container.runtime"), "");
  ASSERT_TRUE(sweep_cli({"reproduce", (out / "runs" / recs.begin()->first).string()}, "rep.log").ok())
      << read("rep.log");
  EXPECT_CONTAINS(read("rep.log"), "reproduced bit-for-bit: 2 steps, ");
  EXPECT_FALSE(fs::exists(planted));
}

TEST_F(DriverE2E, ARandomSearchReplaysInAnotherDirectoryAndAnotherSeedDrawsOthers) {
  const std::string grid = write("rs.yaml", random_search(5));
  std::map<std::string, sweep::Record> runs[2];
  std::string logs[2], why;
  ASSERT_TRUE(run_twice(grid, "out", runs, logs, &why)) << why;
  ASSERT_EQ(runs[0].size(), 3u);
  EXPECT_EQ(logs[0], logs[1]);
  EXPECT_CONTAINS(logs[0], "search random seed=5 samples=3 keys=train.lr,train.clip_norm\n");
  for (const auto& [id, r] : runs[0]) EXPECT_CONTAINS(logs[0], " -> " + id + "\n");
  EXPECT_EQ(sweep_test::sweep_bit_difference(runs[0], runs[1]), "");
  ASSERT_TRUE(sweep_cli({"plan", write("rs6.yaml", random_search(6))}, "plan6.log").ok());
  const std::string plan6 = read_file(dir_ / "plan6.log");
  EXPECT_CONTAINS(plan6, "search random: 3 draws from 2 keys, search seed 6");
  for (const auto& [id, r] : runs[0]) EXPECT_EQ(plan6.find(id), std::string::npos) << id;
}

// A tpe search replays: the same file run into two directories, two runs at a time, makes
// the same decisions and bit-identical runs; another search seed decides otherwise; and a
// search stopped in the middle of a batch and run again reaches the same decisions and
// the same bits as the uninterrupted one.
TEST_F(DriverE2E, ATpeSearchReplaysAndAStoppedOneResumesToTheSameDecisions) {
  const std::string grid = write("tpe.yaml", sweep_test::tpe_search_grid(5));
  std::map<std::string, sweep::Record> runs[2];
  std::string logs[2], why;
  ASSERT_TRUE(run_twice(grid, "out", runs, logs, &why)) << why;
  EXPECT_EQ(logs[0], logs[1]);
  EXPECT_CONTAINS(logs[0],
                  "search tpe seed=5 samples=6 parallel=2 startup=2 metric=objective mode=min "
                  "keys=train.lr,train.clip_norm\n");
  EXPECT_CONTAINS(logs[0], "trial 0 batch 0 random: train.lr=");
  EXPECT_CONTAINS(logs[0], "trial 2 batch 1 tpe (good 1 of 2): ");
  EXPECT_CONTAINS(logs[0], "trial 5 batch 2 tpe (good 1 of 4): ");
  EXPECT_EQ(logs[0].find("(not finished)"), std::string::npos);
  // The final report is written after the last decision: it shows the finished log.
  const std::string report = read_file(dir_ / "out0" / "report.html");
  EXPECT_EQ(report.find("(not finished)"), std::string::npos);
  EXPECT_CONTAINS(report, "trial 5 batch 2 tpe (good 1 of 4): ");
  EXPECT_GE(runs[0].size(), 5u);  // six trials; two may land on one run
  for (const auto& [id, r] : runs[0]) EXPECT_CONTAINS(logs[0], " " + id + " objective=");
  EXPECT_EQ(sweep_test::sweep_bit_difference(runs[0], runs[1]), "");
  ASSERT_TRUE(sweep_cli({"run", write("tpe6.yaml", sweep_test::tpe_search_grid(6)), "--out", (dir_ / "seed6").string(),
                         "--quiet"},
                        "tpe6.log")
                  .ok());
  EXPECT_NE(read_file(dir_ / "seed6" / "search.log"), logs[0]);

  // Stopped while batch 1 runs, then run again.
  const fs::path out = dir_ / "stopped";
  ASSERT_TRUE(interrupt_search_at(grid, out, "trial 2 batch 1", &why)) << why;
  EXPECT_CONTAINS(read_file(out / "search.log"), "(not finished)");  // it did stop half-way
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", out.string(), "--quiet"}, "resumed.log").ok())
      << read_file(dir_ / "resumed.log");
  EXPECT_EQ(read_file(out / "search.log"), logs[0]);
  const auto resumed = completed(out);
  EXPECT_EQ(resumed.size(), runs[0].size());
  EXPECT_EQ(sweep_test::sweep_bit_difference(runs[0], resumed), "");
}

/// The halving search of the driver's tests: sweep_test::halving_search_grid with steps of
/// 60 ms, so that a stage lasts long enough to be interrupted.
std::string halving_search(const std::string& search = sweep_test::kHalvingSearch) {
  return sweep_test::halving_search_grid(search, 60);
}

// A halving search replays: run twice with two runs at a time it makes the same decisions
// and the same records; every run's record, stopped at a rung or promoted to the end, is
// bit for bit the same config trained straight through (cut at its rung's step); and a
// search interrupted in its second stage and run again reaches the same decisions and bits.
TEST_F(DriverE2E, AHalvingSearchReplaysAndItsPromotedRunsAreTheRunsTrainedStraightThrough) {
  const std::string grid = write("halving.yaml", halving_search());
  std::map<std::string, sweep::Record> runs[2];
  std::string logs[2], why;
  ASSERT_TRUE(run_twice(grid, "out", runs, logs, &why)) << why;
  EXPECT_EQ(logs[0], logs[1]);
  EXPECT_CONTAINS(logs[0], "bracket 0 s=2: trials 0..8, rungs 9x2 3x6 1x18\n");
  EXPECT_CONTAINS(logs[0], "bracket 0 rung 2 steps 18: rank 1 trial ");
  EXPECT_CONTAINS(logs[0], "done\n");
  ASSERT_EQ(runs[0].size(), 9u);
  EXPECT_EQ(sweep_test::sweep_bit_difference(runs[0], runs[1]), "");
  std::map<std::string, int> status;
  for (const auto& [id, r] : runs[0]) ++status[r.status];
  EXPECT_EQ(status["completed"], 1);
  EXPECT_EQ(status["stopped"], 8);
  // The rung's records of promoted runs are kept beside them; the one run that reached
  // the end was stopped twice.
  for (const auto& [id, r] : runs[0]) {
    size_t aside = 0;
    for (const auto& e : fs::directory_iterator(dir_ / "out0" / "runs" / id))
      aside += e.path().filename().string().rfind("record.h5.stopped-", 0) == 0;
    EXPECT_EQ(aside, r.status == "completed" ? 2u : r.steps.back().step == 6 ? 1u : 0u) << id;
    // A promoted run resumes from the checkpoint its rung left: its first steps are not
    // trained again.
    const std::string log = read_file(dir_ / "out0" / "runs" / id / "logs" / "rank0.log");
    if (r.status == "completed") {
      EXPECT_CONTAINS(log, "resumed from the checkpoint after step 6");
    }
    if (r.steps.back().step >= 6) {
      EXPECT_CONTAINS(log, "resumed from the checkpoint after step 2");
    }
    if (r.steps.back().step >= 4) {
      EXPECT_FALSE(r.evals.empty()) << id;
    }
  }

  // The same points as a plain grid, every run trained straight through to step 18.
  std::string plain = halving_search("");
  const fs::path straight = dir_ / "straight";
  ASSERT_TRUE(sweep_cli({"run", write("plain.yaml", plain), "--out", straight.string(), "--quiet"}, "plain.log").ok())
      << read_file(dir_ / "plain.log");
  const auto full = completed(straight);
  for (const auto& [id, r] : runs[0]) {
    ASSERT_EQ(full.count(id), 1u) << id;  // the same configs: the same run ids
    const int64_t at = r.steps.back().step;
    EXPECT_EQ(sweep_test::bit_difference(r, sweep::truncate_record(full.at(id), at)), "") << id << " at " << at;
  }

  // Interrupted while its second stage runs, then run again.
  const fs::path out = dir_ / "stopped";
  ASSERT_TRUE(interrupt_search_at(grid, out, "stage 1: running", &why)) << why;
  EXPECT_CONTAINS(read_file(out / "search.log"), "stage 1: running");  // it did stop half-way
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", out.string(), "--quiet"}, "resumed.log").ok())
      << read_file(dir_ / "resumed.log");
  EXPECT_EQ(read_file(out / "search.log"), logs[0]);
  const auto resumed = completed(out);
  EXPECT_EQ(resumed.size(), runs[0].size());
  EXPECT_EQ(sweep_test::sweep_bit_difference(runs[0], resumed), "");
  // sweep status and the report say which runs the search stopped.
  sweep_cli({"status", out.string()}, "status.log");
  EXPECT_CONTAINS(read_file(dir_ / "status.log"), "1 completed, 8 stopped");
  ASSERT_TRUE(sweep_cli({"plan", grid, "--out", out.string()}, "plan.log").ok());
  EXPECT_CONTAINS(read_file(dir_ / "plan.log"), "9 runs in " + out.string() + " (9 done, 0 to run)");
  EXPECT_CONTAINS(read_file(dir_ / "plan.log"), "bracket 0 rungs 9x2 3x6 1x18");
  ASSERT_TRUE(sweep_cli({"report", out.string(), "--format", "md", "-o", (dir_ / "r.md").string()}, "r.log").ok());
  const std::string md = read_file(dir_ / "r.md");
  EXPECT_CONTAINS(md, "8 stopped early by the search");
  EXPECT_CONTAINS(md, "## Search (halving)");
  EXPECT_CONTAINS(md, "| bracket 0 rung 2 (18 steps) | 42 |");  // 9 x 2 + 3 x 4 + 1 x 12 steps
  EXPECT_EQ(md.find("## Failed runs"), std::string::npos);
  // A stopped run reproduces as far as it went.
  for (const auto& [id, r] : runs[0])
    if (r.status == "stopped" && r.steps.back().step == 6) {
      const auto rs = sweep_cli({"reproduce", (out / "runs" / id).string()}, "reproduce.log");
      const std::string said = read_file(dir_ / "reproduce.log");
      EXPECT_TRUE(rs.ok()) << said;
      EXPECT_CONTAINS(said, "reproduced bit-for-bit: 6 steps");
      EXPECT_CONTAINS(said, "the original was stopped by a search after step 6: the re-run stopped there too");
      break;
    }
}

// A rung is ranked only on all its trials' results. The winner's run crashes once (a
// trainer that SIGKILLs itself on its first start): without retries the search stops
// before ranking, names the run and exits 1 (it used to rank the crashed trial worst,
// promote another and say "0 failed"); run again, it decides as the undisturbed search
// did, with the same records. With a retry for the class the crash costs one attempt and
// nothing else.
TEST_F(DriverE2E, AHalvingSearchRanksARungOnlyOnceEachOfItsTrialsHasItsResult) {
  const std::string text = sweep_test::halving_search_grid();  // no slow steps needed
  const std::string grid = write("halving.yaml", text);
  std::map<std::string, sweep::Record> straight[1];
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", (dir_ / "straight").string(), "--quiet"}, "straight.log").ok())
      << read_file(dir_ / "straight.log");
  straight[0] = completed(dir_ / "straight");
  const std::string undisturbed = read_file(dir_ / "straight" / "search.log");
  // The winner of the bracket, and its run.
  const size_t best = undisturbed.find(" best of bracket\n");
  ASSERT_NE(best, std::string::npos) << undisturbed;
  const size_t trial_at = undisturbed.rfind(" trial ", best) + 7;
  const std::string trial = undisturbed.substr(trial_at, undisturbed.find(' ', trial_at) - trial_at);
  const size_t line = undisturbed.find("\ntrial " + trial + ": ");
  ASSERT_NE(line, std::string::npos) << undisturbed;
  const size_t arrow = undisturbed.find(" -> ", line) + 4;
  const std::string id = undisturbed.substr(arrow, 16);

  // Kills itself on the first start of that run whose marker file is missing.
  const fs::path marker = dir_ / "crashed-once";
  const std::string crasher =
      write("crash-once", "#!/bin/sh\ncase \"$*\" in *runs/" + id + "*) [ -e '" + marker.string() + "' ] || { : > '" +
                              marker.string() + "'; kill -9 $$; } ;; esac\nexec '" + bin("sweep-train") + "' \"$@\"\n");
  fs::permissions(crasher, fs::perms::owner_all);

  const fs::path out = dir_ / "crashed";
  const auto first = sweep_cli({"run", grid, "--out", out.string(), "--quiet", "--trainer", crasher}, "first.log");
  const std::string said = read_file(dir_ / "first.log");
  EXPECT_EQ(first.code, 1) << said;
  const std::string stopped = "stage 0: trial " + trial + " run " + id +
                              " has no result at step 2 (failed; see sweep status); the search stops before ranking\n";
  EXPECT_CONTAINS(said, stopped);
  EXPECT_CONTAINS(said, "the halving search stopped at stage 0: 1 run(s) failed");
  EXPECT_CONTAINS(said, ", 1 failed");
  const std::string log = read_file(out / "search.log");
  EXPECT_CONTAINS(log, stopped);
  EXPECT_EQ(log.find(" rung 0 steps 2: rank"), std::string::npos) << log;  // nothing was ranked
  EXPECT_EQ(sweep::read_run_state((out / "runs" / id).string()).state, sweep::RunStatus::failed);
  // plan counts the runs at their rung apart: the search has not decided on them yet.
  ASSERT_TRUE(sweep_cli({"plan", grid, "--out", out.string()}, "plan.log").ok());
  EXPECT_CONTAINS(read_file(dir_ / "plan.log"), "(0 done, 8 stopped at a rung of the unfinished search, 1 to run)");

  const auto again = sweep_cli({"run", grid, "--out", out.string(), "--quiet", "--trainer", crasher}, "again.log");
  EXPECT_TRUE(again.ok()) << read_file(dir_ / "again.log");
  EXPECT_EQ(read_file(out / "search.log"), undisturbed);
  EXPECT_EQ(sweep_test::sweep_bit_difference(straight[0], completed(out)), "");
  // As a plain grid the same directory trains every stopped run on: plan says so.
  ASSERT_TRUE(sweep_cli({"plan", write("plain.yaml", text.substr(0, text.find("search:"))), "--out", out.string()},
                        "plain-plan.log")
                  .ok())
      << read_file(dir_ / "plain-plan.log");
  EXPECT_CONTAINS(read_file(dir_ / "plain-plan.log"), "(1 done, 8 to run)");

  // With a retry for crashes, the rung waits for the retry and nothing else changes.
  fs::remove(marker);
  std::string retried = text;
  retried.replace(retried.find("launch: {"), 9, "launch: {retries: {crashed: 1}, ");
  const fs::path out2 = dir_ / "retried";
  const auto third =
      sweep_cli({"run", write("retried.yaml", retried), "--out", out2.string(), "--trainer", crasher}, "retried.log");
  const std::string said2 = read_file(dir_ / "retried.log");
  EXPECT_TRUE(third.ok()) << said2;
  EXPECT_CONTAINS(said2, "retrying ");
  EXPECT_CONTAINS(said2, ", 0 failed (1 retries)");
  EXPECT_TRUE(fs::exists(marker));  // it did crash once
  EXPECT_EQ(read_file(out2 / "search.log"), undisturbed);
  EXPECT_EQ(sweep_test::sweep_bit_difference(straight[0], completed(out2)), "");
}

// The rung a run stops at is a file in its run directory: one that is not a regular file
// or not a step number is refused with exit 2, naming it, and no record is written.
TEST_F(DriverE2E, ABadStopAtFileIsRefusedNamingIt) {
  for (const std::string bad : {"text", "0", "link"}) {
    const fs::path out = dir_ / ("run-" + bad);
    fs::create_directories(out);
    if (bad == "link")
      fs::create_symlink(sweep_test::tiny_run_yaml(), out / "stop_at");
    else
      sweep_test::write_file(out / "stop_at", bad + "\n");
    const auto st = sweep_test::run_cli(
        {bin("sweep-train"), "--config", sweep_test::tiny_run_yaml(), "--out", out.string(), "--quiet"},
        dir_ / ("stop-" + bad + ".log"));
    EXPECT_EQ(st.code, 2) << bad << ": " << st.out;
    EXPECT_CONTAINS(st.out, (out / "stop_at").string() + ": " +
                                (bad == "link" ? "not a regular file" : "expected one step number >= 1"));
    EXPECT_FALSE(fs::exists(out / "record.h5")) << bad;
    EXPECT_FALSE(fs::exists(out / "record.h5.partial")) << bad;
  }
}

/// The pid in a lock holder's line ("pid 123 on host, since ..."), or 0.
pid_t holder_pid(const std::string& holder) {
  return holder.rfind("pid ", 0) == 0 ? static_cast<pid_t>(std::atol(holder.c_str() + 4)) : 0;
}

// While runs go on, the driver has report.html rewritten, and the report shows them
// running with their step of total (read from their partial records); the report at the
// end shows them completed. No race with the runs' speed: once both runs have recorded a
// step, the test stops their trainers (SIGSTOP) until a rewrite shows them running, so
// the rewrite cannot come too late on a slow or a fast machine.
TEST_F(DriverE2E, TheReportIsRewrittenWhileRunsGoOnAndShowsThemRunning) {
  const std::string grid = write("live.yaml",
                                 "name: live\n"
                                 "base:\n" +
                                     sweep_test::tiny_model("  ") +
                                     "  train: {steps: 20000, micro_batch: 2, log_every: 5000}\n"
                                     "grid:\n"
                                     "  train.lr: [1.0e-3, 3.0e-3]\n"
                                     "launch: {parallel: 2, slots: 2}\n");
  const fs::path out = dir_ / "out";
  sweep::SpawnRunner runner;
  const int driver = runner.start(sweep_argv({"run", grid, "--out", out.string(), "--quiet", "--report-every", "1"}),
                                  (dir_ / "run.log").string());
  std::vector<std::pair<int, sweep::ExitStatus>> ended;
  auto poll = [&](const std::function<bool()>& done, int seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    while (ended.empty() && !done() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(seconds))
      ended = runner.wait_some(0.1);
    return done();
  };
  // Both trainers have flushed a step to their partial records.
  std::vector<pid_t> trainers;
  const bool stepping = poll(
      [&] {
        trainers.clear();
        std::error_code ec;
        if (!fs::is_directory(out / "runs", ec)) return false;
        for (const auto& run : fs::directory_iterator(out / "runs", ec)) {
          try {
            if (sweep::read_partial_progress((run.path() / "record.h5").string()).step <= 0) return false;
          } catch (const sweep::RecordError&) {
            return false;
          }
          if (pid_t pid = holder_pid(sweep::RunLock::holder(run.path().string())); pid > 0) trainers.push_back(pid);
        }
        return trainers.size() == 2;
      },
      120);
  ASSERT_TRUE(stepping) << "the runs never recorded a step while running:\n" << read_file(dir_ / "run.log");
  for (pid_t pid : trainers) ::kill(pid, SIGSTOP);
  std::string seen;  // a rewrite that showed a run in progress
  poll(
      [&] {
        std::error_code ec;
        if (!fs::exists(out / "report.html", ec)) return false;
        const std::string html = read_file(out / "report.html");
        if (html.find("running: step ") != std::string::npos) seen = html;
        return !seen.empty();
      },
      60);
  for (pid_t pid : trainers) ::kill(pid, SIGCONT);
  poll([] { return false; }, 300);
  ASSERT_EQ(ended.size(), 1u) << "the sweep did not end";
  ASSERT_TRUE(ended[0].second.ok()) << read_file(dir_ / "run.log");
  ASSERT_FALSE(seen.empty()) << "no rewrite showed a running run; report.log:\n" << read_file(out / "report.log");
  EXPECT_CONTAINS(seen, "<h2>Running and failed runs</h2>");
  EXPECT_CONTAINS(seen, " of 20000, loss ");
  EXPECT_CONTAINS(read_file(out / "report.log"), "report: ");
  const std::string last = read_file(out / "report.html");
  EXPECT_EQ(last.find("running: step"), std::string::npos);
  EXPECT_CONTAINS(last, "2 completed");
  (void)driver;
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
  // Hold the two running runs where they are (SIGSTOP) until the Ctrl-C: on a slow
  // machine the checks below outlasted their 400 steps, and both completed before the
  // signal. Each is stopped as soon as its trainer holds its run lock (most of a short
  // run is start-up, so the two may never hold theirs at the same moment).
  std::set<pid_t> held;
  for (t0 = std::chrono::steady_clock::now();
       held.size() < 2 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60);
       std::this_thread::sleep_for(std::chrono::milliseconds(10)))
    for (const auto& l : lines(dir_ / "launches"))
      if (pid_t pid = holder_pid(sweep::RunLock::holder((out / "runs" / out_id(l)).string()));
          pid > 0 && held.insert(pid).second)
        ::kill(pid, SIGSTOP);
  ASSERT_EQ(held.size(), 2u) << "no two runs held their run locks:\n" << read_file(dir_ / "first.log");

  // A second driver on the same directory is refused while the first runs.
  auto second = sweep_cli({"run", grid, "--out", out.string(), "--trainer", wrapper_}, "second.log");
  EXPECT_EQ(second.code, 2);
  EXPECT_CONTAINS(read_file(dir_ / "second.log"), "another sweep driver is running on this directory (pid ");
  ASSERT_TRUE(sweep_cli({"status", out.string()}, "status.log").ok());
  EXPECT_CONTAINS(read_file(dir_ / "status.log"), "driver running (pid ");
  EXPECT_CONTAINS(read_file(dir_ / "status.log"), "running");

  ::kill(driver, SIGINT);
  for (pid_t pid : held) ::kill(pid, SIGCONT);  // to take the driver's SIGTERM
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
    if (sweep::read_run_state((out / "runs" / id).string()).state == sweep::RunStatus::interrupted)
      interrupted.insert(id);
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
    if (s.state == sweep::RunStatus::failed) {
      ++failed;
      EXPECT_EQ(n, 2) << id;
      EXPECT_EQ(s.failure, sweep::FailureClass::crashed);
      EXPECT_EQ(s.attempts, 2);
    } else {
      EXPECT_EQ(s.state, sweep::RunStatus::completed);
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
  // The watchdog and the launcher end both runs (the hang would otherwise last until ctest
  // kills the test); the causes are checked below. A bound far from any machine's speed.
  EXPECT_LT(took, 240) << "each run ends by dist.timeout_s, not by the test's time limit";
  EXPECT_TRUE(completed(out).empty());
  int killed = 0, hung = 0;
  for (const auto& e : fs::directory_iterator(out / "runs")) {
    auto s = sweep::read_run_state(e.path().string());
    EXPECT_EQ(s.state, sweep::RunStatus::failed) << e.path();
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

// A hang that comes back at the same step on the same rank is deterministic: the run ends
// after its second attempt, saying so, though retries are left (it was retried until they
// ran out). A hang in the first attempt only (fault.hang_once) is retried and completes:
// the rule is not "never retry a hang".
TEST_F(DriverMpi, AHangRepeatedAtTheSameStepAndRankIsNotRetriedButAHangThatDoesNotRepeatIs) {
  std::string grid = write("hangs.yaml",
                           "name: hangs\n"
                           "base:\n" +
                               sweep_test::tiny_model("  ") +
                               "  train: {steps: 8, micro_batch: 2}\n"
                               "  dist: {world_size: 2, timeout_s: 3}\n"
                               "  fault: {hang_step: 5, hang_rank: 1}\n"
                               "grid:\n"
                               "  fault.hang_once: [0, 1]\n"
                               "launch: {parallel: 1, slots: 2, retries: {hang: 3}}\n");
  const fs::path out = dir_ / "out";
  auto st = sweep_cli({"run", grid, "--out", out.string()}, "run.log");
  const std::string said = read_file(dir_ / "run.log");
  EXPECT_EQ(st.code, 1) << said;
  const std::string verdict = "hang at step 5 on rank 1, repeated in attempts 1 and 2: deterministic, not retried";
  int repeated = 0, once = 0;
  for (const auto& e : fs::directory_iterator(out / "runs")) {
    const auto s = sweep::read_run_state(e.path().string());
    EXPECT_EQ(s.attempts, 2) << e.path() << ": " << s.detail;
    if (read_file(e.path() / "config.yaml").find("hang_once: 1") != std::string::npos) {
      ++once;
      EXPECT_EQ(s.state, sweep::RunStatus::completed) << s.detail;
      continue;
    }
    ++repeated;
    EXPECT_EQ(s.state, sweep::RunStatus::failed);
    EXPECT_EQ(s.failure, sweep::FailureClass::hang);
    EXPECT_EQ(s.detail.rfind(verdict + "; ", 0), 0u) << s.detail;
    // Each attempt located its hang by the ranks' heartbeats.
    EXPECT_CONTAINS(s.detail, "rank 1 never entered collective #");
    ASSERT_EQ(s.hangs.size(), 2u);
    EXPECT_EQ(s.hangs[0].site, "step 5 on rank 1");
    EXPECT_EQ(s.hangs[1].site, "step 5 on rank 1");
    EXPECT_CONTAINS(said, ": hang (" + verdict + "; ");
  }
  EXPECT_EQ(repeated, 1);
  EXPECT_EQ(once, 1);
  // One retry each: the hang that does not repeat, and the first of the one that does.
  size_t retries = 0;
  for (size_t at = said.find("retrying "); at != std::string::npos; at = said.find("retrying ", at + 1)) ++retries;
  EXPECT_EQ(retries, 2u) << said;
}

// A desync (the ranks' parameters part) repeats deterministically: its own class, never
// retried, even when the grid retries every retryable class (it was `crashed` and retried).
TEST_F(DriverMpi, ADesyncIsItsOwnClassAndIsNeverRetried) {
  std::string grid = write("desync.yaml",
                           "name: desync\n"
                           "base:\n" +
                               sweep_test::tiny_model("  ") +
                               "  train: {steps: 6, micro_batch: 2}\n"
                               "  dist: {world_size: 2}\n"
                               "  fault: {desync_step: 3, desync_rank: 1}\n"
                               "launch: {parallel: 1, slots: 2, retries: 2}\n");
  const fs::path out = dir_ / "out";
  auto st = sweep_cli({"run", grid, "--out", out.string()}, "run.log");
  const std::string said = read_file(dir_ / "run.log");
  EXPECT_EQ(st.code, 1) << said;
  EXPECT_CONTAINS(said, ": desync (");
  EXPECT_CONTAINS(said, "desync at step 3: rank 0 and rank 1 hold different parameters");
  EXPECT_EQ(said.find("retrying "), std::string::npos) << said;
  for (const auto& e : fs::directory_iterator(out / "runs")) {
    const auto s = sweep::read_run_state(e.path().string());
    EXPECT_EQ(s.state, sweep::RunStatus::failed);
    EXPECT_EQ(s.failure, sweep::FailureClass::desync);
    EXPECT_EQ(s.attempts, 1);
    // Rank 1's own log is not empty: it says which rank and host it is.
    EXPECT_CONTAINS(read_file(e.path() / "logs" / "rank1.log"), "rank 1 of 2 on ");
  }
  // A grid cannot ask for desync retries: they would end the same way.
  std::string retried = read_file(grid);
  retried.replace(retried.find("retries: 2"), 10, "retries: {desync: 1}");
  const auto refused = sweep_cli({"plan", write("retried.yaml", retried)}, "retried.log");
  EXPECT_EQ(refused.code, 2);
  EXPECT_CONTAINS(read_file(dir_ / "retried.log"), "key 'launch.retries.desync': desync runs are never retried");
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
  EXPECT_CONTAINS(
      argv[0], "exec --bind " + sweep_dir + ":" + sweep_dir + " --bind /tmp --pwd " + sweep_dir + " test-image env ");
  // Which image the run ran in reaches its record (no digest: the image is not a file here).
  EXPECT_CONTAINS(argv[0],
                  "SWEEP_CONTAINER_RUNTIME=apptainer SWEEP_CONTAINER_IMAGE=test-image SWEEP_CONTAINER_DIGEST= " +
                      bin("sweep-train") + " --config ");
  bool docker_env = false;
  for (const auto& a : argv) {
    EXPECT_EQ(a.find("@SWEEP_RANK_ENV@"), std::string::npos) << a;
    if (a.rfind("run --rm --network=host", 0) == 0 && a.find("-e OMPI_COMM_WORLD_RANK") != std::string::npos)
      docker_env = true;
  }
  EXPECT_TRUE(docker_env) << "docker ranks get the launcher's variables";
}

}  // namespace

// The README's promise as users meet it: a shipped sweep, run as shipped, gives a report
// with exactly one bit-identical class holding all its runs.
static void expect_one_class(const fs::path& dir, const std::string& grid_name, size_t runs_expected) {
  const std::string grid = std::string(SWEEP_SOURCE_DIR) + "/sweeps/" + grid_name;
  const fs::path out = dir / "out";
  auto st =
      sweep_test::run_cli({sweep_test::bin("sweep"), "run", grid, "--out", out.string(), "--quiet"}, dir / "run.log");
  ASSERT_TRUE(st.ok()) << read_file(dir / "run.log");
  EXPECT_CONTAINS(read_file(dir / "run.log"), std::to_string(runs_expected) + " completed, 0 already done, 0 failed");
  st = sweep_test::run_cli(
      {sweep_test::bin("sweep"), "report", out.string(), "--format", "json", "-o", (dir / "report.json").string()},
      dir / "report.log");
  ASSERT_TRUE(st.ok()) << read_file(dir / "report.log");
  const std::string json = read_file(dir / "report.json");
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
  EXPECT_EQ(runs, runs_expected);
}

// sweeps/invariance.yaml: world size 1, 2, 4 x ZeRO 0-3 at one global batch, 11 runs.
TEST_F(DriverMpi, TheShippedInvarianceSweepFormsExactlyOneBitIdenticalClass) {
  expect_one_class(dir_, "invariance.yaml", 11);
}

// sweeps/leaf-invariance.yaml: with train.leaf, micro-batches of 16 to 1 sequences on 1, 2
// and 4 ranks (MoE, bf16), 12 runs.
TEST_F(DriverMpi, TheShippedLeafInvarianceSweepFormsExactlyOneBitIdenticalClass) {
  expect_one_class(dir_, "leaf-invariance.yaml", 12);
}

// sweeps/determinism-cost.yaml: one run in each mode on 2 ranks. Each record says which
// mode ran; the report puts their tokens/s side by side, and gives the cost unless a run
// waited for its cores (other tests or processes on the machine), where it refuses and
// says why. Both outcomes of the figure itself are held by ReportTest's unit tests; here
// the refusal must agree with what the records say about their cores.
TEST_F(DriverMpi, TheShippedDeterminismCostSweepReportsWhatDeterminismCosts) {
  const std::string grid = std::string(SWEEP_SOURCE_DIR) + "/sweeps/determinism-cost.yaml";
  const fs::path out = dir_ / "out";
  auto st = sweep_test::run_cli({bin("sweep"), "run", grid, "--out", out.string(), "--quiet"}, dir_ / "run.log");
  ASSERT_TRUE(st.ok()) << read_file(dir_ / "run.log");
  auto recs = completed(out);
  ASSERT_EQ(recs.size(), 2u);
  size_t benchmark = 0;
  for (const auto& [id, r] : recs) {
    const bool bench = r.config.count("train.deterministic") && r.config.at("train.deterministic") == "false";
    benchmark += bench;
    EXPECT_CONTAINS(r.env("determinism"), bench ? "benchmark: native reduction" : "deterministic: canonical reduction");
    EXPECT_EQ(r.env("deterministic_algorithms"), bench ? "0" : "1") << id;
  }
  EXPECT_EQ(benchmark, 1u);
  st = sweep_test::run_cli({bin("sweep"), "report", out.string(), "--format", "json", "-o", (dir_ / "r.json").string()},
                           dir_ / "report.log");
  ASSERT_TRUE(st.ok()) << read_file(dir_ / "report.log");
  const std::string json = read_file(dir_ / "r.json");
  const size_t at = json.find("\"determinism_costs\":[{");
  ASSERT_NE(at, std::string::npos) << json.substr(0, 400);
  const std::string entry = json.substr(at, json.find('}', at) - at);
  EXPECT_EQ(entry.find("tokens_per_s\":null"), std::string::npos) << "a run without its tokens/s: " << entry;
  const bool shared = json.find("\"shared_cores\":true") != std::string::npos;
  if (shared) {
    EXPECT_CONTAINS(entry, "\"cost\":null,\"refused\":\"measured on shared cores (");
  } else {
    EXPECT_EQ(entry.find("null"), std::string::npos) << "a cost without both figures: " << entry;
    EXPECT_CONTAINS(entry, "\"refused\":\"\"");  // no run waited for its cores: nothing to refuse
    EXPECT_CONTAINS(entry, "\"cost\":");
  }
  // Neither run is flagged: the two are not held to each other's bits.
  EXPECT_EQ(json.find("\"identical\":false"), std::string::npos) << json;
}
