// The Tree-structured Parzen Estimator (Bergstra et al., "Algorithms for Hyper-Parameter
// Optimization", NeurIPS 2011), as Optuna's default sampler runs it: univariate (each key
// on its own), the best gamma(n) = min(ceil(n / 10), 25) trials are "good", one Parzen
// estimator l(x) over the good trials' values and one g(x) over the others, each with a
// prior component, and the proposal is the one of 24 candidates drawn from l that
// maximises l(x) / g(x). Numeric keys are modelled on their bounds (loguniform in log
// space, int on [lo - step/2, hi + step/2] then rounded to its step) with truncated
// Gaussians whose widths are the distances to their neighbours; choices by their counts.
//
// Everything is a pure function of (the space, the search seed, the trial number, the
// earlier trials' values and objectives): no clock, no global state, so a search replays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "search.h"  // SearchDim, ConfigValue

namespace sweep {

/// One finished trial as TPE sees it.
struct TpeTrial {
  std::vector<ConfigValue> values;  ///< one per dimension of the space, as the run config got it
  /// Lower is better; +inf for a trial that failed, diverged or has no finite objective
  /// (it counts as the worst).
  double loss = 0;
};

/// Candidates drawn from l(x) per proposal (Optuna's n_ei_candidates).
inline constexpr int kTpeCandidates = 24;
/// Weight of each estimator's prior component (Optuna's prior_weight).
inline constexpr double kTpePriorWeight = 1.0;

/// How many of `n` trials are good: min(ceil(n / 10), 25), at least 1.
size_t tpe_good_count(size_t n);

/// The values of trial `trial` (0-based) proposed from `history` (the trials before it
/// that finished; ties in loss broken by their order in `history`) under `seed`: one
/// value per dimension of `space`, in the form draw() gives.
std::vector<ConfigValue> tpe_propose(const std::vector<SearchDim>& space, const std::vector<TpeTrial>& history,
                                     uint64_t seed, int64_t trial);

/// The values of trial `trial` from a split of `history` made elsewhere (motpe.h): l(x)
/// over the trials `good` (indices into history, their components in this order), g(x)
/// over `bad`, each trial's component with its weight. tpe_propose is this split by loss
/// with every weight 1.
std::vector<ConfigValue> tpe_propose_split(const std::vector<SearchDim>& space, const std::vector<TpeTrial>& history,
                                           const std::vector<size_t>& good, const std::vector<double>& good_weights,
                                           const std::vector<size_t>& bad, const std::vector<double>& bad_weights,
                                           uint64_t seed, int64_t trial);

/// The Parzen estimator of one numeric dimension on [lo, hi] (internal units): exposed
/// for tests. `mus` are the observations, `weights` theirs (missing ones are 1).
struct Parzen {
  std::vector<double> mu, sigma, weight;  ///< components; the last one is the prior
  double lo = 0, hi = 1;
};
Parzen parzen(const std::vector<double>& mus, double lo, double hi, const std::vector<double>& weights = {});
/// log of the mixture's density at x (truncated to [lo, hi]).
double parzen_log_density(const Parzen& p, double x);
/// A sample of the mixture from two uniform numbers in [0, 1).
double parzen_sample(const Parzen& p, double u_component, double u_value);

}  // namespace sweep
