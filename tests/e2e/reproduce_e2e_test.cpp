// End to end: `sweep reproduce` and `sweep compare` with the real `sweep` and
// `sweep-train` binaries on a real (tiny) sweep. A re-run from the record must be bit
// for bit the same; a one-ulp perturbation after step 3 must be caught at step 3; a new
// layout with the same global batch must reproduce under mpiexec; partial and
// future-version records are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "e2e_util.h"  // run_cli, bin, tiny_model, TempDir
#include "hdf5_c.h"    // edits a record's schema version

namespace fs = std::filesystem;

namespace {

using sweep_test::read_file;

const std::string kMpiexec = SWEEP_MPIEXEC;

const std::string kGrid =
    "name: tiny\n"
    "base:\n" +
    sweep_test::tiny_model("  ") +
    "  train: {steps: 10, micro_batch: 2, accum: 2, lr: 3.0e-3, warmup: 2, clip_norm: 1.0,"
    " checkpoint_every: 4, keep_checkpoints: 5}\n"
    "grid:\n"
    "  train.seed: [0]\n";

class ReproduceE2E : public ::testing::Test {
 protected:
  // One sweep for the whole suite: every test re-runs its single run into reproduce/<n>.
  static void SetUpTestSuite() {
    tmp_ = std::make_unique<sweep_test::TempDir>("reproduce_e2e_");
    root_ = tmp_->path();
    sweep_test::write_file(root_ / "grid.yaml", kGrid);
    auto st = cli({"run", (root_ / "grid.yaml").string(), "--out", (root_ / "sweep").string()}, "sweep.log");
    ASSERT_TRUE(st.ok()) << st.out;
    for (const auto& e : fs::directory_iterator(root_ / "sweep" / "runs")) run_dir_ = e.path();
  }
  static void TearDownTestSuite() {
    if (::testing::UnitTest::GetInstance()->Failed()) tmp_->keep();
    tmp_.reset();
  }

  /// `sweep ARGS`, its output in <root>/<log> (replaced).
  static sweep_test::CliResult cli(std::vector<std::string> args, const std::string& log) {
    args.insert(args.begin(), sweep_test::bin("sweep"));
    fs::remove(root_ / log);
    return sweep_test::run_cli(args, root_ / log);
  }
  static std::string out(const std::string& log) { return read_file(root_ / log); }

  /// The re-run's record path from the "re-run:" line of reproduce's output.
  static std::string rerun_record(const std::string& text) {
    const std::string tag = "re-run:   ";
    size_t at = text.find(tag);
    if (at == std::string::npos) return "";
    at += tag.size();
    return text.substr(at, text.find('\n', at) - at);
  }

  static std::unique_ptr<sweep_test::TempDir> tmp_;
  static fs::path root_, run_dir_;
};

std::unique_ptr<sweep_test::TempDir> ReproduceE2E::tmp_;
fs::path ReproduceE2E::root_, ReproduceE2E::run_dir_;

TEST_F(ReproduceE2E, ReRunFromTheRecordIsBitForBit) {
  ASSERT_FALSE(run_dir_.empty());
  const std::string before = read_file(run_dir_ / "record.h5");
  auto st = cli({"reproduce", run_dir_.string()}, "same.log");
  const std::string text = out("same.log");
  EXPECT_EQ(st.code, 0) << text;
  EXPECT_NE(text.find("reproduced bit-for-bit: 10 steps, 11 checksums"), std::string::npos) << text;
  const std::string again = rerun_record(text);
  ASSERT_FALSE(again.empty()) << text;
  EXPECT_EQ(fs::path(again).parent_path().parent_path(), run_dir_ / "reproduce");
  EXPECT_TRUE(fs::exists(fs::path(again).parent_path() / "config.yaml"));
  EXPECT_TRUE(fs::exists(fs::path(again).parent_path() / "logs" / "rank0.log"));
  EXPECT_EQ(read_file(run_dir_ / "record.h5"), before);  // the original is never touched

  // The two records compare equal from the command line too, also given as record files.
  st = cli({"compare", (run_dir_ / "record.h5").string(), again}, "compare.log");
  EXPECT_EQ(st.code, 0) << out("compare.log");
  EXPECT_NE(out("compare.log").find("identical bit-for-bit: 10 steps, 11 checksums"), std::string::npos)
      << out("compare.log");
}

TEST_F(ReproduceE2E, OneUlpPerturbationDivergesAtItsStep) {
  // fault.desync_step on rank 0 of a one-rank run nudges one parameter by one ulp after
  // the update of step 3: step 3's loss is still equal, its checksums are not.
  auto st = cli({"reproduce", run_dir_.string(), "--set", "fault.desync_step=3", "--set", "fault.desync_rank=0"},
                "perturbed.log");
  const std::string text = out("perturbed.log");
  EXPECT_EQ(st.code, 1) << text;
  EXPECT_NE(text.find("diverged at step 3: loss "), std::string::npos) << text;
  EXPECT_NE(text.find("first differing parameter: "), std::string::npos) << text;
  EXPECT_NE(text.find("config fault.desync_step: 0 -> 3"), std::string::npos) << text;
  EXPECT_NE(text.find("environment"), std::string::npos) << text;

  const std::string again = rerun_record(text);
  ASSERT_FALSE(again.empty()) << text;
  st = cli({"compare", run_dir_.string(), fs::path(again).parent_path().string()}, "cmp.log");
  EXPECT_EQ(st.code, 1) << out("cmp.log");
  EXPECT_NE(out("cmp.log").find("diverged at step 3"), std::string::npos) << out("cmp.log");
  // One ulp in one parameter moves later losses by far less than 1e-3.
  st = cli({"compare", run_dir_.string(), fs::path(again).parent_path().string(), "--rtol", "1e-3"}, "tol.log");
  EXPECT_EQ(st.code, 0) << out("tol.log");
  EXPECT_NE(out("tol.log").find("within tolerance (rtol 0.001)"), std::string::npos) << out("tol.log");
}

TEST_F(ReproduceE2E, ThreadCountChangeIsReported) {
  // Whether two threads change the bits depends on the BLAS and the shapes; this only
  // reports the outcome (the acceptance case is the perturbation above).
  auto st = cli({"reproduce", run_dir_.string(), "--set", "train.threads=2"}, "threads.log");
  const std::string text = out("threads.log");
  ASSERT_TRUE(st.code == 0 || st.code == 1) << text;
  const std::string first = text.substr(0, text.find('\n'));
  EXPECT_TRUE(first.rfind("reproduced bit-for-bit", 0) == 0 || first.rfind("diverged at step", 0) == 0) << text;
  RecordProperty("threads2", first);
  std::printf("train.threads=2: %s\n", first.c_str());
}

TEST_F(ReproduceE2E, NewLayoutWithTheSameGlobalBatchReproduces) {
  if (kMpiexec.empty() || !fs::exists(kMpiexec)) GTEST_SKIP() << "no mpiexec found at configure time";
  // Recorded: world 1 x accum 2. Re-run: world 2 x accum 1, the same 2 micro-batches.
  auto st = cli({"reproduce", run_dir_.string(), "--world-size", "2", "--mpiexec", kMpiexec}, "w2.log");
  const std::string text = out("w2.log");
  EXPECT_EQ(st.code, 0) << text;
  EXPECT_NE(text.find("reproduced bit-for-bit: 10 steps, 11 checksums"), std::string::npos) << text;
}

TEST_F(ReproduceE2E, FromACheckpointOnAnotherLayoutTheStepsAfterItReproduce) {
  if (kMpiexec.empty() || !fs::exists(kMpiexec)) GTEST_SKIP() << "no mpiexec found at configure time";
  // Recorded on one rank; resumed from its checkpoint after step 4 on two ranks.
  auto st = cli({"reproduce", run_dir_.string(), "--from-step", "4", "--world-size", "2", "--mpiexec", kMpiexec},
                "from4.log");
  const std::string text = out("from4.log");
  EXPECT_EQ(st.code, 0) << text;
  // It says which steps it computed: not the 10 it compared.
  EXPECT_NE(text.find("reproduced bit-for-bit: 10 steps (6 re-run: steps 5-10; steps 1-4 are the checkpoint's rows), "
                      "11 checksums"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("resumed from the original's checkpoint after step 4 on 2 rank(s)"), std::string::npos) << text;
  // A step without a complete checkpoint: usage error, nothing created.
  const auto before = std::distance(fs::directory_iterator(run_dir_ / "reproduce"), fs::directory_iterator());
  st = cli({"reproduce", run_dir_.string(), "--from-step", "5"}, "from5.log");
  EXPECT_EQ(st.code, 2) << out("from5.log");
  EXPECT_NE(
      out("from5.log").find("is not a complete checkpoint (complete ones kept: step_0000000004, step_0000000008)"),
      std::string::npos)
      << out("from5.log");
  EXPECT_EQ(std::distance(fs::directory_iterator(run_dir_ / "reproduce"), fs::directory_iterator()), before);
}

TEST_F(ReproduceE2E, RefusesALayoutThatChangesTheGlobalBatch) {
  auto st = cli({"reproduce", run_dir_.string(), "--world-size", "3"}, "w3.log");
  EXPECT_EQ(st.code, 2) << out("w3.log");
  EXPECT_NE(
      out("w3.log").find("cannot reproduce on 3 ranks: the recorded global batch is 4 sequences (world 1 x accum 2 x "
                         "micro-batch 2), whose 2 micro-batches of 2 sequences do not split evenly over 3 ranks"),
      std::string::npos)
      << out("w3.log");
}

TEST_F(ReproduceE2E, RefusesPartialAndFutureVersionRecords) {
  const fs::path partial = root_ / "partial";
  fs::create_directories(partial);
  fs::copy_file(run_dir_ / "record.h5", partial / "record.h5.partial");
  auto st = cli({"reproduce", partial.string()}, "partial.log");
  EXPECT_EQ(st.code, 2);
  EXPECT_NE(out("partial.log").find((partial / "record.h5").string() + ": no completed record: the run is failed ("),
            std::string::npos)
      << out("partial.log");
  EXPECT_FALSE(fs::exists(partial / "reproduce"));

  const fs::path future = root_ / "future";
  fs::create_directories(future);
  fs::copy_file(run_dir_ / "record.h5", future / "record.h5");
  {
    hid_t f = H5Fopen((future / "record.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    hid_t a = H5Aopen(f, "schema_version", H5P_DEFAULT);
    int64_t v = sweep::kSchemaVersion + 1;
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    H5Fclose(f);
  }
  st = cli({"reproduce", (future / "record.h5").string()}, "future.log");
  EXPECT_EQ(st.code, 2);
  EXPECT_NE(out("future.log")
                .find("record schema version " + std::to_string(sweep::kSchemaVersion + 1) + " is not supported"),
            std::string::npos)
      << out("future.log");
  st = cli({"compare", (future / "record.h5").string(), (run_dir_ / "record.h5").string()}, "future_cmp.log");
  EXPECT_EQ(st.code, 2) << out("future_cmp.log");

  st = cli({"reproduce", (root_ / "nothing-here").string()}, "none.log");
  EXPECT_EQ(st.code, 2);
  EXPECT_NE(out("none.log").find("nothing-here: no such record"), std::string::npos) << out("none.log");
}

TEST_F(ReproduceE2E, CompareTwoSweepsPairsRunsById) {
  const std::string grid = (root_ / "grid.yaml").string();
  ASSERT_TRUE(cli({"run", grid, "--out", (root_ / "again").string(), "--quiet"}, "again.log").ok()) << out("again.log");
  auto st = cli({"compare", (root_ / "sweep").string(), (root_ / "again").string()}, "sweeps.log");
  EXPECT_EQ(st.code, 0) << out("sweeps.log");
  EXPECT_NE(out("sweeps.log")
                .find("1 pairs: 1 identical, 0 within tolerance, 0 differ; 0 not compared; 0 only in A, 0 only in B"),
            std::string::npos)
      << out("sweeps.log");
  // A sweep and a record cannot be compared.
  st = cli({"compare", (root_ / "sweep").string(), (run_dir_ / "record.h5").string()}, "mixed.log");
  EXPECT_EQ(st.code, 2) << out("mixed.log");
}

}  // namespace
