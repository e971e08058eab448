// The Slurm launcher against a real one-node cluster (label slurm; start it with
// tests/slurm/start-cluster.sh, which scripts/test does). One job array of six runs:
// five finish with valid records although four data.path values are shell syntax
// (which must arrive literally), and one that hangs past its one-minute time limit is
// classified TIMEOUT. Then a two-rank run under srun --mpi=pmix.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "e2e_util.h"   // E2eTest, tiny_model, run_cli
#include "process.h"    // capture
#include "sweep_dir.h"  // read_run_state, read_points_file

namespace fs = std::filesystem;

namespace {

using sweep_test::read_file;

class SlurmE2E : public sweep_test::E2eTest {
 protected:
  // A directory name full of shell syntax: the batch script must pass it as text.
  SlurmE2E() : E2eTest("slurm e2e $(touch pwned) '") {}
  void SetUp() override {
    sweep::Captured c = sweep::capture({"/bin/sh", "-c", "sinfo -h -o %T"}, 30);
    ASSERT_TRUE(c.status.ok() &&
                (c.output.find("idle") != std::string::npos || c.output.find("mix") != std::string::npos))
        << "no idle Slurm node; start one with tests/slurm/start-cluster.sh (as root). sinfo said: " << c.output;
    E2eTest::SetUp();
    fs::create_directories(dir_ / "x");  // what `'; rm -rf x` would remove
  }
};

TEST_F(SlurmE2E, ArrayOfSixFiveCompleteLiterallyOneTimesOut) {
  // The base point, then the includes; the hang early, so it holds one CPU while the
  // others go through the other one. The points differ in data.path, a key that takes
  // effect with text data: each names a real file whose name a shell would act on.
  const std::vector<std::string> names = {
      "base.txt", "hang", "$(touch pwned)", "'; rm -rf x", "`touch pwned2` \"$HOME\" \\ ; exit 7", "plain"};
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  for (const auto& n : names) write(n, text);
  std::string grid = write("slurm.yaml",
                           "name: slurm-e2e\n"
                           "base:\n"
                           "  model: {layers: 1, d_model: 32, heads: 2, vocab: 256, seq_len: 16}\n"
                           "  data: {kind: text, path: base.txt}\n"  // next to the grid file
                           "  train: {steps: 5, micro_batch: 2}\n"
                           "  dist: {timeout_s: 0}\n"  // no watchdog: let Slurm's limit end the hang
                           "include:\n"
                           "  - {fault.hang_step: 2, data.path: hang}\n"
                           "  - {data.path: '$(touch pwned)'}\n"
                           "  - {data.path: \"'; rm -rf x\"}\n"
                           "  - {data.path: '`touch pwned2` \"$HOME\" \\ ; exit 7'}\n"
                           "  - {data.path: plain}\n"
                           "launch:\n"
                           "  launcher: slurm\n"
                           "  parallel: 2\n"
                           "  slurm: {time: '1', mpi: pmix, poll_s: 1}\n");
  const fs::path out = dir_ / "out";
  // cwd = the test dir, so a relative `rm -rf x` or `touch pwned` would land here.
  const auto st = sweep_test::run_cli({"/bin/sh", "-c", "cd \"$1\" && exec \"$2\" run \"$3\" --out \"$4\"", "sh",
                                       dir_.string(), sweep_test::bin("sweep"), grid, out.string()},
                                      dir_ / "run.log");
  const std::string log = st.out;
  EXPECT_EQ(st.code, 1) << log;
  EXPECT_CONTAINS(log, "submitted job array ");
  EXPECT_CONTAINS(log, "sweep slurm-e2e: 5 completed, 0 already done, 1 failed");

  int completed = 0, timeouts = 0;
  std::set<std::string> paths;
  for (const auto& [id, values] : sweep::read_points_file(out.string())) {
    const std::string rd = (out / "runs" / id).string();
    sweep::RunState s = sweep::read_run_state(rd);
    if (s.state == "completed") {
      ++completed;
      sweep::Record r = sweep::read_record(rd + "/record.h5");
      EXPECT_EQ(r.status, "completed");
      EXPECT_EQ(r.run_id, id);
      EXPECT_EQ(r.steps.size(), 5u);
      paths.insert(r.config.at("data.path"));
      EXPECT_TRUE(fs::exists(rd + "/logs/rank0.log")) << rd;
    } else {
      ++timeouts;
      EXPECT_EQ(s.failure, sweep::FailureClass::timeout) << s.detail;
      EXPECT_CONTAINS(s.detail, "Slurm TIMEOUT");
    }
  }
  EXPECT_EQ(completed, 5);
  EXPECT_EQ(timeouts, 1);
  std::set<std::string> expected;  // every point but the hang, each path as given, next to the grid file
  for (const auto& n : names)
    if (n != "hang") expected.insert((dir_ / n).string());
  EXPECT_EQ(paths, expected);
  EXPECT_TRUE(fs::is_directory(dir_ / "x"));
  for (const char* f : {"pwned", "pwned2"}) {
    EXPECT_FALSE(fs::exists(dir_ / f));
    EXPECT_FALSE(fs::exists(out / f));
    EXPECT_FALSE(fs::exists(fs::path("/tmp") / f));
  }

  // `sweep status` reads the same states back.
  ASSERT_TRUE(sweep_cli({"status", out.string()}, "status.log").ok());
  // A throughput_outlier flag depends on the machine's load at the moment, not on Slurm:
  // "(1 with health flags)" may stand after the count.
  const std::string status = read_file(dir_ / "status.log");
  EXPECT_TRUE(std::regex_search(status, std::regex("6 runs: 5 completed( \\(\\d with health flags\\))?, 1 failed")))
      << status;
  EXPECT_CONTAINS(read_file(dir_ / "status.log"), "timeout");
}

TEST_F(SlurmE2E, TwoRanksUnderSrunPmix) {
  std::string grid = write("mpi.yaml",
                           "name: slurm-mpi\n"
                           "base:\n" +
                               sweep_test::tiny_model("  ") +
                               "  train: {steps: 4, micro_batch: 2}\n"
                               "  dist: {world_size: 2}\n"
                               "launch: {launcher: slurm, slurm: {mpi: pmix, poll_s: 1}}\n");
  const fs::path out = dir_ / "out";
  sweep::ExitStatus st = sweep_cli({"run", grid, "--out", out.string()}, "run.log");
  ASSERT_TRUE(st.ok()) << read_file(dir_ / "run.log");
  auto points = sweep::read_points_file(out.string());
  ASSERT_EQ(points.size(), 1u);
  const fs::path rd = out / "runs" / points[0].first;
  sweep::Record r = sweep::read_record((rd / "record.h5").string());
  EXPECT_EQ(r.status, "completed");
  EXPECT_EQ(r.world_size, 2);
  EXPECT_TRUE(fs::exists(rd / "logs" / "rank0.log"));
  EXPECT_TRUE(fs::exists(rd / "logs" / "rank1.log"));
}

TEST_F(SlurmE2E, AModelOfOnesOwnUnderSrunPmix) {
  // gpt2-train: examples/own-model built against the installed package (the own_model
  // fixture); launch.trainer names it, and every rank under srun runs it.
  const std::string program = std::string(SWEEP_BINARY_DIR) + "/own-model/gpt2-train";
  ASSERT_TRUE(fs::exists(program)) << program;
  std::string grid = write("own.yaml",
                           "name: slurm-own\n"
                           "base:\n"
                           "  model: {kind: gpt2, vocab: 64, seq_len: 16, n_layer: 1, n_embd: 16, n_head: 2}\n"
                           "  train: {steps: 4, micro_batch: 2}\n"
                           "  dist: {world_size: 2}\n"
                           "launch: {launcher: slurm, trainer: " +
                               program + ", slurm: {mpi: pmix, poll_s: 1}}\n");
  const fs::path out = dir_ / "out";
  sweep::ExitStatus st = sweep_cli({"run", grid, "--out", out.string()}, "run.log");
  ASSERT_TRUE(st.ok()) << read_file(dir_ / "run.log");
  auto points = sweep::read_points_file(out.string());
  ASSERT_EQ(points.size(), 1u);
  sweep::Record r = sweep::read_record((out / "runs" / points[0].first / "record.h5").string());
  EXPECT_EQ(r.status, "completed");
  EXPECT_EQ(r.world_size, 2);
  EXPECT_EQ(r.config.at("model.kind"), "gpt2");
  EXPECT_EQ(r.environment.at("trainer"), fs::canonical(program).string());
}

TEST_F(SlurmE2E, AGridsProgramOnTwoRanksUnderSrun) {
  // A program: section (tests/python/rank_program.py): each task's command names its own
  // run directory and id, srun starts both ranks, rank 0 writes the record.
  const std::string script = std::string(SWEEP_SOURCE_DIR) + "/tests/python/rank_program.py";
  std::string grid = write("program.yaml",
                           "name: slurm-program\n"
                           "program: {argv: [/usr/bin/python3, " +
                               script +
                               "], kind: ranks}\n"
                               "base:\n"
                               "  train: {steps: 2}\n"
                               "  dist: {world_size: 2}\n"
                               "seeds: 2\n"
                               "launch: {launcher: slurm, slurm: {mpi: pmix, poll_s: 1}}\n");
  const fs::path out = dir_ / "out";
  sweep::ExitStatus st = sweep_cli({"run", grid, "--out", out.string()}, "run.log");
  ASSERT_TRUE(st.ok()) << read_file(dir_ / "run.log");
  auto points = sweep::read_points_file(out.string());
  ASSERT_EQ(points.size(), 2u);
  for (const auto& [id, _] : points) {
    const fs::path rd = out / "runs" / id;
    sweep::Record r = sweep::read_record((rd / "record.h5").string());
    EXPECT_EQ(r.status, "completed");
    EXPECT_EQ(r.world_size, 2);
    EXPECT_CONTAINS(r.environment.at("program"), script);
    for (int rank : {0, 1}) {
      const std::string seen = read_file(rd / ("seen-rank" + std::to_string(rank) + ".json"));
      EXPECT_CONTAINS(seen, "\"SWEEP_RUN_ID\": \"" + id + "\"");
      EXPECT_CONTAINS(seen, "\"SWEEP_RUN_DIR\": \"" + rd.string() + "\"");
      EXPECT_CONTAINS(seen, "\"rank\": " + std::to_string(rank) + ", \"size\": 2");
    }
  }
}

}  // namespace
