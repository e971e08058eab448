// `search: kind: random`: the points a search draws are a pure function of the space,
// the search seed and the number of samples; every bad input names its file:line:col.
#include "search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "data_file.h"     // identify_data_file
#include "fake_trainer.h"  // flag_value
#include "grid.h"
#include "halving_search.h"  // halving_trials, truncate_record, run_halving_search
#include "pbt_plan.h"        // pbt_decision_steps
#include "process.h"         // ProcessRunner
#include "program.h"         // json_string_array
#include "record.h"          // RecordWriter
#include "run_config.h"      // load_run_config, run_id
#include "sweep_run.h"       // run_sweep
#include "temp_dir.h"        // TempDir
#include "test_util.h"       // EXPECT_CONTAINS, thrown_message

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

SearchSpec halving(int64_t min_steps, int64_t eta, int64_t brackets) {
  SearchSpec s;
  s.kind = "halving", s.min_steps = min_steps, s.eta = eta, s.brackets = brackets;
  s.min_steps_where = s.brackets_where = "x.yaml:9:3";
  return s;
}

std::string rungs(const HalvingBracket& b) {
  std::string out;
  for (const auto& r : b.rungs)
    out += (out.empty() ? "" : " ") + std::to_string(r.trials) + "x" + std::to_string(r.steps);
  return out;
}

TEST(HalvingSchedule, OneBracketIsSuccessiveHalvingEndingAtTheFullBudget) {
  const auto b = halving_schedule(halving(16, 3, 1), 150, 27);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].s, 2);  // 16 x 3^2 = 144 <= 150 < 432
  EXPECT_EQ(rungs(b[0]), "27x16 9x50 3x150");
  EXPECT_EQ(b[0].first, 0);
  EXPECT_EQ(b[0].count, 27);
  // A rung keeps at least one trial; eta 2 halves.
  EXPECT_EQ(rungs(halving_schedule(halving(10, 2, 1), 80, 5)[0]), "5x10 2x20 1x40 1x80");
  // min_steps equal to the budget: one rung, every trial trained to the end.
  EXPECT_EQ(rungs(halving_schedule(halving(50, 3, 1), 50, 4)[0]), "4x50");
}

TEST(HalvingSchedule, BracketsShareTheTrialsAsHyperbandDoes) {
  // s_max 2: Hyperband's n_s = ceil(3 x 3^s / (s + 1)) = 9, 5, 3 (of 17). 34 trials: one
  // each, then 31 x 9/17 = 16.4, 31 x 5/17 = 9.1, 31 x 3/17 = 5.5, and the largest
  // remainder (5.5) takes the last one.
  const auto b = halving_schedule(halving(16, 3, 3), 150, 34);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(rungs(b[0]), "17x16 5x50 1x150");
  EXPECT_EQ(rungs(b[1]), "10x50 3x150");
  EXPECT_EQ(rungs(b[2]), "7x150");
  EXPECT_EQ(b[1].first, 17);
  EXPECT_EQ(b[2].first, 27);
}

TEST(HalvingSchedule, ImpossibleSchedulesNameTheirKey) {
  EXPECT_CONTAINS(sweep_test::thrown_message<ConfigError>([] { halving_schedule(halving(200, 3, 1), 150, 9); }),
                  "x.yaml:9:3: key 'search.min_steps': 200 is above train.steps 150");
  EXPECT_CONTAINS(sweep_test::thrown_message<ConfigError>([] { halving_schedule(halving(16, 3, 4), 150, 40); }),
                  "key 'search.brackets': 4 brackets, but min_steps 16 x eta 3^s fits train.steps 150 only for s <= 2");
  EXPECT_CONTAINS(sweep_test::thrown_message<ConfigError>([] { halving_schedule(halving(16, 3, 3), 150, 2); }),
                  "3 brackets need a trial each, and the search has 2");
}

TEST(HalvingSearch, BadInputNamesItsLineAndKey) {
  const std::string head =
      "name: hs\n"                      // 1
      "base:\n"                         // 2
      "  train: {steps: 90}\n"          // 3
      "grid:\n"                         // 4
      "  train.lr: [1.0e-3, 3.0e-3]\n"  // 5
      "search:\n"                       // 6
      "  kind: halving\n";              // 7
  EXPECT_CONTAINS(error_of(head), "x.yaml:7:3: key 'search.min_steps': required");
  EXPECT_CONTAINS(error_of(head + "  min_steps: 10\n  eta: 1\n"),
                  "x.yaml:9:8: key 'search.eta': expected an integer in [2");
  EXPECT_CONTAINS(error_of(head + "  min_steps: 91\n"),
                  "x.yaml:8:14: key 'search.min_steps': 91 is above train.steps 90");
  EXPECT_CONTAINS(error_of(head + "  min_steps: 10\n  metric: loss\n"), "x.yaml:9:11: key 'search.metric'");
  EXPECT_CONTAINS(error_of(head + "  min_steps: 10\n  metric: tokens_per_s\n"),
                  "x.yaml:9:11: key 'search.metric': 'tokens_per_s' is measured in time");
  EXPECT_CONTAINS(error_of(head + "  min_steps: 10\n  parallel: 2\n"), "it has no parallel");
  EXPECT_CONTAINS(error_of(head + "  min_steps: 10\n  samples: 4\n"), "samples is the number of points to draw");
  EXPECT_CONTAINS(error_of("name: hs\ngrid:\n  train.steps: [30, 60]\nsearch:\n  kind: halving\n  min_steps: 10\n"),
                  "halving's budget is train.steps, so it must be one value");
  EXPECT_CONTAINS(error_of("name: hs\nsearch:\n  kind: random\n  min_steps: 10\n"),
                  "x.yaml:4:14: key 'search.min_steps': only a halving search has one");
}

/// A pbt search of 4 members over train.lr (and `space`), 60 steps; `search` goes into
/// search: after its space, `train` replaces the checkpoint keys.
std::string pbt_grid(const std::string& search, const std::string& space = "",
                     const std::string& train = ", checkpoint_every: 20, keep_checkpoints: 3") {
  return "name: pbt\n"  // 1
         "base:\n"      // 2
         "  train: {steps: 60" +
         train +
         "}\n"                                               // 3
         "search:\n"                                         // 4
         "  kind: pbt\n"                                     // 5
         "  population: 4\n"                                 // 6
         "  space:\n"                                        // 7
         "    train.lr: {loguniform: [1.0e-4, 1.0e-2]}\n" +  // 8
         space +
         search;
}

TEST(PbtSearch, TheMembersAreTheFirstDrawsAndTheDecisionsEveryIntervalBeforeTheEnd) {
  const SweepSpec spec = parse_grid(pbt_grid("  interval: 20\n  seed: 4\n"), "x.yaml");
  EXPECT_EQ(spec.search.population, 4);
  EXPECT_EQ(spec.search.quantile, 0.25);
  EXPECT_EQ(spec.search.perturb_down, 0.8);
  EXPECT_EQ(spec.search.perturb_up, 1.2);
  EXPECT_EQ(spec.search.resample, 0.25);
  EXPECT_EQ(spec.search.metric, "train_loss_end");
  EXPECT_EQ(pbt_decision_steps(spec.search, 60), (std::vector<int64_t>{20, 40}));
  SearchSpec one = spec.search;
  one.generations = 1;
  EXPECT_EQ(pbt_decision_steps(one, 60), (std::vector<int64_t>{20}));
  const auto points = expand(spec);
  ASSERT_EQ(points.size(), 4u);
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(points[size_t(i)].values.front().second, draw(spec.search.space[0], 4, i).text);
}

TEST(PbtSearch, BadInputNamesItsLineAndKey) {
  const std::string at20 = "  interval: 20\n";
  EXPECT_CONTAINS(error_of(pbt_grid("")), "x.yaml:5:3: key 'search.interval': required");
  EXPECT_CONTAINS(error_of(pbt_grid("  interval: 25\n")), "x.yaml:9:13: key 'search.interval': 25 does not divide");
  EXPECT_CONTAINS(error_of(pbt_grid("  interval: 60\n")), "key 'search.interval': 60 does not divide");
  EXPECT_CONTAINS(error_of(pbt_grid(at20 + "  generations: 3\n")),
                  "x.yaml:10:16: key 'search.generations': 3 decisions, but train.steps 60 / interval 20 leaves room "
                  "for 2");
  EXPECT_CONTAINS(error_of(pbt_grid(at20 + "  quantile: 0\n")), "key 'search.quantile': expected a fraction");
  EXPECT_CONTAINS(error_of(pbt_grid(at20 + "  perturb: [1.2, 0.8]\n")),
                  "key 'search.perturb': expected 0 < down < 1 < up");
  EXPECT_CONTAINS(error_of(pbt_grid(at20 + "  resample: 2\n")), "key 'search.resample': expected a number");
  EXPECT_CONTAINS(error_of(pbt_grid(at20 + "  samples: 4\n")), "it has no samples");
  EXPECT_CONTAINS(error_of(pbt_grid(at20 + "  metric: [final_loss, objective]\n")), "by one metric");
  EXPECT_CONTAINS(error_of(pbt_grid(at20, "    model.d_model: {choice: [32, 64]}\n")),
                  "x.yaml:9:5: key 'search.space.model.d_model': a pbt search cannot perturb it");
  EXPECT_CONTAINS(error_of(pbt_grid(at20, "    train.accum: {int: [1, 4]}\n")), "it changes the layout");
  EXPECT_CONTAINS(error_of(pbt_grid(at20, "    train.steps: {int: [40, 80]}\n")), "it is the budget");
  EXPECT_CONTAINS(error_of(pbt_grid(at20 + "seeds: 2\n")), "give one seed (a member is one run)");
  EXPECT_CONTAINS(error_of(pbt_grid(at20, "", ", checkpoint_every: 20, keep_checkpoints: 2")), "expected >= 3");
  EXPECT_CONTAINS(error_of(pbt_grid(at20, "", ", checkpoint_every: 20, keep_checkpoints: 3, min_lr_ratio: 0.1")),
                  "key 'search.space.train.lr': a pbt member's learning rate may move down to 0.0001");
  EXPECT_CONTAINS(error_of("name: x\nsearch:\n  kind: random\n  interval: 10\n"),
                  "x.yaml:4:13: key 'search.interval': only a population-based search has one");
}

/// Stands in for a program that honours a search's stop (program.stop): trains to the
/// run directory's stop_at, else to train.steps, and records "stopped" with no failure
/// text, as python/sweep's finish() does. A larger lr lowers the loss faster.
class RungProgram : public ProcessRunner {
 public:
  int calls = 0;
  ExitStatus run(const std::vector<std::string>& argv, const std::string&) override {
    ++calls;
    const std::string out = sweep_test::flag_value(argv, "--out");
    const RunConfig c = load_run_config(sweep_test::flag_value(argv, "--config"));
    int64_t stop = 0;
    std::ifstream(out + "/stop_at") >> stop;
    RecordHeader h;
    h.run_id = run_id(c);
    h.sweep_id = sweep_test::flag_value(argv, "--sweep-id");
    h.config_yaml = to_yaml(c);
    h.config = to_flat(c);
    RecordWriter w(out + "/record.h5", h);
    for (int64_t step = 1; step <= (stop > 0 ? stop : c.train.steps); ++step) {
      StepMetrics m;
      m.step = step, m.loss = 3.0 - c.train.lr * double(step);
      w.append_step(m);
    }
    w.finish(stop > 0 ? "stopped" : "completed", "");
    ExitStatus st;
    st.code = 0;
    return st;
  }
};

// A halving search over 4 trials of one seed trains 7 rungs (4x4, 2x8, 1x16 steps): it
// completed 4 runs, not 7. A run a program stopped (no failure text in its record) is
// said to have stopped, its line not opening on an empty part (", ; train loss").
TEST(HalvingSearch, CountsEachRunOnceAndSaysWhereAProgramStoppedIt) {
  sweep_test::TempDir tmp("halving_search_");
  const SweepSpec spec = parse_grid(
      "name: h4\nbase:\n  train: {steps: 16}\ngrid:\n  train.lr: [0.01, 0.02, 0.03, 0.04]\n"
      "search:\n  kind: halving\n  min_steps: 4\n  eta: 2\n",
      "h4.yaml");
  const std::vector<GridPoint> points = expand(spec);
  SweepRunOptions opt;
  opt.out_dir = (tmp.path() / "out").string();
  std::filesystem::create_directories(opt.out_dir);  // as `sweep run` makes it
  opt.train_binary = "/opt/sweep/bin/sweep-train";
  auto search = [&](RungProgram& program) {
    return run_halving_search(spec, points, opt.out_dir,
                              [&](const std::vector<GridPoint>& rung, const std::map<std::string, int64_t>& stop) {
                                opt.stop_at = stop;
                                return run_sweep(spec, rung, opt, program);
                              });
  };
  RungProgram program;
  testing::internal::CaptureStdout();
  const SweepSummary s = search(program);
  const std::string lines = testing::internal::GetCapturedStdout();
  EXPECT_EQ(program.calls, 7);
  EXPECT_EQ(s.completed, 4) << lines;
  EXPECT_EQ(s.skipped, 0);
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(lines.find(", ;"), std::string::npos) << lines;
  EXPECT_CONTAINS(lines, "stopped   " + points[0].id + " train.lr=0.01, stopped by the search at step 4; train loss ");
  EXPECT_CONTAINS(lines, ", stopped by the search at step 8; train loss ");
  // Run again: every run is at its rung already, none is trained, each counted once.
  RungProgram again;
  opt.quiet = true;
  const SweepSummary t = search(again);
  EXPECT_EQ(again.calls, 0);
  EXPECT_EQ(t.completed, 0);
  EXPECT_EQ(t.skipped, 4);
}

/// A program of its own under a halving search, as python's sweep runs one: its source
/// file is its program, recorded in program.files with its hash; its loss follows the
/// source (a "sign -1" line ranks the trials the other way round); a stopped run leaves
/// checkpoints/last naming the source hash that wrote it, and a run that finds a
/// checkpoint of another source fails, as a resumed python program cannot carry on a
/// record it does not have.
class SourceProgram : public ProcessRunner {
 public:
  std::string source;
  int calls = 0, resumed_other = 0;
  ExitStatus run(const std::vector<std::string>& argv, const std::string&) override {
    ++calls;
    ExitStatus st;
    const std::string out = sweep_test::flag_value(argv, "--out");
    const RunConfig c = load_run_config(sweep_test::flag_value(argv, "--config"));
    int64_t stop = 0;
    std::ifstream(out + "/stop_at") >> stop;
    const std::string hash = identify_data_file(source, "").hash;
    std::string from;
    if (std::ifstream(out + "/checkpoints/last") >> from; !from.empty() && from != hash) {
      ++resumed_other;
      st.code = 1;
      return st;
    }
    std::ifstream in(source);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const double sign = text.find("sign -1") != std::string::npos ? -1 : 1;
    RecordHeader h;
    h.run_id = run_id(c);
    h.sweep_id = sweep_test::flag_value(argv, "--sweep-id");
    h.config_yaml = to_yaml(c);
    h.config = to_flat(c);
    h.environment = {{"program.files", json_string_array({hash + " " + source})}};
    RecordWriter w(out + "/record.h5", h);
    for (int64_t step = 1; step <= (stop > 0 ? stop : c.train.steps); ++step) {
      StepMetrics m;
      m.step = step, m.loss = 3.0 - sign * c.train.lr * double(step);
      w.append_step(m);
    }
    w.finish(stop > 0 ? "stopped" : "completed", "");
    if (stop > 0) {
      std::filesystem::create_directories(out + "/checkpoints");
      std::ofstream(out + "/checkpoints/last") << hash;
    }
    st.code = 0;
    return st;
  }
};

// A finished search run again after its program changed: every trial whose records
// (stopped at a rung or completed) hold the old program starts over from step 0, its
// record, rung records and checkpoints kept aside, so no run resumes the old program's
// checkpoint and no rung is ranked on the old program; search.log is then that of a
// search of the new program started afresh, and one line says what happened.
TEST(HalvingSearch, RunAgainAfterItsProgramChangedEveryChangedTrialStartsOver) {
  sweep_test::TempDir tmp("halving_stale_");
  const std::string source = (tmp.path() / "train.src").string();
  std::ofstream(source) << "sign 1\n";
  const SweepSpec spec = parse_grid(
      "name: h4\nbase:\n  train: {steps: 16}\ngrid:\n  train.lr: [0.01, 0.02, 0.03, 0.04]\n"
      "search:\n  kind: halving\n  min_steps: 4\n  eta: 2\n",
      "h4.yaml");
  const std::vector<GridPoint> points = expand(spec);
  auto search = [&](SourceProgram& program, const std::string& out) {
    SweepRunOptions opt;
    opt.out_dir = out;
    opt.quiet = true;
    std::filesystem::create_directories(opt.out_dir);
    opt.train_binary = "/opt/sweep/bin/sweep-train";
    program.source = source;
    testing::internal::CaptureStdout();
    const SweepSummary s = run_halving_search(
        spec, points, opt.out_dir, [&](const std::vector<GridPoint>& rung, const std::map<std::string, int64_t>& stop) {
          opt.stop_at = stop;
          return run_sweep(spec, rung, opt, program);
        });
    testing::internal::GetCapturedStdout();
    return s;
  };
  const auto read_text = [](const std::string& path) {
    std::ifstream in(path);
    return std::string{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  };
  const std::string out = (tmp.path() / "out").string();
  SourceProgram first;
  ASSERT_EQ(search(first, out).failed, 0);
  ASSERT_EQ(first.calls, 7);
  const std::string old_hash = identify_data_file(source, "").hash;

  std::ofstream(source) << "sign -1\n";
  const std::string new_hash = identify_data_file(source, "").hash;
  SourceProgram again;
  testing::internal::CaptureStderr();
  const SweepSummary s = search(again, out);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(again.resumed_other, 0);
  EXPECT_EQ(s.failed, 0) << said;
  EXPECT_EQ(again.calls, 7);  // all 4 trials from step 0, as a fresh search
  EXPECT_EQ(said,
            "sweep: train.src changed since 4 of 4 trials ran: they start over from step 0 (their records and "
            "checkpoints are kept aside)\n");
  for (const GridPoint& p : points) {
    const std::string dir = out + "/runs/" + p.id;
    EXPECT_EQ(read_record(dir + "/record.h5").env("program.files"), json_string_array({new_hash + " " + source}));
    int stale_checkpoints = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      stale_checkpoints += name.rfind("checkpoints.stale-", 0) == 0;
      // What a resumed run carries its rows on from holds the new program only.
      if (name.rfind("record.h5.stopped-", 0) == 0) {
        EXPECT_EQ(read_record(e.path().string()).env("program.files"), json_string_array({new_hash + " " + source}))
            << name;
      }
      if (name.rfind("record.h5.stale-", 0) == 0) {
        EXPECT_EQ(read_record(e.path().string()).env("program.files"), json_string_array({old_hash + " " + source}))
            << name;
      }
    }
    EXPECT_EQ(stale_checkpoints, 1) << dir;
  }
  const std::string fresh = (tmp.path() / "fresh").string();
  SourceProgram afresh;
  search(afresh, fresh);
  EXPECT_EQ(read_text(out + "/search.log"), read_text(fresh + "/search.log"));
  // Run once more: nothing changed, nothing runs, nothing is said.
  SourceProgram third;
  testing::internal::CaptureStderr();
  search(third, out);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(third.calls, 0);
}

TEST(HalvingSearch, TrialsAreTheGridsPointsWithTheirSeedsTogether) {
  const std::string text =
      "name: hs\nbase:\n  train: {steps: 90}\ngrid:\n  train.lr: [1.0e-3, 3.0e-3, 1.0e-2]\nseeds: 2\n"
      "search:\n  kind: halving\n  min_steps: 10\n";
  const SweepSpec spec = parse_grid(text, "x.yaml");
  const auto points = expand(spec);
  const auto trials = halving_trials(spec, points);
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0].inputs, "train.lr=1.0e-3");
  ASSERT_EQ(trials[0].run_ids.size(), 2u);
  EXPECT_EQ(trials[0].run_ids[0], points[0].id);
  EXPECT_EQ(trials[0].run_ids[1], points[1].id);
  // With brackets the order is shuffled by the search seed, and another seed shuffles
  // otherwise (27 trials: the chance of the same order is nil).
  const auto order = [&](int seed) {
    SweepSpec s = parse_grid(
        "name: hs\nbase:\n  train: {steps: 90}\ngrid:\n  train.lr: [1, 2, 3]\n  train.warmup: [0, 1, 2]\n"
        "  train.clip_norm: [1, 2, 3]\nsearch:\n  kind: halving\n  min_steps: 10\n  brackets: 2\n  seed: " +
            std::to_string(seed) + "\n",
        "x.yaml");
    std::string o;
    for (const auto& t : halving_trials(s, expand(s))) o += t.inputs + ";";
    return o;
  };
  EXPECT_EQ(order(1), order(1));
  EXPECT_NE(order(1), order(2));
}

TEST(HalvingSearch, ARecordTruncatedToAStepIsTheRunAsItStoodThen) {
  Record r;
  for (int64_t s = 1; s <= 10; ++s) {
    StepMetrics m;
    m.step = s, m.loss = double(20 - s);
    r.steps.push_back(m);
    r.rank_step_time_s.push_back({0.1});
    if (s % 5 == 0) r.checksums.push_back(ChecksumRow{}), r.checksums.back().step = s;
    if (s % 4 == 0) r.evals.push_back(EvalRow{}), r.evals.back().step = s;
  }
  const Record t = truncate_record(r, 6);
  ASSERT_EQ(t.steps.size(), 6u);
  EXPECT_EQ(t.steps.back().step, 6);
  EXPECT_EQ(t.rank_step_time_s.size(), 6u);
  ASSERT_EQ(t.checksums.size(), 1u);
  EXPECT_EQ(t.checksums[0].step, 5);
  ASSERT_EQ(t.evals.size(), 1u);
  EXPECT_EQ(t.evals[0].step, 4);
  EXPECT_EQ(truncate_record(r, 100).steps.size(), 10u);
}

}  // namespace
}  // namespace sweep
