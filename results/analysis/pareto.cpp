// Constraint-domination, non-domination ranks and hypervolumes (pareto.h).
#include "pareto.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace sweep {
namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

/// The hypervolume of `pts` (each below `ref` in every objective) in the first `m`
/// objectives: slices along objective m - 1, each the (m - 1)-dimensional volume of the
/// points at or below it. Exact; O(n^(m-1) log n), for the few dozen points a split sees.
double volume(std::vector<std::vector<double>> pts, const std::vector<double>& ref, size_t m) {
  if (pts.empty()) return 0;
  if (m == 1) {
    double best = ref[0];
    for (const auto& p : pts) best = std::min(best, p[0]);
    return ref[0] - best;
  }
  std::stable_sort(pts.begin(), pts.end(), [&](const auto& a, const auto& b) { return a[m - 1] < b[m - 1]; });
  double total = 0;
  std::vector<std::vector<double>> below;
  for (size_t i = 0; i < pts.size(); ++i) {
    below.push_back(pts[i]);
    const double upper = i + 1 < pts.size() ? pts[i + 1][m - 1] : ref[m - 1];
    const double height = upper - pts[i][m - 1];
    if (height > 0) total += height * volume(below, ref, m - 1);
  }
  return total;
}

}  // namespace

std::string parse_metric_constraint(const std::string& text, MetricConstraint* out) {
  static const char* kForm = "expected 'METRIC <= NUMBER' (or <, >=, >), e.g. 'memory_per_rank_mib <= 512'";
  const size_t at = text.find_first_of("<>=!");
  if (at == std::string::npos) return std::string("no comparison: ") + kForm;
  size_t len = 1;
  if (at + 1 < text.size() && text[at + 1] == '=') len = 2;
  const std::string op = text.substr(at, len);
  if (op != "<" && op != "<=" && op != ">" && op != ">=")
    return "'" + op + "' is no comparison sweep takes (a constraint bounds a figure; == on a measured number " +
           "rarely holds); " + kForm;
  MetricConstraint c;
  c.metric = trim(text.substr(0, at));
  c.op = op;
  c.bound_text = trim(text.substr(at + len));
  if (c.metric.empty()) return std::string("no metric before '") + op + "'; " + kForm;
  if (c.metric.find_first_of(" \t") != std::string::npos) return "'" + c.metric + "' is not one metric name; " + kForm;
  char* end = nullptr;
  c.bound = std::strtod(c.bound_text.c_str(), &end);
  if (c.bound_text.empty() || *end != '\0' || !std::isfinite(c.bound))
    return "'" + c.bound_text + "' is not a finite number; " + kForm;
  *out = c;
  return "";
}

double constraint_violation(const MetricConstraint& c, double value) {
  if (!std::isfinite(value)) return INFINITY;
  const double over = c.op[0] == '<' ? value - c.bound : c.bound - value;
  const bool strict = c.op.size() == 1;
  if (over < 0 || (over == 0 && !strict)) return 0;
  // A strict bound that is met exactly is violated by the least amount that counts.
  return std::max(over, 1e-300) / std::max(std::fabs(c.bound), 1.0);
}

bool ParetoEntry::failed() const {
  return loss.empty() || std::any_of(loss.begin(), loss.end(), [](double v) { return !std::isfinite(v); }) ||
         std::isnan(violation);
}

bool dominates(const std::vector<double>& a, const std::vector<double>& b) {
  bool better = false;
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
    if (a[k] > b[k]) return false;
    if (a[k] < b[k]) better = true;
  }
  return better;
}

std::vector<size_t> domination_ranks(const std::vector<ParetoEntry>& e) {
  std::vector<size_t> rank(e.size(), 0);
  std::vector<size_t> feasible, infeasible, failed;
  for (size_t i = 0; i < e.size(); ++i) (e[i].failed() ? failed : e[i].feasible() ? feasible : infeasible).push_back(i);
  // Feasible: peel the fronts (Deb's fast non-dominated sort).
  std::vector<size_t> dominated_by(e.size(), 0);
  std::vector<std::vector<size_t>> dominates_list(e.size());
  for (size_t a : feasible)
    for (size_t b : feasible)
      if (dominates(e[a].loss, e[b].loss)) dominates_list[a].push_back(b), ++dominated_by[b];
  std::vector<size_t> front;
  for (size_t i : feasible)
    if (dominated_by[i] == 0) front.push_back(i);
  size_t r = 0;
  for (; !front.empty(); ++r) {
    std::vector<size_t> next;
    for (size_t a : front) {
      rank[a] = r;
      for (size_t b : dominates_list[a])
        if (--dominated_by[b] == 0) next.push_back(b);
    }
    std::sort(next.begin(), next.end());
    front = std::move(next);
  }
  // Infeasible: by violation, equal violations one rank.
  std::stable_sort(infeasible.begin(), infeasible.end(),
                   [&](size_t a, size_t b) { return e[a].violation < e[b].violation; });
  for (size_t k = 0; k < infeasible.size(); ++k) {
    if (k > 0 && e[infeasible[k]].violation != e[infeasible[k - 1]].violation) ++r;
    rank[infeasible[k]] = r;
  }
  if (!infeasible.empty()) ++r;
  for (size_t i : failed) rank[i] = r;
  return rank;
}

std::vector<size_t> pareto_front(const std::vector<ParetoEntry>& e) {
  std::vector<size_t> out;
  for (size_t i = 0; i < e.size(); ++i) {
    if (!e[i].feasible()) continue;
    bool beaten = false;
    for (size_t j = 0; j < e.size() && !beaten; ++j) beaten = e[j].feasible() && dominates(e[j].loss, e[i].loss);
    if (!beaten) out.push_back(i);
  }
  return out;
}

double hypervolume(const std::vector<std::vector<double>>& points, const std::vector<double>& ref) {
  std::vector<std::vector<double>> inside;
  for (const auto& p : points) {
    bool below = p.size() == ref.size();
    for (size_t k = 0; below && k < p.size(); ++k) below = p[k] < ref[k];
    if (below) inside.push_back(p);
  }
  return volume(inside, ref, ref.size());
}

std::vector<double> reference_point(const std::vector<std::vector<double>>& points) {
  std::vector<double> worst;
  for (const auto& p : points) {
    if (worst.empty()) worst = p;
    for (size_t k = 0; k < p.size() && k < worst.size(); ++k) worst[k] = std::max(worst[k], p[k]);
  }
  for (double& w : worst) {
    w = std::max(1.1 * w, 0.9 * w);
    if (w == 0) w = 1e-12;
  }
  return worst;
}

std::vector<size_t> greedy_hypervolume_subset(const std::vector<std::vector<double>>& points, size_t count,
                                              const std::vector<double>& ref) {
  std::vector<size_t> chosen;
  std::vector<bool> taken(points.size(), false);
  std::vector<std::vector<double>> set;
  double have = 0;
  while (chosen.size() < count && chosen.size() < points.size()) {
    size_t best = points.size();
    double best_gain = -INFINITY;
    for (size_t i = 0; i < points.size(); ++i) {
      if (taken[i]) continue;
      set.push_back(points[i]);
      const double gain = hypervolume(set, ref) - have;
      set.pop_back();
      if (gain > best_gain) best = i, best_gain = gain;
    }
    taken[best] = true;
    chosen.push_back(best);
    set.push_back(points[best]);
    have = hypervolume(set, ref);
  }
  return chosen;
}

}  // namespace sweep
