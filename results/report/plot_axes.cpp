// Ticks, robust limits, labels and the palette of the report's charts (plot_axes.h).
#include "plot_axes.h"

#include <algorithm>  // sort, min, max
#include <cmath>
#include <cstdio>  // snprintf

#include "text.h"  // significant

namespace sweep::plot {

namespace {

// Ticks of one step inside [lo, hi]; the index keeps 0.1 * 3 from drifting to 0.30000000000000004.
std::vector<double> ticks_at(double lo, double hi, double step) {
  std::vector<double> out;
  const double first = std::ceil(lo / step - 1e-9), last = std::floor(hi / step + 1e-9);
  for (double k = first; k <= last && out.size() < 1000; ++k) out.push_back(k * step == 0 ? 0 : k * step);
  return out;
}

// The middle of a sorted, non-empty sample.
double median(const std::vector<double>& sorted) {
  const size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

// "1234567" -> "1,234,567"; the sign stays in front.
std::string group_thousands(std::string digits) {
  size_t start = digits[0] == '-' ? 1 : 0, end = digits.find('.');
  if (end == std::string::npos) end = digits.size();
  for (size_t i = end; i > start + 3; i -= 3) digits.insert(i - 3, ",");
  return digits;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, bool integer) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) return {};
  if (lo == hi) return {lo};
  // Candidate steps around a fifth of the range; keep the one whose count is nearest 5,
  // counts within 4..7 before 8 (where the next step up leaves 3) before any other, the
  // larger step on a tie.
  const double magnitude = std::pow(10.0, std::floor(std::log10((hi - lo) / 5)));
  std::vector<double> best;
  int best_score = 1 << 30;
  for (double scale : {0.1, 1.0, 10.0})
    for (double mult : {1.0, 2.0, 5.0}) {
      const double step = mult * magnitude * scale;
      if (integer && step < 1) continue;
      std::vector<double> t = ticks_at(lo, hi, step);
      const int n = int(t.size());
      const int score = std::abs(n - 5) + (n >= 4 && n <= 7 ? 0 : n == 8 ? 50 : 100);
      if (score <= best_score) best_score = score, best = std::move(t);
    }
  if (best.empty()) best = {lo};
  return best;
}

double tick_step(const std::vector<double>& ticks) { return ticks.size() < 2 ? 0 : ticks[1] - ticks[0]; }

std::vector<double> log_ticks(double lo, double hi) {
  if (!(lo > 0) || !std::isfinite(hi) || lo > hi) return {};
  const int first = int(std::ceil(std::log10(lo) - 1e-9)), last = int(std::floor(std::log10(hi) + 1e-9));
  const int every = std::max(1, (last - first + 7) / 7);
  std::vector<double> out;
  for (int k = first; k <= last; k += every) out.push_back(std::pow(10.0, k));
  return out;
}

Limits robust_limits(const std::vector<std::vector<double>>& curves) {
  std::vector<double> peaks, floors;
  for (const auto& c : curves) {
    double lo = INFINITY, hi = -INFINITY;
    for (double v : c)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (lo <= hi) floors.push_back(lo), peaks.push_back(hi);
  }
  Limits out;
  if (peaks.empty()) return out;
  std::sort(peaks.begin(), peaks.end());
  std::sort(floors.begin(), floors.end());
  // The typical curve spans median floor to median peak; a curve that leaves that band by
  // more than three such spans is an outlier and is drawn clipped instead of setting the scale.
  const double top = median(peaks), bottom = median(floors);
  const double span = top > bottom ? top - bottom : (top == 0 ? 1 : std::abs(top) * 0.1);
  double lo = bottom, hi = top;
  for (double v : peaks)
    if (v <= top + 3 * span) hi = std::max(hi, v);
  for (double v : floors)
    if (v >= bottom - 3 * span) lo = std::min(lo, v);
  out.log = lo > 0 && hi / lo > 100;
  if (out.log) {
    const double pad = 0.05 * std::log10(hi / lo);
    out.lo = lo / std::pow(10.0, pad), out.hi = hi * std::pow(10.0, pad);
  } else if (hi - lo > 1e-9 * std::max(std::abs(lo), std::abs(hi))) {
    const double pad = 0.05 * (hi - lo);
    out.lo = lo - pad, out.hi = hi + pad;
  } else {  // one flat line (a mean of equal values may differ in its last bit): a band around it
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    out.lo = lo - pad, out.hi = hi + pad;
  }
  return out;
}

Limits log_limits(const std::vector<std::vector<double>>& curves) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& c : curves)
    for (double v : c)
      if (std::isfinite(v) && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!(lo <= hi)) return robust_limits(curves);
  const double bottom = std::floor(std::log10(lo)), top = std::max(std::ceil(std::log10(hi)), bottom + 1);
  const double pad = 0.05 * (top - bottom);
  Limits out;
  out.log = true;
  out.lo = std::pow(10.0, bottom - pad), out.hi = std::pow(10.0, top + pad);
  return out;
}

std::string tick_label(double v, double step) {
  char buf[64];
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a >= 1e15 || a < 1e-4 || !(step > 0)) {
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }
  const int decimals = step >= 1 ? 0 : std::min(15, int(std::ceil(-std::log10(step) - 1e-9)));
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return group_thousands(buf);
}

std::string number_label(double v) {
  char buf[64];
  if (!std::isfinite(v) || std::abs(v) >= 1e15 || (v != 0 && std::abs(v) < 1e-4)) return significant(v, 4);
  if (std::abs(v) >= 1000) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return group_thousands(buf);
  }
  return significant(v, 4);
}

// Category10 with near-black and light blue: every pair at least 27 apart in CIE76 Lab
// (plot_axes_test checks 20), so twelve curves stay apart on white.
constexpr const char* kPalette[kPaletteSize] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#aec7e8"};
constexpr const char* kDashes[] = {"", "6 3", "2 2", "8 3 2 3", "12 4"};

const char* series_colour(size_t i) { return kPalette[i % kPaletteSize]; }

const char* series_dash(size_t i) {
  constexpr size_t n = sizeof(kDashes) / sizeof(kDashes[0]);
  const size_t round = i / kPaletteSize;
  return round == 0 ? kDashes[0] : kDashes[1 + (round - 1) % (n - 1)];
}

}  // namespace sweep::plot
