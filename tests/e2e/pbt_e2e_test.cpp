// A pbt search end to end with the real `sweep` and `sweep-train` on the tiny model: the
// same decisions and bits at any launch.parallel and after a SIGKILL of the driver, every
// fork's record naming its parent and step, and the best member reproduced bit for bit.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "e2e_util.h"  // E2eTest, completed_records, pbt_search_grid, sweep_bit_difference, wait_for

namespace fs = std::filesystem;

namespace {

using sweep_test::read_file;

/// The search of these tests (e2e_util.h): a population of 8, three runs at a time.
std::string pbt_grid(int slow_ms) {
  return sweep_test::pbt_search_grid(slow_ms, "launch: {parallel: 3, slots: 3, grace_s: 5}\n", 8);
}

/// The run of the line of search.log that starts with `prefix` ("... run ID ...").
std::string run_on_line(const std::string& log, const std::string& prefix) {
  const size_t at = log.find(prefix);
  if (at == std::string::npos) return "";
  const size_t run = log.find(" run ", at) + 5;
  return log.substr(run, log.find(' ', run) - run);
}

class PbtE2E : public sweep_test::E2eTest {
 protected:
  PbtE2E() : E2eTest("pbt_e2e") {}
};

// Run with one run at a time and with three, the search makes the same decisions (the
// same search.log, checkpoint digests included) and the same records, stopped and
// completed; killed with SIGKILL in its second generation and run again, it ends with
// the same log and bits. Every fork's record names its parent and step as its config
// does, and each lineage goes back to a member of generation 0 (the report's family
// tree); the best member reproduces bit for bit from its parent's checkpoint.
TEST_F(PbtE2E, APbtSearchDecidesTheSameAtAnyParallelAndAfterAKilledDriver) {
  const std::string grid = write("pbt.yaml", pbt_grid(20));
  const fs::path one = dir_ / "one", three = dir_ / "three", killed = dir_ / "killed";
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", one.string(), "--quiet", "--parallel", "1"}, "one.log").ok())
      << read_file(dir_ / "one.log");
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", three.string(), "--quiet", "--parallel", "3"}, "three.log").ok())
      << read_file(dir_ / "three.log");
  const std::string log = read_file(one / "search.log");
  EXPECT_EQ(read_file(three / "search.log"), log);
  EXPECT_CONTAINS(log, "search pbt seed=5 population=8 interval=6 decisions_at=6,12,18 quantile=0.25");
  EXPECT_CONTAINS(log, "generation 3: decided\n");
  EXPECT_CONTAINS(log, " exploits member ");
  EXPECT_CONTAINS(log, "\ndone\n");
  const auto a = sweep_test::completed_records(one), b = sweep_test::completed_records(three);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_EQ(sweep_test::sweep_bit_difference(a, b), "");
  EXPECT_EQ(sweep_test::sweep_bit_difference(b, a), "");

  // Lineage: a fork's record names the parent and step its config does, and the chain of
  // parents ends at a member of generation 0.
  std::set<std::string> first;
  for (const auto& [id, r] : a)
    if (log.find("-> " + id + "\n") < log.find("generation ")) first.insert(id);
  EXPECT_EQ(first.size(), 8u);
  size_t forks = 0;
  for (const auto& [id, r] : a) {
    const auto parent = r.config.find("train.fork_parent");
    if (parent == r.config.end() || parent->second.empty()) {
      EXPECT_TRUE(first.count(id)) << id << " is neither a member of generation 0 nor a fork";
      continue;
    }
    ++forks;
    EXPECT_EQ(r.lineage.kind, "forked") << id;
    EXPECT_EQ(r.lineage.parent_run_id, parent->second) << id;
    EXPECT_EQ(std::to_string(r.lineage.parent_step), r.config.at("train.fork_step")) << id;
    EXPECT_EQ(r.steps.front().step, 1) << id << ": the parent's rows come first";
    std::string up = id;
    for (int hops = 0; hops < 10 && !first.count(up); ++hops) up = a.at(up).lineage.parent_run_id;
    EXPECT_TRUE(first.count(up)) << id << ": its lineage does not reach generation 0";
  }
  EXPECT_GE(forks, 3u);  // the bottom 2 of 8 fork at each of 3 decisions (some may share a run)

  // The best member reproduces bit for bit.
  const std::string best = run_on_line(log, "final step 24: rank 1 ");
  ASSERT_EQ(a.count(best), 1u) << log;
  EXPECT_EQ(a.at(best).status, "completed");
  const auto rs = sweep_cli({"reproduce", (one / "runs" / best).string()}, "reproduce.log");
  EXPECT_TRUE(rs.ok()) << read_file(dir_ / "reproduce.log");
  EXPECT_CONTAINS(read_file(dir_ / "reproduce.log"), "reproduced bit-for-bit: 24 steps");

  // The report draws the population's family tree from the records' lineage.
  ASSERT_TRUE(sweep_cli({"report", one.string(), "--format", "md", "-o", (dir_ / "r.md").string()}, "r.log").ok());
  const std::string md = read_file(dir_ / "r.md");
  EXPECT_CONTAINS(md, "## Lineage");
  // And each member's schedule: the values of each span of steps and whose checkpoint it forked from.
  EXPECT_CONTAINS(md, "Each member's schedule");
  EXPECT_CONTAINS(md, "| member 0 | ");
  EXPECT_CONTAINS(md, " (from member ");
  if (a.at(best).lineage.kind == "forked") {
    EXPECT_CONTAINS(md, best + ": forked from " + a.at(best).lineage.parent_run_id + " at step " +
                            std::to_string(a.at(best).lineage.parent_step));
  }

  // --lineage: the member with the longest lineage re-run run by run from step 0, each
  // child from its parent's re-run. With every checkpoint of the originals removed, plain
  // reproduce refuses (exit 2) and --lineage reproduces bit for bit; with one bit flipped
  // at step 3 (in the first run of the chain) it names that run and stops there.
  std::string deepest, root;
  int depth = 0;
  for (const auto& [id, r] : a) {
    int hops = 0;
    std::string up = id;
    for (; hops < 10 && a.at(up).lineage.kind == "forked"; ++hops) up = a.at(up).lineage.parent_run_id;
    if (r.status == "completed" && hops > depth) depth = hops, deepest = id, root = up;
  }
  ASSERT_GE(depth, 1) << log;
  for (const auto& run : fs::directory_iterator(one / "runs")) fs::remove_all(run.path() / "checkpoints");
  EXPECT_EQ(sweep_cli({"reproduce", (one / "runs" / deepest).string()}, "plain.log").code, 2)
      << read_file(dir_ / "plain.log");
  EXPECT_CONTAINS(read_file(dir_ / "plain.log"), "is gone");
  const auto whole = sweep_cli({"reproduce", "--lineage", (one / "runs" / deepest).string()}, "lineage.log");
  EXPECT_TRUE(whole.ok()) << read_file(dir_ / "lineage.log");
  EXPECT_CONTAINS(read_file(dir_ / "lineage.log"), "reproduced bit-for-bit across its lineage: " +
                                                       std::to_string(depth + 1) + " runs, steps 1-24, each re-run");
  EXPECT_CONTAINS(read_file(dir_ / "lineage.log"), "  run " + root + " (steps 1-");
  const auto flipped = sweep_cli({"reproduce", "--lineage", (one / "runs" / deepest).string(), "--set",
                                  "fault.transient_step=3", "--set", "fault.transient_rank=0"},
                                 "flipped.log");
  EXPECT_EQ(flipped.code, 1) << read_file(dir_ / "flipped.log");
  EXPECT_CONTAINS(read_file(dir_ / "flipped.log"), "not reproduced across its lineage: run " + root + " (steps 1-");
  EXPECT_CONTAINS(read_file(dir_ / "flipped.log"), ", part 1 of " + std::to_string(depth + 1) + ") differs");

  // SIGKILL of the driver while generation 2 trains, then `sweep run` again.
  sweep::SpawnRunner runner;
  const int driver =
      runner.start(sweep_argv({"run", grid, "--out", killed.string(), "--quiet"}), (dir_ / "killed.log").string());
  const auto t0 = std::chrono::steady_clock::now();
  bool reached = false, ended = false;
  while (!reached && !ended && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(240)) {
    reached = read_file(killed / "search.log").find("generation 2: training") != std::string::npos;
    ended = !runner.wait_some(0.02).empty();
  }
  ASSERT_TRUE(reached) << "the driver ended before its second generation: " << read_file(dir_ / "killed.log");
  ::kill(driver, SIGKILL);
  EXPECT_EQ(sweep_test::wait_for(runner, driver).signal, SIGKILL);
  EXPECT_CONTAINS(read_file(killed / "search.log"), "generation 1: decided\n");
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", killed.string(), "--quiet"}, "again.log").ok())
      << read_file(dir_ / "again.log");
  EXPECT_EQ(read_file(killed / "search.log"), log);
  const auto c = sweep_test::completed_records(killed);
  EXPECT_EQ(c.size(), a.size());
  EXPECT_EQ(sweep_test::sweep_bit_difference(a, c), "");
}

// A log that an earlier driver wrote is replayed, not trusted blindly: a decision in it
// that the records no longer give (here a digest edited) stops the search, which says so
// and changes nothing.
TEST_F(PbtE2E, APbtSearchWhoseLogDisagreesWithItsRecordsStops) {
  const std::string grid = write("pbt.yaml", pbt_grid(0));
  const fs::path out = dir_ / "out";
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", out.string(), "--quiet"}, "run.log").ok())
      << read_file(dir_ / "run.log");
  std::string log = read_file(out / "search.log");
  const size_t at = log.find(", checkpoint ");
  ASSERT_NE(at, std::string::npos) << log;
  log[at + 13] = log[at + 13] == '0' ? '1' : '0';
  sweep_test::write_file(out / "search.log", log);
  const auto rs = sweep_cli({"run", grid, "--out", out.string(), "--quiet"}, "again.log");
  EXPECT_FALSE(rs.ok());
  EXPECT_CONTAINS(read_file(dir_ / "again.log"), "decided generation");
  EXPECT_CONTAINS(read_file(dir_ / "again.log"), "otherwise than its records do now");
  EXPECT_EQ(read_file(out / "search.log"), log);
}

}  // namespace
