// The record rules every reader applies (results/analysis/sweep_records.h).
#include "sweep_records.h"

#include <gtest/gtest.h>

#include "record.h"

namespace sweep {
namespace {

Record with_steps(std::initializer_list<int64_t> steps, const std::string& status = "completed") {
  Record r;
  r.status = status;
  r.config["train.steps"] = "3";
  for (int64_t s : steps) {
    StepMetrics m;
    m.step = s;
    r.steps.push_back(m);
  }
  return r;
}

TEST(StepsProblem, StepsThatNothingCanBeReadByAreNamed) {
  EXPECT_EQ(steps_problem(with_steps({1, 2, 3})), "");
  EXPECT_EQ(steps_problem(with_steps({2, 3})), "");        // a run may record only some steps
  EXPECT_EQ(steps_problem(with_steps({}, "failed")), "");  // it failed before its first step
  EXPECT_EQ(steps_problem(with_steps({})),
            "record.h5 is completed but holds no training step (a run records each step it trained)");
  EXPECT_EQ(steps_problem(with_steps({1, 3, 3})), "record.h5's steps do not increase: step 3 follows step 3 (row 3)");
  EXPECT_EQ(steps_problem(with_steps({2, 1})), "record.h5's steps do not increase: step 1 follows step 2 (row 2)");
  EXPECT_EQ(steps_problem(with_steps({0, 1})), "record.h5's first step is 0 (steps count from 1)");
  EXPECT_EQ(steps_problem(with_steps({1, 2, 3, 4})), "record.h5 records step 4, beyond its config's train.steps 3");
  Record no_steps_key = with_steps({1, 2, 3, 4});
  no_steps_key.config.erase("train.steps");  // a program's config without the key: no bound
  EXPECT_EQ(steps_problem(no_steps_key), "");
}

// `sweep report DIR` by hand is titled as `sweep run` titles it: by the grid's name, which
// each record keeps as its sweep_id, not by the directory the sweep was written to.
TEST(SweepName, IsTheNameMostOfTheRunsRecordsCarry) {
  auto named = [](std::initializer_list<const char*> ids) {
    std::vector<Record> runs;
    for (const char* id : ids) {
      runs.emplace_back();
      runs.back().sweep_id = id;
    }
    return runs;
  };
  EXPECT_EQ(sweep_name(named({"seven-tricks", "seven-tricks", "seven-tricks"})), "seven-tricks");
  // A run forked in from another sweep does not rename it; a tie goes to the first name.
  EXPECT_EQ(sweep_name(named({"other", "seven-tricks", "seven-tricks"})), "seven-tricks");
  EXPECT_EQ(sweep_name(named({"b", "a"})), "a");
  // Records that name none (another writer's), or nothing readable as text: the caller's fallback.
  EXPECT_EQ(sweep_name(named({"", ""})), "");
  EXPECT_EQ(sweep_name(named({"\xff\xfe", ""})), "");
  EXPECT_EQ(sweep_name({}), "");
}

}  // namespace
}  // namespace sweep
