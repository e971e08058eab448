// The trainer's knobs, each proven on the real sweep-train binary and its record:
// fp16 loss scaling, clipping, schedule, resume, data workers, MoE, data kinds and the
// bad-input contract (exit 2, one line naming the key or file, nothing written).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "e2e_util.h"    // E2eTest, tiny_model, run_cli, bit_difference
#include "hdf5_c.h"      // writes an HDF5 data file
#include "run_health.h"  // run_health, health_names

namespace fs = std::filesystem;

namespace {

using sweep_test::bit_difference;

const std::string kTiny = sweep_test::tiny_model();

class TrainerE2E : public sweep_test::E2eTest {
 protected:
  TrainerE2E() : E2eTest("sweep_trainer") {}
};

TEST_F(TrainerE2E, Fp16ForcedOverflowSkipsTheStepAndBacksTheScaleOff) {
  ASSERT_TRUE(train("fp16", kTiny + "train: {steps: 8, micro_batch: 2, accum: 2, lr: 3.0e-3, precision: fp16,"
                                    " loss_scale_interval: 3}\nfault: {inf_grad_step: 5}\n")
                  .ok())
      << log("fp16");
  auto r = record("fp16");
  ASSERT_EQ(r.steps.size(), 8u);
  // Clean steps 1-3 grow the scale once (interval 3): 65536 x2 from step 4.
  EXPECT_EQ(r.steps[0].loss_scale, 65536.0);
  EXPECT_EQ(r.steps[3].loss_scale, 131072.0);
  EXPECT_EQ(r.steps[4].skipped, 1);           // step 5 overflowed
  EXPECT_EQ(r.steps[5].loss_scale, 65536.0);  // backed off by 0.5
  for (size_t i = 0; i < r.steps.size(); ++i)
    if (i != 4) {
      EXPECT_EQ(r.steps[i].skipped, 0) << "step " << i + 1;
    }
  // Not "health: ok": the skip is counted and where the gradient first went non-finite is
  // named, in the record and the log.
  ASSERT_FALSE(r.params.empty());
  EXPECT_EQ(r.summary.at("loss_scale_skips"), "1");
  EXPECT_EQ(r.summary.at("fp16_overflows"), "5: first non-finite gradient: " + r.params[0].name + "[0] = inf");
  EXPECT_EQ(sweep::health_names(sweep::run_health(r)), "fp16_overflow");
  EXPECT_CONTAINS(r.summary.at("health.fp16_overflow"),
                  "1 of 8 steps (12%) skipped by the fp16 loss scaler after it calibrated, the first at step 5 "
                  "(scale 1.311e+05 -> 6.554e+04): first non-finite gradient: " +
                      r.params[0].name + "[0] = inf.");
  EXPECT_CONTAINS(log("fp16"), "step 5: fp16 overflow (first non-finite gradient: " + r.params[0].name +
                                   "[0] = inf); update skipped, loss scale 131072 -> 65536");
  // The skipped step leaves the parameters exactly as they were.
  ASSERT_EQ(r.checksums.size(), 9u);
  EXPECT_EQ(r.checksums[5].params, r.checksums[4].params);
  EXPECT_NE(r.checksums[4].params, r.checksums[3].params);
  EXPECT_EQ(r.status, "completed");
}

TEST_F(TrainerE2E, ClippingBoundsTheNormAndTheScheduleFollowsItsFormula) {
  ASSERT_TRUE(train("clip", kTiny +
                                "train: {steps: 10, micro_batch: 2, accum: 1, lr: 1.0e-2, warmup: 3, min_lr: 1.0e-3,"
                                " schedule: cosine, clip_norm: 0.05}\n")
                  .ok())
      << log("clip");
  auto r = record("clip");
  int clipped = 0;
  for (const auto& s : r.steps) {
    EXPECT_LE(s.grad_norm * s.clip_coef, 0.05 * (1 + 1e-9)) << "step " << s.step;
    if (s.clip_coef < 1) ++clipped;
  }
  EXPECT_GT(clipped, 0) << "clip_norm 0.05 should clip some step of a fresh model";
  EXPECT_DOUBLE_EQ(r.steps[0].lr, 1.0e-2 * 1 / 3);
  EXPECT_DOUBLE_EQ(r.steps[2].lr, 1.0e-2);  // warmup end
  const double p = 3.0 / 7.0;               // step 6: (6 - 3) / (10 - 3)
  EXPECT_DOUBLE_EQ(r.steps[5].lr, 1.0e-3 + 0.5 * (1.0e-2 - 1.0e-3) * (1 + std::cos(M_PI * p)));
  EXPECT_DOUBLE_EQ(r.steps[9].lr, 1.0e-3);  // last step: min_lr
}

// 16 sequences per epoch, 4 per step: epochs end after steps 4, 8, 12.
const std::string kResume = kTiny +
                            "data: {samples: 16}\n"
                            "train: {steps: 12, micro_batch: 2, accum: 2, lr: 3.0e-3, checkpoint_every: 2,"
                            " keep_checkpoints: 10}\n";

TEST_F(TrainerE2E, ResumeInsideAnEpochAndAtAnEpochBoundaryIsBitIdentical) {
  ASSERT_TRUE(train("full", kResume).ok()) << log("full");
  auto full = record("full");
  for (int from : {6, 8}) {  // 6: inside epoch 2; 8: exactly at the end of epoch 2
    // The state of a run that died after `from` steps: its checkpoint, plus a newer one
    // that never got its DONE marker (a crash mid-checkpoint), which resume must ignore.
    std::string name = "from" + std::to_string(from);
    char ck[32];
    std::snprintf(ck, sizeof ck, "step_%010d", from);
    fs::create_directories(dir_ / name / "checkpoints" / "step_0000000010");
    std::ofstream(dir_ / name / "checkpoints" / "step_0000000010" / "state.bin") << "torn write";
    fs::copy(dir_ / "full" / "checkpoints" / ck, dir_ / name / "checkpoints" / ck, fs::copy_options::recursive);
    ASSERT_TRUE(train(name, kResume, 0, {"--resume"}).ok()) << log(name);
    EXPECT_NE(log(name).find("resumed from the checkpoint after step " + std::to_string(from)), std::string::npos)
        << log(name);
    EXPECT_EQ(bit_difference(full, record(name)), "") << name;
  }
}

TEST_F(TrainerE2E, DataWorkersDoNotChangeTheBits) {
  std::string cfg = kTiny + "data: {samples: 24}\ntrain: {steps: 10, micro_batch: 2, accum: 4, lr: 3.0e-3}\n";
  ASSERT_TRUE(train("w0", cfg + "").ok()) << log("w0");
  ASSERT_TRUE(
      train("w2", kTiny + "data: {samples: 24, workers: 2}\ntrain: {steps: 10, micro_batch: 2, accum: 4, lr: 3.0e-3}\n")
          .ok())
      << log("w2");
  EXPECT_EQ(bit_difference(record("w0"), record("w2")), "");
}

TEST_F(TrainerE2E, MoeWithIdleExpertsTrains) {
  ASSERT_TRUE(train("moe",
                    "model: {layers: 1, d_model: 32, heads: 2, vocab: 64, seq_len: 8,"
                    " moe: {experts: 16, top_k: 1, shared_experts: 1}}\n"
                    "train: {steps: 20, micro_batch: 1, accum: 1, lr: 1.0e-2}\n")
                  .ok())
      << log("moe");
  auto r = record("moe");
  EXPECT_EQ(r.status, "completed");
  EXPECT_LT(r.steps.back().loss, r.steps.front().loss);
  // 8 tokens over 16 experts: some expert got no token at step 1, so its weights keep
  // their initial hash, while one that got tokens changed.
  int idle = 0, used = 0;
  for (size_t t = 0; t < r.params.size(); ++t) {
    if (r.params[t].name.find("expert") == std::string::npos) continue;
    (r.checksums[1].tensors[t] == r.checksums[0].tensors[t] ? idle : used)++;
  }
  EXPECT_GT(idle, 0);
  EXPECT_GT(used, 0);
}

TEST_F(TrainerE2E, TokensTextAndHdf5FilesTrainAndTheirRecordsReadBack) {
  {
    std::ofstream out(dir_ / "data.bin", std::ios::binary);
    for (int i = 0; i < 4000; ++i) {
      uint16_t t = uint16_t((i * 7) % 64);
      out.write(reinterpret_cast<const char*>(&t), 2);
    }
    std::ofstream(dir_ / "data.txt") << std::string(3000, 'a') + "the quick brown fox jumps over the lazy dog\n";
  }
  ASSERT_TRUE(train("tok", kTiny + "data: {kind: tokens, path: \"" + (dir_ / "data.bin").string() +
                               "\"}\ntrain: {steps: 5, micro_batch: 2}\n")
                  .ok())
      << log("tok");
  EXPECT_EQ(record("tok").environment.at("data.source").find("uint16 tokens file"), 0u);
  ASSERT_TRUE(
      train("txt", "model: {layers: 1, d_model: 32, heads: 2, vocab: 256, seq_len: 16}\ndata: {kind: text, path: \"" +
                       (dir_ / "data.txt").string() + "\"}\ntrain: {steps: 5, micro_batch: 2}\n")
          .ok())
      << log("txt");
  const auto txt = record("txt");
  EXPECT_EQ(txt.status, "completed");
  EXPECT_EQ(txt.steps.size(), 5u);
  EXPECT_NE(txt.environment.at("data.source").find("text"), std::string::npos) << txt.environment.at("data.source");
  // An HDF5 file with a 1-D integer dataset, as a tokenizer pipeline would leave it.
  {
    std::vector<int32_t> tokens(4000);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 5 + i / 7) % 64);
    hid_t f = H5Fcreate((dir_ / "data.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t n = tokens.size();
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t d = H5Dcreate2(f, "ids", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens.data());
    H5Dclose(d), H5Sclose(space), H5Fclose(f);
  }
  ASSERT_TRUE(train("h5", kTiny + "data: {kind: hdf5, path: \"" + (dir_ / "data.h5").string() +
                              "\", dataset: ids}\ntrain: {steps: 5, micro_batch: 2}\n")
                  .ok())
      << log("h5");
  const auto h5 = record("h5");
  EXPECT_EQ(h5.status, "completed");
  EXPECT_EQ(h5.steps.size(), 5u);
  EXPECT_TRUE(h5.verified);
  EXPECT_NE(h5.environment.at("data.source").find("hdf5 " + (dir_ / "data.h5").string() + ":ids"), std::string::npos)
      << h5.environment.at("data.source");
  for (const auto& s : h5.steps) EXPECT_TRUE(std::isfinite(s.loss));
}

TEST_F(TrainerE2E, QuickstartLearnsWellBelowLnVocab) {
  // The quickstart's own grid and step budget: every run must get below 60% of ln(vocab)
  // (the synthetic chain's floor is ln 4 = 1.39 nats, ln 256 = 5.55).
  const std::string grid = std::string(SWEEP_SOURCE_DIR) + "/sweeps/quickstart.yaml";
  auto st = sweep_cli({"run", grid, "--out", (dir_ / "qs").string()}, "qs.log");
  ASSERT_TRUE(st.ok()) << st.out;
  int runs = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "qs" / "runs")) {
    auto r = sweep::read_record((e.path() / "record.h5").string());
    const double limit = 0.6 * std::log(std::stod(r.config.at("model.vocab")));
    EXPECT_LT(r.steps.back().loss, limit) << r.run_id << " (" << r.config.at("train.lr") << ")";
    EXPECT_GT(r.steps.back().loss, std::stod(r.environment.at("data.entropy_floor"))) << r.run_id;
    ++runs;
  }
  EXPECT_GE(runs, 4);
}

struct BadCase {
  const char* name;
  std::string config;
  std::string message;  // a substring of the one error line
};

TEST_F(TrainerE2E, BadInputExitsTwoNamingTheKeyAndWritesNothing) {
  std::ofstream(dir_ / "short.bin", std::ios::binary) << std::string(10, '\0');  // 5 tokens < seq_len + 1
  std::vector<BadCase> cases = {
      {"unknown", "train: {stepz: 3}\n", "unknown key 'train.stepz' (did you mean 'train.steps'?)"},
      {"type", "train: {steps: many}\n", "key 'train.steps': expected an integer"},
      {"range", "train: {accum: 0}\n", "key 'train.accum': expected an integer in [1,"},
      {"precision", "train: {precision: fp8}\n", "key 'train.precision': expected one of fp32 | bf16 | fp16"},
      {"missing", "data: {kind: tokens, path: /nonexistent/data.bin}\n",
       "key 'data.path': cannot open '/nonexistent/data.bin'"},
      {"short", "data: {kind: tokens, path: \"" + (dir_ / "short.bin").string() + "\"}\n",
       "holds 5 tokens; one sequence needs 17"},
      {"vocab", "data: {kind: text, path: \"" + (dir_ / "short.bin").string() + "\"}\n", "key 'model.vocab'"},
  };
  for (const auto& c : cases) {
    auto st = train(c.name, kTiny + c.config);
    EXPECT_EQ(st.code, 2) << c.name << ": " << log(c.name);
    std::string out = log(c.name);
    EXPECT_NE(out.find(c.message), std::string::npos) << c.name << ": " << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << c.name << ": expected one line, got: " << out;
    EXPECT_FALSE(fs::exists(dir_ / c.name)) << c.name << ": the run directory was created";
  }
}

}  // namespace
