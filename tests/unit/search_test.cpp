// `search: kind: random`: the points a search draws are a pure function of the space,
// the search seed and the number of samples; every bad input names its file:line:col.
#include "search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "grid.h"
#include "test_util.h"  // EXPECT_CONTAINS, thrown_message

namespace sweep {
namespace {

/// A random search over lr, warmup and clip norm; `extra` is appended to search.space.
std::string search_grid(int samples, int seed, const std::string& extra = "") {
  return "name: rs\n"              // 1
         "base:\n"                 // 2
         "  train:\n"              // 3
         "    steps: 20\n"         // 4
         "    schedule: cosine\n"  // 5
         "search:\n"               // 6
         "  kind: random\n"        // 7
         "  samples: " +
         std::to_string(samples) + "\n" +               // 8
         "  seed: " + std::to_string(seed) + "\n" +     // 9
         "  space:\n"                                   // 10
         "    train.lr: {loguniform: [1e-4, 1e-2]}\n"   // 11
         "    train.warmup: {int: [0, 10], step: 2}\n"  // 12
         "    train.clip_norm: {uniform: [0.5, 2.0]}\n" +
         extra;  // 13
}

std::vector<GridPoint> points_of(const std::string& text) { return expand(parse_grid(text, "x.yaml")); }

std::vector<std::string> ids(const std::vector<GridPoint>& points) {
  std::vector<std::string> out;
  for (const auto& p : points) out.push_back(p.id);
  return out;
}

std::string error_of(const std::string& text) {
  return sweep_test::thrown_message<ConfigError>([&] { expand(parse_grid(text, "x.yaml")); });
}

TEST(RandomSearch, DrawsTheSamePointsForTheSameFileAndOthersForAnotherSeed) {
  const auto a = points_of(search_grid(8, 7)), b = points_of(search_grid(8, 7)), c = points_of(search_grid(8, 8));
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(ids(a), ids(b));
  EXPECT_EQ(c.size(), 8u);
  std::set<std::string> shared;
  for (const auto& id : ids(c))
    for (const auto& other : ids(a)) shared.insert(id == other ? id : "");
  EXPECT_EQ(shared, std::set<std::string>{""}) << "another search seed drew a point of the first";
  // The swept values are what the plan shows, and what the config holds.
  for (const auto& p : a) {
    ASSERT_EQ(p.values.size(), 3u);
    EXPECT_EQ(p.values[0].first, "train.lr");
    EXPECT_EQ(std::stod(p.values[0].second), p.config.train.lr);
  }
}

// The meaning of a search file must not drift between versions or machines: the first
// draws of this file are pinned.
TEST(RandomSearch, TheFirstDrawsOfAFileArePinned) {
  const auto p = points_of(search_grid(2, 7));
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].values[0].second, "0.00948221");
  EXPECT_EQ(p[0].values[1].second, "6");
  EXPECT_EQ(p[0].values[2].second, "0.808483");
  EXPECT_EQ(p[1].values[0].second, "0.000514613");
  EXPECT_EQ(p[1].values[2].second, "1.82111");
}

TEST(RandomSearch, MoreSamplesKeepTheFirstOnesAndANewKeyLeavesTheOthersDraws) {
  const auto five = points_of(search_grid(5, 3)), ten = points_of(search_grid(10, 3));
  ASSERT_EQ(ten.size(), 10u);
  for (size_t i = 0; i < five.size(); ++i) EXPECT_EQ(five[i].id, ten[i].id) << i;
  const auto more = points_of(search_grid(5, 3, "    train.weight_decay: {uniform: [0, 0.1]}\n"));
  ASSERT_EQ(more.size(), 5u);
  for (size_t i = 0; i < five.size(); ++i)
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(more[i].values[k], five[i].values[k]) << i;
}

TEST(RandomSearch, DrawsCoverTheirRangesAsTheirKindSays) {
  SearchDim lr{"train.lr", "x", "loguniform", {}, 1e-4, 1e-2, 1};
  SearchDim warm{"train.warmup", "x", "int", {}, 0, 10, 3};
  SearchDim clip{"train.clip_norm", "x", "uniform", {}, 0.5, 2.0, 1};
  SearchDim act{"train.schedule", "x", "choice", {{"gelu", "x:1:1", true}, {"relu", "x:1:7", true}}, 0, 0, 1};
  std::map<std::string, int> warmups, acts;
  int low_lr = 0, low_clip = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    const double l = std::stod(draw(lr, 11, i).text), c = std::stod(draw(clip, 11, i).text);
    ASSERT_GE(l, 1e-4);
    ASSERT_LE(l, 1e-2);
    ASSERT_GE(c, 0.5);
    ASSERT_LE(c, 2.0);
    low_lr += l < 1e-3;  // the geometric middle
    low_clip += c < 1.25;
    ++warmups[draw(warm, 11, i).text];
    ++acts[draw(act, 11, i).text];
  }
  // Seeded, so these are fixed numbers; the bounds say what a uniform draw looks like.
  EXPECT_NEAR(low_lr, n / 2, n / 20);
  EXPECT_NEAR(low_clip, n / 2, n / 20);
  EXPECT_EQ(warmups.size(), 4u);  // 0, 3, 6, 9: never 10, which is off the step
  for (const char* w : {"0", "3", "6", "9"}) EXPECT_NEAR(warmups[w], n / 4, n / 20) << w;
  EXPECT_EQ(acts.size(), 2u);
  EXPECT_NEAR(acts["gelu"], n / 2, n / 20);
  EXPECT_EQ(draw(act, 11, 0).where.rfind("x:1:", 0), 0u);  // a choice keeps where it was written
}

TEST(RandomSearch, SeedsExcludeAndConstraintsApplyToTheDraws) {
  const std::string text = search_grid(6, 7, "    train.schedule: {choice: [cosine, linear]}\n") +
                           "seeds: 2\n"
                           "exclude:\n"
                           "  - train.schedule: linear\n";
  const auto p = points_of(text);
  size_t cosine = 0;
  for (const auto& x : p) cosine += x.config.train.schedule == "cosine";
  EXPECT_EQ(cosine, p.size());
  EXPECT_EQ(p.size() % 2, 0u);
  EXPECT_GT(p.size(), 0u);
  EXPECT_LT(p.size(), 12u);
}

TEST(RandomSearch, BadInputNamesItsLineAndKey) {
  const std::string head =
      "name: rs\n"         // 1
      "search:\n"          // 2
      "  kind: random\n";  // 3
  EXPECT_CONTAINS(error_of(head + "  samples: 0\n  space:\n    train.lr: {uniform: [0.1, 0.2]}\n"),
                  "x.yaml:4:12: key 'search.samples'");
  EXPECT_CONTAINS(error_of(head + "  space:\n    train.lr: {uniform: [0.1, 0.2]}\n"), "key 'search.samples': required");
  EXPECT_CONTAINS(error_of(head + "  samples: 3\n  space: {}\n"), "x.yaml:5:10: key 'search.space'");
  EXPECT_CONTAINS(error_of(head + "  samples: 3\n  space:\n    train.lr: {loguniform: [0, 0.1]}\n"),
                  "x.yaml:6:29: key 'search.space.train.lr.loguniform': the bounds of a loguniform must be > 0");
  EXPECT_CONTAINS(error_of(head + "  samples: 3\n  space:\n    train.lr: {loguniform: [-1, 0.1]}\n"), "must be > 0");
  EXPECT_CONTAINS(error_of(head + "  samples: 3\n  space:\n    train.lr: {uniform: [0.2, 0.1]}\n"), "expected lo < hi");
  EXPECT_CONTAINS(error_of(head + "  samples: 3\n  space:\n    train.lr: {uniform: [0.1, x]}\n"),
                  "expected a finite number, got 'x'");
  EXPECT_CONTAINS(error_of(head + "  samples: 3\n  space:\n    train.lr: {uniform: [0.1, 0.2], step: 2}\n"),
                  "only an int dimension has a step");
  EXPECT_CONTAINS(error_of(head + "  samples: 3\n  space:\n    train.warmup: {int: [0, 10], step: 0}\n"),
                  "key 'search.space.train.warmup.step': expected >= 1");
  EXPECT_CONTAINS(error_of(head + "  samples: 3\n  space:\n    train.lr: {unifrom: [0.1, 0.2]}\n"),
                  "did you mean 'uniform'");
  EXPECT_CONTAINS(error_of(head + "  samples: 3\n  space:\n    train.lr: [0.1, 0.2]\n"), "expected one of {choice");
  // Keys are the run config's, checked as a grid's are.
  EXPECT_CONTAINS(error_of(head + "  samples: 3\n  space:\n    train.lrr: {uniform: [0.1, 0.2]}\n"), "x.yaml:6:5");
  EXPECT_CONTAINS(error_of(head + "  samples: 3\n  space:\n    train.lrr: {uniform: [0.1, 0.2]}\n"), "train.lr");
  // A real draw for an integer key: the key's own check names the search.space line.
  EXPECT_CONTAINS(error_of(head + "  samples: 3\n  space:\n    train.warmup: {uniform: [0.5, 9.5]}\n"), "x.yaml:6:5");
  EXPECT_CONTAINS(error_of("name: rs\nsearch:\n  kind: bayes\n"), "x.yaml:3:9: key 'search.kind'");
  EXPECT_CONTAINS(error_of("name: rs\nsearch:\n  samples: 3\n"), "set search.kind: random");
  EXPECT_CONTAINS(
      error_of(head + "  samples: 3\n  space:\n    train.lr: {uniform: [0.1, 0.2]}\ngrid:\n  train.seed: [1]\n"),
      "x.yaml:8:3: key 'grid': search.kind random draws every point");
  EXPECT_CONTAINS(
      error_of(head +
               "  samples: 3\n  space:\n    train.lr: {uniform: [0.1, 0.2]}\n    train.lr: {uniform: [0.1, 0.3]}\n"),
      "is given twice");
  EXPECT_CONTAINS(error_of(head + "  samples: 3\n  space:\n    train.seed: {int: [0, 9]}\nseeds: 2\n"), "swept twice");
}

}  // namespace
}  // namespace sweep
