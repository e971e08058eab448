// A pbt search's plan, a pure function of the grid: whether its members can be forked
// and perturbed at all, and at which steps it decides. Expansion (grid_expand.cpp) checks
// it without the executor; running the search is search/pbt_search.h.
#pragma once

#include <cstdint>
#include <vector>

#include "grid.h"  // SweepSpec, GridPoint

namespace sweep {

/// The steps a pbt search decides at (interval, 2 x interval, ...), for `budget` =
/// train.steps: search.generations of them, or one at every interval before the budget.
std::vector<int64_t> pbt_decision_steps(const SearchSpec& s, int64_t budget);

/// Checks a pbt search against its expanded points: one member per draw (one seed), one
/// train.steps that search.interval divides, at most steps/interval - 1 generations,
/// sweep-train (or a launch.trainer program) on this host (a member forks another's
/// checkpoint: `sweep fork`'s machinery, which a grid's program, a container and Slurm do
/// not run), keys a fork can change (not the model, the layout, the data or the budget;
/// uniform, loguniform and int only over numeric keys), and checkpoints kept long enough
/// that every fork's parent checkpoint is still there for `sweep reproduce`. Throws
/// ConfigError naming the key.
void check_pbt(const SweepSpec& spec, const std::vector<GridPoint>& points);

}  // namespace sweep
