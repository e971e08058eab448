// The one run-state rule: the words of RunStatus, and next_action, which `sweep run`
// follows and `sweep plan` and `sweep verify` report.
#include "run_status.h"

#include <gtest/gtest.h>

#include <string>

#include "sweep_dir.h"

namespace sweep {
namespace {

constexpr RunStatus kAll[] = {RunStatus::pending,     RunStatus::running, RunStatus::completed,
                              RunStatus::diverged,    RunStatus::stopped, RunStatus::failed,
                              RunStatus::interrupted, RunStatus::damaged, RunStatus::stale};

TEST(RunStatus, EveryWordReadsBackAndNoOtherWordIsOne) {
  for (RunStatus s : kAll) EXPECT_EQ(parse_status(status_name(s)), s) << status_name(s);
  // The words state files and records have always held.
  EXPECT_STREQ(status_name(RunStatus::completed), "completed");
  EXPECT_STREQ(status_name(RunStatus::interrupted), "interrupted");
  for (const char* other : {"", "Completed", "done", "queued", "orphaned", "completed "})
    EXPECT_FALSE(parse_status(other).has_value()) << other;
  EXPECT_EQ(status_or("orphaned", RunStatus::damaged), RunStatus::damaged);
}

TEST(RunStatus, FinishedRecordsAreCompletedDivergedAndStopped) {
  for (RunStatus s : kAll)
    EXPECT_EQ(is_finished(s), s == RunStatus::completed || s == RunStatus::diverged || s == RunStatus::stopped)
        << status_name(s);
}

RunState in(RunStatus s, int64_t stopped_at = 0) {
  RunState r;
  r.state = s;
  r.stopped_at = stopped_at;
  return r;
}

TEST(NextAction, EachStateHasOneAction) {
  EXPECT_EQ(next_action(in(RunStatus::pending)), NextAction::run);
  EXPECT_EQ(next_action(in(RunStatus::running)), NextAction::run);  // a driver died: resumed
  EXPECT_EQ(next_action(in(RunStatus::failed)), NextAction::run);
  EXPECT_EQ(next_action(in(RunStatus::interrupted)), NextAction::run);
  EXPECT_EQ(next_action(in(RunStatus::completed)), NextAction::keep);
  EXPECT_EQ(next_action(in(RunStatus::diverged)), NextAction::keep_failed);
  EXPECT_EQ(next_action(in(RunStatus::damaged)), NextAction::start_over);
  EXPECT_EQ(next_action(in(RunStatus::stale)), NextAction::start_over);
}

TEST(NextAction, AStoppedRunIsKeptOnlyWhereItWasAskedToStop) {
  // A plain grid trains it to train.steps: it resumes.
  EXPECT_EQ(next_action(in(RunStatus::stopped, 8)), NextAction::promote);
  // A halving rung: kept at the rung it reached or passed, promoted to a later one.
  EXPECT_EQ(next_action(in(RunStatus::stopped, 8), {8, std::nullopt}), NextAction::keep);
  EXPECT_EQ(next_action(in(RunStatus::stopped, 8), {4, std::nullopt}), NextAction::keep);
  EXPECT_EQ(next_action(in(RunStatus::stopped, 8), {16, std::nullopt}), NextAction::promote);
  // The plan of a halving search: kept once it has finished, its decision awaited before.
  EXPECT_EQ(next_action(in(RunStatus::stopped, 8), {0, true}), NextAction::keep);
  EXPECT_EQ(next_action(in(RunStatus::stopped, 8), {0, false}), NextAction::await_rung);
  // Only a stopped run waits on the search.
  EXPECT_EQ(next_action(in(RunStatus::completed), {0, false}), NextAction::keep);
  EXPECT_EQ(next_action(in(RunStatus::failed), {0, false}), NextAction::run);
}

// When an attempt began is the state's `updated` (written as it starts); `sweep status`
// and `sweep serve`'s run page say how long ago in the same words.
TEST(AttemptAge, IsTheTimeSinceTheStateSaysTheAttemptBegan) {
  RunState s;
  s.updated = "2026-12-07T10:00:00Z";
  const std::time_t started = attempt_started(s);
  EXPECT_EQ(started, 1796637600);
  EXPECT_EQ(attempt_age_words(started, 2, started + 72), "1m12s into attempt 2");
  EXPECT_EQ(attempt_age_words(started, 1, started + 9), "9s into attempt 1");
  EXPECT_EQ(attempt_age_words(started, 1, started - 5), "0s into attempt 1");  // another host's clock behind
  for (const char* bad : {"", "yesterday", "2026-12-07T10:00:00Z trailing", "2026-12-07 10:00:00"}) {
    s.updated = bad;
    EXPECT_EQ(attempt_started(s), 0) << bad;
  }
}

}  // namespace
}  // namespace sweep
