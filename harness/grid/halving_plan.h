// A halving search's plan, a pure function of the grid: which trials it has, in which
// order its brackets take them, and whether the grid can be halved at all. Expansion
// (grid_expand.cpp) and `sweep plan` use it without the executor; running the search is
// search/halving_search.h.
#pragma once

#include <string>
#include <vector>

#include "grid.h"  // SweepSpec, GridPoint

namespace sweep {

/// Checks a halving search against its expanded points: one train.steps for all (the
/// budget), the built-in trainer or a program built on sweep/trainer.h (a rung stops a
/// run through its run directory's stop_at file, which only those read), and the
/// schedule (halving_schedule). Throws ConfigError naming the key.
void check_halving(const SweepSpec& spec, const std::vector<GridPoint>& points);

/// One trial: a drawn point or a grid point, with every seed's run.
struct HalvingTrial {
  std::string inputs;                ///< its values, without the seed ("train.lr=0.01 ...")
  std::vector<std::string> run_ids;  ///< one per seed, in expansion order
};

/// The trials of `points` in the order the schedule's brackets take them: first
/// appearance in expansion order, shuffled by the search seed when there are brackets.
std::vector<HalvingTrial> halving_trials(const SweepSpec& spec, const std::vector<GridPoint>& points);

}  // namespace sweep
