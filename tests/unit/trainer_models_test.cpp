// A grid of a model of one's own: `sweep` asks the program named by launch.trainer (a path
// relative to the grid file) or --trainer for its kinds (`--describe-models`) and checks
// the grid's model keys against them before anything starts. The programs here are shell
// stand-ins that print what a train_main program prints.
#include "trainer_models.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "grid.h"
#include "model_schema.h"  // describe_models_yaml
#include "run_config.h"
#include "temp_dir.h"   // TempDirTest
#include "test_util.h"  // EXPECT_CONTAINS, thrown_message, write_file

namespace sweep {
namespace {

class TrainerModels : public sweep_test::TempDirTest {
 protected:
  TrainerModels() : TempDirTest("trainer_models") {}

  /// An executable at <dir>/<name> that prints `out` for --describe-models and exits `code`.
  std::string program(const std::string& name, const std::string& out, int code = 0) {
    sweep_test::write_file(dir_ / (name + ".out"), out);
    const std::string path = (dir_ / name).string();
    sweep_test::write_file(path, "#!/bin/sh\n[ \"$1\" = --describe-models ] || exit 9\ncat \"$0.out\"\nexit " +
                                     std::to_string(code) + "\n");
    ::chmod(path.c_str(), 0755);
    return path;
  }
  std::string grid(const std::string& text) { return sweep_test::write_file(dir_ / "g.yaml", text); }
  static std::string error_of(const std::string& path, const std::string& trainer = "") {
    return sweep_test::thrown_message<ConfigError>([&] { expand_grid(load_grid(path, trainer)); });
  }

  static std::string lstm_models() {
    return describe_models_yaml(
        {{"lstm"},
         {ModelSchema{"lstm",
                      "an LSTM language model",
                      {int_key("hidden", 32, 8, 4096, "state width"), int_key("layers", 1, 1, 8, "stacked LSTMs")}}}});
  }
};

TEST_F(TrainerModels, LaunchTrainerRelativeToTheGridGivesItsKindsAndKeys) {
  program("lstm-train", lstm_models());
  const std::string g = grid(
      "name: own\n"
      "launch: {trainer: lstm-train}\n"
      "base:\n  model: {kind: lstm, vocab: 64, seq_len: 8}\n"
      "grid:\n  model.hidden: [16, 32]\n  model.layers: [1, 2]\n");
  const SweepSpec spec = load_grid(g);
  EXPECT_EQ(spec.launch.trainer, (dir_ / "lstm-train").string());
  const Expansion e = expand_grid(spec);
  ASSERT_EQ(e.points.size(), 4u);
  EXPECT_EQ(e.points[1].config.model.kind, "lstm");
  EXPECT_EQ(e.points[1].config.model.values[1].second, "2");
  EXPECT_NE(e.points[0].id, e.points[1].id);
  EXPECT_EQ(e.points[0].id, run_id(e.points[0].config));
}

TEST_F(TrainerModels, BadKeysKindsAndSweptKindsAreNamedAtTheirLine) {
  program("lstm-train", lstm_models());
  EXPECT_CONTAINS(error_of(grid("name: own\nlaunch: {trainer: lstm-train}\nbase:\n  model: {kind: lstm}\n"
                                "grid:\n  model.hiden: [16, 32]\n")),
                  "g.yaml:6:17: unknown key 'model.hiden' for model.kind lstm (did you mean 'model.hidden'?)");
  EXPECT_CONTAINS(error_of(grid("name: own\nlaunch: {trainer: lstm-train}\nbase:\n  model: {kind: lstm}\n"
                                "grid:\n  model.hidden: [4]\n")),
                  "key 'model.hidden': expected an integer in [8, 4096], got '4'");
  EXPECT_CONTAINS(error_of(grid("name: own\nlaunch: {trainer: lstm-train}\nbase:\n  model: {kind: lstn}\n")),
                  "unknown model kind 'lstn' (did you mean 'lstm'?); registered kinds: decoder, lstm");
  EXPECT_CONTAINS(error_of(grid("name: own\nlaunch: {trainer: lstm-train}\ngrid:\n  model.kind: [decoder, lstm]\n")),
                  "g.yaml:4:3: key 'model.kind' cannot be swept");
}

TEST_F(TrainerModels, AProgramThatCannotDescribeItsModelsIsRefusedByName) {
  EXPECT_CONTAINS(error_of(grid("name: own\nlaunch: {trainer: missing-train}\n")),
                  "g.yaml:2:19: key 'launch.trainer': 'missing-train' (" + (dir_ / "missing-train").string() +
                      "): not found or not executable");
  program("broken-train", "broken-train: error: no GPU\n", 2);
  EXPECT_CONTAINS(error_of(grid("name: own\nlaunch: {trainer: broken-train}\n")),
                  "--describe-models failed (exit code 2): broken-train: error: no GPU");
  program("chatty-train", "hello\n");
  EXPECT_CONTAINS(error_of(grid("name: own\nlaunch: {trainer: chatty-train}\n")), "not a --describe-models document");
  program("clash-train",
          "offers: [c]\nmodels: [{kind: c, keys: [{name: seq_len, type: int, default: '1', min: '1', max: '2'}]}]\n");
  EXPECT_CONTAINS(error_of(grid("name: own\nlaunch: {trainer: clash-train}\n")),
                  "model 'c': key 'seq_len': collides with the built-in key model.seq_len");
}

TEST_F(TrainerModels, AKindTheProgramDoesNotTrainIsRefused) {
  program("lstm-train", lstm_models());  // offers lstm only, not the built-in decoder
  EXPECT_CONTAINS(error_of(grid("name: own\nlaunch: {trainer: lstm-train}\n")),
                  "g.yaml: key 'model.kind': launch.trainer 'lstm-train' does not train model.kind decoder; it "
                  "offers: lstm");
  const std::string g = grid("name: own\nbase:\n  model: {kind: decoder}\n");
  EXPECT_CONTAINS(error_of(g, (dir_ / "lstm-train").string()), "g.yaml:3:17: key 'model.kind': --trainer '" +
                                                                   (dir_ / "lstm-train").string() +
                                                                   "' does not train model.kind decoder");
}

TEST_F(TrainerModels, TrainerOptionOverridesLaunchTrainer) {
  const std::string p = program("gru-train", describe_models_yaml({{"gru"}, {ModelSchema{"gru", "", {}}}}));
  const std::string g = grid("name: own\nlaunch: {trainer: missing-train}\nbase:\n  model: {kind: gru}\n");
  const SweepSpec spec = load_grid(g, p);
  EXPECT_EQ(spec.launch.trainer, p);
  EXPECT_EQ(expand_grid(spec).points.at(0).config.model.kind, "gru");
}

}  // namespace
}  // namespace sweep
