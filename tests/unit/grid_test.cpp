// The grid language: expansion order, de-duplication, and file:line messages.
#include "grid.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "test_util.h"  // EXPECT_CONTAINS, thrown_message

namespace sweep {
namespace {

/// The message of the ConfigError that parsing and expanding `text` throws ("" when none).
std::string error_of(const std::string& text) {
  return sweep_test::thrown_message<ConfigError>([&] { expand(parse_grid(text, "x.yaml")); });
}

const char* kTwoAxes =
    "name: demo\n"                // 1
    "base:\n"                     // 2
    "  train:\n"                  // 3
    "    steps: 20\n"             // 4
    "    schedule: linear\n"      // 5
    "  model:\n"                  // 6
    "    layers: 1\n"             // 7
    "grid:\n"                     // 8
    "  train.lr: [0.1, 2e-2]\n"   // 9
    "  train.seed: [1, 2, 3]\n";  // 10

TEST(Grid, ParsesNameBaseAndAxesInFileOrder) {
  SweepSpec s = parse_grid(kTwoAxes, "x.yaml");
  EXPECT_EQ(s.name, "demo");
  EXPECT_EQ(s.source, "x.yaml");
  ASSERT_EQ(s.base.size(), 3u);
  EXPECT_EQ(s.base.at("train.steps").text, "20");
  EXPECT_EQ(s.base.at("train.steps").where, "x.yaml:4:12");
  ASSERT_EQ(s.axes.size(), 2u);
  EXPECT_EQ(s.axes[0].key, "train.lr");
  ASSERT_EQ(s.axes[0].values.size(), 2u);
  EXPECT_EQ(s.axes[0].values[1].text, "2e-2");
  EXPECT_EQ(s.axes[0].values[1].where, "x.yaml:9:19");
  EXPECT_EQ(s.axes[1].key, "train.seed");
  EXPECT_EQ(s.axes[1].values.size(), 3u);
}

TEST(Grid, ExpandsTheCartesianProductLastAxisFastest) {
  auto points = expand(parse_grid(kTwoAxes, "x.yaml"));
  ASSERT_EQ(points.size(), 6u);
  const double lrs[] = {0.1, 0.1, 0.1, 0.02, 0.02, 0.02};
  const int64_t seeds[] = {1, 2, 3, 1, 2, 3};
  std::set<std::string> ids;
  for (size_t i = 0; i < points.size(); ++i) {
    const GridPoint& p = points[i];
    EXPECT_EQ(p.config.train.lr, lrs[i]) << i;
    EXPECT_EQ(p.config.train.seed, seeds[i]) << i;
    // Base applies to every point; everything else stays default.
    EXPECT_EQ(p.config.train.steps, 20) << i;
    EXPECT_EQ(p.config.train.schedule, "linear") << i;
    EXPECT_EQ(p.config.model.layers, 1) << i;
    EXPECT_EQ(p.config.model.d_model, ModelConfig{}.d_model) << i;
    EXPECT_EQ(p.id, run_id(p.config)) << i;
    ASSERT_EQ(p.values.size(), 2u);
    EXPECT_EQ(p.values[0].first, "train.lr");
    EXPECT_EQ(p.values[1].first, "train.seed");
    EXPECT_EQ(p.values[1].second, std::to_string(seeds[i]));
    ids.insert(p.id);
  }
  EXPECT_EQ(points[3].values[0].second, "2e-2");  // as written, for display
  EXPECT_EQ(ids.size(), 6u);
}

TEST(Grid, DuplicatePointsCollapseKeepingTheFirst) {
  auto points = expand(parse_grid("name: d\ngrid:\n  train.lr: [0.1, 1e-1, 0.2, 0.10]\n", "x.yaml"));
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].config.train.lr, 0.1);
  EXPECT_EQ(points[0].values[0].second, "0.1");
  EXPECT_EQ(points[1].config.train.lr, 0.2);
  // Three spellings of one number are one value: 2 seeds x 1 lr.
  points = expand(parse_grid("name: d\ngrid:\n  train.seed: [0, 1]\n  train.lr: [1e-3, 0.001, 1.0e-3]\n", "x.yaml"));
  EXPECT_EQ(points.size(), 2u);
}

TEST(Grid, WithoutGridIsOnePoint) {
  auto points = expand(parse_grid("name: one\nbase:\n  train:\n    seed: 5\n", "x.yaml"));
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].config.train.seed, 5);
  EXPECT_TRUE(points[0].values.empty());
  RunConfig expected;
  expected.train.seed = 5;
  EXPECT_EQ(points[0].id, run_id(expected));

  points = expand(parse_grid("name: bare\n", "x.yaml"));
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].id, run_id(RunConfig{}));
}

TEST(Grid, RelativeDataPathsAreNextToTheGridFileEverywhereTheyAreWritten) {
  const std::string text =
      "name: rel\n"
      "base: {data: {kind: text, eval_path: held/out.txt}, model: {vocab: 256}}\n"
      "grid: {data.path: [a.txt, /abs/b.txt, ../c.txt]}\n"
      "exclude: [{data.path: [a.txt]}]\n";
  const auto points = expand(parse_grid(text, "/proj/sweeps/grid.yaml"));
  ASSERT_EQ(points.size(), 2u) << "the exclude, written relative too, still removes a.txt";
  EXPECT_EQ(points[0].config.data.path, "/abs/b.txt") << "an absolute path stays as written";
  EXPECT_EQ(points[1].config.data.path, "/proj/c.txt");
  EXPECT_EQ(points[0].config.data.eval_path, "/proj/sweeps/held/out.txt");
  // The run id holds the resolved path: the same grid text elsewhere is other data.
  const auto elsewhere = expand(parse_grid(text, "/other/grid.yaml"));
  EXPECT_NE(run_id(points[1].config), run_id(elsewhere[1].config));
}

TEST(Grid, AxisOverridesBase) {
  auto points = expand(parse_grid("name: o\nbase:\n  train:\n    seed: 5\ngrid:\n  train.seed: [6, 7]\n", "x.yaml"));
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].config.train.seed, 6);
  EXPECT_EQ(points[1].config.train.seed, 7);
}

TEST(Grid, AxesMayTogetherFixWhatBaseAloneBreaks) {
  // warmup 200 > default steps 100, but every point sets steps >= 1000.
  auto points =
      expand(parse_grid("name: w\nbase:\n  train:\n    warmup: 200\ngrid:\n  train.steps: [1000, 2000]\n", "x.yaml"));
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[1].config.train.warmup, 200);
  // heads 6 does not divide the default d_model 64, but does divide both swept widths.
  points = expand(parse_grid("name: h\ngrid:\n  model.d_model: [96, 192]\n  model.heads: [3, 6]\n", "x.yaml"));
  EXPECT_EQ(points.size(), 4u);
}

TEST(Grid, InvalidPointNamesTheLineOfTheOffendingKey) {
  std::string msg = error_of("name: w\nbase:\n  train:\n    warmup: 200\ngrid:\n  train.steps: [1000, 100]\n");
  EXPECT_CONTAINS(msg, "x.yaml:4:13: key 'train.warmup': must be <= train.steps (100)");
  msg = error_of("name: h\ngrid:\n  model.heads: [4, 5]\n");
  EXPECT_CONTAINS(msg, "x.yaml:3:20: key 'model.heads': must divide model.d_model (64), got 5");
}

TEST(Grid, UnknownTopLevelKey) {
  std::string msg = error_of("name: g\ngird:\n  train.lr: [1]\n");
  EXPECT_CONTAINS(msg, "x.yaml:2:1: unknown top-level key 'gird' (did you mean 'grid'?)");
}

TEST(Grid, UnknownSection) {
  std::string msg = error_of("name: g\nbase:\n  trian:\n    lr: 0.1\n");
  EXPECT_CONTAINS(msg, "x.yaml:3:3: unknown section 'base.trian' (did you mean 'base.train'?)");
}

TEST(Grid, UnknownKeyInBaseOrAxis) {
  std::string msg = error_of("name: g\nbase:\n  train:\n    lrr: 0.1\n");
  EXPECT_CONTAINS(msg, "x.yaml:4:10: unknown key 'train.lrr' (did you mean 'train.lr'?)");
  msg = error_of("name: g\ngrid:\n  train.lrr: [0.1]\n");
  EXPECT_CONTAINS(msg, "x.yaml:3:");
  EXPECT_CONTAINS(msg, "unknown key 'train.lrr' (did you mean 'train.lr'?)");
}

TEST(Grid, UnsafeNamesAreRefused) {
  for (const char* name : {"../../x", "a/b", ".hidden", "-flag", "a b", "$(rm)", "..", ""}) {
    std::string msg = error_of(std::string("name: \"") + name + "\"\n");
    EXPECT_CONTAINS(msg, "x.yaml:1:7: key 'name'");
  }
  EXPECT_CONTAINS(error_of("base:\n  train:\n    lr: 0.1\n"), "x.yaml: key 'name': required");
  EXPECT_CONTAINS(error_of("name: [a]\n"), "key 'name'");
  EXPECT_EQ(error_of("name: ok-name_1.2\n"), "");
}

TEST(Grid, EmptyAndNonListAxes) {
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.lr: []\n"),
                  "x.yaml:3:13: key 'grid.train.lr': expected a non-empty list");
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.lr: 0.1\n"),
                  "x.yaml:3:13: key 'grid.train.lr': expected a non-empty list");
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.lr: [[0.1]]\n"),
                  "x.yaml:3:14: key 'grid.train.lr': expected a scalar");
  EXPECT_CONTAINS(error_of("name: g\ngrid: [1, 2]\n"), "x.yaml:2:7: key 'grid': expected a mapping");
  EXPECT_CONTAINS(error_of("name: g\nbase: 3\n"), "x.yaml:2:7: key 'base': expected a mapping");
}

TEST(Grid, BadAxisValueNamesItsExactPlace) {
  std::string msg = error_of("name: g\ngrid:\n  train.steps: [10, abc]\n");
  EXPECT_CONTAINS(msg, "x.yaml:3:21: key 'train.steps': expected an integer");
  EXPECT_CONTAINS(msg, "got 'abc'");
  msg = error_of("name: g\ngrid:\n  train.schedule: [cosine, cosin]\n");
  EXPECT_CONTAINS(msg, "x.yaml:3:28: key 'train.schedule'");
  msg = error_of("name: g\ngrid:\n  train.lr:\n    - 0.1\n    - -1\n");
  EXPECT_CONTAINS(msg, "x.yaml:5:7: key 'train.lr'");
}

TEST(Grid, DuplicateAxis) {
  std::string msg = error_of("name: g\ngrid:\n  train.lr: [0.1]\n  train.lr: [0.2]\n");
  EXPECT_CONTAINS(msg, "x.yaml:4:3: key 'grid.train.lr' is given twice");
}

TEST(Grid, InvalidYaml) {
  std::string msg = error_of("name: g\ngrid:\n  train.lr: [0.1\n");
  EXPECT_CONTAINS(msg, "x.yaml:");
  EXPECT_CONTAINS(msg, "invalid YAML");
  EXPECT_CONTAINS(error_of("just text\n"), "x.yaml: expected a mapping");
}

TEST(Grid, LoadGridNamesMissingFile) {
  EXPECT_CONTAINS(
      sweep_test::thrown_message<ConfigError>([] { load_grid("/nonexistent/grid.yaml"); }, "no ConfigError"),
      "/nonexistent/grid.yaml: cannot open");
}

}  // namespace
}  // namespace sweep
