// What each varying key does to the objective (AxisEffect): the mean at each value of a
// grid's axis with its share of the variance (eta squared), and for a search's continuous
// parameters, where every draw differs, quantile bins with a rank-based share that works
// for any shape of effect (rank_eta_squared) and Spearman's correlation for its direction.
// A sweep of one knob at a time has no axes to share variance between: each of its points
// is compared with the base point instead (base_deltas).
#include <algorithm>  // sort, min, max, stable_sort
#include <cmath>      // isfinite, sqrt
#include <cstdio>     // snprintf
#include <cstdlib>    // strtod
#include <map>
#include <set>
#include <utility>  // pair

#include "report.h"
#include "text.h"  // significant

namespace sweep {
namespace {

bool as_number(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return *end == '\0' && std::isfinite(*out);
}

// Eta squared: the share of the finite objectives' sum of squares around their mean that
// lies between the means at each value of the axis (`e.counts`, `e.means`).
double explained_share(const std::vector<ReportRun>& figs, const AxisEffect& e) {
  double sum = 0;
  size_t n = 0;
  for (const auto& f : figs)
    if (std::isfinite(f.objective)) sum += f.objective, ++n;
  if (n < 2) return NAN;
  const double mean = sum / double(n);
  double total = 0, between = 0;
  for (const auto& f : figs)
    if (std::isfinite(f.objective)) total += (f.objective - mean) * (f.objective - mean);
  for (size_t v = 0; v < e.values.size(); ++v)
    if (e.counts[v]) between += double(e.counts[v]) * (e.means[v] - mean) * (e.means[v] - mean);
  return total > 0 ? std::min(1.0, between / total) : NAN;
}

// Whether one value of `a` always goes with one value of `b` and the other way round
// (both vary, so each has at least two values).
bool changes_together(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::map<std::string, std::string> ab, ba;
  for (size_t i = 0; i < a.size(); ++i) {
    auto [x, fresh_a] = ab.emplace(a[i], b[i]);
    auto [y, fresh_b] = ba.emplace(b[i], a[i]);
    if (x->second != b[i] || y->second != a[i]) return false;
  }
  return ab.size() > 1;
}

// Whether every value of `key` is run with the same set of combinations of the `others`
// (train.seed included: a value with fewer seeds is not like with like).
bool balanced_axis(const std::vector<std::vector<std::string>>& values, const std::vector<size_t>& others, size_t key) {
  std::map<std::string, std::set<std::vector<std::string>>> rest;
  for (size_t i = 0; i < values[key].size(); ++i) {
    std::vector<std::string> combo;
    combo.reserve(others.size());
    for (size_t k : others) combo.push_back(values[k][i]);
    rest[values[key][i]].insert(std::move(combo));
  }
  for (const auto& [v, combos] : rest)
    if (combos != rest.begin()->second) return false;
  return true;
}

// "0.00105 to 0.00231": the range of a bin, three significant digits.
std::string bin_name(double lo, double hi) {
  return lo == hi ? significant(lo, 3) : significant(lo, 3) + " to " + significant(hi, 3);
}

// A key's values over the runs, as numbers when every one is one.
struct KeyValues {
  std::vector<std::string> text;  // per run
  std::vector<double> number;     // per run, when numeric
  bool numeric = true;
  size_t distinct = 0;
};

}  // namespace

std::vector<double> midranks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double mid = 0.5 * double(i + j) + 1;  // positions i..j hold ranks i+1..j+1
    for (size_t k = i; k <= j; ++k) rank[order[k]] = mid;
    i = j + 1;
  }
  return rank;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 3) return NAN;
  const std::vector<double> rx = midranks(std::vector<double>(x.begin(), x.begin() + std::ptrdiff_t(n)));
  const std::vector<double> ry = midranks(std::vector<double>(y.begin(), y.begin() + std::ptrdiff_t(n)));
  const double mean = 0.5 * double(n + 1);  // the mean of ranks 1..n, ties or not
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) * (rx[i] - mean);
    syy += (ry[i] - mean) * (ry[i] - mean);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : NAN;
}

std::vector<size_t> quantile_bins(const std::vector<double>& x, size_t bins) {
  const size_t n = x.size();
  std::vector<size_t> out(n, 0);
  if (n == 0 || bins < 2) return out;
  std::vector<double> sorted = x;
  std::sort(sorted.begin(), sorted.end());
  // A value's bin: where the first of its equals sits among the sorted values.
  std::vector<size_t> raw(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t before = size_t(std::lower_bound(sorted.begin(), sorted.end(), x[i]) - sorted.begin());
    raw[i] = std::min(bins - 1, before * bins / n);
  }
  std::set<size_t> used(raw.begin(), raw.end());
  std::map<size_t, size_t> renumber;
  for (size_t b : used) renumber.emplace(b, renumber.size());
  for (size_t i = 0; i < n; ++i) out[i] = renumber[raw[i]];
  return out;
}

double rank_eta_squared(const std::vector<double>& y, const std::vector<size_t>& group) {
  const size_t n = std::min(y.size(), group.size());
  std::map<size_t, std::pair<double, size_t>> sums;  // group -> (sum of ranks, count)
  const std::vector<double> r = midranks(std::vector<double>(y.begin(), y.begin() + std::ptrdiff_t(n)));
  for (size_t i = 0; i < n; ++i) sums[group[i]].first += r[i], ++sums[group[i]].second;
  const size_t k = sums.size();
  if (k < 2 || n < k + 1) return NAN;
  const double dn = double(n);
  double h = 0;
  for (const auto& [g, s] : sums) h += s.first * s.first / double(s.second);
  h = 12.0 / (dn * (dn + 1)) * h - 3 * (dn + 1);
  // Ties shrink the ranks' variance; Kruskal and Wallis divide it back out.
  std::map<double, size_t> ties;
  for (size_t i = 0; i < n; ++i) ++ties[y[i]];
  double t = 0;
  for (const auto& [v, c] : ties) t += double(c) * double(c) * double(c) - double(c);
  const double correction = 1 - t / (dn * dn * dn - dn);
  if (!(correction > 0)) return NAN;  // every y equal
  h /= correction;
  return std::clamp((h - double(k) + 1) / (dn - double(k)), 0.0, 1.0);
}

std::vector<AxisEffect> axis_effects(const std::vector<Record>& runs, const std::vector<ReportRun>& figs,
                                     const std::vector<std::string>& keys, bool sampled, bool* rank_importance) {
  std::vector<KeyValues> kv(keys.size());
  std::vector<size_t> finite;  // runs with a finite objective
  for (size_t i = 0; i < runs.size(); ++i)
    if (std::isfinite(figs[i].objective)) finite.push_back(i);
  for (size_t k = 0; k < keys.size(); ++k) {
    std::set<std::string> distinct;
    for (const auto& r : runs) {
      const std::string v = report_value(r, keys[k]);
      double x = 0;
      kv[k].numeric = kv[k].numeric && as_number(v, &x);
      kv[k].text.push_back(v), kv[k].number.push_back(x);
      distinct.insert(v);
    }
    kv[k].distinct = distinct.size();
  }
  // A key is continuous when its numbers are too many to list and mostly differ between
  // runs (seeds repeat a draw: in a search that is still a draw per trial).
  std::vector<bool> binned(keys.size(), false);
  bool any_binned = false;
  for (size_t k = 0; k < keys.size(); ++k) {
    binned[k] = kv[k].numeric && kv[k].distinct > kMaxLevels && (sampled || 2 * kv[k].distinct >= runs.size());
    any_binned = any_binned || binned[k];
  }
  if (rank_importance) *rank_importance = any_binned;

  std::vector<std::vector<std::string>> texts;
  texts.reserve(keys.size());
  for (const auto& x : kv) texts.push_back(x.text);
  std::vector<double> objective;
  objective.reserve(finite.size());
  for (size_t i : finite) objective.push_back(figs[i].objective);
  std::vector<AxisEffect> out;
  for (size_t k = 0; k < keys.size(); ++k) {
    AxisEffect e;
    e.key = keys[k];
    e.binned = binned[k];
    // Each run's level: its value, or its bin among the runs with a finite objective.
    std::vector<std::string> level(runs.size());
    if (e.binned) {
      std::vector<double> x;
      x.reserve(finite.size());
      for (size_t i : finite) x.push_back(kv[k].number[i]);
      const size_t bins = std::clamp<size_t>(finite.size() / 6, 2, 5);
      const std::vector<size_t> bin = quantile_bins(x, bins);
      std::map<size_t, std::pair<double, double>> range;
      for (size_t j = 0; j < bin.size(); ++j) {
        auto [it, fresh] = range.emplace(bin[j], std::make_pair(x[j], x[j]));
        it->second.first = std::min(it->second.first, x[j]), it->second.second = std::max(it->second.second, x[j]);
      }
      for (size_t j = 0; j < finite.size(); ++j) level[finite[j]] = bin_name(range[bin[j]].first, range[bin[j]].second);
      for (const auto& [b, lohi] : range) e.values.push_back(bin_name(lohi.first, lohi.second));
    } else {
      level = kv[k].text;
      std::set<std::string> vs(level.begin(), level.end());
      e.values.assign(vs.begin(), vs.end());
      std::sort(e.values.begin(), e.values.end(), value_less);
    }
    std::map<std::string, std::pair<double, size_t>> acc;
    for (size_t i : finite) acc[level[i]].first += figs[i].objective, ++acc[level[i]].second;
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& v : e.values) {
      const auto& a = acc[v];
      e.counts.push_back(a.second);
      e.means.push_back(a.second ? a.first / double(a.second) : NAN);
      if (a.second) lo = std::min(lo, e.means.back()), hi = std::max(hi, e.means.back());
    }
    e.spread = hi >= lo ? hi - lo : 0;
    if (any_binned) {
      std::map<std::string, size_t> index;
      for (size_t v = 0; v < e.values.size(); ++v) index.emplace(e.values[v], v);
      std::vector<size_t> group;
      group.reserve(finite.size());
      for (size_t i : finite) group.push_back(index[level[i]]);
      e.importance = rank_eta_squared(objective, group);
    } else {
      e.importance = explained_share(figs, e);
    }
    if (kv[k].numeric) {
      std::vector<double> x;
      x.reserve(finite.size());
      for (size_t i : finite) x.push_back(kv[k].number[i]);
      e.rank_correlation = spearman(x, objective);
    }
    std::vector<size_t> others;  // keys that change together with k say nothing about balance
    for (size_t o = 0; o < keys.size(); ++o) {
      if (o == k) continue;
      // Two continuous keys always pair value for value; they change together only when
      // one follows the other (a derived key: train.min_lr of train.min_lr_ratio).
      const bool together = binned[k] && binned[o]
                                ? std::abs(spearman(kv[k].number, kv[o].number)) > 0.9999
                                : !binned[k] && !binned[o] && changes_together(kv[k].text, kv[o].text);
      if (together)
        e.confounded_with.push_back(keys[o]);
      else
        others.push_back(o);
    }
    e.balanced = !e.binned && balanced_axis(texts, others, k);
    out.push_back(std::move(e));
  }
  if (any_binned)
    std::stable_sort(out.begin(), out.end(), [](const AxisEffect& a, const AxisEffect& b) {
      const bool fa = std::isfinite(a.importance), fb = std::isfinite(b.importance);
      return fa != fb ? fa : fa && a.importance > b.importance;
    });
  else
    std::stable_sort(out.begin(), out.end(),
                     [](const AxisEffect& a, const AxisEffect& b) { return a.spread > b.spread; });
  return out;
}

BaseDeltas base_deltas(const std::vector<Record>& runs, const std::vector<ReportRun>& figs,
                       const std::vector<std::string>& keys) {
  BaseDeltas out;
  std::vector<std::string> knobs;
  for (const auto& k : keys)
    if (k != "train.seed") knobs.push_back(k);
  if (knobs.size() < 2) return out;
  // The points: each distinct combination of the knobs' values, in the order of their first run.
  std::vector<std::vector<std::string>> point_values;
  std::vector<std::vector<size_t>> point_runs;
  std::map<std::vector<std::string>, size_t> index;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::string> values;
    values.reserve(knobs.size());
    for (const auto& k : knobs) values.push_back(report_value(runs[i], k));
    auto [it, fresh] = index.emplace(values, point_values.size());
    if (fresh) point_values.push_back(std::move(values)), point_runs.emplace_back();
    point_runs[it->second].push_back(i);
  }
  // Each knob's mode over the points: the base's value, which every point that does not
  // change this knob keeps. A tie (every axis of a crossed grid) means there is no base.
  std::vector<std::string> mode(knobs.size());
  for (size_t k = 0; k < knobs.size(); ++k) {
    std::map<std::string, size_t> n;
    for (const auto& p : point_values) ++n[p[k]];
    size_t best = 0, second = 0;
    for (const auto& [v, c] : n) {
      if (c > best)
        second = best, best = c, mode[k] = v;
      else if (c > second)
        second = c;
    }
    if (best == second) return out;
  }
  const auto base_it = index.find(mode);
  if (base_it == index.end()) return out;
  const size_t base = base_it->second;
  // Each other point's changes: the knobs where it leaves the base, with its values there.
  std::vector<std::set<std::pair<size_t, std::string>>> changes(point_values.size());
  for (size_t p = 0; p < point_values.size(); ++p) {
    for (size_t k = 0; k < knobs.size(); ++k)
      if (point_values[p][k] != mode[k]) changes[p].emplace(k, point_values[p][k]);
    if (changes[p].size() > kMaxKnobsPerPoint) return out;
  }
  // A point whose changes are made up of other points' smaller changes crosses them.
  for (size_t p = 0; p < point_values.size(); ++p) {
    if (changes[p].size() < 2) continue;
    std::set<std::pair<size_t, std::string>> covered;
    for (size_t q = 0; q < point_values.size(); ++q)
      if (q != p && !changes[q].empty() && changes[q].size() < changes[p].size() &&
          std::includes(changes[p].begin(), changes[p].end(), changes[q].begin(), changes[q].end()))
        covered.insert(changes[q].begin(), changes[q].end());
    if (covered == changes[p]) return out;
  }

  // Seeds: each point's finite objectives by train.seed (the mean should a seed repeat).
  const auto by_seed = [&](size_t p) {
    std::map<std::string, std::pair<double, size_t>> acc;
    for (size_t i : point_runs[p])
      if (std::isfinite(figs[i].objective)) {
        auto& a = acc[report_value(runs[i], "train.seed")];
        a.first += figs[i].objective, ++a.second;
      }
    std::map<std::string, double> mean;
    for (const auto& [seed, a] : acc) mean.emplace(seed, a.first / double(a.second));
    return mean;
  };
  const std::map<std::string, double> base_seed = by_seed(base);
  out.base_runs = point_runs[base];
  for (size_t k = 0; k < knobs.size(); ++k) out.base.emplace_back(knobs[k], mode[k]);
  const ObjectiveSpread spread = objective_spread(figs, out.base_runs);
  out.base_seeds = spread.n, out.base_mean = spread.mean, out.base_std = spread.std;
  for (size_t p = 0; p < point_values.size(); ++p) {
    if (p == base) continue;
    PointDelta d;
    for (const auto& [k, v] : changes[p]) d.changes.emplace_back(knobs[k], v);
    d.runs = point_runs[p];
    double here = 0, there = 0;
    for (const auto& [seed, objective] : by_seed(p)) {
      const auto b = base_seed.find(seed);
      if (b == base_seed.end()) continue;
      d.seeds.push_back(seed);
      here += objective, there += b->second;
    }
    std::sort(d.seeds.begin(), d.seeds.end(), value_less);
    if (!d.seeds.empty()) {
      d.objective = here / double(d.seeds.size());
      d.base_objective = there / double(d.seeds.size());
      d.delta = d.objective - d.base_objective;
      if (d.base_objective != 0) d.relative = d.delta / std::abs(d.base_objective);
      d.within_spread = std::isfinite(out.base_std) && std::abs(d.delta) <= out.base_std;
    }
    out.points.push_back(std::move(d));
  }
  std::stable_sort(out.points.begin(), out.points.end(), [](const PointDelta& a, const PointDelta& b) {
    const bool fa = std::isfinite(a.delta), fb = std::isfinite(b.delta);
    return fa != fb ? fa : fa && std::abs(a.delta) > std::abs(b.delta);
  });
  return out;
}

}  // namespace sweep
