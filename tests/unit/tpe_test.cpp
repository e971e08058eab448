// The Tree-structured Parzen Estimator (harness/search/tpe.h): its estimators are proper
// densities on their bounds, its proposals are a pure function of (space, seed, trial,
// history), they learn (beating random draws on a known objective), and a bad tpe
// section names its file:line:col.
#include "tpe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "grid.h"
#include "motpe.h"       // motpe_split, motpe_propose
#include "test_util.h"   // EXPECT_CONTAINS, thrown_message
#include "tpe_search.h"  // tpe_log

namespace sweep {
namespace {

SearchDim numeric(const std::string& key, const std::string& kind, double lo, double hi, int64_t step = 1) {
  SearchDim d;
  d.key = key, d.kind = kind, d.lo = lo, d.hi = hi, d.step = step, d.where = "x.yaml:1:1";
  return d;
}

double value(const ConfigValue& v) { return std::stod(v.text); }

TEST(Tpe, GoodCountIsATenthCappedAt25) {
  EXPECT_EQ(tpe_good_count(0), 1u);
  EXPECT_EQ(tpe_good_count(1), 1u);
  EXPECT_EQ(tpe_good_count(10), 1u);
  EXPECT_EQ(tpe_good_count(11), 2u);
  EXPECT_EQ(tpe_good_count(240), 24u);
  EXPECT_EQ(tpe_good_count(1000), 25u);
}

// Widths are the larger gap to a neighbour (the prior's centre and the bounds count),
// clipped below at range / min(100, n + 1); the prior spans the range.
TEST(Tpe, ParzenWidthsComeFromTheNeighbours) {
  // Nine observations: the floor is 1 / min(100, 10) = 0.1. Sorted with the prior's
  // centre: 0.05 0.1 0.3 0.32 0.5 0.6 0.7 0.75 0.9 0.95.
  const Parzen p = parzen({0.05, 0.1, 0.3, 0.32, 0.6, 0.7, 0.75, 0.9, 0.95}, 0, 1);
  ASSERT_EQ(p.mu.size(), 10u);
  EXPECT_NEAR(p.sigma[0], 0.1, 1e-12);   // max(0.05, 0.05), clipped up to the floor
  EXPECT_NEAR(p.sigma[2], 0.2, 1e-12);   // max(0.3 - 0.1, 0.02)
  EXPECT_NEAR(p.sigma[3], 0.18, 1e-12);  // max(0.02, 0.5 - 0.32)
  EXPECT_NEAR(p.sigma[7], 0.15, 1e-12);  // max(0.9 - 0.75, 0.05)
  EXPECT_NEAR(p.sigma[8], 0.1, 1e-12);   // max(0.05, 1 - 0.95), clipped
  EXPECT_DOUBLE_EQ(p.mu[9], 0.5);
  EXPECT_DOUBLE_EQ(p.sigma[9], 1.0);
  EXPECT_DOUBLE_EQ(p.weight[9], kTpePriorWeight);
  const Parzen few = parzen({0.1, 0.2, 0.9}, 0, 1);
  EXPECT_DOUBLE_EQ(few.sigma[0], 0.25);  // clipped at 1 / (3 + 1)
  const Parzen wide = parzen({0.0}, 0, 1);
  EXPECT_DOUBLE_EQ(wide.sigma[0], 0.5);  // max(0, 0.5 - 0)
}

// The mixture is a density on [lo, hi] (integrates to 1), and its sampler draws from it:
// the share of samples below the median of the density is one half.
TEST(Tpe, ParzenIsADensityOnItsBoundsAndTheSamplerDrawsFromIt) {
  const Parzen p = parzen({-1.5, 0.3, 0.4, 2.0}, -2, 3);
  double integral = 0, below = 0;
  const int n = 20000;
  const double h = 5.0 / n;
  std::vector<double> cdf;
  for (int i = 0; i < n; ++i) {
    integral += std::exp(parzen_log_density(p, -2 + (i + 0.5) * h)) * h;
    cdf.push_back(integral);
  }
  EXPECT_NEAR(integral, 1.0, 1e-4);
  const double median = -2 + h * double(std::lower_bound(cdf.begin(), cdf.end(), 0.5 * integral) - cdf.begin());
  const int samples = 4000;
  for (int i = 0; i < samples; ++i) {
    const double x = parzen_sample(p, draw_unit(1, i, "c"), draw_unit(1, i, "v"));
    ASSERT_GE(x, -2.0);
    ASSERT_LE(x, 3.0);
    below += x < median ? 1 : 0;
  }
  EXPECT_NEAR(below / samples, 0.5, 0.03);
}

// Same inputs, same proposal; another seed or trial number, another one. Values take the
// form of draw(): within bounds, six digits, ints on their step, choices as written.
TEST(Tpe, ProposalsAreAPureFunctionOfTheirInputs) {
  std::vector<SearchDim> space = {numeric("train.lr", "loguniform", 1e-4, 1e-1),
                                  numeric("train.warmup", "int", 0, 100, 10)};
  SearchDim act;
  act.key = "model.act", act.kind = "choice", act.choices = {{"gelu", "x.yaml:2:3"}, {"relu", "x.yaml:2:9"}};
  space.push_back(act);
  std::vector<TpeTrial> history;
  for (int i = 0; i < 12; ++i) {
    std::vector<ConfigValue> v;
    for (const auto& d : space) v.push_back(draw(d, 3, i));
    history.push_back({v, std::abs(std::log10(value(v[0])) + 2.5) + (i == 4 ? INFINITY : 0)});
  }
  const auto a = tpe_propose(space, history, 3, 12), b = tpe_propose(space, history, 3, 12);
  ASSERT_EQ(a.size(), 3u);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(a[k].text, b[k].text);
  const auto c = tpe_propose(space, history, 4, 12), d = tpe_propose(space, history, 3, 13);
  EXPECT_NE(a[0].text, c[0].text);
  EXPECT_NE(a[0].text, d[0].text);
  for (const auto& p : {a, c, d}) {
    EXPECT_GE(value(p[0]), 1e-4);
    EXPECT_LE(value(p[0]), 1e-1);
    const double w = value(p[1]);
    EXPECT_EQ(std::fmod(w, 10), 0) << p[1].text;
    EXPECT_TRUE(p[2].text == "gelu" || p[2].text == "relu");
  }
}

// The estimator learns: on a known objective (a valley at lr 10^-2.5, warmup 30), TPE
// after 8 random draws finds a better best in 30 trials than 30 random draws do, for
// most search seeds; and it proposes near the valley once it has seen it.
TEST(Tpe, BeatsRandomDrawsOnAKnownObjective) {
  const std::vector<SearchDim> space = {numeric("train.lr", "loguniform", 1e-5, 1e-1),
                                        numeric("train.warmup", "int", 0, 100, 1)};
  auto f = [](const std::vector<ConfigValue>& v) {
    const double a = std::log10(value(v[0])) + 2.5, b = (value(v[1]) - 30) / 50;
    return a * a + b * b;
  };
  int wins = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    std::vector<TpeTrial> history;
    double best_tpe = INFINITY, best_random = INFINITY;
    for (int i = 0; i < 30; ++i) {
      std::vector<ConfigValue> v;
      if (i < 8)
        for (const auto& d : space) v.push_back(draw(d, seed, i));
      else
        v = tpe_propose(space, history, seed, i);
      history.push_back({v, f(v)});
      best_tpe = std::min(best_tpe, f(v));
      std::vector<ConfigValue> r;
      for (const auto& d : space) r.push_back(draw(d, seed, i));
      best_random = std::min(best_random, f(r));
    }
    wins += best_tpe <= best_random ? 1 : 0;
  }
  EXPECT_GE(wins, 4) << "TPE beat or matched random search in " << wins << " of 5 seeds";
}

std::string tpe_grid(const std::string& lines) {
  return "name: t\n"                                     // 1
         "base:\n"                                       // 2
         "  train: {steps: 20}\n"                        // 3
         "search:\n"                                     // 4
         "  kind: tpe\n"                                 // 5
         "  samples: 6\n"                                // 6
         "  space:\n"                                    // 7
         "    train.lr: {loguniform: [1e-4, 1e-2]}\n" +  // 8
         lines;
}

std::string error_of(const std::string& text) {
  return sweep_test::thrown_message<ConfigError>([&] { expand(parse_grid(text, "x.yaml")); });
}

TEST(Tpe, TheGridHoldsTheStartupDrawsOfTheRandomSearch) {
  const SweepSpec spec = parse_grid(tpe_grid("  startup: 3\n  parallel: 2\n"), "x.yaml");
  EXPECT_EQ(spec.search.kind, "tpe");
  EXPECT_EQ(spec.search.startup, 3);
  EXPECT_EQ(spec.search.parallel, 2);
  const auto points = expand(spec);
  ASSERT_EQ(points.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(points[size_t(i)].values[0].second, draw(spec.search.space[0], 0, i).text);
  EXPECT_EQ(parse_grid(tpe_grid(""), "x.yaml").search.startup, 6);  // min(10, samples)
}

TEST(Tpe, BadInputNamesItsLineAndKey) {
  EXPECT_CONTAINS(error_of(tpe_grid("  parallel: 0\n")), "x.yaml:9:13: key 'search.parallel'");
  EXPECT_CONTAINS(error_of(tpe_grid("  parallel: 7\n")), "x.yaml:9:13: key 'search.parallel'");
  EXPECT_CONTAINS(error_of(tpe_grid("  startup: 0\n")), "x.yaml:9:12: key 'search.startup'");
  const std::string metric = error_of(tpe_grid("  metric: final_los\n"));
  EXPECT_CONTAINS(metric, "x.yaml:9:11: key 'search.metric': expected one of objective, final_loss");
  EXPECT_CONTAINS(metric, "did you mean 'final_loss'");
  EXPECT_CONTAINS(error_of(tpe_grid("  mode: maximum\n")), "x.yaml:9:9: key 'search.mode': expected one of min, max");
  // A timing metric differs between two runs of the same bits: a search on it would not replay.
  EXPECT_CONTAINS(error_of(tpe_grid("  metric: tokens_per_s\n")),
                  "x.yaml:9:11: key 'search.metric': 'tokens_per_s' is measured in time: it differs between two runs "
                  "of the same bits, so a search deciding on it would not replay");
  std::string random = tpe_grid("  metric: final_loss\n");
  random.replace(random.find("kind: tpe"), 9, "kind: random");
  EXPECT_CONTAINS(error_of(random), "x.yaml:9:11: key 'search.metric': only a search that learns from its runs");
}

TEST(Tpe, TheLogNamesTheMetricWithTheValueTheRunsHave) {
  // Under mode max the search minimises the negated metric; search.log says the metric's
  // own name and value, never a "loss" that is its negation.
  SweepSpec spec = parse_grid(tpe_grid("  metric: final_eval_loss\n  mode: max\n"), "x.yaml");
  SearchTrial t;
  t.values = {ConfigValue{"1.0e-3", "", true}};
  t.source = "random";
  t.run_ids = {"00000000000000aa"};
  t.finished = true;
  t.loss = -2.5;  // mode max: lower is better
  SearchTrial worst = t;
  worst.loss = INFINITY;
  const std::string log = tpe_log(spec, {t, worst});
  EXPECT_CONTAINS(log, " 00000000000000aa final_eval_loss=2.5\n");
  EXPECT_CONTAINS(log, " 00000000000000aa final_eval_loss=worst (failed, diverged or no finite final_eval_loss)\n");
  EXPECT_EQ(log.find(" loss="), std::string::npos) << log;
}

// ---- several objectives (motpe.h, pareto.h)

TEST(MultiObjective, MetricsModesAndConstraintsParse) {
  const SweepSpec spec =
      parse_grid(tpe_grid("  metric: [train_loss_end, memory_per_rank_mib, metrics.acc]\n  mode: [min, min, max]\n"
                          "  constraints: [\"memory_per_rank_mib <= 512\", \"metrics.acc>0.5\"]\n"),
                 "x.yaml");
  const SearchSpec& s = spec.search;
  EXPECT_TRUE(s.pareto());
  EXPECT_EQ(s.metrics, (std::vector<std::string>{"train_loss_end", "memory_per_rank_mib", "metrics.acc"}));
  EXPECT_EQ(s.modes, (std::vector<std::string>{"min", "min", "max"}));
  EXPECT_EQ(s.metric, "train_loss_end");
  ASSERT_EQ(s.constraints.size(), 2u);
  EXPECT_EQ(s.constraints[1].text(), "metrics.acc>0.5");
  EXPECT_EQ(search_objective_words(s),
            " metric=train_loss_end,memory_per_rank_mib,metrics.acc mode=min,min,max "
            "constraints=memory_per_rank_mib<=512,metrics.acc>0.5");
  // One mode is every metric's; one metric and no constraints is today's search.
  EXPECT_EQ(parse_grid(tpe_grid("  metric: [final_loss, best_eval_loss]\n  mode: max\n"), "x.yaml").search.modes,
            (std::vector<std::string>{"max", "max"}));
  const SearchSpec one = parse_grid(tpe_grid("  metric: final_loss\n"), "x.yaml").search;
  EXPECT_FALSE(one.pareto());
  EXPECT_EQ(search_objective_words(one), " metric=final_loss mode=min");
  // Random draws first and ranks nothing, so a timing metric is fine there: only the
  // report's front uses it.
  std::string random = tpe_grid("  metric: [train_loss_end, tokens_per_s]\n  mode: [min, max]\n");
  random.replace(random.find("kind: tpe"), 9, "kind: random");
  EXPECT_EQ(parse_grid(random, "x.yaml").search.metrics, (std::vector<std::string>{"train_loss_end", "tokens_per_s"}));
}

TEST(MultiObjective, BadInputNamesItsLineAndKey) {
  EXPECT_CONTAINS(error_of(tpe_grid("  metric: [train_loss_end, final_loss]\n  mode: [min]\n")),
                  "x.yaml:10:9: key 'search.mode': 1 mode for 2 metrics (search.metric at x.yaml:9:11)");
  EXPECT_CONTAINS(error_of(tpe_grid("  metric: final_loss\n  mode: [min, max]\n")),
                  "x.yaml:10:9: key 'search.mode': 2 modes for 1 metric");
  EXPECT_CONTAINS(error_of(tpe_grid("  metric: [final_loss, final_loss]\n")),
                  "x.yaml:9:24: key 'search.metric': 'final_loss' is named twice");
  EXPECT_CONTAINS(error_of(tpe_grid("  metric: [final_loss, best_eval]\n")),
                  "x.yaml:9:24: key 'search.metric': expected one of objective");
  EXPECT_CONTAINS(error_of(tpe_grid("  metric: [final_loss, best_eval_loss]\n  mode: [min, most]\n")),
                  "x.yaml:10:15: key 'search.mode': expected one of min, max, got 'most'");
  const std::string unknown = error_of(tpe_grid("  constraints: [\"memory_per_rank <= 512\"]\n"));
  EXPECT_CONTAINS(unknown, "x.yaml:9:17: key 'search.constraints': expected one of objective");
  EXPECT_CONTAINS(unknown, "got 'memory_per_rank' (did you mean 'memory_per_rank_mib'?)");
  EXPECT_CONTAINS(error_of(tpe_grid("  constraints: [\"memory_per_rank_mib == 512\"]\n")),
                  "x.yaml:9:17: key 'search.constraints': 'memory_per_rank_mib == 512': '==' is no comparison");
  EXPECT_CONTAINS(
      error_of(tpe_grid("  constraints: [\"memory_per_rank_mib <= half\"]\n")),
      "x.yaml:9:17: key 'search.constraints': 'memory_per_rank_mib <= half': 'half' is not a finite number");
  EXPECT_CONTAINS(error_of(tpe_grid("  constraints: memory_per_rank_mib <= 512\n")),
                  "x.yaml:9:16: key 'search.constraints': expected a list of constraints");
  // tpe decides on its constraints too: a timing metric would not replay.
  EXPECT_CONTAINS(error_of(tpe_grid("  constraints: [\"tokens_per_s >= 1000\"]\n")),
                  "x.yaml:9:17: key 'search.constraints': 'tokens_per_s' is measured in time");
  const std::string halving =
      "name: h\nbase:\n  train: {steps: 90}\ngrid:\n  train.lr: [1.0e-3, 3.0e-3]\nsearch:\n  kind: halving\n"
      "  min_steps: 10\n";
  EXPECT_CONTAINS(error_of(halving + "  metric: [train_loss_end, final_loss]\n"),
                  "x.yaml:9:11: key 'search.metric': a halving search promotes by one metric");
  EXPECT_CONTAINS(error_of(halving + "  constraints: [\"memory_per_rank_mib <= 512\"]\n"),
                  "x.yaml:9:16: key 'search.constraints': a halving search promotes by one metric");
  EXPECT_CONTAINS(error_of("name: g\ngrid:\n  train.lr: [1.0e-3]\nsearch:\n  constraints: [\"final_loss < 3\"]\n"),
                  "x.yaml:5:16: key 'search.constraints': only a search that draws its points has one");
}

// A program's clock-derived metric (program.timing_metrics) is refused like tokens_per_s
// where the search decides on it, and fine where only the report ranks by it.
TEST(MultiObjective, AProgramsTimingMetricIsRefusedWhereTheSearchDecides) {
  const std::string grid =
      "name: p\nprogram:\n  argv: [/bin/true]\n  kind: prog\n  timing_metrics: [mfu]\n"
      "search:\n  kind: KIND\n  samples: 4\n  metric: [metrics.loss, metrics.mfu]\n"
      "  space:\n    train.lr: {loguniform: [1e-4, 1e-2]}\n";
  std::string tpe = grid;
  tpe.replace(tpe.find("KIND"), 4, "tpe");
  EXPECT_CONTAINS(error_of(tpe), "x.yaml:9:11: key 'search.metric': 'metrics.mfu' is one of program.timing_metrics");
  std::string random = grid;
  random.replace(random.find("KIND"), 4, "random");
  EXPECT_EQ(parse_grid(random, "x.yaml").search.metrics.size(), 2u);
}

// The good trials: the fronts while they fit whole, the front that does not cut by the
// greedy hypervolume subset, infeasible trials only once the feasible ones ran out.
TEST(Motpe, TheSplitIsByConstraintDominationThenHypervolume) {
  std::vector<ParetoEntry> e;
  for (int i = 0; i < 11; ++i) e.push_back({{10.0 + i, 10.0 + i}, 0});  // dominated by the three below
  e.push_back({{0, 1}, 0});                                             // 11: front
  e.push_back({{0.5, 0.5}, 0});  // 12: front, the middle: the most hypervolume alone
  e.push_back({{1, 0}, 0});      // 13: front
  e.push_back({{-5, -5}, 0.3});  // 14: better than all, but infeasible
  ASSERT_EQ(tpe_good_count(e.size()), 2u);
  const MotpeSplit s = motpe_split(e);
  ASSERT_EQ(s.good.size(), 2u);
  EXPECT_EQ(s.good[0], 12u);
  EXPECT_TRUE(s.good[1] == 11u || s.good[1] == 13u);
  EXPECT_EQ(s.good.size() + s.bad.size(), e.size());
  for (double w : s.weights) EXPECT_TRUE(w > 0 && w <= 1) << w;
  EXPECT_EQ(*std::max_element(s.weights.begin(), s.weights.end()), 1.0);

  // With one feasible trial the rest of the good set is the least infeasible ones, in
  // (violation, trial) order, weighted as good as nothing.
  std::vector<ParetoEntry> f;
  for (int i = 0; i < 11; ++i) f.push_back({{double(i), double(-i)}, 0.1 * (11 - i)});
  f.push_back({{50, 50}, 0});
  ASSERT_EQ(tpe_good_count(f.size()), 2u);
  const MotpeSplit t = motpe_split(f);
  EXPECT_EQ(t.good, (std::vector<size_t>{11, 10}));
  EXPECT_EQ(t.weights, (std::vector<double>{1.0, kMotpeMinWeight}));
}

// g(x)'s trials count by age as in Optuna (numpy's linspace, pinned from it): the last 25
// fully, the older ones from 1/n up.
TEST(Motpe, BadTrialsAreWeightedByAgeAsOptunaDoes) {
  EXPECT_EQ(tpe_default_weights(3), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(tpe_default_weights(25), std::vector<double>(25, 1.0));
  const auto w26 = tpe_default_weights(26);
  EXPECT_DOUBLE_EQ(w26[0], 0.038461538461538464);
  EXPECT_EQ(w26[1], 1.0);
  const auto w45 = tpe_default_weights(45);
  ASSERT_EQ(w45.size(), 45u);
  EXPECT_DOUBLE_EQ(w45[0], 0.022222222222222223);
  EXPECT_DOUBLE_EQ(w45[1], 0.07368421052631578);
  EXPECT_DOUBLE_EQ(w45[3], 0.1766081871345029);
  EXPECT_EQ(w45[19], 1.0);
  EXPECT_EQ(w45[44], 1.0);
}

double zdt1(const std::vector<ConfigValue>& v, double* f2) {
  double g = 0;
  for (size_t i = 1; i < v.size(); ++i) g += value(v[i]);
  g = 1 + 9 * g / double(v.size() - 1);
  const double f1 = value(v[0]);
  *f2 = g * (1 - std::sqrt(f1 / g));
  return f1;
}

// It learns: on ZDT1 (5 variables) 40 trials of multi-objective TPE after 10 random ones
// dominate more (hypervolume below (1.1, 6)) than 40 random draws, for most seeds; and
// the same history and seed give the same proposal.
TEST(Motpe, BeatsRandomDrawsOnZdt1AndIsAPureFunction) {
  std::vector<SearchDim> space;
  for (int i = 0; i < 5; ++i) space.push_back(numeric("model.x" + std::to_string(i), "uniform", 0, 1));
  int wins = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    std::vector<TpeTrial> history;
    std::vector<ParetoEntry> entries;
    std::vector<std::vector<double>> mo, random;
    for (int i = 0; i < 40; ++i) {
      std::vector<ConfigValue> v;
      if (i < 10)
        for (const auto& d : space) v.push_back(draw(d, seed, i));
      else
        v = motpe_propose(space, history, entries, seed, i);
      double f2 = 0;
      const double f1 = zdt1(v, &f2);
      history.push_back({v, f1});
      entries.push_back({{f1, f2}, 0});
      mo.push_back({f1, f2});
      std::vector<ConfigValue> r;
      for (const auto& d : space) r.push_back(draw(d, seed, i));
      const double r1 = zdt1(r, &f2);
      random.push_back({r1, f2});
    }
    wins += hypervolume(mo, {1.1, 6}) > hypervolume(random, {1.1, 6}) ? 1 : 0;
    const auto again = motpe_propose(space, history, entries, seed, 40);
    EXPECT_EQ(again[0].text, motpe_propose(space, history, entries, seed, 40)[0].text);
  }
  EXPECT_GE(wins, 4) << "multi-objective TPE beat random search in " << wins << " of 5 seeds";
}

TEST(Motpe, TheLogNamesEveryMetricItsConstraintsAndTheVerdict) {
  const SweepSpec spec = parse_grid(
      tpe_grid(
          "  metric: [metrics.f1, metrics.f2]\n  mode: [min, max]\n  constraints: [\"memory_per_rank_mib <= 1\"]\n"),
      "x.yaml");
  SearchTrial t;
  t.values = {ConfigValue{"1.0e-3", "", true}};
  t.source = "motpe (good 1 of 4)";
  t.run_ids = {"00000000000000aa"};
  t.finished = true;
  t.metric_values = {0.25, 3};
  t.constraint_values = {2};
  t.entry = pareto_entry(spec.search, t.metric_values, t.constraint_values);
  EXPECT_EQ(t.entry.loss, (std::vector<double>{0.25, -3}));  // max negated
  EXPECT_DOUBLE_EQ(t.entry.violation, 1.0);
  SearchTrial failed = t;
  failed.metric_values = {NAN, 3};
  failed.entry = pareto_entry(spec.search, failed.metric_values, failed.constraint_values);
  const std::string log = tpe_log(spec, {t, failed});
  EXPECT_CONTAINS(log, " metric=metrics.f1,metrics.f2 mode=min,max constraints=memory_per_rank_mib<=1 keys=");
  EXPECT_CONTAINS(log,
                  " 00000000000000aa metrics.f1=0.25 metrics.f2=3 memory_per_rank_mib=2 infeasible (violation 1)\n");
  EXPECT_CONTAINS(
      log, " metrics.f1=none metrics.f2=3 memory_per_rank_mib=2 worst (failed, diverged or a metric not finite)\n");
}

}  // namespace
}  // namespace sweep
