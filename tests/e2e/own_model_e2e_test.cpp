// End to end: a model of the user's own in the same reproducible loop. gpt2-train is
// examples/own-model built against this build *as installed* (scripts/build-own-model,
// the own_model_build fixture); test-models-train (test_models_train.cpp) holds models that
// break the seam's rules. Real binaries, real mpiexec ranks, real records.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "e2e_util.h"  // E2eTest, run_cli, mpiexec, completed_records, bit_difference

namespace fs = std::filesystem;

namespace {

using sweep_test::bit_difference;

const std::string kGpt2Train = std::string(SWEEP_BINARY_DIR) + "/own-model/gpt2-train";

/// A tiny GPT-2 run of `world` ranks x `accum`, ZeRO `zero`; `extra` goes at the end.
std::string gpt2_config(int world, int accum, int zero = 0, const std::string& extra = "") {
  return "model: {kind: gpt2, vocab: 64, seq_len: 16, n_layer: 1, n_embd: 32, n_head: 2}\n"
         "data: {kind: synthetic, seed: 0, branching: 4}\n"
         "train: {steps: 8, micro_batch: 2, accum: " +
         std::to_string(accum) +
         ", lr: 3.0e-3, warmup: 2, clip_norm: 0.5, checkpoint_every: 4}\n"
         "dist: {world_size: " +
         std::to_string(world) + ", zero_stage: " + std::to_string(zero) + "}\n" + extra;
}

class OwnModel : public sweep_test::E2eTest {
 protected:
  OwnModel() : E2eTest("own_model") { trainer_ = kGpt2Train; }
  void SetUp() override {
    E2eTest::SetUp();
    ASSERT_TRUE(fs::exists(kGpt2Train)) << kGpt2Train << " is missing: scripts/build-own-model builds it";
  }
  /// Trains `cfg` on `world` ranks (alone when 1); the run must complete.
  sweep::Record trained(const std::string& name, int world, const std::string& cfg) {
    const auto r = train(name, cfg, world > 1 ? world : 0);
    EXPECT_TRUE(r.ok()) << log(name);
    return record(name);
  }
};

TEST_F(OwnModel, SweepRunTrainsItWithTheSameSchemaAndItsOwnKeysAsAxes) {
  const std::string grid = write("own.yaml",
                                 "name: own\n"
                                 "launch: {trainer: " +
                                     kGpt2Train +
                                     "}\n"
                                     "base:\n"
                                     "  model: {kind: gpt2, vocab: 64, seq_len: 16, n_layer: 1, n_head: 2}\n"
                                     "  train: {steps: 6, micro_batch: 2, accum: 2, lr: 3.0e-3}\n"
                                     "grid:\n"
                                     "  model.n_embd: [16, 32]\n");
  const auto r = sweep_cli({"run", grid, "--out", (dir_ / "out").string()}, "run.log");
  ASSERT_TRUE(r.ok()) << read("run.log");
  const auto records = sweep_test::completed_records(dir_ / "out");
  ASSERT_EQ(records.size(), 2u);
  for (const auto& [id, rec] : records) {
    EXPECT_TRUE(rec.verified) << id << ": the record's digest does not check";
    EXPECT_EQ(rec.config.at("model.kind"), "gpt2");
    EXPECT_EQ(rec.config.count("model.layers"), 0u) << "a decoder key in a gpt2 record";
    EXPECT_EQ(rec.steps.size(), 6u);
    EXPECT_EQ(rec.checksums.size(), 7u);
    ASSERT_FALSE(rec.params.empty());
    EXPECT_EQ(rec.checksums.back().tensors.size(), rec.params.size());
    EXPECT_EQ(rec.memory.step_peak.size(), 1u);
    EXPECT_EQ(rec.environment.at("trainer"), fs::canonical(kGpt2Train).string());
    for (const auto& p : rec.params) EXPECT_EQ(p.name.rfind("layer0.", 0), std::string::npos) << p.name;
  }
  // The report's axis is the model's own key.
  EXPECT_CONTAINS(read("out/report.html"), "model.n_embd");
  EXPECT_CONTAINS(read("run.log"), "2 completed");
}

TEST_F(OwnModel, AnUnknownKindExitsTwoNamingTheRegisteredKinds) {
  const auto r = sweep_test::run_cli_split(
      {kGpt2Train, "--config", write("k.yaml", "model: {kind: gtp2}\n"), "--out", (dir_ / "k").string()}, dir_, dir_);
  sweep_test::expect_one_error_line(r, 2);
  EXPECT_CONTAINS(r.err,
                  "key 'model.kind': unknown model kind 'gtp2' (did you mean 'gpt2'?); registered kinds: "
                  "decoder, gpt2");
  EXPECT_FALSE(fs::exists(dir_ / "k"));
  // Keys the factory finds contradictory (n_head must divide n_embd): exit 2 too.
  const auto f = sweep_test::run_cli_split(
      {kGpt2Train, "--config", write("f.yaml", "model: {kind: gpt2, n_embd: 30, n_head: 4}\n"), "--out",
       (dir_ / "f").string()},
      dir_, dir_);
  sweep_test::expect_one_error_line(f, 2);
  EXPECT_CONTAINS(f.err, "model 'gpt2': key 'model.n_head': must divide model.n_embd (30), got 4");
  EXPECT_FALSE(fs::exists(dir_ / "f"));
  // --describe-models: the kinds and keys the driver reads.
  const auto d = sweep_test::run_cli_split({kGpt2Train, "--describe-models"}, dir_, dir_);
  EXPECT_EQ(d.code, 0) << d.err;
  EXPECT_CONTAINS(d.out, "kind: gpt2");
  EXPECT_CONTAINS(d.out, "name: n_embd");
}

TEST_F(OwnModel, SweepReproduceReRunsItBitForBitWithTheRecordedProgram) {
  const std::string grid = write("one.yaml", "name: one\nlaunch: {trainer: " + kGpt2Train +
                                                 "}\nbase:\n  model: {kind: gpt2, vocab: 64, seq_len: 16, n_layer: 1, "
                                                 "n_embd: 16, n_head: 2}\n  train: {steps: 5, micro_batch: 2}\n");
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", (dir_ / "out").string()}, "run.log").ok()) << read("run.log");
  const auto records = sweep_test::completed_records(dir_ / "out");
  ASSERT_EQ(records.size(), 1u);
  const fs::path run = fs::path(records.begin()->second.path).parent_path();
  // No --trainer: the record names the program that trained it.
  const auto r = sweep_cli({"reproduce", run.string()}, "reproduce.log");
  EXPECT_TRUE(r.ok()) << read("reproduce.log");
  EXPECT_CONTAINS(read("reproduce.log"), "reproduced bit-for-bit: 5 steps, 6 checksums");
  EXPECT_CONTAINS(read("reproduce.log"), "program: ");
  // Out of its sweep directory, no grid declared the program the record names: it is not
  // run unasked (a record can name any command).
  const fs::path copy = dir_ / "copied" / run.filename();
  fs::create_directories(copy);
  fs::copy_file(run / "record.h5", copy / "record.h5");
  const auto refused = sweep_cli({"reproduce", copy.string()}, "refused.log");
  EXPECT_EQ(refused.code, 2) << read("refused.log");
  EXPECT_CONTAINS(read("refused.log"), "pass --allow-program to run it");
  EXPECT_FALSE(fs::exists(copy / "reproduce"));
  EXPECT_TRUE(sweep_cli({"reproduce", copy.string(), "--allow-program"}, "allowed.log").ok()) << read("allowed.log");
}

class OwnModelMpi : public OwnModel {};

TEST_F(OwnModelMpi, LayoutsAndZeroStagesAreBitIdentical) {
  const sweep::Record ref = trained("w1a4", 1, gpt2_config(1, 4));
  ASSERT_EQ(ref.steps.size(), 8u);
  struct Case {
    std::string name;
    int world, accum, zero;
  };
  for (const Case& c : std::vector<Case>{
           {"w2a2", 2, 2, 0}, {"w4a1", 4, 1, 0}, {"w2a2z1", 2, 2, 1}, {"w2a2z2", 2, 2, 2}, {"w2a2z3", 2, 2, 3}}) {
    SCOPED_TRACE(c.name);
    const sweep::Record r = trained(c.name, c.world, gpt2_config(c.world, c.accum, c.zero));
    EXPECT_EQ(bit_difference(ref, r), "");
    ASSERT_EQ(r.checksums.size(), ref.checksums.size());
    EXPECT_EQ(r.checksums.back().tensors, ref.checksums.back().tensors);
  }
}

TEST_F(OwnModelMpi, SweepRunUnderTheMpirunLauncherTrainsTheSameBits) {
  const std::string grid = write("mpirun.yaml", "name: own-mpirun\nlaunch: {launcher: mpirun, trainer: " + kGpt2Train +
                                                    ", mpi_args: [--oversubscribe]}\nbase:\n"
                                                    "  model: {kind: gpt2, vocab: 64, seq_len: 16, n_layer: 1, "
                                                    "n_embd: 32, n_head: 2}\n"
                                                    "  train: {steps: 8, micro_batch: 2, accum: 2, lr: 3.0e-3, warmup: "
                                                    "2, clip_norm: 0.5, checkpoint_every: 4}\n"
                                                    "  dist: {world_size: 2}\n");
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", (dir_ / "out").string()}, "run.log").ok()) << read("run.log");
  const auto records = sweep_test::completed_records(dir_ / "out");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records.begin()->second.world_size, 2);
  // The same math on one rank, started directly.
  EXPECT_EQ(bit_difference(trained("w1a4", 1, gpt2_config(1, 4)), records.begin()->second), "");
}

TEST_F(OwnModelMpi, AKilledRunResumesToTheUninterruptedBits) {
  const std::string cfg = gpt2_config(2, 2, 1, "fault: {slow_ms: 60}\n");  // time to kill it between checkpoints
  const sweep::Record ref = trained("ref", 2, cfg);
  sweep::SpawnRunner runner;
  const int id = runner.start(train_argv("run", cfg, 2, {"--quiet"}), (dir_ / "run.log").string());
  const fs::path done = dir_ / "run" / "checkpoints" / "step_0000000004" / "DONE";
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(done) && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  int killed = 0;
  for (int pid : sweep_test::processes_mentioning((dir_ / "run").string() + " ")) killed += ::kill(pid, SIGKILL) == 0;
  EXPECT_GT(killed, 0);
  sweep_test::wait_for(runner, id);
  ASSERT_TRUE(fs::exists(done)) << log("run");
  ASSERT_FALSE(fs::exists(dir_ / "run" / "record.h5")) << "the run finished before the kill: nothing was resumed";
  ASSERT_TRUE(train("run", cfg, 2, {"--resume"}).ok()) << log("run");
  EXPECT_CONTAINS(log("run"), "resumed from the checkpoint after step 4");
  EXPECT_EQ(bit_difference(ref, record("run")), "");
}

TEST_F(OwnModelMpi, ADesyncOnOneRankIsCaughtNamingTheUsersParameter) {
  const sweep::Record ref = trained("ref", 2, gpt2_config(2, 2));
  // fault.desync_step flips one bit of the middle element of rank 1's replica.
  int64_t n = 0;
  for (const auto& p : ref.params) n = std::max(n, p.offset + p.numel);
  std::string expected;
  for (const auto& p : ref.params)
    if (p.offset <= n / 2 && n / 2 < p.offset + p.numel) expected = p.name;
  ASSERT_FALSE(expected.empty());
  const auto r = train("desync", gpt2_config(2, 2, 0, "fault: {desync_step: 3, desync_rank: 1}\n"), 2);
  EXPECT_FALSE(r.ok());
  EXPECT_CONTAINS(log("desync"),
                  "desync at step 3: rank 0 and rank 1 hold different parameters; first differing "
                  "parameter: " +
                      expected);
}

/// The seam's rules, with test-models-train.
class SeamRules : public sweep_test::E2eTest {
 protected:
  SeamRules() : E2eTest("seam_rules") { trainer_ = sweep_test::bin("test-models-train"); }
  static std::string config(const std::string& kind, int world = 1, int accum = 2) {
    return "model: {kind: " + kind +
           ", vocab: 32, seq_len: 8}\n"
           "train: {steps: 6, micro_batch: 3, accum: " +
           std::to_string(accum) + ", lr: 1.0e-2}\ndist: {world_size: " + std::to_string(world) + "}\n";
  }
};

TEST_F(SeamRules, ABrokenModelFailsWithOneLineNamingItAndWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"nonscalar",
       "model 'nonscalar': loss() returned a Float tensor of shape [2]; expected the summed loss as a "
       "floating-point scalar (0-dim) tensor"},
      {"no-targets", "model 'no-targets': loss() reported 0 targets for a micro-batch; expected at least 1"},
      {"detached", "model 'detached': loss() returned a tensor that depends on no parameter"},
      {"grows",
       "model 'grows': its parameters changed during step 1: it has 3 parameter tensors, 2 when it was made "
       "(register every parameter in the constructor)"},
      {"fp64", "model 'fp64': parameter 'scale64' is Double; the flat buffer holds fp32 parameters"}};
  for (const auto& [kind, message] : cases) {
    SCOPED_TRACE(kind);
    const auto r = sweep_test::run_cli_split(train_argv(kind, config(kind)), dir_, dir_);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_CONTAINS(r.err, "test-models-train: run failed: " + message);
  }
}

TEST_F(SeamRules, AProgramsOwnDataTrainAndBadTokensOrNoSourceAreNamed) {
  const std::string own = "data: {kind: program, workers: 2}\n";
  ASSERT_TRUE(train("own", config("masked") + own).ok()) << log("own");
  EXPECT_EQ(record("own").environment.at("data.source"), "program: arithmetic progressions mod 32");
  // The program's data, not the synthetic default: the runs differ.
  ASSERT_TRUE(train("synthetic", config("masked")).ok()) << log("synthetic");
  EXPECT_NE(record("own").checksums.back().params, record("synthetic").checksums.back().params);
  // A token past the vocabulary, found in a prefetch worker: one line naming the model.
  auto r = sweep_test::run_cli_split(train_argv("bad", config("bad-data") + own), dir_, dir_);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_CONTAINS(r.err, "run failed: model 'bad-data': its data source gave token ");
  EXPECT_CONTAINS(r.err, "outside [0, model.vocab = 32)");
  // A kind without a data source of its own: a config error, nothing written.
  r = sweep_test::run_cli_split(train_argv("none", config("nonscalar") + own), dir_, dir_);
  sweep_test::expect_one_error_line(r, 2);
  EXPECT_CONTAINS(r.err, "key 'data.kind': program, but model 'nonscalar' supplies no data source of its own");
  EXPECT_FALSE(fs::exists(dir_ / "none"));
}

class SeamRulesMpi : public SeamRules {};

TEST_F(SeamRulesMpi, TargetCountsBelowTheTokenCountStayLayoutInvariant) {
  // "masked" counts only some positions: the step's mean is over its targets, found after
  // the reduction, and must not depend on how the micro-batches are spread.
  // The program's own data too: its samples go through the same layout-free sampler.
  const std::string own = "data: {kind: program}\n";
  ASSERT_TRUE(train("w1a4", config("masked", 1, 4) + own).ok()) << log("w1a4");
  ASSERT_TRUE(train("w2a2", config("masked", 2, 2) + own, 2).ok()) << log("w2a2");
  ASSERT_TRUE(train("w4a1", config("masked", 4, 1) + own, 4).ok()) << log("w4a1");
  const auto ref = record("w1a4");
  EXPECT_EQ(bit_difference(ref, record("w2a2")), "");
  EXPECT_EQ(bit_difference(ref, record("w4a1")), "");
  // Not the token-count mean: the loss is over kept targets (about 2/3 of the tokens), so it
  // is well above what dividing by all tokens gives.
  EXPECT_GT(ref.steps[0].loss, 3.0);
}

}  // namespace
