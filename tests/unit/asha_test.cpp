// asha_decide: asynchronous successive halving whose decisions are a function of the
// results alone, whichever order they arrive in.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "asha_search.h"

namespace sweep {
namespace {

using Table = std::map<std::pair<size_t, size_t>, double>;  // (trial, rung) -> metric

/// The plan from the results of `table` that `known` holds.
AshaPlan plan_of(size_t trials, const std::vector<int64_t>& steps, int64_t eta, const Table& table,
                 const std::set<std::pair<size_t, size_t>>& known) {
  return asha_decide(trials, steps, eta, false, "loss", [&](size_t j, size_t k) -> std::optional<double> {
    if (!known.count({j, k})) return std::nullopt;
    return table.at({j, k});
  });
}

/// The lines of rung `k` ("rung K ...") of a plan.
std::vector<std::string> rung_lines(const AshaPlan& p, size_t k) {
  std::vector<std::string> out;
  for (const std::string& l : p.lines)
    if (l.rfind("rung " + std::to_string(k) + " ", 0) == 0) out.push_back(l);
  return out;
}

TEST(Asha, PromotesTheBestFloorNOverEtaOfTheFirstNResultsInTrialOrder) {
  // Each later trial worse at rung 0: after 3 results the best 1 goes on (trial 0), after
  // 6 the best 2 (trial 1 joins), after 9 the best 3.
  Table t;
  std::set<std::pair<size_t, size_t>> all;
  for (size_t j = 0; j < 9; ++j) t[{j, 0}] = double(j), all.insert({j, 0});
  AshaPlan p = plan_of(9, {2, 6, 18}, 3, t, all);
  EXPECT_EQ(p.entered[1], (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(p.taken[0], 9u);
  EXPECT_EQ(p.taken[1], 0u);
  EXPECT_FALSE(p.done);  // rung 1 has not trained
  EXPECT_EQ(rung_lines(p, 0)[3], "rung 0 steps 2: promoted trial 0 (rank 1 of the first 3 results)");
  // Each later trial better: each is the best so far once a place opens, and goes on as
  // asha promotes (a promotion is never taken back): 2 at 3 results, 3 at 4, ...
  for (size_t j = 0; j < 9; ++j) t[{j, 0}] = 10.0 - double(j);
  p = plan_of(9, {2, 6, 18}, 3, t, all);
  EXPECT_EQ(p.entered[1], (std::vector<size_t>{2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(rung_lines(p, 0)[9], "rung 0 steps 2: promoted trial 5 (rank 1 of the first 6 results)");
}

TEST(Asha, AResultWaitsForEveryResultBeforeItInTheRungsOrder) {
  Table t = {{{0, 0}, 3.0}, {{1, 0}, 2.0}, {{2, 0}, 1.0}};
  const AshaPlan p = plan_of(3, {2, 6}, 3, t, {{0, 0}, {2, 0}});  // trial 1 still trains
  EXPECT_EQ(p.taken[0], 1u);
  EXPECT_TRUE(p.entered[1].empty());
  ASSERT_EQ(p.lines.size(), 1u);
  EXPECT_EQ(p.lines[0], "rung 0 steps 2: result 1 trial 0 loss=3");
  EXPECT_FALSE(p.done);
}

TEST(Asha, TiesGoToTheLowerTrialAndNoFiniteResultIsEverPromoted) {
  Table t = {{{0, 0}, NAN}, {{1, 0}, 2.0}, {{2, 0}, 2.0}, {{3, 0}, NAN}, {{4, 0}, NAN}, {{5, 0}, NAN}};
  std::set<std::pair<size_t, size_t>> all;
  for (size_t j = 0; j < 6; ++j) all.insert({j, 0});
  AshaPlan p = plan_of(6, {2, 6}, 3, t, all);
  EXPECT_EQ(p.entered[1], (std::vector<size_t>{1, 2}));  // tie at 2.0: trial 1 first
  EXPECT_EQ(rung_lines(p, 0)[0], "rung 0 steps 2: result 1 trial 0 loss=worst (failed, diverged or no finite loss)");
  // Every result the worst: nobody goes on, and the search is done with no best.
  for (auto& [k, v] : t) v = NAN;
  p = plan_of(6, {2, 6}, 3, t, all);
  EXPECT_TRUE(p.entered[1].empty());
  EXPECT_TRUE(p.done);
  EXPECT_EQ(p.lines.back().rfind("best:", 0), std::string::npos);
}

// The property the search stands on: however the results arrive (any number of workers,
// any order of finishing), every rung's decisions grow as one fixed sequence and end the
// same. A simulated pool of `workers` takes the highest-rung job first, finishes a random
// one of those it runs, and the plan is taken again after each result.
TEST(Asha, AnyArrivalOrderAndAnyNumberOfWorkersReachTheSameDecisions) {
  const size_t trials = 20;
  const std::vector<int64_t> steps = {1, 3, 9, 27};
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> u(0, 1);
  Table t;
  for (size_t j = 0; j < trials; ++j)
    for (size_t k = 0; k < steps.size(); ++k) t[{j, k}] = j % 7 == 3 ? NAN : std::round(u(gen) * 8) / 8;  // ties too
  std::set<std::pair<size_t, size_t>> all;
  for (const auto& [key, v] : t) all.insert(key);
  // Straight: results arrive in the plan's own order (what one worker does).
  std::set<std::pair<size_t, size_t>> one;
  AshaPlan straight = plan_of(trials, steps, 3, t, one);
  const auto first_waiting = [&](const AshaPlan& p) -> std::optional<std::pair<size_t, size_t>> {
    for (size_t k = steps.size(); k-- > 0;)
      for (size_t j : p.entered[k])
        if (!one.count({j, k})) return std::make_pair(j, k);
    return std::nullopt;
  };
  while (!straight.done) {
    const auto job = first_waiting(straight);
    ASSERT_TRUE(job.has_value());
    one.insert(*job);
    straight = plan_of(trials, steps, 3, t, one);
  }
  ASSERT_GE(straight.entered[2].size(), 1u) << "the table promotes nobody past rung 1";

  for (size_t workers : {1, 2, 4, 7}) {
    for (int seed = 0; seed < 25; ++seed) {
      std::mt19937_64 order(uint64_t(seed) * 31 + workers);
      std::set<std::pair<size_t, size_t>> known, running;
      AshaPlan p = plan_of(trials, steps, 3, t, known);
      for (int guard = 0; guard < 10000 && !p.done; ++guard) {
        // Fill the free workers: the highest rung first, then the rung's order.
        for (size_t k = steps.size(); k-- > 0 && running.size() < workers;)
          for (size_t j : p.entered[k])
            if (running.size() < workers && !known.count({j, k}) && !running.count({j, k})) running.insert({j, k});
        ASSERT_FALSE(running.empty()) << "nothing to run, and the search is not done";
        auto it = running.begin();
        std::advance(it, std::uniform_int_distribution<size_t>(0, running.size() - 1)(order));
        known.insert(*it), running.erase(it);
        p = plan_of(trials, steps, 3, t, known);
        // Every rung's decisions so far are the start of the straight run's.
        for (size_t k = 0; k < steps.size(); ++k) {
          const auto now = rung_lines(p, k), whole = rung_lines(straight, k);
          ASSERT_LE(now.size(), whole.size());
          for (size_t i = 0; i < now.size(); ++i) ASSERT_EQ(now[i], whole[i]) << workers << " workers, seed " << seed;
        }
      }
      ASSERT_TRUE(p.done);
      EXPECT_EQ(p.lines, straight.lines) << workers << " workers, seed " << seed;
    }
  }
}

}  // namespace
}  // namespace sweep
