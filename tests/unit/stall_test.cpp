// results/analysis/stall.h: a running run that has recorded no step for longer than
// max(30 s, 5 x its recent step time) makes no progress; one that is merely slow does.
#include "stall.h"

#include <gtest/gtest.h>

namespace sweep {
namespace {

RecordProgress progress(double written_at, double step_time_s, int64_t step = 10) {
  RecordProgress p;
  p.step = step, p.steps = 100, p.written_at = written_at, p.step_time_s = step_time_s;
  return p;
}

TEST(Stall, AFastRunStallsAfterThirtySecondsWithoutAStep) {
  const double t = 1.7e9;
  EXPECT_EQ(stall_threshold_s(progress(t, 0.05)), 30);
  EXPECT_EQ(stalled_for_s(progress(t, 0.05), t + 29), 0);
  EXPECT_EQ(stalled_for_s(progress(t, 0.05), t + 47), 47);
}

TEST(Stall, ASlowRunHasFiveOfItsStepsBeforeItIsSaidToStall) {
  const double t = 1.7e9;
  EXPECT_EQ(stall_threshold_s(progress(t, 20)), 100);
  EXPECT_EQ(stalled_for_s(progress(t, 20), t + 90), 0);  // four steps' time: slow, not stalled
  EXPECT_EQ(stalled_for_s(progress(t, 20), t + 130), 130);
}

TEST(Stall, NothingIsSaidBeforeTheFirstStepOrWithoutAWriteTime) {
  EXPECT_EQ(stalled_for_s(progress(1.7e9, 0.05, 0), 1.7e9 + 1000), 0);
  EXPECT_EQ(stalled_for_s(progress(0, 0.05), 1.7e9), 0);
  EXPECT_EQ(stalled_for_s(progress(1.7e9 + 5, 0.05), 1.7e9), 0);  // written "in the future": another clock
}

}  // namespace
}  // namespace sweep
