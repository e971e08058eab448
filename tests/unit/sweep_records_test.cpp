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

}  // namespace
}  // namespace sweep
