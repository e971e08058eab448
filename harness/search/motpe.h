// Multi-objective TPE (Ozaki, Tanigaki, Watanabe, Onishi and Nomura, "Multiobjective
// Tree-Structured Parzen Estimator for Computationally Expensive Optimization Problems",
// GECCO 2020, and its journal version, JAIR 2022), as Optuna's TPESampler runs it for
// several objectives and constraints: the trials so far are split into good and bad by
// constraint-domination rank (pareto.h: feasible fronts first, then infeasible trials by
// violation, failed ones last); the rank that does not fit whole is cut by greedy
// hypervolume subset selection; each good trial's Parzen component is weighted by its
// share of the good trials' hypervolume, and each bad trial's by its age (Optuna's
// default weights). Proposals are then tpe.h's, from that split.
//
// A pure function of the trials' values and results in trial order and the seed, as tpe.h.
#pragma once

#include <cstddef>
#include <vector>

#include "pareto.h"  // ParetoEntry
#include "tpe.h"     // TpeTrial, tpe_propose_split

namespace sweep {

/// Which trials build l(x) and with what weights, and which build g(x).
struct MotpeSplit {
  std::vector<size_t> good;     ///< indices, by rank, a cut rank in the order it was chosen
  std::vector<double> weights;  ///< one per good trial, in (0, 1]
  std::vector<size_t> bad;      ///< the others, in trial order
  /// One per bad trial: Optuna's default weights, 1 for the last 25 and a ramp from 1/n
  /// up for the n - 25 before them, so old trials count less in g(x).
  std::vector<double> bad_weights;
};

/// Optuna's default_weights(n): n ones for n < 25, else n - 25 values from 1/n to 1
/// (numpy's linspace) followed by 25 ones.
std::vector<double> tpe_default_weights(size_t n);

/// Weight of a good trial that adds no hypervolume, and of an infeasible good trial
/// (Optuna's EPS).
inline constexpr double kMotpeMinWeight = 1e-12;

/// The split of `entries` (one per finished trial, in trial order): the best
/// tpe_good_count(n) by constraint-domination. Weights: for two or more objectives, each
/// feasible good trial's leave-one-out hypervolume contribution among the feasible good
/// trials (reference_point of theirs), plus kMotpeMinWeight, over the largest; 1 for one
/// objective; kMotpeMinWeight for an infeasible or failed one.
MotpeSplit motpe_split(const std::vector<ParetoEntry>& entries);

/// The values of trial `trial` from `history` (values only) judged by `entries`.
std::vector<ConfigValue> motpe_propose(const std::vector<SearchDim>& space, const std::vector<TpeTrial>& history,
                                       const std::vector<ParetoEntry>& entries, uint64_t seed, int64_t trial);

}  // namespace sweep
