#include "tpe.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "text.h"  // significant

namespace sweep {
namespace {

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// Mass of component k inside [lo, hi].
double mass(const Parzen& p, size_t k) {
  const double m = normal_cdf((p.hi - p.mu[k]) / p.sigma[k]) - normal_cdf((p.lo - p.mu[k]) / p.sigma[k]);
  return m > 1e-300 ? m : 1e-300;
}

// A numeric dimension's bounds in the units TPE models it in.
void internal_bounds(const SearchDim& d, double* lo, double* hi) {
  if (d.kind == "loguniform") {
    *lo = std::log(d.lo), *hi = std::log(d.hi);
  } else if (d.kind == "int") {
    *lo = d.lo - 0.5 * double(d.step), *hi = d.hi + 0.5 * double(d.step);
  } else {
    *lo = d.lo, *hi = d.hi;
  }
}

// A value as the run config got it, in internal units; NaN when it does not parse.
double internal_value(const SearchDim& d, const ConfigValue& v) {
  char* end = nullptr;
  const double x = std::strtod(v.text.c_str(), &end);
  if (v.text.empty() || *end != '\0' || !std::isfinite(x)) return NAN;
  return d.kind == "loguniform" ? (x > 0 ? std::log(x) : NAN) : x;
}

// The text a proposal of `x` (internal units) becomes: what draw() would write.
ConfigValue external_value(const SearchDim& d, double x) {
  ConfigValue v;
  v.where = d.where;
  if (d.kind == "int") {
    const int64_t count = (int64_t(d.hi) - int64_t(d.lo)) / d.step + 1;
    const int64_t k = std::clamp(int64_t(std::llround((x - d.lo) / double(d.step))), int64_t(0), count - 1);
    v.text = std::to_string(int64_t(d.lo) + k * d.step);
    return v;
  }
  double out = d.kind == "loguniform" ? std::exp(x) : x;
  out = std::clamp(out, d.lo, d.hi);
  v.text = significant(out, 6);
  return v;
}

// The i-th uniform number of trial `trial`'s stream for `key` (independent of every other
// trial's and of the startup draws).
double unit_of(uint64_t seed, int64_t trial, const std::string& key, int64_t i) {
  return draw_unit(seed ^ (0x7a5e9d3c1b2f4e6dULL * uint64_t(trial + 1)), i, key + "/tpe");
}

// Categorical estimator: (weighted count + prior / K) / (total weight + prior) for each
// choice; every weight 1 (a single objective) gives (count + prior / K) / (n + prior).
std::vector<double> categorical(const std::vector<int>& obs, const std::vector<double>& weights, size_t k) {
  std::vector<double> p(k, kTpePriorWeight / double(k));
  double total = kTpePriorWeight;
  for (size_t i = 0; i < obs.size(); ++i) {
    const double w = i < weights.size() ? weights[i] : 1.0;
    p[size_t(obs[i])] += w;
    total += w;
  }
  for (double& x : p) x /= total;
  return p;
}

ConfigValue propose_numeric(const SearchDim& d, const std::vector<double>& good, const std::vector<double>& good_w,
                            const std::vector<double>& bad, const std::vector<double>& bad_w, uint64_t seed,
                            int64_t trial) {
  double lo = 0, hi = 0;
  internal_bounds(d, &lo, &hi);
  const Parzen l = parzen(good, lo, hi, good_w), g = parzen(bad, lo, hi, bad_w);
  double best = NAN, best_score = -INFINITY;
  for (int64_t c = 0; c < kTpeCandidates; ++c) {
    const double x = parzen_sample(l, unit_of(seed, trial, d.key, 2 * c), unit_of(seed, trial, d.key, 2 * c + 1));
    const double score = parzen_log_density(l, x) - parzen_log_density(g, x);
    if (std::isnan(best) || score > best_score) best = x, best_score = score;
  }
  return external_value(d, best);
}

ConfigValue propose_choice(const SearchDim& d, const std::vector<int>& good, const std::vector<double>& good_w,
                           const std::vector<int>& bad, const std::vector<double>& bad_w, uint64_t seed,
                           int64_t trial) {
  const size_t k = d.choices.size();
  const std::vector<double> l = categorical(good, good_w, k), g = categorical(bad, bad_w, k);
  size_t best = 0;
  double best_score = -INFINITY;
  for (int c = 0; c < kTpeCandidates; ++c) {
    double u = unit_of(seed, trial, d.key, c), acc = 0;
    size_t pick = k - 1;
    for (size_t i = 0; i < k; ++i) {
      acc += l[i];
      if (u < acc) {
        pick = i;
        break;
      }
    }
    const double score = std::log(l[pick]) - std::log(g[pick]);
    if (score > best_score) best = pick, best_score = score;
  }
  ConfigValue v = d.choices[best];
  v.where = d.where;
  return v;
}

}  // namespace

size_t tpe_good_count(size_t n) { return std::max<size_t>(1, std::min<size_t>((n + 9) / 10, 25)); }

Parzen parzen(const std::vector<double>& mus, double lo, double hi, const std::vector<double>& weights) {
  Parzen p;
  p.lo = lo, p.hi = hi;
  const double range = hi - lo;
  const size_t n = mus.size();
  // Widths from the neighbours among the observations and the prior's centre; the bounds
  // stand in past the ends. Clipped to [range / min(100, n + 1), range].
  std::vector<double> sorted = mus;
  sorted.push_back(0.5 * (lo + hi));
  std::sort(sorted.begin(), sorted.end());
  const double floor = range / std::min(100.0, double(n) + 1);
  for (size_t i = 0; i < n; ++i) {
    const double m = mus[i];
    const auto at = std::lower_bound(sorted.begin(), sorted.end(), m);
    const double left = at == sorted.begin() ? m - lo : m - *(at - 1);
    const double right = at + 1 == sorted.end() ? hi - m : *(at + 1) - m;
    p.mu.push_back(m);
    p.sigma.push_back(std::clamp(std::max(left, right), floor, range));
    p.weight.push_back(i < weights.size() ? weights[i] : 1.0);
  }
  p.mu.push_back(0.5 * (lo + hi));
  p.sigma.push_back(range);
  p.weight.push_back(kTpePriorWeight);
  return p;
}

double parzen_log_density(const Parzen& p, double x) {
  const double total = std::accumulate(p.weight.begin(), p.weight.end(), 0.0);
  double density = 0;
  for (size_t k = 0; k < p.mu.size(); ++k) {
    const double z = (x - p.mu[k]) / p.sigma[k];
    density += p.weight[k] / total * std::exp(-0.5 * z * z) / (p.sigma[k] * std::sqrt(2 * M_PI)) / mass(p, k);
  }
  return density > 0 ? std::log(density) : -INFINITY;
}

double parzen_sample(const Parzen& p, double u_component, double u_value) {
  const double total = std::accumulate(p.weight.begin(), p.weight.end(), 0.0);
  size_t k = p.mu.size() - 1;
  double acc = 0;
  for (size_t i = 0; i < p.mu.size(); ++i) {
    acc += p.weight[i] / total;
    if (u_component < acc) {
      k = i;
      break;
    }
  }
  // Inverse CDF of the truncated normal, by bisection on [lo, hi]: exact to the last bits
  // after 100 halvings, and the same on every machine.
  const double a = normal_cdf((p.lo - p.mu[k]) / p.sigma[k]), b = normal_cdf((p.hi - p.mu[k]) / p.sigma[k]);
  const double target = a + u_value * (b - a);
  double lo = p.lo, hi = p.hi;
  for (int i = 0; i < 100 && lo < hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (normal_cdf((mid - p.mu[k]) / p.sigma[k]) < target)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

std::vector<ConfigValue> tpe_propose(const std::vector<SearchDim>& space, const std::vector<TpeTrial>& history,
                                     uint64_t seed, int64_t trial) {
  // Best first; failed trials (+inf) last; ties by their order in the history.
  std::vector<size_t> order(history.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double la = std::isnan(history[a].loss) ? INFINITY : history[a].loss;
    const double lb = std::isnan(history[b].loss) ? INFINITY : history[b].loss;
    return la < lb;
  });
  const size_t n_good = std::min(tpe_good_count(history.size()), order.size());
  const std::vector<size_t> good(order.begin(), order.begin() + std::ptrdiff_t(n_good)),
      bad(order.begin() + std::ptrdiff_t(n_good), order.end());
  return tpe_propose_split(space, history, good, std::vector<double>(good.size(), 1.0), bad,
                           std::vector<double>(bad.size(), 1.0), seed, trial);
}

std::vector<ConfigValue> tpe_propose_split(const std::vector<SearchDim>& space, const std::vector<TpeTrial>& history,
                                           const std::vector<size_t>& good, const std::vector<double>& good_weights,
                                           const std::vector<size_t>& bad, const std::vector<double>& bad_weights,
                                           uint64_t seed, int64_t trial) {
  std::vector<ConfigValue> out;
  out.reserve(space.size());
  for (size_t di = 0; di < space.size(); ++di) {
    const SearchDim& d = space[di];
    if (d.kind == "choice") {
      std::vector<int> l, g;
      std::vector<double> lw, gw;
      for (size_t r = 0; r < good.size() + bad.size(); ++r) {
        const bool is_good = r < good.size();
        const std::string& text = history[is_good ? good[r] : bad[r - good.size()]].values[di].text;
        for (size_t c = 0; c < d.choices.size(); ++c)
          if (d.choices[c].text == text) {
            (is_good ? l : g).push_back(int(c));
            (is_good ? lw : gw).push_back(is_good ? good_weights[r] : bad_weights[r - good.size()]);
          }
      }
      out.push_back(propose_choice(d, l, lw, g, gw, seed, trial));
      continue;
    }
    std::vector<double> l, lw, g, gw;
    for (size_t r = 0; r < good.size() + bad.size(); ++r) {
      const bool is_good = r < good.size();
      const double x = internal_value(d, history[is_good ? good[r] : bad[r - good.size()]].values[di]);
      if (!std::isfinite(x)) continue;
      (is_good ? l : g).push_back(x);
      (is_good ? lw : gw).push_back(is_good ? good_weights[r] : bad_weights[r - good.size()]);
    }
    out.push_back(propose_numeric(d, l, lw, g, gw, seed, trial));
  }
  return out;
}

}  // namespace sweep
