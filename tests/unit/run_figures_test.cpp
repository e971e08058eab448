// A run's summary figures: the training loss at its end, the held-out losses, throughput
// and the objective a sweep ranks its runs by.
#include "run_figures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace sweep {
namespace {

Record with_losses(const std::vector<double>& losses) {
  Record r;
  r.status = "completed";
  for (size_t i = 0; i < losses.size(); ++i) {
    StepMetrics m;
    m.step = int64_t(i) + 1;
    m.loss = losses[i];
    r.steps.push_back(m);
  }
  return r;
}

TEST(RunFigures, TheTrainLossIsTheMeanOfTheLastTwentyFiniteLosses) {
  std::vector<double> losses(30);
  for (size_t i = 0; i < losses.size(); ++i) losses[i] = double(i);  // 0 .. 29
  const RunFigures f = run_figures(with_losses(losses));
  EXPECT_EQ(f.train_loss_end_steps, 20u);
  EXPECT_DOUBLE_EQ(f.train_loss_end, 19.5);  // mean of 10 .. 29
  EXPECT_DOUBLE_EQ(f.final_loss, 29);
  EXPECT_DOUBLE_EQ(f.best_loss, 0);
  // Without evaluations the objective is that mean.
  EXPECT_EQ(f.objective_name, "final train loss");
  EXPECT_DOUBLE_EQ(f.objective, 19.5);
  EXPECT_TRUE(std::isnan(f.final_eval_loss));
  EXPECT_TRUE(std::isnan(f.best_eval_loss));
  EXPECT_EQ(f.best_eval_step, -1);
}

TEST(RunFigures, AShortRunAveragesAllItsStepsAndSkipsNonFiniteLosses) {
  const RunFigures f = run_figures(with_losses({4.0, NAN, 2.0, INFINITY}));
  EXPECT_EQ(f.train_loss_end_steps, 4u);
  EXPECT_DOUBLE_EQ(f.train_loss_end, 3.0);
  EXPECT_TRUE(std::isinf(f.final_loss));  // the last step as recorded
  EXPECT_DOUBLE_EQ(f.best_loss, 2.0);
  const RunFigures none = run_figures(with_losses({}));
  EXPECT_TRUE(std::isnan(none.train_loss_end));
  EXPECT_TRUE(std::isnan(none.objective));
  EXPECT_TRUE(std::isnan(none.tokens_per_s_median));
}

TEST(RunFigures, FiniteLossesNearTheLargestDoubleHaveAFiniteMean) {
  // Their sum overflows; the objective a sweep ranks by must not turn into inf.
  const RunFigures f = run_figures(with_losses({1.5e308, 1.7e308, 1.6e308}));
  EXPECT_TRUE(std::isfinite(f.train_loss_end));
  EXPECT_NEAR(f.train_loss_end / 1.6e308, 1.0, 1e-12);
  EXPECT_TRUE(std::isfinite(run_figures(with_losses({-1.7e308, 1.7e308, 1.7e308})).objective));
}

TEST(RunFigures, WithEvaluationsTheObjectiveIsTheFinalEvalLoss) {
  Record r = with_losses({5, 4, 3, 2});
  r.evals = {{2, 3.5, 100, 0.1}, {3, 3.25, 100, 0.1}, {4, 3.75, 100, 0.1}};
  const RunFigures f = run_figures(r);
  EXPECT_DOUBLE_EQ(f.final_eval_loss, 3.75);
  EXPECT_DOUBLE_EQ(f.best_eval_loss, 3.25);
  EXPECT_EQ(f.best_eval_step, 3);
  EXPECT_EQ(f.objective_name, "final eval loss");
  EXPECT_DOUBLE_EQ(f.objective, 3.75);
  EXPECT_NE(figures_text(f).find("final eval loss 3.75 (best 3.25 at step 3)"), std::string::npos) << figures_text(f);
  // A non-finite final evaluation leaves the objective unknown, not the best one.
  r.evals.back().loss = NAN;
  EXPECT_TRUE(std::isnan(run_figures(r).objective));
  EXPECT_EQ(run_figures(r).best_eval_step, 3);
}

// One rule for every reader: a diverged, failed or interrupted run's figures are partial,
// so it has no objective and says why.
TEST(RunFigures, OnlyACompletedOrStoppedRunHasAnObjective) {
  Record r = with_losses({5, 4, 3, 2});
  for (const char* status : {"diverged", "failed", "interrupted", "running"}) {
    r.status = status;
    const RunFigures f = run_figures(r);
    EXPECT_TRUE(std::isnan(f.objective)) << status;
    EXPECT_EQ(f.objective_name, std::string("none (") + status + ")");
    EXPECT_DOUBLE_EQ(f.train_loss_end, 3.5);  // the figures themselves are still there
  }
  r.status = "stopped";
  EXPECT_DOUBLE_EQ(run_figures(r).objective, 3.5);
}

// A program that evaluates at the top of its next iteration, stopped at a rung (step 4),
// has only the evaluation of step 0: no "final" eval loss, and its objective is the
// training loss at its rung. A completed run's older last evaluation is named by its step.
TEST(RunFigures, AnEvaluationOlderThanTheLastStepIsNeverCalledFinal) {
  Record r = with_losses({5, 4, 3, 2});
  r.evals = {{0, 5.5, 100, 0.1}};
  r.status = "stopped";
  RunFigures f = run_figures(r);
  EXPECT_DOUBLE_EQ(f.objective, 3.5);
  EXPECT_EQ(f.objective_name, "final train loss");
  EXPECT_EQ(figures_text(f).find("final eval"), std::string::npos) << figures_text(f);
  EXPECT_NE(figures_text(f).find("last eval loss 5.5 at step 0"), std::string::npos) << figures_text(f);
  r.status = "completed";
  f = run_figures(r);
  EXPECT_DOUBLE_EQ(f.objective, 5.5);
  EXPECT_EQ(f.objective_name, "last eval loss (step 0)");
  r.evals.push_back({4, 2.5, 100, 0.1});  // at the last step: final, stopped or not
  r.status = "stopped";
  EXPECT_EQ(run_figures(r).objective_name, "final eval loss");
  EXPECT_DOUBLE_EQ(run_figures(r).objective, 2.5);
}

TEST(RunFigures, TokensPerSecondMedianIsNotMovedByASlowStep) {
  Record r = with_losses({3, 3, 3, 3, 3});
  const double times[] = {10.0, 1.0, 1.0, 2.0, 0.5};  // the first step compiles, warms caches
  for (size_t i = 0; i < r.steps.size(); ++i) r.steps[i].tokens = 1000, r.steps[i].step_time_s = times[i];
  const RunFigures f = run_figures(r);
  EXPECT_DOUBLE_EQ(f.tokens_per_s_median, 1000.0);
  EXPECT_DOUBLE_EQ(f.tokens_per_s, 5000.0 / 14.5);
}

}  // namespace
}  // namespace sweep
