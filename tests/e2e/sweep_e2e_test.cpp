// End to end: the real `sweep` and `sweep-train` binaries, real child processes and
// real HDF5 records. Proves the core promise on one process: same grid twice gives
// bit-identical records; another seed does not.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "e2e_util.h"  // E2eTest, run_cli, tiny_model, completed_records, bit_difference

namespace fs = std::filesystem;

namespace {

using sweep_test::bit_difference;
using sweep_test::same_bits;

const std::string kGrid =
    "name: tiny\n"
    "base:\n" +
    sweep_test::tiny_model("  ") +
    "  train: {steps: 10, micro_batch: 2, accum: 2, lr: 3.0e-3, warmup: 2, clip_norm: 1.0}\n"
    "grid:\n"
    "  train.seed: [0, 1]\n";

class SweepE2E : public sweep_test::E2eTest {
 protected:
  SweepE2E() : E2eTest("sweep_e2e") {}
  /// The completed records of a sweep, by seed.
  std::map<std::string, sweep::Record> records(const fs::path& sweep_dir) {
    std::map<std::string, sweep::Record> out;
    for (auto& [id, r] : sweep_test::completed_records(sweep_dir)) out[r.config.at("train.seed")] = r;
    return out;
  }
};

TEST_F(SweepE2E, SameGridTwiceIsBitIdenticalAndSeedChangesIt) {
  std::string grid = write("grid.yaml", kGrid);
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", (dir_ / "a").string()}, "a.log").ok()) << read("a.log");
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", (dir_ / "b").string()}, "b.log").ok()) << read("b.log");

  auto a = records(dir_ / "a"), b = records(dir_ / "b");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (const auto& [seed, ra] : a) {
    const sweep::Record& rb = b.at(seed);
    EXPECT_EQ(ra.run_id, rb.run_id);
    EXPECT_EQ(ra.status, "completed");
    ASSERT_EQ(ra.steps.size(), 10u);
    ASSERT_EQ(rb.steps.size(), 10u);
    ASSERT_EQ(ra.checksums.size(), 11u);  // step 0 (initial) and every step
    ASSERT_EQ(rb.checksums.size(), 11u);
    EXPECT_EQ(bit_difference(ra, rb), "") << "seed " << seed;
    for (size_t i = 0; i < ra.checksums.size(); ++i)
      EXPECT_EQ(ra.checksums[i].tensors, rb.checksums[i].tensors) << "seed " << seed << " step " << i + 1;
  }
  // Another seed: different initialisation and sample order, so every step differs.
  const auto &s0 = a.at("0"), &s1 = a.at("1");
  EXPECT_NE(s0.run_id, s1.run_id);
  EXPECT_FALSE(same_bits(s0.steps[0].loss, s1.steps[0].loss));
  EXPECT_NE(s0.checksums.back().params, s1.checksums.back().params);

  // The report lists every run.
  std::string html = read("a/report.html");
  for (const auto& [seed, r] : a) EXPECT_NE(html.find(r.run_id), std::string::npos) << r.run_id;
  EXPECT_NE(html.find("<svg"), std::string::npos);
}

TEST_F(SweepE2E, RerunSkipsCompletedRunsWithoutTouchingThem) {
  std::string grid = write("grid.yaml", kGrid);
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", (dir_ / "a").string()}, "first.log").ok()) << read("first.log");
  std::map<fs::path, std::string> before;
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "a" / "runs"))
    if (e.path().filename() == "record.h5") before[e.path()] = sweep_test::read_file(e.path());
  ASSERT_EQ(before.size(), 2u);
  auto second = sweep_cli({"run", grid, "--out", (dir_ / "a").string()}, "second.log");
  ASSERT_TRUE(second.ok()) << second.out;
  EXPECT_CONTAINS(second.out, "0 completed, 2 already done, 0 failed");
  for (const auto& [path, bytes] : before) EXPECT_EQ(sweep_test::read_file(path), bytes) << path;
}

TEST_F(SweepE2E, BadGridExitsTwoAndCreatesNothing) {
  std::string grid = write("bad.yaml", "name: bad\nbase:\n  train: {stepz: 3}\n");
  auto st = sweep_cli({"run", grid, "--out", (dir_ / "out").string()}, "bad.log");
  EXPECT_EQ(st.code, 2);
  EXPECT_CONTAINS(st.out, "bad.yaml:3:");
  EXPECT_CONTAINS(st.out, "unknown key 'train.stepz' (did you mean 'train.steps'?)");
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(SweepE2E, TrainerRefusesToOverwriteACompletedRecord) {
  const std::string cfg = sweep_test::tiny_run_yaml(), out = (dir_ / "run").string();
  const std::vector<std::string> argv = {sweep_test::bin("sweep-train"), "--config", cfg, "--out", out, "--quiet"};
  auto first = sweep_test::run_cli(argv, dir_ / "1.log");
  ASSERT_TRUE(first.ok()) << first.out;
  std::string bytes = read("run/record.h5");
  auto st = sweep_test::run_cli(argv, dir_ / "2.log");
  EXPECT_EQ(st.code, 3);
  EXPECT_CONTAINS(st.out, "never overwritten");
  EXPECT_EQ(read("run/record.h5"), bytes);
}

}  // namespace
