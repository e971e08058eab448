// Health flags on hand-built records: each flag raised by what it names and not by a
// healthy run or a run just short of its threshold; stored flags win over computing; the
// throughput outlier among a sweep's comparable runs.
#include "run_health.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "run_figures.h"        // run_figures, kept_rows, skipped_step_ranges
#include "telemetry_summary.h"  // telemetry_summary
#include "test_util.h"          // EXPECT_CONTAINS

namespace sweep {
namespace {

// A healthy run of `n` steps: the loss falls from 5 towards 2, nothing skipped or clipped.
Record healthy(size_t n = 100) {
  Record r;
  r.status = "completed";
  r.config = {{"train.clip_norm", "1"}, {"train.precision", "fp32"}};
  for (size_t i = 0; i < n; ++i) {
    StepMetrics m;
    m.step = int64_t(i) + 1;
    m.loss = 2.0 + 3.0 * std::exp(-double(i) / 20.0);
    m.clip_coef = i % 2 ? 1.0 : 0.5;  // half the steps clipped: clipping that works
    m.loss_scale = 1;
    m.tokens = 512;
    m.step_time_s = 0.01;
    r.steps.push_back(m);
  }
  r.summary = {{"stragglers", ""}, {"rank_compute_median_s", "0.005"}};
  return r;
}

std::string names(const Record& r) { return health_names(compute_health(r)); }

TEST(RunHealth, AHealthyRunRaisesNoFlag) {
  EXPECT_EQ(names(healthy()), "");
  EXPECT_EQ(names(healthy(1)), "");
  Record empty;
  EXPECT_EQ(names(empty), "");
}

TEST(RunHealth, MostStepsSkippedIsFlagged) {
  Record r = healthy(20);
  r.config["train.precision"] = "fp16";
  for (size_t i = 0; i < 9; ++i) r.steps[i].skipped = 1;
  EXPECT_EQ(names(r), "");  // 9 of 20: below half
  r.steps[9].skipped = 1;
  const auto flags = compute_health(r);
  ASSERT_EQ(health_names(flags), "skipped_steps");
  EXPECT_NE(flags[0].detail.find("10 of 20 steps (50%)"), std::string::npos) << flags[0].detail;
  EXPECT_NE(flags[0].detail.find("fp16 loss scale"), std::string::npos) << flags[0].detail;
  // Judged over at least 10 steps: a short run that skipped its first steps is not.
  Record short_run = healthy(9);
  for (auto& s : short_run.steps) s.skipped = 1;
  EXPECT_EQ(names(short_run), "");
}

TEST(RunHealth, ANonFiniteLossOnAnyStepIsFlagged) {
  Record r = healthy();
  r.steps[40].loss = NAN;
  r.steps[41].loss = INFINITY;
  const auto flags = compute_health(r);
  ASSERT_EQ(health_names(flags), "nonfinite_loss");
  EXPECT_NE(flags[0].detail.find("2 of 100 steps"), std::string::npos) << flags[0].detail;
  EXPECT_NE(flags[0].detail.find("at step 41"), std::string::npos) << flags[0].detail;
  // Where train.on_nan: skip_step saw the first one go non-finite (the record's
  // nonfinite_skips), in the flag's sentence; a list naming other steps only adds nothing.
  r.summary["nonfinite_skips"] =
      "4: non-finite loss (rank 1, elsewhere) | 41: non-finite loss (rank 2, its micro-batch 1)";
  EXPECT_EQ(compute_health(r)[0].detail,
            "2 of 100 steps had a non-finite loss, the first at step 41: non-finite loss (rank 2, its micro-batch 1).");
  r.summary["nonfinite_skips"] = "141: non-finite loss (rank 2)";
  EXPECT_EQ(compute_health(r)[0].detail, flags[0].detail);
}

TEST(RunHealth, Fp16OverflowsAfterCalibrationAreFlaggedWithWhereTheFirstWas) {
  Record r = healthy();
  r.config["train.precision"] = "fp16";
  double scale = 65536;
  for (auto& s : r.steps) s.loss_scale = scale;
  const auto overflow = [&](size_t i) {  // the scaler skips step i + 1 and halves its scale
    r.steps[i].skipped = 1, r.steps[i].grad_norm = INFINITY;
    for (size_t k = i + 1; k < r.steps.size(); ++k) r.steps[k].loss_scale = r.steps[i].loss_scale / 2;
  };
  overflow(0), overflow(1);  // calibrating: steps 1-2, before any update
  EXPECT_EQ(names(r), "");
  overflow(59);  // one overflow in 100 steps: 1%, the scaler's routine
  EXPECT_EQ(names(r), "");
  overflow(60);  // and the next step too: two in a row
  r.summary["fp16_overflows"] = "60: rank 1, its micro-batch 0; first non-finite gradient: embed[3] = inf | 61: x";
  const auto flags = compute_health(r);
  ASSERT_EQ(health_names(flags), "fp16_overflow");
  EXPECT_EQ(flags[0].detail,
            "2 of 100 steps (2%) skipped by the fp16 loss scaler after it calibrated, 2 in a row, the first at step 60 "
            "(scale 1.638e+04 -> 8192): rank 1, its micro-batch 0; first non-finite gradient: embed[3] = inf; 2 more "
            "while it calibrated.");
  // Apart, over a short run: more than 1% of its steps.
  Record short_run = healthy(8);
  short_run.config["train.precision"] = "fp16";
  short_run.steps[4].skipped = 1, short_run.steps[4].grad_norm = INFINITY;
  EXPECT_EQ(names(short_run), "fp16_overflow");
  // A skip with a non-finite loss is nonfinite_loss's, not the scaler's.
  short_run.steps[4].loss = NAN;
  EXPECT_EQ(names(short_run), "nonfinite_loss");
}

TEST(RunHealth, ANonFiniteHeldOutLossIsFlaggedForItIsTheObjective) {
  Record r = healthy();
  r.evals = {{50, 2.5, 100, 0.1}, {100, INFINITY, 100, 0.1}};
  const auto flags = compute_health(r);
  ASSERT_EQ(health_names(flags), "nonfinite_loss");
  EXPECT_EQ(flags[0].detail, "1 of 2 evaluations had a non-finite held-out loss, the first at step 100.");
}

TEST(RunHealth, ALossEndingAboveItsStartIsFlagged) {
  Record r = healthy(60);
  for (auto& s : r.steps) s.loss = 3.0 + 0.01 * double(s.step);  // rising
  const auto flags = compute_health(r);
  ASSERT_EQ(health_names(flags), "loss_rose");
  EXPECT_NE(flags[0].detail.find("last 20 steps"), std::string::npos) << flags[0].detail;
  // A loss that blew up at once and came partway down under its schedule (lr 10) ended
  // above its first step's, though below the mean of its first 20.
  for (auto& s : r.steps) s.loss = s.step == 1 ? 4.1 : 3000.0 - 45.0 * double(s.step);
  EXPECT_EQ(names(r), "loss_rose");
  // A flat loss does not end above its start.
  for (auto& s : r.steps) s.loss = 3.0;
  EXPECT_EQ(names(r), "");
  // Windows of half the run when it is shorter than 40 steps: last 6 against first 6.
  Record short_run = healthy(12);
  const double losses[] = {5, 4, 3, 3, 3, 3, 4.5, 4.5, 4.5, 4.5, 4.5, 4.5};
  for (size_t i = 0; i < 12; ++i) short_run.steps[i].loss = losses[i];
  EXPECT_EQ(names(short_run), "loss_rose");
  for (size_t i = 6; i < 12; ++i) short_run.steps[i].loss = 3.4;
  EXPECT_EQ(names(short_run), "");
  // Fewer than kHealthMinSteps steps are not judged: two steps are two batches, noise.
  Record two = healthy(2);
  two.steps[1].loss = two.steps[0].loss + 1;
  EXPECT_EQ(names(two), "");
}

TEST(RunHealth, StepsTheSpikePolicyLeftOutCountInNoFigureOrFlag) {
  Record r = healthy(30);
  for (auto& s : r.steps)
    if (s.step >= 28) s.loss = 50;  // a spike over steps 28-30, rewound
  EXPECT_EQ(names(r), "loss_rose loss_spike");
  r.summary["spike_skipped_steps"] = "28-30";
  EXPECT_EQ(names(r), "loss_spike");  // the spike happened; the trend is over what was kept
  const RunFigures f = run_figures(r);
  EXPECT_EQ(f.left_out_steps, 3u);
  EXPECT_EQ(f.train_loss_end_steps, 20u);
  EXPECT_LT(f.train_loss_end, 5.0);  // the mean of steps 8-27, not the spike's
  EXPECT_DOUBLE_EQ(f.objective, f.train_loss_end);
  EXPECT_NE(figures_text(f).find("(mean of last 20 steps; 3 left out by the spike policy)"), std::string::npos)
      << figures_text(f);
  EXPECT_EQ(kept_rows(r).size(), 27u);
  r.summary["spike_skipped_steps"] = "2 5-6 28-30";  // skips and a rewind
  EXPECT_EQ(kept_rows(r).size(), 24u);
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(skipped_step_ranges(r), (Ranges{{2, 2}, {5, 6}, {28, 30}}));
  // What the figures and the chart marks both read: a malformed tail is left out, never
  // read as step 0 or as a range without an end.
  r.summary["spike_skipped_steps"] = "2 5- 9";
  EXPECT_EQ(skipped_step_ranges(r), (Ranges{{2, 2}}));
  r.summary["spike_skipped_steps"] = "x 3";
  EXPECT_EQ(skipped_step_ranges(r), Ranges{});
}

// Small-batch noise: +-10% of the loss, in a fixed pseudo-random pattern.
Record noisy(size_t n = 100) {
  Record r = healthy(n);
  uint32_t x = 12345;
  for (auto& m : r.steps) {
    x = x * 1664525u + 1013904223u;
    m.loss *= 1.0 + 0.2 * (double(x >> 8) / double(1u << 24) - 0.5);
  }
  return r;
}

TEST(RunHealth, ASpikesFlagNamesTheTensorsWhoseGradientNormsLedIt) {
  Record r = noisy();
  r.steps[59].loss *= 3;  // step 60
  r.params = {{"a", {4}, 0, 4}, {"b", {4}, 4, 4}, {"c", {4}, 8, 4}, {"d", {4}, 12, 4}};
  r.telemetry = {{50, "every", {1, 1, 1, 1}, {}}, {55, "every", {1, 2, 1, 0}, {}}, {60, "spike", {3, 50, NAN, 0}, {}}};
  // Against each tensor's median before (a: 1, b: 1.5, c: 1, d: 0): c non-finite, then b
  // 33x, then a 3x; d, which stayed 0, is last.
  EXPECT_EQ(spike_leading_tensors(r, 60),
            "against their median over the 2 telemetry rows before it: c (non-finite), b (33.33x), a (3x)");
  EXPECT_EQ(spike_leading_tensors(r, 60, 1),
            "against their median over the 2 telemetry rows before it: c (non-finite)");
  const auto flags = compute_health(r);
  // c's NaN norm is a non-finite gradient too (the step's loss is finite).
  ASSERT_EQ(health_names(flags), "nonfinite_gradient loss_spike");
  EXPECT_CONTAINS(flags[1].detail,
                  "; the gradient norms that rose most at that step, against their median over the 2 "
                  "telemetry rows before it: c (non-finite), b (33.33x), a (3x)");
  // No row before the spike: the largest norms; no row at the spike: nothing said.
  r.telemetry.erase(r.telemetry.begin(), r.telemetry.begin() + 2);
  EXPECT_EQ(spike_leading_tensors(r, 60),
            "with no telemetry row before it, the largest: c (non-finite), b (norm 50), a (norm 3)");
  r.telemetry[0].step = 61;
  EXPECT_EQ(spike_leading_tensors(r, 60), "");
  EXPECT_EQ(compute_health(r)[1].detail.find("gradient norms"), std::string::npos);
}

TEST(RunHealth, ANonFiniteTensorInATelemetryRowIsANonFiniteGradientNamedByTensor) {
  // A script that logs no grad_norm (NaN in /metrics) but took telemetry rows
  // (run.gradients()): the row at step 27 holds an inf norm in tensor c.
  Record r = noisy();
  for (auto& s : r.steps) s.grad_norm = NAN;
  r.params = {{"a", {4}, 0, 4}, {"b", {4}, 4, 4}, {"c", {4}, 8, 4}, {"d", {4}, 12, 4}};
  r.telemetry = {{20, "every", {1, 1, 1, 1}, {}}, {27, "nonfinite", {1, 2, INFINITY, NAN}, {}}};
  auto flags = compute_health(r);
  ASSERT_EQ(health_names(flags), "nonfinite_gradient");
  EXPECT_EQ(flags[0].detail,
            "1 of 100 steps had a finite loss but a non-finite gradient, the first at step 27, first in "
            "tensor c (its /telemetry row).");
  // A failure that names the tensor already is not repeated; finite rows raise nothing.
  r.failure = "non-finite gradient at step 27 (first non-finite gradient: c[2])";
  EXPECT_EQ(compute_health(r)[0].detail.find("its /telemetry row"), std::string::npos);
  r.failure.clear();
  r.telemetry[1].tensor_grad_norm = {1, 2, 3, 4};
  EXPECT_EQ(names(r), "");
}

TEST(RunHealth, TheLowerMedianIsTheSmallerOfTwoAndSaysWhatItWasToldForNone) {
  EXPECT_EQ(lower_median({3, 1}), 1);
  EXPECT_EQ(lower_median({5, 1, 3}), 3);
  EXPECT_EQ(lower_median({4, 1, 3, 2}), 2);
  EXPECT_EQ(lower_median({}), 0);
  EXPECT_TRUE(std::isnan(lower_median({}, NAN)));
}

TEST(TelemetrySummary, SaysEachRanksOwnNormTheLargestTensorsAndEachLayersLoadAndEntropy) {
  Record r;
  EXPECT_TRUE(telemetry_summary(r).empty()) << "a record without telemetry says nothing";
  r.params = {{"a", {4}, 0, 4}, {"b", {4}, 4, 4}, {"c", {4}, 8, 4}};
  r.rank_grad_norm = {{1, 1, NAN}, {1, 1, 3}, {2, 1, 3}, {NAN, NAN, NAN}};
  r.moe_layers = 2, r.moe_experts = 4;
  r.telemetry = {{10, "every", {1, 2, 3}, {8, 8, 8, 8, 32, 0, 0, 0}},
                 {14, "spike", {1, 2, 3}, {8, 8, 8, 8, 32, 0, 0, 0}},
                 {20, "every,last", {0.5, NAN, 0.25}, {8, 8, 8, 8, 32, 0, 0, 0}}};
  const auto lines = telemetry_summary(r, 2);
  ASSERT_EQ(lines.size(), 4u) << ::testing::PrintToString(lines);
  // Rank medians over the steps that gave one: 1, 1, 3; rank 2 is 3x the lower median.
  EXPECT_EQ(lines[0], "rank gradient norms: median 1, 1, 3 (largest over the lower median of the ranks: 3x, rank 2)");
  // A non-finite norm counts as the largest.
  EXPECT_EQ(lines[1], "rows: 3 (2 every, 1 last, 1 spike); largest tensor gradient norms at step 20: b nan, a 0.5");
  // Layer 0 spreads its 96 tokens evenly; layer 1 sends all to one expert.
  EXPECT_EQ(lines[2], "routing layer 0: 96 tokens, load max/mean 1 (expert 0), entropy 1 of the most");
  EXPECT_EQ(lines[3], "routing layer 1: 96 tokens, load max/mean 4 (expert 0), entropy 0 of the most");
}

TEST(RunHealth, ALossSpikeAboveTheRunningMedianIsFlaggedWithItsStepAndSize) {
  EXPECT_EQ(names(noisy()), "") << "noise of +-10% is no spike";
  Record r = noisy();
  r.steps[59].loss *= 3;    // step 60
  r.steps[80].loss *= 1.6;  // step 81
  const auto flags = compute_health(r);
  ASSERT_EQ(health_names(flags), "loss_spike");
  EXPECT_EQ(flags[0].detail.rfind("the loss spiked at step 60: ", 0), 0u) << flags[0].detail;
  EXPECT_CONTAINS(flags[0].detail, " over the 20 finite losses before it (+");
  EXPECT_CONTAINS(flags[0].detail, "; 2 steps in all were that far above their running median, the largest at step 60");
  // One spike, and a jump of 15%: under the 20% that a spike must rise by.
  r = noisy();
  r.steps[59].loss *= 3;
  r.steps[80].loss = 1.15 * 2.0;
  const auto one = compute_health(r);
  ASSERT_EQ(health_names(one), "loss_spike");
  EXPECT_EQ(one[0].detail.rfind("the loss spiked at step 60: ", 0), 0u) << one[0].detail;
  EXPECT_EQ(one[0].detail.find("in all"), std::string::npos) << one[0].detail;
  // The first steps have too little history to judge; a non-finite loss is not a spike.
  r = noisy();
  r.steps[5].loss *= 10;
  r.steps[70].loss = NAN;
  EXPECT_EQ(names(r), "nonfinite_loss");
}

TEST(RunHealth, ClippingOnNearlyEveryStepIsFlagged) {
  Record r = healthy(20);
  for (auto& s : r.steps) s.clip_coef = 0.3;
  r.steps[0].clip_coef = r.steps[1].clip_coef = 1.0;  // 18 of 20: 90%
  const auto flags = compute_health(r);
  ASSERT_EQ(health_names(flags), "clipping");
  EXPECT_NE(flags[0].detail.find("18 of 20 applied steps (90%)"), std::string::npos) << flags[0].detail;
  r.steps[2].clip_coef = 1.0;  // 17 of 20
  EXPECT_EQ(names(r), "");
  // Without clipping configured, a coefficient below 1 cannot mean a clip.
  for (auto& s : r.steps) s.clip_coef = 0.3;
  r.config["train.clip_norm"] = "0";
  EXPECT_EQ(names(r), "");
  // Over at least 10 applied steps: skipped steps do not count.
  r.config["train.clip_norm"] = "1";
  Record few = healthy(10);
  for (auto& s : few.steps) s.clip_coef = 0.3;
  EXPECT_EQ(names(few), "clipping");
  few.steps[0].skipped = 1;
  EXPECT_EQ(names(few), "");
}

TEST(RunHealth, HeldOutLossRisingWhileTrainLossFallsIsFlagged) {
  Record r = healthy(100);  // the training loss falls throughout
  r.evals = {{25, 3.0, 100, 0}, {50, 2.9, 100, 0}, {75, 3.0, 100, 0}, {100, 3.2, 100, 0}};
  const auto flags = compute_health(r);
  ASSERT_EQ(health_names(flags), "eval_rising");
  EXPECT_NE(flags[0].detail.find("from 2.9 at step 50 to 3.2 at step 100"), std::string::npos) << flags[0].detail;
  // Within the 1% margin of the best: noise, not a rise.
  r.evals.back().loss = 2.9 * 1.009;
  EXPECT_EQ(names(r), "");
  // A rise the training loss shares is not overfitting (the training loss rose too).
  r.evals.back().loss = 3.2;
  for (auto& s : r.steps)
    if (s.step > 50) s.loss = 3.0 + 0.01 * double(s.step);
  EXPECT_EQ(health_names(compute_health(r)).find("eval_rising"), std::string::npos);
  // Needs three evaluations.
  Record two = healthy(100);
  two.evals = {{50, 2.9, 100, 0}, {100, 3.2, 100, 0}};
  EXPECT_EQ(names(two), "");
}

TEST(RunHealth, AStragglerRankIsFlagged) {
  Record r = healthy();
  r.summary["stragglers"] = "1";
  r.summary["rank_compute_median_s"] = "0.01,0.05";
  const auto flags = compute_health(r);
  ASSERT_EQ(health_names(flags), "straggler");
  EXPECT_NE(flags[0].detail.find("rank 1 "), std::string::npos) << flags[0].detail;
  EXPECT_NE(flags[0].detail.find("0.01,0.05"), std::string::npos) << flags[0].detail;
}

// The sentence gives how much longer each straggler computed than its peers in the same
// steps (summary rank_compute_ratio, the trainer's judge_stragglers).
TEST(RunHealth, AStragglersSentenceSaysHowMuchLongerThanItsPeers) {
  Record r = healthy();
  r.summary["stragglers"] = "1";
  r.summary["rank_compute_median_s"] = "0.01,0.05";
  r.summary["rank_compute_ratio"] = "1,4.87";
  const auto flags = compute_health(r);
  ASSERT_EQ(health_names(flags), "straggler");
  EXPECT_NE(flags[0].detail.find("rank 1 computed more slowly than its peers in the same steps (4.87x)"),
            std::string::npos)
      << flags[0].detail;
}

// [step][rank] compute times: `slow` ranks take `factor` times as long in the steps of
// [from, to), on top of a time every rank shares that changes from step to step.
std::vector<std::vector<double>> compute_times(size_t steps, size_t world, std::vector<size_t> slow, double factor,
                                               size_t from, size_t to) {
  std::vector<std::vector<double>> out(steps, std::vector<double>(world));
  for (size_t s = 0; s < steps; ++s)
    for (size_t r = 0; r < world; ++r) {
      const double shared = 0.05 * double(1 + s % 7);  // the machine's load, the run's phase
      const bool hit = s >= from && s < to && std::find(slow.begin(), slow.end(), r) != slow.end();
      out[s][r] = shared * (1 + 0.01 * double(r)) * (hit ? factor : 1.0);
    }
  return out;
}

TEST(RunHealth, AStragglerIsJudgedAgainstItsPeersInTheSameSteps) {
  // Rank 2 of 4 takes 1.5x its peers in every step: a straggler, at the ratio it took.
  StragglerJudgement j = judge_stragglers(compute_times(20, 4, {2}, 1.5, 0, 20));
  EXPECT_EQ(j.ranks, std::vector<int>{2});
  ASSERT_EQ(j.ratio.size(), 4u);
  EXPECT_NEAR(j.ratio[2], 1.5 * 1.02 / 1.01, 1e-9);
  EXPECT_NEAR(j.ratio[0], 1 / 1.01, 1e-9);
  // A configurable threshold: at 1.6 it is not one.
  EXPECT_TRUE(judge_stragglers(compute_times(20, 4, {2}, 1.5, 0, 20), 1.6).ranks.empty());
  // Slow in the first 8 of 20 steps only (a burst of load on its core): its median over
  // the steps is its peers'.
  j = judge_stragglers(compute_times(20, 4, {2}, 3.0, 0, 8));
  EXPECT_TRUE(j.ranks.empty()) << j.ratio[2];
  // Every rank slowed together in some steps: no rank's fault.
  j = judge_stragglers(compute_times(20, 4, {0, 1, 2, 3}, 3.0, 5, 15));
  EXPECT_TRUE(j.ranks.empty());
  // Below kStragglerMinS of excess a ratio is scheduling noise on a small model.
  std::vector<std::vector<double>> tiny(20, {0.001, 0.001, 0.003});
  EXPECT_TRUE(judge_stragglers(tiny).ranks.empty());
  // One rank, no steps, or steps without a finite time: nothing to judge.
  EXPECT_TRUE(judge_stragglers({{0.1}, {0.1}}).ratio.empty());
  EXPECT_TRUE(judge_stragglers({}).ratio.empty());
  EXPECT_TRUE(judge_stragglers({{0.1, NAN}}).ratio.empty());
}

// A rank slowed because other processes shared its cores is still a straggler (it was
// slower), and the sentence says why: its wait for a CPU, far above its peers'.
TEST(RunHealth, AStragglerThatWaitedForACpuIsSaidToHaveSharedItsCores) {
  Record r = healthy();
  r.summary["stragglers"] = "1";
  r.summary["rank_compute_median_s"] = "0.01,0.05";
  r.summary["rank_runqueue_share"] = "0.02,0.47";
  auto flags = compute_health(r);
  ASSERT_EQ(health_names(flags), "straggler") << "sharing cores is not itself a flag";
  EXPECT_NE(flags[0].detail.find("; rank 1 waited for a CPU 47% of its step time against 2% typical: other "
                                 "processes shared its cores."),
            std::string::npos)
      << flags[0].detail;
  EXPECT_DOUBLE_EQ(runqueue_share(r), 0.47);
  // A straggler whose wait is like its peers' was slow for another reason: nothing added.
  r.summary["rank_runqueue_share"] = "0.02,0.05";
  flags = compute_health(r);
  EXPECT_EQ(flags[0].detail.find("waited for a CPU"), std::string::npos) << flags[0].detail;
  // A record that does not say, or says something that does not read: unknown.
  r.summary.erase("rank_runqueue_share");
  EXPECT_TRUE(std::isnan(runqueue_share(r)));
  r.summary["rank_runqueue_share"] = "0.02,x";
  EXPECT_TRUE(std::isnan(runqueue_share(r)));
  EXPECT_EQ(compute_health(r)[0].detail.find("waited for a CPU"), std::string::npos);
}

TEST(RunHealth, AStragglerIsNamedWithItsHostWhenTheRecordNamesThem) {
  Record r = healthy();
  r.summary["stragglers"] = "0,2";
  r.summary["rank_compute_median_s"] = "0.09,0.01,0.08";
  r.environment["rank_hosts"] = "node-a,node-a,node-b";
  const auto flags = compute_health(r);
  ASSERT_EQ(health_names(flags), "straggler");
  EXPECT_NE(flags[0].detail.find("ranks 0 (node-a),2 (node-b) computed"), std::string::npos) << flags[0].detail;
}

TEST(RunHealth, StoredFlagsWinOverComputingThem) {
  Record r = healthy();
  r.steps[3].loss = NAN;  // would be flagged if computed
  for (const auto& [k, v] : health_attributes({})) r.summary[k] = v;
  EXPECT_TRUE(health_stored(r));
  EXPECT_TRUE(run_health(r).empty());
  const std::vector<HealthFlag> stored = {{"loss_rose", "one sentence."}, {"clipping", "another."}};
  const auto attrs = health_attributes(stored);
  ASSERT_EQ(attrs.size(), 3u);
  EXPECT_EQ(attrs[0], (std::pair<std::string, std::string>{"health", "loss_rose clipping"}));
  for (const auto& [k, v] : attrs) r.summary[k] = v;
  const auto back = run_health(r);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].name, "clipping");
  EXPECT_EQ(back[1].detail, "another.");
  // A record without the attribute (schema 1-2, other writers) has them computed.
  r.summary.erase("health");
  EXPECT_FALSE(health_stored(r));
  EXPECT_EQ(health_names(run_health(r)), "nonfinite_loss");
}

TEST(RunHealth, AThroughputOutlierAmongComparableRunsIsFlagged) {
  std::vector<Record> runs;
  for (double t : {0.01, 0.011, 0.009, 0.025}) {  // tokens/s 51200, 46545, 56889, 20480
    Record r = healthy(30);
    for (auto& s : r.steps) s.step_time_s = t;
    r.params = {{"w", {16, 16}, 0, 256}};
    runs.push_back(r);
  }
  Record other = healthy(30);  // other work per step: not comparable, never flagged
  for (auto& s : other.steps) s.step_time_s = 1.0, s.tokens = 1024;
  runs.push_back(other);
  std::vector<RunFigures> figs;
  figs.reserve(runs.size());
  for (const auto& r : runs) figs.push_back(run_figures(r));
  const auto out = sweep_health(runs, figs);
  EXPECT_EQ(health_names(out[0]) + health_names(out[1]) + health_names(out[2]), "");
  ASSERT_EQ(health_names(out[3]), "throughput_outlier");
  EXPECT_NE(out[3].front().detail.find("of the 4 runs"), std::string::npos) << out[3].front().detail;
  EXPECT_EQ(health_names(out[4]), "");
  // Just above half the median: not an outlier.
  for (auto& s : runs[3].steps) s.step_time_s = 0.0195;
  figs[3] = run_figures(runs[3]);
  EXPECT_TRUE(throughput_outliers(runs, figs)[3].empty());
  // Fewer than three comparable runs: no typical speed to judge by.
  for (auto& s : runs[3].steps) s.step_time_s = 0.05;
  figs[3] = run_figures(runs[3]);
  runs.erase(runs.begin(), runs.begin() + 2), figs.erase(figs.begin(), figs.begin() + 2);
  EXPECT_TRUE(throughput_outliers(runs, figs)[1].empty());
}

// bf16 on a CPU is slower by design, and a run whose cores were shared was measured under
// contention: neither is judged against fp32 runs on cores of their own, nor their peer.
TEST(RunHealth, ThroughputIsJudgedOnlyAmongRunsThatShouldMatchOnCoresOfTheirOwn) {
  std::vector<Record> runs;
  for (double t : {0.01, 0.011, 0.009, 0.025, 0.025, 0.025}) {
    Record r = healthy(30);
    for (auto& s : r.steps) s.step_time_s = t;
    r.params = {{"w", {16, 16}, 0, 256}};
    r.config["train.precision"] = "fp32";
    runs.push_back(r);
  }
  runs[3].config["train.precision"] = "bf16";            // slower by design
  runs[4].summary["rank_runqueue_share"] = "0.02,0.67";  // its second rank waited for a CPU 67% of the time
  runs[5].environment["blas.kernel"] = "Haswell";        // another kernel: another speed
  std::vector<RunFigures> figs;
  for (const auto& r : runs) figs.push_back(run_figures(r));
  const auto out = throughput_outliers(runs, figs);
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_TRUE(out[i].empty()) << i << ": " << out[i].front().detail;
  // The same run on cores of its own, in fp32 with the others' kernel, is one.
  runs[4].summary.erase("rank_runqueue_share");
  figs[4] = run_figures(runs[4]);
  const auto judged = throughput_outliers(runs, figs);
  ASSERT_EQ(health_names(judged[4]), "throughput_outlier");
  EXPECT_NE(judged[4].front().detail.find("of the 4 runs of this sweep that should run as fast, on cores of their own "
                                          "(256 parameters, "),
            std::string::npos)
      << judged[4].front().detail;
  EXPECT_NE(judged[4].front().detail.find("train.precision fp32"), std::string::npos);
}

// Where the report marks a run's spike decisions on its loss curve: each sentence's step and
// the left-out range that ends there (a rewind's undone steps), or the step alone (a skip).
TEST(RunHealth, SpikeMarksPairEachDecisionWithTheStepsItLeftOut) {
  Record r = healthy(30);
  r.summary["spike_decisions"] = "3";
  r.summary["spike_decision.1"] =
      "step 15: the loss spiked to 26.57 against a median of 3.889; rewound to the checkpoint after step 12, skipping "
      "the global batches of steps 13-15 (2 updates undone)";
  r.summary["spike_decision.2"] = "step 20: the loss spiked to 9 against a median of 3; its update skipped";
  r.summary["spike_decision.3"] = "a sentence of another writer";
  r.summary["spike_skipped_steps"] = "13-15 20";
  const std::vector<SpikeMark> marks = spike_marks(r);
  ASSERT_EQ(marks.size(), 2u);
  EXPECT_EQ(marks[0].step, 15);
  EXPECT_EQ(marks[0].left_out_from, 13);
  EXPECT_EQ(marks[0].text, r.summary["spike_decision.1"]);
  EXPECT_EQ(marks[1].step, 20);
  EXPECT_EQ(marks[1].left_out_from, 20);
  // A range that only contains the step, ending later, is another decision's.
  r.summary["spike_skipped_steps"] = "13-16 20";
  EXPECT_EQ(spike_marks(r)[0].left_out_from, 15);
  r.summary.erase("spike_decisions");
  EXPECT_TRUE(spike_marks(r).empty());
}

}  // namespace
}  // namespace sweep
