// The one rule of timing metrics (results/analysis/timing_metrics.h): which figures of a
// record come from the clock, and how compare leaves them out of its bitwise verdict and
// shows them apart.
#include "timing_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "compare.h"    // compare_records, verdict_line, detail_lines
#include "test_util.h"  // EXPECT_CONTAINS

namespace sweep {
namespace {

// Two steps with a checksum row at 0 and 2, and `mfu`, the program's own figure at each
// step and evaluation.
Record record_with_mfu(double mfu) {
  Record r;
  r.status = "completed";
  r.checksums = {{0, 1, {}}, {2, 3, {}}};
  for (int64_t s = 1; s <= 2; ++s) {
    StepMetrics m;
    m.step = s, m.loss = 1.0 / double(s), m.step_time_s = 0.25 * mfu, m.tokens = 8;
    m.tokens_per_s = 8 / m.step_time_s;
    r.steps.push_back(m);
  }
  r.step_extra["mfu"] = {mfu, mfu};
  r.step_extra["accuracy"] = {0.5, 0.75};
  r.evals = {{2, 0.5, 8, 0.125 * mfu}};
  r.eval_extra["mfu"] = {mfu};
  return r;
}

TEST(TimingMetric, TheBuiltInClockFiguresAreTimingInEveryRecord) {
  const Record r;  // declares nothing: a record of any schema version
  for (const char* name : {"step_time_s", "tokens_per_s", "record_time_s", "eval_time_s"})
    EXPECT_TRUE(is_timing_metric(r, name)) << name;
  for (const char* name : {"loss", "grad_norm", "tokens", "eval_loss", "mfu", "eval_mfu", "accuracy"})
    EXPECT_FALSE(is_timing_metric(r, name)) << name;
  EXPECT_TRUE(declared_timing_metrics(r).empty());
}

TEST(TimingMetric, AProgramsOwnMetricIsTimingWhereItsRecordDeclaresIt) {
  Record by_program, by_grid;
  by_program.summary["timing_metrics"] = "mfu tflops";    // run.declare_timing("mfu", "tflops")
  by_grid.environment["program.timing_metrics"] = "mfu";  // the grid's program.timing_metrics
  for (const Record* r : {&by_program, &by_grid}) {
    EXPECT_TRUE(is_timing_metric(*r, "mfu"));
    EXPECT_TRUE(is_timing_metric(*r, "eval_mfu")) << "an evaluation's figure of the same name";
    EXPECT_FALSE(is_timing_metric(*r, "accuracy"));
    EXPECT_FALSE(is_timing_metric(*r, "mfu2"));
  }
  EXPECT_TRUE(is_timing_metric(by_program, "tflops"));
  EXPECT_FALSE(is_timing_metric(by_grid, "tflops"));
  // Both places at once, each name once, sorted.
  by_program.environment["program.timing_metrics"] = " mfu  wall_s ";
  EXPECT_EQ(declared_timing_metrics(by_program), (std::vector<std::string>{"mfu", "tflops", "wall_s"}));
}

TEST(TimingMetric, TheRecordsOwnMathIsNeverTimingWhateverItDeclares) {
  Record r;
  r.summary["timing_metrics"] = "loss grad_norm lr tokens";
  for (const char* name : {"loss", "grad_norm", "lr", "tokens", "eval_loss"})
    EXPECT_FALSE(is_timing_metric(r, name)) << name;
}

TEST(TimingMetric, CompareLeavesADeclaredTimingMetricOutOfTheBitsAndShowsItApart) {
  Record a = record_with_mfu(0.5), b = record_with_mfu(0.25);
  // Undeclared, the clock's figure is the program's own metric like any other: it differs.
  RecordComparison c = compare_records(a, b);
  EXPECT_FALSE(c.bitwise());
  EXPECT_FALSE(c.match());
  EXPECT_EQ(verdict_line(c),
            "training identical bit-for-bit (2 steps, 2 checksums), but the program's own metric mfu differs at "
            "step 1");
  // Declared by either record (the grid's word in one, the program's in the other): timing.
  for (Record* declaring : {&a, &b}) {
    Record x = a, y = b;
    (declaring == &a ? x : y).summary["timing_metrics"] = "mfu";
    c = compare_records(x, y);
    EXPECT_TRUE(c.bitwise()) << verdict_line(c);
    EXPECT_EQ(verdict_line(c), "identical bit-for-bit: 2 steps, 2 checksums, 1 evaluations");
    ASSERT_EQ(c.timing.size(), 5u);
    EXPECT_EQ(c.timing[0].metric, "eval_mfu");
    EXPECT_EQ(c.timing[1].metric, "eval_time_s");
    EXPECT_EQ(c.timing[2].metric, "mfu");
    EXPECT_EQ(c.timing[2].mean_a, 0.5);
    EXPECT_EQ(c.timing[2].mean_b, 0.25);
    EXPECT_EQ(timing_line(c.timing),
              "timing metrics (not compared bit for bit), means: eval_mfu 0.5 vs 0.25, eval_time_s 0.0625 vs "
              "0.03125, mfu 0.5 vs 0.25, step_time_s 0.125 vs 0.0625, tokens_per_s 64 vs 128");
    std::string details;
    for (const auto& line : detail_lines(c)) details += line + "\n";
    EXPECT_CONTAINS(details, timing_line(c.timing));
  }
  // A figure that is not timing still counts: the declaration leaves accuracy in.
  a.summary["timing_metrics"] = "mfu";
  b.step_extra["accuracy"][1] = std::nextafter(0.75, 1.0);
  c = compare_records(a, b);
  EXPECT_FALSE(c.bitwise());
  EXPECT_CONTAINS(verdict_line(c), "the program's own metric accuracy differs at step 2");
}

TEST(TimingMetric, AFigureNoRecordMeasuredIsNotShown) {
  Record a = record_with_mfu(0.5), b = record_with_mfu(0.5);
  // record_time_s is 0 in every row of both (the writers' default): nothing to show.
  for (const TimingFigure& f : compare_records(a, b).timing) EXPECT_NE(f.metric, "record_time_s");
  // A NaN row is left out of the mean; a record without the figure says (none).
  a.steps[0].record_time_s = NAN, a.steps[1].record_time_s = 0.5;
  b.steps.clear(), b.checksums.resize(1), b.step_extra.clear();
  const auto timing = compare_records(a, b).timing;
  std::string line = timing_line(timing);
  EXPECT_CONTAINS(line, "record_time_s 0.5 vs (none)");
}

}  // namespace
}  // namespace sweep
