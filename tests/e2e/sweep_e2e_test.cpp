// End to end: the real `sweep` and `sweep-train` binaries, real child processes and
// real HDF5 records. Proves the core promise on one process: same grid twice gives
// bit-identical records; another seed does not.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "process.h"  // SpawnRunner
#include "record.h"   // read_record

namespace fs = std::filesystem;

namespace {

const std::string kBin = SWEEP_BIN_DIR;

const char* kGrid = R"(name: tiny
base:
  model: {layers: 1, d_model: 32, heads: 2, vocab: 64, seq_len: 16}
  train: {steps: 10, micro_batch: 2, accum: 2, lr: 3.0e-3, warmup: 2, clip_norm: 1.0}
grid:
  train.seed: [0, 1]
)";

class SweepE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sweep_e2e_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  /// Runs the real CLI; its output goes to <dir>/<log>.
  sweep::ExitStatus sweep_cli(std::vector<std::string> args, const std::string& log) {
    args.insert(args.begin(), kBin + "/sweep");
    return sweep::SpawnRunner().run(args, (dir_ / log).string());
  }
  std::string read(const std::string& name) {
    std::ifstream in(dir_ / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::map<std::string, sweep::Record> records(const fs::path& sweep_dir) {
    std::map<std::string, sweep::Record> out;
    for (const auto& e : fs::directory_iterator(sweep_dir / "runs")) {
      auto r = sweep::read_record((e.path() / "record.h5").string());
      out[r.config.at("train.seed")] = r;
    }
    return out;
  }
  fs::path dir_;
};

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

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
    for (size_t i = 0; i < ra.steps.size(); ++i) {
      EXPECT_TRUE(same_bits(ra.steps[i].loss, rb.steps[i].loss)) << "seed " << seed << " step " << i + 1;
      EXPECT_TRUE(same_bits(ra.steps[i].grad_norm, rb.steps[i].grad_norm)) << "seed " << seed << " step " << i + 1;
    }
    ASSERT_EQ(ra.checksums.size(), 11u);  // step 0 (initial) and every step
    ASSERT_EQ(rb.checksums.size(), 11u);
    for (size_t i = 0; i < ra.checksums.size(); ++i) {
      EXPECT_EQ(ra.checksums[i].params, rb.checksums[i].params) << "seed " << seed << " step " << i + 1;
      EXPECT_EQ(ra.checksums[i].tensors, rb.checksums[i].tensors) << "seed " << seed << " step " << i + 1;
    }
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
    if (e.path().filename() == "record.h5") before[e.path()] = read(fs::relative(e.path(), dir_).string());
  ASSERT_EQ(before.size(), 2u);
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", (dir_ / "a").string()}, "second.log").ok()) << read("second.log");
  EXPECT_NE(read("second.log").find("0 completed, 2 already done, 0 failed"), std::string::npos) << read("second.log");
  for (const auto& [path, bytes] : before) EXPECT_EQ(read(fs::relative(path, dir_).string()), bytes) << path;
}

TEST_F(SweepE2E, BadGridExitsTwoAndCreatesNothing) {
  std::string grid = write("bad.yaml", "name: bad\nbase:\n  train: {stepz: 3}\n");
  auto st = sweep_cli({"run", grid, "--out", (dir_ / "out").string()}, "bad.log");
  EXPECT_EQ(st.code, 2);
  std::string log = read("bad.log");
  EXPECT_NE(log.find("bad.yaml:3:"), std::string::npos) << log;
  EXPECT_NE(log.find("unknown key 'train.stepz' (did you mean 'train.steps'?)"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(SweepE2E, TrainerRefusesToOverwriteACompletedRecord) {
  std::string cfg = std::string(SWEEP_SOURCE_DIR) + "/tests/data/tiny_run.yaml";
  std::string out = (dir_ / "run").string();
  sweep::SpawnRunner runner;
  ASSERT_TRUE(runner.run({kBin + "/sweep-train", "--config", cfg, "--out", out, "--quiet"}, (dir_ / "1.log").string()).ok())
      << read("1.log");
  std::string bytes = read("run/record.h5");
  auto st = runner.run({kBin + "/sweep-train", "--config", cfg, "--out", out, "--quiet"}, (dir_ / "2.log").string());
  EXPECT_EQ(st.code, 3);
  EXPECT_NE(read("2.log").find("never overwritten"), std::string::npos) << read("2.log");
  EXPECT_EQ(read("run/record.h5"), bytes);
}

}  // namespace
