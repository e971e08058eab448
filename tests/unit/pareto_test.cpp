// Judging runs on several objectives (results/analysis/pareto.h): Deb's
// constraint-domination ranks, the Pareto front, exact hypervolumes, the greedy subset
// that keeps the most of it, and constraints read and measured.
#include "pareto.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace sweep {
namespace {

ParetoEntry entry(std::vector<double> loss, double violation = 0) { return {std::move(loss), violation}; }

TEST(Pareto, DominanceNeedsNoWorseAndOneBetter) {
  EXPECT_TRUE(dominates({1, 2}, {1, 3}));
  EXPECT_TRUE(dominates({0, 0}, {1, 1}));
  EXPECT_FALSE(dominates({1, 2}, {1, 2}));  // equal: neither
  EXPECT_FALSE(dominates({1, 3}, {2, 2}));  // a trade-off: neither
  EXPECT_FALSE(dominates({2, 2}, {1, 3}));
}

// Feasible fronts first, then infeasible by violation (equal ones share a rank), then the
// failed: a feasible trial beats every infeasible one whatever its objectives.
TEST(Pareto, RanksAreConstraintDomination) {
  const std::vector<ParetoEntry> e = {
      entry({1, 4}),       // 0: front
      entry({2, 2}),       // 1: front
      entry({3, 3}),       // 2: dominated by 1
      entry({0, 0}, 0.5),  // 3: best objectives, infeasible
      entry({5, 5}, 0.1),  // 4: infeasible, smaller violation
      entry({9, 9}, 0.1),  // 5: the same violation as 4
      entry({NAN, 1}),     // 6: failed
      entry({4, 4}),       // 7: dominated by 1 and 2: the third front
  };
  EXPECT_EQ(domination_ranks(e), (std::vector<size_t>{0, 0, 1, 4, 3, 3, 5, 2}));
  EXPECT_EQ(pareto_front(e), (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(e[6].failed());
  EXPECT_FALSE(e[3].feasible());
}

TEST(Pareto, HypervolumeIsTheAreaOfTheUnionOfBoxes) {
  // Two boxes [1,3]x[2,3] and [2,3]x[1,3] overlap on [2,3]x[2,3]: 2 + 2 - 1.
  EXPECT_DOUBLE_EQ(hypervolume({{1, 2}, {2, 1}}, {3, 3}), 3.0);
  EXPECT_DOUBLE_EQ(hypervolume({{1, 2}, {2, 1}, {2.5, 2.5}}, {3, 3}), 3.0);  // a dominated point adds nothing
  EXPECT_DOUBLE_EQ(hypervolume({{3, 0}}, {3, 3}), 0.0);                      // on the reference: nothing
  EXPECT_DOUBLE_EQ(hypervolume({}, {1, 1}), 0.0);
  // Three objectives: a box inside another adds nothing; two 2x1x2 boxes sharing a 1x1x2
  // one: 4 + 4 - 2.
  EXPECT_DOUBLE_EQ(hypervolume({{1, 1, 1}, {2, 1, 1}}, {3, 3, 3}), 8.0);
  EXPECT_DOUBLE_EQ(hypervolume({{1, 2, 1}, {2, 1, 1}}, {3, 3, 3}), 6.0);
}

TEST(Pareto, TheReferencePointIsOptunas) {
  const std::vector<double> r = reference_point({{1, -2}, {3, -4}});  // max(1.1 w, 0.9 w) of the worst
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[0], 3.3);
  EXPECT_DOUBLE_EQ(r[1], -1.8);
  const std::vector<double> z = reference_point({{0, 1}});
  EXPECT_EQ(z[0], 1e-12);  // a worst of 0 would make an empty box
  EXPECT_DOUBLE_EQ(z[1], 1.1);
}

// Of a front, the greedy subset takes the point that adds most, then the one that adds
// most to it: the extremes of a front before its middle when they span more.
TEST(Pareto, TheGreedySubsetKeepsTheMostHypervolume) {
  const std::vector<std::vector<double>> front = {{0, 10}, {4, 4}, {10, 0}, {5, 5.5}};  // the last one dominated
  const std::vector<double> ref = {11, 11};
  const auto two = greedy_hypervolume_subset(front, 2, ref);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], 1u);  // (4,4) alone holds 49, more than 11 of an extreme
  double best = 0;
  for (size_t a = 0; a < front.size(); ++a)
    for (size_t b = a + 1; b < front.size(); ++b) best = std::max(best, hypervolume({front[a], front[b]}, ref));
  EXPECT_DOUBLE_EQ(hypervolume({front[two[0]], front[two[1]]}, ref), best);
  EXPECT_EQ(greedy_hypervolume_subset(front, 9, ref).size(), 4u);
}

TEST(Pareto, ConstraintsParseAndMeasureTheirViolation) {
  MetricConstraint c;
  ASSERT_EQ(parse_metric_constraint("memory_per_rank_mib <= 512", &c), "");
  EXPECT_EQ(c.metric, "memory_per_rank_mib");
  EXPECT_EQ(c.op, "<=");
  EXPECT_EQ(c.bound, 512);
  EXPECT_EQ(c.text(), "memory_per_rank_mib<=512");
  EXPECT_EQ(constraint_violation(c, 512), 0);
  EXPECT_DOUBLE_EQ(constraint_violation(c, 768), 0.5);  // relative to the bound
  EXPECT_TRUE(std::isinf(constraint_violation(c, NAN)));
  ASSERT_EQ(parse_metric_constraint("metrics.acc>0.9", &c), "");
  EXPECT_EQ(constraint_violation(c, 0.95), 0);
  EXPECT_GT(constraint_violation(c, 0.9), 0);           // strict: the bound itself violates
  EXPECT_DOUBLE_EQ(constraint_violation(c, 0.4), 0.5);  // |bound| < 1: absolute
  for (const char* bad : {"memory_per_rank_mib = 512", "memory_per_rank_mib", "<= 5", "a b <= 5",
                          "memory_per_rank_mib <= lots", "x <= inf"})
    EXPECT_NE(parse_metric_constraint(bad, &c), "") << bad;
}

}  // namespace
}  // namespace sweep
