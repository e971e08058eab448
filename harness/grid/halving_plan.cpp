#include "halving_plan.h"

#include <algorithm>
#include <map>
#include <utility>

namespace sweep {

void check_halving(const SweepSpec& spec, const std::vector<GridPoint>& points) {
  const SearchSpec& s = spec.search;
  if (!spec.program.argv.empty() && !spec.program.stop)
    throw ConfigError(s.where + ": key 'search.kind': halving stops runs at its rungs through the run directory " +
                      "(the stop_at file) and resumes promoted ones from their checkpoints; a grid's program takes " +
                      "part once it does both and says so with program.stop: true (python: run.should_stop, " +
                      "run.save, run.restore, run.finish(\"stopped\"))");
  if (!spec.program.argv.empty() && spec.program.honours_declared &&
      std::find(spec.program.honours.begin(), spec.program.honours.end(), "train.steps") == spec.program.honours.end())
    throw ConfigError(s.where +
                      ": key 'search.kind': halving's budget is train.steps, which program.honours "
                      "does not list; a program a halving search runs trains train.steps steps");
  // A program keeps its own step count unless the grid sets train.steps: the rungs are
  // fractions of it.
  if (!spec.program.argv.empty() && !points.empty() && !points.front().config.writes("train.steps"))
    throw ConfigError(s.where + ": key 'search.kind': halving's budget is train.steps, which the grid does not set; " +
                      "the program would train its own step count (put train.steps in base)");
  for (const GridPoint& p : points)
    if (p.config.train.steps != points.front().config.train.steps)
      throw ConfigError(s.where + ": key 'search.kind': halving's budget is train.steps, so it must be one value; " +
                        "points have " + std::to_string(points.front().config.train.steps) + " and " +
                        std::to_string(p.config.train.steps) + " (put train.steps in base)");
  const int64_t budget = points.empty() ? s.min_steps : points.front().config.train.steps;
  halving_schedule(s, budget, int64_t(halving_trials(spec, points).size()));
}

std::vector<HalvingTrial> halving_trials(const SweepSpec& spec, const std::vector<GridPoint>& points) {
  const bool seeded = !spec.seeds.values.empty();
  std::vector<HalvingTrial> trials;
  std::map<std::string, size_t> index;
  for (const GridPoint& p : points) {
    std::string inputs;
    for (const auto& [k, v] : p.values)
      if (!(seeded && k == spec.seeds.key)) inputs += (inputs.empty() ? "" : " ") + k + "=" + v;
    auto [it, fresh] = index.emplace(inputs, trials.size());
    if (fresh) trials.push_back({inputs, {}});
    trials[it->second].run_ids.push_back(p.id);
  }
  if (spec.search.brackets > 1) {
    // Brackets take consecutive trials: shuffle them first, so that no bracket gets one
    // corner of a grid (a pure function of the search seed).
    std::vector<std::pair<double, size_t>> order;
    for (size_t j = 0; j < trials.size(); ++j)
      order.emplace_back(draw_unit(spec.search.seed, int64_t(j), "search.brackets"), j);
    std::sort(order.begin(), order.end());
    std::vector<HalvingTrial> shuffled;
    shuffled.reserve(order.size());
    for (const auto& [u, j] : order) shuffled.push_back(trials[j]);
    trials = std::move(shuffled);
  }
  return trials;
}

}  // namespace sweep
