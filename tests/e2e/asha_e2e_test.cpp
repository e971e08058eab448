// An asha search end to end with the real `sweep` and `sweep-train` on the tiny model:
// the same decisions and bits at launch.parallel 1, 2 and 4 and after a SIGKILL of the
// driver; promotions that start before the first rung has finished; a run that fails
// holds up exactly the decisions that wait for it.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>

#include "e2e_util.h"  // E2eTest, completed_records, halving_search_grid, sweep_bit_difference, wait_for

namespace fs = std::filesystem;

namespace {

using sweep_test::read_file;

const std::string kAsha = "search:\n  kind: asha\n  min_steps: 2\n  eta: 3\n";

/// The 3 x 3 grid of the halving tests as an asha search (rungs 2, 6 and 18 steps) on four
/// slots; steps sleep `slow_ms` (no effect on the bits) so a driver can be killed half-way.
std::string asha_grid(int slow_ms) {
  return sweep_test::halving_search_grid(kAsha, slow_ms, "launch: {parallel: 2, slots: 4, grace_s: 5}\n");
}

/// The run id of trial `trial` in a search.log ("trial 4: ... -> ID").
std::string run_of_trial(const std::string& log, int trial) {
  const size_t line = log.find("\ntrial " + std::to_string(trial) + ": ");
  if (line == std::string::npos) return "";
  const size_t arrow = log.find(" -> ", line) + 4;
  return log.substr(arrow, 16);
}

class AshaE2E : public sweep_test::E2eTest {
 protected:
  AshaE2E() : E2eTest("asha_e2e") {}
  /// `grid` run undisturbed into straight/: its search.log (empty when the run failed).
  std::string run_straight(const std::string& grid) {
    const auto rs = sweep_cli({"run", grid, "--out", (dir_ / "straight").string(), "--quiet"}, "straight.log");
    EXPECT_TRUE(rs.ok()) << read_file(dir_ / "straight.log");
    return rs.ok() ? read_file(dir_ / "straight" / "search.log") : "";
  }
  /// The crashed-once marker: there once crash_once's trainer has killed itself.
  fs::path marker() const { return dir_ / "crashed-once"; }
  /// A trainer that SIGKILLs itself on its first start whose arguments match the sh case
  /// patterns `when`, and is sweep-train otherwise.
  std::string crash_once(const std::string& when) {
    const std::string m = marker().string();
    const std::string crasher =
        write("crash-once", "#!/bin/sh\ncase \"$*\" in " + when + ") [ -e '" + m + "' ] || { : > '" + m +
                                "'; kill -9 $$; } ;; esac\nexec '" + sweep_test::bin("sweep-train") + "' \"$@\"\n");
    fs::permissions(crasher, fs::perms::owner_all);
    return crasher;
  }
};

// One, two and four runs at a time make the same decisions (search.log) and the same
// records, stopped and completed; with two workers a promoted trial resumes before the
// last trial of the first rung has started (it is asynchronous); killed with SIGKILL
// while the second rung trains and run again, the search ends with the same log and bits.
TEST_F(AshaE2E, AnAshaSearchDecidesTheSameAtParallel124AndAfterAKilledDriver) {
  const std::string grid = write("asha.yaml", asha_grid(30));
  std::map<int, fs::path> dirs;
  std::string log;
  std::map<std::string, sweep::Record> records;
  for (int parallel : {1, 2, 4}) {
    const fs::path out = dirs[parallel] = dir_ / ("p" + std::to_string(parallel));
    const std::string said = "p" + std::to_string(parallel) + ".log";
    ASSERT_TRUE(sweep_cli({"run", grid, "--out", out.string(), "--parallel", std::to_string(parallel)}, said).ok())
        << read_file(dir_ / said);
    EXPECT_CONTAINS(read_file(dir_ / said), std::to_string(parallel) + " workers (launch.parallel) busy ");
    if (parallel == 1) {
      log = read_file(out / "search.log");
      records = sweep_test::completed_records(out);
      continue;
    }
    EXPECT_EQ(read_file(out / "search.log"), log) << parallel << " runs at a time";
    const auto r = sweep_test::completed_records(out);
    EXPECT_EQ(r.size(), records.size());
    EXPECT_EQ(sweep_test::sweep_bit_difference(records, r), "") << parallel << " runs at a time";
  }
  EXPECT_CONTAINS(log, "search asha seed=0 eta=3 min_steps=2 budget=18 metric=train_loss_end mode=min trials=9\n");
  EXPECT_CONTAINS(log, "rung 0 steps 2: promoted trial ");
  EXPECT_CONTAINS(log, "rung 2 steps 18: result 1 trial ");
  EXPECT_CONTAINS(log, "\nbest: trial ");
  EXPECT_CONTAINS(log, "\ndone\n");
  EXPECT_EQ(records.size(), 9u);

  // Asynchronous: with two workers a promoted run resumes before trial 8 first starts
  // (synchronous halving would start every trial of the first rung first).
  const std::string two = read_file(dir_ / "p2.log");
  const size_t promoted = two.find(": promoted from step 2, resuming");
  const size_t last_started = two.find("started   " + run_of_trial(log, 8));
  ASSERT_NE(promoted, std::string::npos) << two;
  ASSERT_NE(last_started, std::string::npos) << two;
  EXPECT_LT(promoted, last_started) << two;

  // The report's search section reads the rungs back.
  ASSERT_TRUE(sweep_cli({"report", dirs[1].string(), "--format", "md", "-o", (dir_ / "r.md").string()}, "r.log").ok());
  const std::string md = read_file(dir_ / "r.md");
  EXPECT_CONTAINS(md, "## Search (asha)");
  EXPECT_CONTAINS(md, "| rung 2 (18 steps) |");

  // SIGKILL of the driver while a promoted run trains its next rung (its rung record moved
  // aside, no record of its own yet) and rung 1 has results, then `sweep run` again.
  const fs::path killed = dir_ / "killed";
  sweep::SpawnRunner runner;
  const int driver =
      runner.start(sweep_argv({"run", grid, "--out", killed.string(), "--quiet"}), (dir_ / "killed.log").string());
  const auto promoted_in_flight = [&] {
    std::error_code ec;
    for (const auto& run : fs::directory_iterator(killed / "runs", ec)) {
      if (fs::exists(run.path() / "record.h5")) continue;
      for (const auto& f : fs::directory_iterator(run.path(), ec))
        if (f.path().filename().string().rfind("record.h5.stopped-", 0) == 0) return true;
    }
    return false;
  };
  const auto t0 = std::chrono::steady_clock::now();
  bool reached = false, ended = false;
  while (!reached && !ended && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(240)) {
    reached =
        read_file(killed / "search.log").find("rung 1 steps 6: result 1 ") != std::string::npos && promoted_in_flight();
    ended = !runner.wait_some(0.02).empty();
  }
  ASSERT_TRUE(reached) << "the driver ended before a promoted run of rung 1 trained: "
                       << read_file(dir_ / "killed.log");
  ::kill(driver, SIGKILL);
  EXPECT_EQ(sweep_test::wait_for(runner, driver).signal, SIGKILL);
  EXPECT_EQ(read_file(killed / "search.log").find("\ndone\n"), std::string::npos);
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", killed.string(), "--quiet"}, "again.log").ok())
      << read_file(dir_ / "again.log");
  EXPECT_EQ(read_file(killed / "search.log"), log);
  EXPECT_EQ(sweep_test::sweep_bit_difference(records, sweep_test::completed_records(killed)), "");
}

// A rung takes its results in order: when trial 4's run crashes at rung 0 (a trainer that
// SIGKILLs itself on its first start) and the grid allows no retry, the decisions after
// it wait, the search names the run and exits 1; run again, it decides as the undisturbed
// search did, with the same records.
TEST_F(AshaE2E, ARunThatFailsHoldsUpOnlyTheDecisionsThatWaitForIt) {
  const std::string grid = write("asha.yaml", asha_grid(0));
  const std::string undisturbed = run_straight(grid);
  ASSERT_FALSE(undisturbed.empty());
  const auto straight = sweep_test::completed_records(dir_ / "straight");
  const std::string id = run_of_trial(undisturbed, 4);
  ASSERT_EQ(id.size(), 16u) << undisturbed;

  const std::string crasher = crash_once("*runs/" + id + "*");
  const fs::path out = dir_ / "crashed";
  const auto first = sweep_cli({"run", grid, "--out", out.string(), "--quiet", "--trainer", crasher}, "first.log");
  const std::string said = read_file(dir_ / "first.log");
  EXPECT_EQ(first.code, 1) << said;
  const std::string named =
      "rung 0 steps 2: trial 4 run " + id + " has no result (failed; see sweep status); the decisions after it wait\n";
  EXPECT_CONTAINS(said, named);
  EXPECT_CONTAINS(said, "the asha search stopped short: 1 run(s) failed");
  EXPECT_CONTAINS(said, ": 8 completed, 0 already done, 1 failed");  // each run once
  const std::string log = read_file(out / "search.log");
  EXPECT_CONTAINS(log, named);
  EXPECT_CONTAINS(log, "rung 0 steps 2: result 4 trial 3 ");
  EXPECT_EQ(log.find("rung 0 steps 2: result 5 "), std::string::npos) << log;  // waits for trial 4
  EXPECT_EQ(log.find("\ndone\n"), std::string::npos) << log;

  const auto again = sweep_cli({"run", grid, "--out", out.string(), "--quiet", "--trainer", crasher}, "again.log");
  EXPECT_TRUE(again.ok()) << read_file(dir_ / "again.log");
  EXPECT_EQ(read_file(out / "search.log"), undisturbed);
  EXPECT_EQ(sweep_test::sweep_bit_difference(straight, sweep_test::completed_records(out)), "");
}

// A promoted run that crashes at its next rung fails that rung only: its result at the
// rung it came from stands (read from the rung record its promotion moved aside), so the
// first rung's decisions are all taken and only the second rung's wait for it.
TEST_F(AshaE2E, APromotedRunThatFailsKeepsTheResultOfTheRungItCameFrom) {
  const std::string grid = write("asha.yaml", asha_grid(0));
  const std::string undisturbed = run_straight(grid);
  const size_t first = undisturbed.find("rung 0 steps 2: promoted trial ");
  ASSERT_NE(first, std::string::npos) << undisturbed;
  const std::string trial = undisturbed.substr(first + 31, undisturbed.find(' ', first + 31) - first - 31);
  const std::string id = run_of_trial(undisturbed, std::stoi(trial));
  ASSERT_EQ(id.size(), 16u) << undisturbed;

  // Kills itself on the first resumed start of that run: its promotion.
  const std::string crasher = crash_once("*runs/" + id + "*--resume*|*--resume*runs/" + id + "*");
  const fs::path out = dir_ / "crashed";
  const auto crashed = sweep_cli({"run", grid, "--out", out.string(), "--quiet", "--trainer", crasher}, "first.log");
  const std::string said = read_file(dir_ / "first.log");
  EXPECT_EQ(crashed.code, 1) << said;
  EXPECT_TRUE(fs::exists(marker())) << said;
  EXPECT_CONTAINS(said, "rung 1 steps 6: trial " + trial + " run " + id + " has no result (failed; see sweep status)");
  const std::string log = read_file(out / "search.log");
  // The first rung is whole: every result and promotion of the undisturbed search.
  const auto rung0 = [](const std::string& l) {
    std::string out;
    for (size_t at = 0; (at = l.find("\nrung 0 ", at)) != std::string::npos; ++at)
      out += l.substr(at, l.find('\n', at + 1) - at);
    return out;
  };
  EXPECT_EQ(rung0(log), rung0(undisturbed));
  EXPECT_CONTAINS(log, "rung 0 steps 2: result 9 trial 8 ");

  const auto again = sweep_cli({"run", grid, "--out", out.string(), "--quiet", "--trainer", crasher}, "again.log");
  EXPECT_TRUE(again.ok()) << read_file(dir_ / "again.log");
  EXPECT_EQ(read_file(out / "search.log"), undisturbed);
}

}  // namespace
