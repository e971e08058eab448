// Planning `sweep reproduce`: which layouts keep the bits, --set overrides, where the
// re-run goes, and the verdict, with a fake runner standing in for sweep-train.
#include "reproduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "record.h"
#include "temp_dir.h"   // TempDirTest
#include "test_util.h"  // thrown_message, EXPECT_CONTAINS

namespace sweep {
namespace {

namespace fs = std::filesystem;

Record recorded(int64_t world, int64_t accum) {
  RunConfig c;
  c.dist.world_size = world;
  c.train.accum = accum;
  Record r;
  r.path = "runs/x/record.h5";
  r.config_yaml = to_yaml(c);
  return r;
}

std::string refusal(const Record& r, int64_t world, int64_t accum, const std::vector<std::string>& set = {}) {
  return sweep_test::thrown_message<ConfigError>([&] { reproduce_config(r, world, accum, 0, set); });
}

TEST(ReproduceConfig, KeepsTheRecordedConfigByDefault) {
  RunConfig c = reproduce_config(recorded(1, 2), 0, 0, 0, {});
  EXPECT_EQ(c.dist.world_size, 1);
  EXPECT_EQ(c.train.accum, 2);
  EXPECT_EQ(to_yaml(c), recorded(1, 2).config_yaml);
}

TEST(ReproduceConfig, ChangesTheLayoutWhenTheGlobalBatchHolds) {
  RunConfig c = reproduce_config(recorded(1, 4), 2, 0, 0, {});  // accum derived: 4 / 2
  EXPECT_EQ(c.dist.world_size, 2);
  EXPECT_EQ(c.train.accum, 2);
  c = reproduce_config(recorded(1, 4), 0, 1, 0, {});  // world derived: 4 / 1
  EXPECT_EQ(c.dist.world_size, 4);
  EXPECT_EQ(c.train.accum, 1);
  c = reproduce_config(recorded(2, 2), 4, 1, 0, {});
  EXPECT_EQ(c.dist.world_size, 4);
}

TEST(ReproduceConfig, RefusesLayoutsThatChangeTheBits) {
  // The default micro-batch is 4 sequences: 16 in all for world 1 x accum 4.
  EXPECT_NE(refusal(recorded(1, 4), 3, 0)
                .find("cannot reproduce on 3 ranks: the recorded global batch is 16 sequences (world 1 x accum 4 x "
                      "micro-batch 4)"),
            std::string::npos)
      << refusal(recorded(1, 4), 3, 0);
  EXPECT_NE(refusal(recorded(1, 4), 2, 4).find("world 2 x accum 4 x micro-batch 4 = 32 sequences"), std::string::npos);
  EXPECT_NE(refusal(recorded(1, 4), 0, 3).find("not a multiple of 3"), std::string::npos);
  // Any factorization of the micro-batches now: 6 on 2 ranks is accum 3.
  EXPECT_EQ(refusal(recorded(1, 6), 2, 0), "");
  EXPECT_EQ(reproduce_config(recorded(1, 6), 2, 0, 0, {}).train.accum, 3);
}

/// A recorded run with train.leaf `leaf`.
Record recorded_leaf(int64_t world, int64_t accum, int64_t micro, int64_t leaf) {
  RunConfig c;
  c.dist.world_size = world, c.train.accum = accum, c.train.micro_batch = micro, c.train.leaf = leaf;
  Record r;
  r.path = "runs/x/record.h5";
  r.config_yaml = to_yaml(c);
  return r;
}

TEST(ReproduceConfig, TheMicroBatchIsLayoutOnlyWithALeaf) {
  const auto micro_refusal = [](const Record& r, int64_t w, int64_t a, int64_t b) {
    return sweep_test::thrown_message<ConfigError>([&] { reproduce_config(r, w, a, b, {}); });
  };
  // 16 sequences, leaf 1: micro-batch 1 on the recorded 2 ranks is accum 8; micro-batch 2
  // on 4 ranks is accum 2.
  RunConfig c = reproduce_config(recorded_leaf(2, 2, 4, 1), 0, 0, 1, {});
  EXPECT_EQ(c.dist.world_size, 2);
  EXPECT_EQ(c.train.accum, 8);
  EXPECT_EQ(c.train.micro_batch, 1);
  c = reproduce_config(recorded_leaf(2, 2, 4, 1), 4, 0, 2, {});
  EXPECT_EQ(c.train.accum, 2);
  EXPECT_EQ(math_id(c), math_id(reproduce_config(recorded_leaf(2, 2, 4, 1), 0, 0, 0, {})));
  EXPECT_NE(micro_refusal(recorded_leaf(2, 2, 4, 2), 0, 0, 3).find("not a multiple of the recorded train.leaf (2)"),
            std::string::npos);
  EXPECT_NE(micro_refusal(recorded_leaf(1, 1, 6, 1), 0, 0, 4).find("which is not a multiple of 4"), std::string::npos)
      << micro_refusal(recorded_leaf(1, 1, 6, 1), 0, 0, 4);
  // Without a leaf the micro-batch is the tree's leaf.
  EXPECT_NE(micro_refusal(recorded_leaf(1, 2, 4, 0), 0, 0, 2).find("the recorded run has no train.leaf"),
            std::string::npos);
  EXPECT_EQ(micro_refusal(recorded_leaf(1, 2, 4, 0), 0, 0, 4), "");  // the recorded one
}

TEST(ReproduceConfig, SetOverridesAreValidated) {
  RunConfig c = reproduce_config(recorded(1, 2), 0, 0, 0, {"train.threads=2", "fault.desync_step=3"});
  EXPECT_EQ(c.train.threads, 2);
  EXPECT_EQ(c.fault.desync_step, 3);
  EXPECT_NE(refusal(recorded(1, 2), 0, 0, {"train.thread=2"}).find("did you mean 'train.threads'"), std::string::npos);
  EXPECT_NE(refusal(recorded(1, 2), 0, 0, {"train.threads"}).find("expected KEY=VALUE"), std::string::npos);
  EXPECT_NE(refusal(recorded(1, 2), 0, 0, {"train.threads=0"}).find("--set train.threads=0"), std::string::npos)
      << refusal(recorded(1, 2), 0, 0, {"train.threads=0"});
}

class ReproduceDir : public sweep_test::TempDirTest {
 protected:
  ReproduceDir() : TempDirTest("reproduce_test") {}

  // A completed record of 3 steps in <dir>/run/record.h5 (`environment` added to its own).
  std::string write_record(const std::vector<std::pair<std::string, std::string>>& environment = {}) {
    RunConfig c;
    c.train.steps = 3;
    RecordHeader h;
    h.run_id = run_id(c);
    h.config_yaml = to_yaml(c);
    h.config = to_flat(c);
    h.environment = {{"hosts", "here"}};
    h.environment.insert(h.environment.end(), environment.begin(), environment.end());
    h.params = {{"w", {2}, 0, 2}};
    fs::create_directories(dir_ / "run");
    const std::string path = (dir_ / "run" / "record.h5").string();
    RecordWriter w(path, h);
    w.append_checksum({0, 1, {11}});
    for (int64_t s = 1; s <= 3; ++s) {
      StepMetrics m;
      m.step = s, m.loss = 3.0 / double(s);
      w.append_step(m);
      w.append_rank_times({0.1});
      w.append_checksum({s, 1 + uint64_t(s), {11 + uint64_t(s)}});
    }
    w.finish("completed");
    return path;
  }
};

// Stands in for sweep-train: copies a record (or nothing) into the --out directory.
class CopyRunner : public ProcessRunner {
 public:
  explicit CopyRunner(std::string from) : from_(std::move(from)) {}
  ExitStatus run(const std::vector<std::string>& argv, const std::string& log_path) override {
    argv_ = argv;
    std::ofstream(log_path) << "fake run\n";
    for (size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == "--out" && !from_.empty()) fs::copy_file(from_, argv[i + 1] + "/record.h5");
    ExitStatus st;
    st.code = from_.empty() ? 1 : 0;
    return st;
  }
  std::vector<std::string> argv_;

 private:
  std::string from_;
};

TEST_F(ReproduceDir, NumbersReRunsAndNeverTouchesTheOriginal) {
  EXPECT_EQ(next_reproduce_dir((dir_ / "run").string()), (dir_ / "run" / "reproduce" / "1").string());
  EXPECT_EQ(next_reproduce_dir((dir_ / "run").string()), (dir_ / "run" / "reproduce" / "2").string());
  EXPECT_EQ(resolve_record_path((dir_ / "run").string()), (dir_ / "run" / "record.h5").string());
  EXPECT_EQ(resolve_record_path("x/record.h5"), "x/record.h5");
}

TEST_F(ReproduceDir, SameRecordIsReproducedAndADifferentOneDiverges) {
  const std::string original = write_record();
  ReproduceOptions opt;
  opt.source = (dir_ / "run").string();
  opt.launch.train_binary = original;  // must exist; the fake runner never starts it
  CopyRunner same(original);
  ReproduceResult r = reproduce(opt, same);
  EXPECT_TRUE(r.reproduced());
  ASSERT_FALSE(r.lines.empty());
  EXPECT_EQ(r.lines[0], "reproduced bit-for-bit: 3 steps, 4 checksums");
  EXPECT_EQ(r.out_dir, (dir_ / "run" / "reproduce" / "1").string());
  EXPECT_TRUE(fs::exists(r.out_dir + "/config.yaml"));
  EXPECT_EQ(same.argv_.at(0), original);
  EXPECT_EQ(same.argv_.at(2), r.out_dir + "/config.yaml");

  // A re-run that leaves no record is not a reproduction; the log is named.
  CopyRunner none("");
  r = reproduce(opt, none);
  EXPECT_FALSE(r.reproduced());
  EXPECT_NE(r.lines.at(0).find("re-run failed (exit code 1) without a record; log: "), std::string::npos)
      << r.lines.at(0);
  EXPECT_EQ(r.out_dir, (dir_ / "run" / "reproduce" / "2").string());
}

TEST_F(ReproduceDir, WarnsWhenTheReRunsImageIsNotTheRecordsButStillRunsIt) {
  const std::string original = write_record({{"container.runtime", "charliecloud"},
                                             {"container.image", "/images/old"},
                                             {"container.digest", "xxh3:0123456789abcdef"}});
  fs::create_directories(dir_ / "image/opt/sweep/bin");
  std::ofstream(dir_ / "image/opt/sweep/bin/sweep-train") << "another build";
  ReproduceOptions opt;
  opt.source = (dir_ / "run").string();
  opt.launch.train_binary = original;
  opt.container.runtime = "charliecloud";
  opt.container.command = "ch-run";
  opt.container.image = (dir_ / "image").string();
  opt.container.trainer = "/opt/sweep/bin/sweep-train";
  CopyRunner same(original);
  ReproduceResult r = reproduce(opt, same);
  EXPECT_TRUE(r.reproduced()) << "a warning, not a failure";
  std::string warning;
  for (const auto& l : r.lines)
    if (l.rfind("warning: container: ", 0) == 0) warning = l;
  EXPECT_CONTAINS(warning,
                  "the record ran in the charliecloud image /images/old (xxh3:0123456789abcdef); this re-run "
                  "uses the charliecloud image " +
                      opt.container.image + " (xxh3:");
  // The ranks ran in the image, and were told which one (their record names it).
  const auto& argv = same.argv_;
  EXPECT_NE(std::find(argv.begin(), argv.end(), "ch-run"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "/opt/sweep/bin/sweep-train"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "SWEEP_CONTAINER_IMAGE=" + opt.container.image), argv.end());
  // The run's directory is bound (the record is not under <sweep>/runs/ here), never the record file.
  const std::string run = (dir_ / "run").string();
  const auto bind = std::find(argv.begin(), argv.end(), "-b");
  ASSERT_NE(bind, argv.end());
  EXPECT_EQ(*(bind + 1), run + ":" + run);

  // The same record re-run on the host: warned too.
  opt.container = ContainerSpec{};
  r = reproduce(opt, same);
  EXPECT_TRUE(r.reproduced());
  warning.clear();
  for (const auto& l : r.lines)
    if (l.rfind("warning: container: ", 0) == 0) warning = l;
  EXPECT_CONTAINS(warning, "this re-run runs on the host");
  EXPECT_EQ(std::find(same.argv_.begin(), same.argv_.end(), "ch-run"), same.argv_.end());
}

TEST_F(ReproduceDir, RefusesPartialRecordsAndMissingTrainer) {
  write_record();
  fs::rename(dir_ / "run" / "record.h5", dir_ / "run" / "record.h5.partial");
  ReproduceOptions opt;
  opt.source = (dir_ / "run").string();
  opt.launch.train_binary = "/nonexistent/sweep-train";
  CopyRunner runner("");
  try {
    reproduce(opt, runner);
    ADD_FAILURE() << "a partial record was accepted";
  } catch (const RecordError& e) {
    EXPECT_NE(std::string(e.what()).find("no completed record: the run is failed"), std::string::npos) << e.what();
  }
  fs::rename(dir_ / "run" / "record.h5.partial", dir_ / "run" / "record.h5");
  EXPECT_THROW(reproduce(opt, runner), ConfigError);
  EXPECT_FALSE(fs::exists(dir_ / "run" / "reproduce"));  // refused before anything was created
}

}  // namespace
}  // namespace sweep
