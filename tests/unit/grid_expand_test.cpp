// The grid language beyond the plain product: zip, exclude, include, seeds, value
// generators, constraints and warnings; and every validation error they can raise.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "grid.h"
#include "grid_values.h"
#include "test_util.h"  // EXPECT_CONTAINS, thrown_message

namespace sweep {
namespace {

/// The message of the ConfigError that parsing and expanding `text` throws ("" when none).
std::string error_of(const std::string& text) {
  return sweep_test::thrown_message<ConfigError>([&] { expand_grid(parse_grid(text, "g.yaml")); });
}

Expansion ex(const std::string& text) { return expand_grid(parse_grid(text, "g.yaml")); }

std::vector<std::string> column(const Expansion& e, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& p : e.points) {
    std::string v = "?";
    for (const auto& [k, val] : p.values)
      if (k == key) v = val;
    out.push_back(v);
  }
  return out;
}

using V = std::vector<std::string>;

TEST(ExpandEach, HandsOverTheSamePointsInTheSameOrderWithTheSameCounts) {
  const SweepSpec spec = parse_grid(
      "name: s\nbase: {train: {steps: 3}}\nconstraints: {global_batch: 8, derive: train.accum, on_mismatch: skip}\n"
      "grid:\n  train.lr: [0.1, 0.2, 0.1]\n  train.micro_batch: [1, 3, 4]\nexclude:\n  - {train.lr: 0.2, "
      "train.micro_batch: 4}\ninclude:\n  - {train.warmup: 2}\nseeds: 2\n",
      "g.yaml");
  const Expansion whole = expand_grid(spec);
  std::vector<GridPoint> streamed;
  const Expansion e = expand_grid_each(spec, [&](GridPoint&& p) { streamed.push_back(std::move(p)); });
  EXPECT_TRUE(e.points.empty());
  EXPECT_EQ(e.excluded, whole.excluded);
  EXPECT_EQ(e.mismatched, whole.mismatched);
  EXPECT_EQ(e.duplicates, whole.duplicates);
  EXPECT_GT(whole.excluded + whole.mismatched, 0u);
  EXPECT_GT(whole.duplicates, 0u);
  ASSERT_EQ(streamed.size(), whole.points.size());
  for (size_t i = 0; i < streamed.size(); ++i) {
    EXPECT_EQ(streamed[i].id, whole.points[i].id) << i;
    EXPECT_EQ(streamed[i].values, whole.points[i].values) << i;
  }
}

TEST(GridZip, AdvancesKeysTogetherAndMultipliesWithTheGrid) {
  Expansion e =
      ex("name: z\n"
         "grid:\n"
         "  train.lr: [0.1, 0.2]\n"
         "zip:\n"
         "  - train.micro_batch: [8, 4, 2]\n"
         "    train.accum: [1, 2, 4]\n");
  ASSERT_EQ(e.points.size(), 6u);
  EXPECT_EQ(column(e, "train.lr"), (V{"0.1", "0.1", "0.1", "0.2", "0.2", "0.2"}));
  EXPECT_EQ(column(e, "train.micro_batch"), (V{"8", "4", "2", "8", "4", "2"}));
  EXPECT_EQ(column(e, "train.accum"), (V{"1", "2", "4", "1", "2", "4"}));
  for (const auto& p : e.points) {
    EXPECT_EQ(p.config.train.micro_batch * p.config.train.accum, 8);
    EXPECT_EQ(p.id, run_id(p.config));
  }
  // One group may be written without the list.
  EXPECT_EQ(ex("name: z\nzip:\n  train.seed: [1, 2]\n  data.seed: [3, 4]\n").points.size(), 2u);
}

TEST(GridZip, Errors) {
  EXPECT_CONTAINS(error_of("name: z\nzip:\n  - train.micro_batch: [8, 4]\n    train.accum: [1, 2, 4]\n"),
                  "g.yaml:4:5: key 'zip[0].train.accum': has 3 values but 'train.micro_batch' has 2");
  EXPECT_CONTAINS(error_of("name: z\nzip: 3\n"), "g.yaml:2:6: key 'zip': expected a list of mappings");
  EXPECT_CONTAINS(error_of("name: z\nzip:\n  - [1, 2]\n"), "g.yaml:3:5: key 'zip[0]': expected a mapping");
  EXPECT_CONTAINS(error_of("name: z\ngrid:\n  train.lr: [0.1]\nzip:\n  - train.lr: [0.2]\n"),
                  "g.yaml:5:5: key 'train.lr' is swept twice (zip here, and at g.yaml:3:3)");
  EXPECT_CONTAINS(error_of("name: z\nzip:\n  - train.acum: [1]\n"),
                  "unknown key 'train.acum' (did you mean 'train.accum'?)");
  EXPECT_CONTAINS(error_of("name: z\nzip:\n  - train.accum: [1, 0]\n"),
                  "g.yaml:3:22: key 'train.accum': expected an integer");
}

TEST(GridExclude, DropsPointsMatchingEveryKeyComparingCanonicalValues) {
  Expansion e =
      ex("name: x\n"
         "grid:\n"
         "  train.precision: [fp32, bf16, fp16]\n"
         "  train.lr: [1e-3, 2e-3]\n"
         "exclude:\n"
         "  - {train.precision: fp16, train.lr: 0.002}\n"  // a spelling other than the axis's
         "  - {train.precision: [bf16]}\n");
  EXPECT_EQ(e.excluded, 3u);
  ASSERT_EQ(e.points.size(), 3u);
  EXPECT_EQ(column(e, "train.precision"), (V{"fp32", "fp32", "fp16"}));
  EXPECT_EQ(column(e, "train.lr"), (V{"1e-3", "2e-3", "1e-3"}));
  // A key that is not swept matches through the base value: all points or none.
  EXPECT_EQ(ex("name: x\nbase: {train: {steps: 5}}\ngrid:\n  train.seed: [1, 2]\nexclude:\n  - {train.steps: 5}\n")
                .points.size(),
            0u);
  EXPECT_EQ(ex("name: x\ngrid:\n  train.seed: [1, 2]\nexclude:\n  - {train.steps: 5}\n").points.size(), 2u);
}

TEST(GridExclude, Errors) {
  EXPECT_CONTAINS(error_of("name: x\nexclude: {train.lr: 1}\n"),
                  "g.yaml:2:10: key 'exclude': expected a list of mappings");
  EXPECT_CONTAINS(error_of("name: x\nexclude:\n  - 3\n"), "g.yaml:3:5: key 'exclude[0]': expected a mapping");
  EXPECT_CONTAINS(error_of("name: x\nexclude:\n  - {train.lrr: 1}\n"),
                  "unknown key 'train.lrr' (did you mean 'train.lr'?)");
  EXPECT_CONTAINS(error_of("name: x\nexclude:\n  - {train.precision: fp8}\n"), "g.yaml:3:23: key 'train.precision'");
}

TEST(GridInclude, AddsPointsAfterTheProductNeverExcluded) {
  Expansion e =
      ex("name: i\n"
         "grid:\n"
         "  train.lr: [0.1]\n"
         "include:\n"
         "  - {train.lr: 0.5, train.warmup: 3}\n"
         "  - {train.lr: 0.1}\n"  // the same point as the product's: kept once
         "exclude:\n"
         "  - {train.lr: 0.5}\n");
  ASSERT_EQ(e.points.size(), 2u);
  EXPECT_EQ(e.duplicates, 1u);
  EXPECT_EQ(e.points[1].config.train.lr, 0.5);
  EXPECT_EQ(e.points[1].config.train.warmup, 3);
  EXPECT_EQ(e.points[1].id, run_id(e.points[1].config));
  EXPECT_CONTAINS(error_of("name: i\ninclude:\n  - {train.lr: [1, 2]}\n"),
                  "g.yaml:3:16: key 'include[0].train.lr': expected a single value");
  EXPECT_CONTAINS(error_of("name: i\ninclude:\n  - {train.warmup: 500}\n"),
                  "key 'train.warmup': must be <= train.steps");
}

TEST(GridSeeds, ReplicatesEveryPointIncludingIncludes) {
  Expansion e = ex("name: s\ngrid:\n  train.lr: [0.1, 0.2]\nseeds: 3\ninclude:\n  - {train.lr: 0.3}\n");
  ASSERT_EQ(e.points.size(), 9u);
  EXPECT_EQ(column(e, "train.seed"), (V{"0", "1", "2", "0", "1", "2", "0", "1", "2"}));
  EXPECT_EQ(column(e, "train.lr"), (V{"0.1", "0.1", "0.1", "0.2", "0.2", "0.2", "0.3", "0.3", "0.3"}));
  EXPECT_EQ(column(ex("name: s\nseeds: [7, 9]\n"), "train.seed"), (V{"7", "9"}));
  EXPECT_EQ(column(ex("name: s\nseeds: {range: [10, 13]}\n"), "train.seed"), (V{"10", "11", "12"}));
  EXPECT_CONTAINS(error_of("name: s\nseeds: 0\n"), "g.yaml:2:8: key 'seeds': expected a count in [1, 100000]");
  EXPECT_CONTAINS(error_of("name: s\nseeds: [-1]\n"), "g.yaml:2:9: key 'train.seed'");
  EXPECT_CONTAINS(error_of("name: s\ngrid:\n  train.seed: [1]\nseeds: 2\n"),
                  "key 'train.seed' is swept twice (seeds here");
}

TEST(GridGenerators, RangeLinspaceLogspace) {
  auto vals = [](const std::string& gen) {
    Expansion e = ex("name: g\nbase: {train: {steps: 1000}}\ngrid:\n  " + gen + "\n");
    std::string key = gen.substr(0, gen.find(':'));
    return column(e, key);
  };
  EXPECT_EQ(vals("train.warmup: {range: [0, 30, 10]}"), (V{"0", "10", "20"}));
  EXPECT_EQ(vals("train.warmup: {range: [3, 0, -1]}"), (V{"3", "2", "1"}));
  EXPECT_EQ(vals("train.warmup: {range: [0, 3]}"), (V{"0", "1", "2"}));
  EXPECT_EQ(vals("train.clip_norm: {range: [0.5, 1.0, 0.1]}"), (V{"0.5", "0.6", "0.7", "0.8", "0.9"}));
  EXPECT_EQ(vals("train.lr: {linspace: [0.1, 0.5, 5]}"), (V{"0.1", "0.2", "0.3", "0.4", "0.5"}));
  EXPECT_EQ(vals("train.lr: {linspace: [0.25, 9, 1]}"), (V{"0.25"}));
  EXPECT_EQ(vals("train.lr: {logspace: [1e-4, 1e-2, 3]}"), (V{"0.0001", "0.001", "0.01"}));
  EXPECT_EQ(vals("train.warmup: {linspace: [0, 100, 3]}"), (V{"0", "50", "100"}));
  EXPECT_EQ(format_generated(3e-05), "3e-05");
  EXPECT_EQ(format_generated(0.1 + 0.2), "0.3");
}

TEST(GridGenerators, Errors) {
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.lr: {rnage: [1, 2]}\n"),
                  "g.yaml:3:13: key 'grid.train.lr': unknown generator 'rnage' (did you mean 'range'?)");
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.lr: {range: [1]}\n"),
                  "key 'grid.train.lr.range': expected [start, stop]");
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.lr: {range: [1, 2, 0]}\n"), "step must not be 0");
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.lr: {range: [2, 1]}\n"), "generates no values");
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.lr: {linspace: [0.1, 1, x]}\n"), "expected a number, got 'x'");
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.lr: {linspace: [0.1, 1, 2.5]}\n"), "count must be an integer");
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.lr: {logspace: [0, 1, 3]}\n"), "start and stop must be > 0");
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.seed: {range: [0, 2000000]}\n"),
                  "generates more than 1000000 values");
  // Generated values are validated like written ones: a fractional warmup is refused.
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.warmup: {linspace: [0, 1, 3]}\n"),
                  "g.yaml:3:17: key 'train.warmup': expected an integer in [0, 1099511627776], got '0.5'");
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.lr: {range: [0.1, 0.2], linspace: [1, 2, 3]}\n"),
                  "g.yaml:3:13: key 'grid.train.lr': expected a non-empty list of values, or one of");
}

TEST(GridConstraints, GlobalBatchIsCheckedAtEveryPoint) {
  const std::string head = "name: c\nconstraints:\n  global_batch: 16\n";
  Expansion e = ex(head + "zip:\n  - train.micro_batch: [8, 4, 16]\n    train.accum: [2, 4, 1]\n");
  EXPECT_EQ(e.points.size(), 3u);
  std::string msg = error_of(head + "grid:\n  train.micro_batch: [8, 4]\n  train.accum: [2]\n");
  EXPECT_CONTAINS(msg,
                  "g.yaml:3:17: key 'constraints.global_batch': micro_batch 4 x accum 2 x world_size 1 = 8, not 16");
  EXPECT_CONTAINS(msg, "at point train.micro_batch=4 train.accum=2");
  // on_mismatch: skip drops such points and counts them.
  e = ex(head + "  on_mismatch: skip\ngrid:\n  train.micro_batch: [8, 4]\n  train.accum: [2]\n");
  EXPECT_EQ(e.points.size(), 1u);
  EXPECT_EQ(e.mismatched, 1u);
  // An excluded point never fails the constraint.
  EXPECT_EQ(ex(head + "grid:\n  train.micro_batch: [8, 4]\n  train.accum: [2]\nexclude:\n  - {train.micro_batch: 4}\n")
                .points.size(),
            1u);
}

TEST(GridConstraints, DeriveComputesMicroBatchOrAccum) {
  Expansion e =
      ex("name: c\n"
         "constraints: {global_batch: 32, derive: train.micro_batch}\n"
         "grid:\n"
         "  dist.world_size: [1, 2, 4]\n"
         "  train.accum: [1, 2]\n");
  ASSERT_EQ(e.points.size(), 6u);
  for (const auto& p : e.points) {
    EXPECT_EQ(p.config.train.micro_batch * p.config.train.accum * p.config.dist.world_size, 32);
    EXPECT_EQ(p.id, run_id(p.config)) << "the id must hash the derived value";
  }
  EXPECT_EQ(column(e, "train.micro_batch"), (V{"32", "16", "16", "8", "8", "4"}));
  e = ex("name: c\nconstraints: {global_batch: 8, derive: train.accum}\ngrid:\n  train.micro_batch: [1, 2, 8]\n");
  EXPECT_EQ(column(e, "train.accum"), (V{"8", "4", "1"}));
  // Excluding by a derived value.
  e =
      ex("name: c\nconstraints: {global_batch: 8, derive: train.accum}\ngrid:\n  train.micro_batch: [1, 2, 8]\n"
         "exclude:\n  - {train.accum: 4}\n");
  EXPECT_EQ(column(e, "train.accum"), (V{"8", "1"}));
  EXPECT_CONTAINS(
      error_of("name: c\nconstraints: {global_batch: 8, derive: train.accum}\ngrid:\n  train.micro_batch: [3]\n"),
      "key 'constraints.global_batch': 8 is not divisible by micro_batch x world_size = 3");
}

TEST(GridConstraints, Errors) {
  EXPECT_CONTAINS(error_of("name: c\nconstraints: {global_batch: 0}\n"),
                  "g.yaml:2:29: key 'constraints.global_batch': expected an integer in [1, ");
  EXPECT_CONTAINS(error_of("name: c\nconstraints: {derive: train.accum}\n"),
                  "key 'constraints.global_batch': required");
  EXPECT_CONTAINS(error_of("name: c\nconstraints: {global_batch: 8, derive: train.lr}\n"),
                  "key 'constraints.derive': expected one of train.micro_batch, train.accum, got 'train.lr'");
  EXPECT_CONTAINS(error_of("name: c\nconstraints: {global_batch: 8, on_mismatch: ignore}\n"),
                  "key 'constraints.on_mismatch': expected one of error, skip");
  EXPECT_CONTAINS(error_of("name: c\nconstraints: {global_bach: 8}\n"),
                  "unknown key 'constraints.global_bach' (did you mean 'constraints.global_batch'?)");
  EXPECT_CONTAINS(error_of("name: c\nconstraints: {global_batch: 8, derive: train.accum}\ngrid:\n  train.accum: [1]\n"),
                  "key 'train.accum' is swept twice");
}

TEST(GridConstraints, ZeroThreeNeedsTwoRanksAtEveryPoint) {
  std::string msg = error_of("name: z\ngrid:\n  dist.zero_stage: [0, 3]\n  dist.world_size: [2, 1]\n");
  EXPECT_CONTAINS(msg, "g.yaml:3:24: key 'dist.zero_stage': stage 3 shards parameters and needs dist.world_size >= 2");
  EXPECT_CONTAINS(msg, "(at point dist.zero_stage=3 dist.world_size=1)");
  EXPECT_EQ(error_of("name: z\ngrid:\n  dist.zero_stage: [0, 3]\n  dist.world_size: [2, 4]\n"), "");
}

// Every factorization of a global batch gives the same bits now (the canonical reduction
// takes a rank's leaves as the subtrees that cover them): no accumulation is warned about.
TEST(GridWarnings, AnAccumulationThatIsNotAPowerOfTwoIsNotWarnedAbout) {
  Expansion e = ex("name: w\ngrid:\n  train.accum: [1, 3, 4, 6]\n  train.seed: [0, 1]\n");
  EXPECT_EQ(e.points.size(), 8u);
  EXPECT_TRUE(e.warnings.empty());
}

TEST(GridIds, SamePointSameIdAcrossSpellingsAndKeyOrder) {
  Expansion a = ex("name: a\nbase: {train: {steps: 10, lr: 0.001}}\ngrid:\n  train.seed: [1]\n");
  Expansion b = ex("name: b\nbase: {train: {lr: 1e-3, steps: 10}}\nseeds: [1]\n");
  ASSERT_EQ(a.points.size(), 1u);
  ASSERT_EQ(b.points.size(), 1u);
  EXPECT_EQ(a.points[0].id, b.points[0].id);
}

TEST(GridIds, FastIdsEqualRunIdEverywhere) {
  // Every kind of key (text, choice, int, real, nested moe key) through the fast path.
  // (data.dataset: data.path would have no effect with the synthetic data of the others.)
  Expansion e =
      ex("name: f\n"
         "base: {data: {kind: hdf5, path: d.h5}}\n"
         "grid:\n"
         "  data.dataset: ['', 'a b', \"$(touch pwned)\"]\n"
         "  train.schedule: [constant, cosine]\n"
         "  model.moe.experts: [0, 4]\n"
         "  train.lr: {logspace: [1e-4, 1e-2, 2]}\n"
         "seeds: 2\n");
  ASSERT_EQ(e.points.size(), 48u);
  std::set<std::string> ids;
  for (const auto& p : e.points) {
    EXPECT_EQ(p.id, run_id(p.config));
    ids.insert(p.id);
  }
  EXPECT_EQ(ids.size(), 48u);
}

TEST(GridIdleKeys, PointsDifferingOnlyInAKeyWithoutEffectAreOneRunWithOneWarning) {
  Expansion e = ex("name: i\nbase:\n  data: {kind: text, path: t.txt}\ngrid:\n  data.seed: [1, 2]\n");
  ASSERT_EQ(e.points.size(), 1u);
  EXPECT_EQ(e.duplicates, 1u);
  EXPECT_EQ(e.points[0].config.data.seed, 0);
  EXPECT_EQ(e.points[0].id, run_id(e.points[0].config));
  EXPECT_EQ(e.points[0].id, ex("name: i\nbase:\n  data: {kind: text, path: t.txt}\n").points[0].id);
  ASSERT_EQ(e.warnings.size(), 1u);
  EXPECT_EQ(e.warnings[0],
            "g.yaml:5:15: warning: key 'data.seed' has no effect with data.kind text; it is ignored and does not "
            "change run ids");
}

TEST(GridIdleKeys, AKeyThatAppliesStillSplitsAndOnlyIdlePointsAreReset) {
  Expansion e =
      ex("name: i\nbase:\n  data: {seed: 3, path: t.txt}\ngrid:\n  data.kind: [synthetic, text]\n"
         "  data.seed: [1, 2]\n");
  // synthetic x 2 seeds (data.path is idle there) + text (data.seed idle) = 3 runs.
  ASSERT_EQ(e.points.size(), 3u);
  std::set<std::string> ids;
  for (const auto& p : e.points) {
    EXPECT_EQ(p.id, run_id(p.config));
    ids.insert(p.id);
  }
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(e.points[0].config.data.seed, 1);
  EXPECT_EQ(e.points[0].config.data.path, "");
  EXPECT_EQ(e.points[2].config.data.seed, 0);
  EXPECT_EQ(e.points[2].config.data.path, std::filesystem::absolute("t.txt").string()) << "next to g.yaml";
  ASSERT_EQ(e.warnings.size(), 2u);
  EXPECT_CONTAINS(e.warnings[0], "g.yaml:3:25: warning: key 'data.path' has no effect with data.kind synthetic");
  EXPECT_CONTAINS(e.warnings[1], "g.yaml:6:15: warning: key 'data.seed' has no effect with data.kind text");
}

TEST(GridIdleKeys, KeysLeftAtTheirDefaultNeverWarn) {
  // data.seed, moe.top_k and the loss scale are idle here, but nobody set them.
  Expansion e =
      ex("name: i\nbase:\n  data: {kind: text, path: t.txt}\ngrid:\n  train.lr: [0.1, 0.2]\n"
         "  model.moe.experts: [0, 2]\n");
  EXPECT_EQ(e.points.size(), 4u);
  EXPECT_TRUE(e.warnings.empty());
  // Set to their default, they change nothing either.
  e = ex("name: i\nbase:\n  data: {kind: text, path: t.txt, seed: 0}\ngrid:\n  train.lr: [0.1, 0.2]\n");
  EXPECT_EQ(e.points.size(), 2u);
  EXPECT_TRUE(e.warnings.empty());
}

TEST(GridIdleKeys, IncludedPointsAreResetToo) {
  Expansion e = ex("name: i\nbase:\n  train: {precision: fp32}\ninclude:\n  - {train.loss_scale_init: 8}\n");
  ASSERT_EQ(e.points.size(), 1u);
  EXPECT_EQ(e.points[0].id, run_id(RunConfig{}));
  ASSERT_EQ(e.warnings.size(), 1u);
  EXPECT_CONTAINS(e.warnings[0],
                  "g.yaml:5:29: warning: key 'train.loss_scale_init' has no effect with "
                  "train.precision fp32");
}

TEST(GridMinLrRatio, MinLrFollowsEachPointsLr) {
  Expansion r = ex("name: r\nbase:\n  train: {min_lr_ratio: 0.1}\ngrid:\n  train.lr: [0.001, 0.01]\n");
  Expansion m = ex("name: m\nzip:\n  - {train.lr: [0.001, 0.01], train.min_lr: [0.0001, 0.001]}\n");
  ASSERT_EQ(r.points.size(), 2u);
  ASSERT_EQ(m.points.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r.points[i].id, run_id(r.points[i].config));
    EXPECT_EQ(r.points[i].id, m.points[i].id);
  }
  EXPECT_EQ(r.points[1].config.train.min_lr, 0.001);
  // Swept itself, the ratio is a dimension like any key.
  Expansion s = ex("name: s\ngrid:\n  train.min_lr_ratio: [0, 0.1]\n");
  ASSERT_EQ(s.points.size(), 2u);
  EXPECT_EQ(s.points[0].id, run_id(RunConfig{}));
  EXPECT_EQ(s.points[1].config.train.min_lr, 1e-4);
}

TEST(GridMinLrRatio, BothSpellingsInOneGridAreAnErrorNamingTheLines) {
  EXPECT_CONTAINS(error_of("name: b\nbase:\n  train: {min_lr: 0.0001}\ngrid:\n  train.min_lr_ratio: [0.1]\n"),
                  "g.yaml:5:3: key 'train.min_lr_ratio': give either train.min_lr (at g.yaml:3:19) or "
                  "train.min_lr_ratio, not both");
  // An include is base + its keys: it may spell the other one.
  EXPECT_EQ(error_of("name: b\ngrid:\n  train.min_lr_ratio: [0.1]\ninclude:\n  - {train.min_lr: 0.0001}\n"), "");
}

TEST(GridTop, UnknownKeysAndTooLargeGrids) {
  EXPECT_CONTAINS(error_of("name: t\nsede: 3\n"), "g.yaml:2:1: unknown top-level key 'sede' (did you mean 'seeds'?)");
  EXPECT_CONTAINS(error_of("name: t\ngrid:\n  train.seed: {range: [0, 300]}\n  data.seed: {range: [0, 300]}\n"
                           "  train.steps: {range: [1, 301]}\n"),
                  "the grid has 27000000 points; at most 20000000 are supported");
}

}  // namespace
}  // namespace sweep
