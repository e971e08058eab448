// Multi-objective TPE's split of the trials (motpe.h).
#include "motpe.h"

#include <algorithm>

namespace sweep {

std::vector<double> tpe_default_weights(size_t n) {
  if (n < 25) return std::vector<double>(n, 1.0);
  std::vector<double> w;
  const size_t ramp = n - 25;
  const double first = 1.0 / double(n), step = ramp > 1 ? (1.0 - first) / double(ramp - 1) : 0.0;
  for (size_t i = 0; i < ramp; ++i) w.push_back(i + 1 == ramp && ramp > 1 ? 1.0 : first + double(i) * step);
  w.resize(n, 1.0);
  return w;
}

MotpeSplit motpe_split(const std::vector<ParetoEntry>& e) {
  MotpeSplit s;
  const size_t n_good = std::min(tpe_good_count(e.size()), e.size());
  const std::vector<size_t> rank = domination_ranks(e);
  std::vector<bool> is_good(e.size(), false);
  for (size_t r = 0; s.good.size() < n_good; ++r) {
    std::vector<size_t> members;
    for (size_t i = 0; i < e.size(); ++i)
      if (rank[i] == r) members.push_back(i);
    const size_t need = n_good - s.good.size();
    std::vector<size_t> take = members;
    if (members.size() > need) {
      take.clear();
      if (e[members.front()].feasible()) {  // a front: the subset that keeps the most hypervolume
        std::vector<std::vector<double>> pts;
        pts.reserve(members.size());
        for (size_t i : members) pts.push_back(e[i].loss);
        for (size_t k : greedy_hypervolume_subset(pts, need, reference_point(pts))) take.push_back(members[k]);
      } else {  // equal violations, or failed: the earlier trials
        take.assign(members.begin(), members.begin() + std::ptrdiff_t(need));
      }
    }
    for (size_t i : take) s.good.push_back(i), is_good[i] = true;
  }
  for (size_t i = 0; i < e.size(); ++i)
    if (!is_good[i]) s.bad.push_back(i);
  s.bad_weights = tpe_default_weights(s.bad.size());

  s.weights.assign(s.good.size(), kMotpeMinWeight);
  std::vector<size_t> feasible;  // positions in s.good
  for (size_t k = 0; k < s.good.size(); ++k)
    if (e[s.good[k]].feasible()) feasible.push_back(k);
  const size_t objectives = e.empty() ? 0 : e.front().loss.size();
  if (objectives < 2 || feasible.size() == 1) {
    for (size_t k : feasible) s.weights[k] = 1.0;
    return s;
  }
  if (feasible.empty()) return s;
  std::vector<std::vector<double>> pts;
  pts.reserve(feasible.size());
  for (size_t k : feasible) pts.push_back(e[s.good[k]].loss);
  const std::vector<double> ref = reference_point(pts);
  const double whole = hypervolume(pts, ref);
  std::vector<double> contribution;
  double most = 0;
  for (size_t j = 0; j < pts.size(); ++j) {
    std::vector<std::vector<double>> others = pts;
    others.erase(others.begin() + std::ptrdiff_t(j));
    contribution.push_back(whole - hypervolume(others, ref) + kMotpeMinWeight);
    most = std::max(most, contribution.back());
  }
  for (size_t j = 0; j < feasible.size(); ++j) s.weights[feasible[j]] = std::clamp(contribution[j] / most, 0.0, 1.0);
  return s;
}

std::vector<ConfigValue> motpe_propose(const std::vector<SearchDim>& space, const std::vector<TpeTrial>& history,
                                       const std::vector<ParetoEntry>& entries, uint64_t seed, int64_t trial) {
  const MotpeSplit s = motpe_split(entries);
  return tpe_propose_split(space, history, s.good, s.weights, s.bad, s.bad_weights, seed, trial);
}

}  // namespace sweep
