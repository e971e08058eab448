// The axes of the report's charts: nice-number ticks (1, 2, 5 x 10^k), decade ticks for a
// log axis, y limits set by the bulk of the curves rather than by an outlier, tick labels,
// and the colour and dash of the i-th curve. Pure functions, so they are tested alone.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace sweep::plot {

/// Ticks at a nice step (1, 2 or 5 x 10^k) inside [lo, hi]: the step whose count of ticks
/// is nearest 5 within 4..7 where one exists, else 8 (rather than 3). `integer` keeps the step at 1 or more (steps).
/// One tick for lo == hi; none for a non-finite or reversed range.
std::vector<double> nice_ticks(double lo, double hi, bool integer = false);

/// The step between the ticks nice_ticks returned (0 when fewer than two): labels use it.
double tick_step(const std::vector<double>& ticks);

/// Powers of ten inside [lo, hi] (lo > 0), every 10^n-th decade when there are more than 7.
std::vector<double> log_ticks(double lo, double hi);

/// The y range of a chart.
struct Limits {
  double lo = 0, hi = 1;  ///< the plot's edges; points outside are drawn clipped
  bool log = false;       ///< log10 scale: the positive bulk spans more than two decades
};

/// Limits from the finite points of the curves that set the scale (the caller leaves out
/// diverged curves): the typical curve spans the median of the curves' minima to the median
/// of their maxima; a curve whose peak (or floor) lies more than three such spans beyond is
/// an outlier that does not widen the range. Padded by 5%; log when hi / lo > 100. A range
/// narrower than a billionth of its values is one flat line, padded by 10% of its value.
Limits robust_limits(const std::vector<std::vector<double>>& curves);

/// Limits of a log axis for a figure that spans decades by design (a loss scale: 1 where
/// nothing scales, 65536 where fp16 does): every finite positive value sets them, none is
/// an outlier. From the power of ten at or below the smallest to the one at or above the
/// largest (a decade at least, so the axis has two ticks), padded by 5% of that span, so
/// that no curve lies on an edge. Without a positive value, robust_limits(curves).
Limits log_limits(const std::vector<std::vector<double>>& curves);

/// The tick label of v on an axis whose ticks are `step` apart: as few decimals as the
/// step needs, thousands separated by commas ("9,251", "0.02", "1e-05").
std::string tick_label(double v, double step);

/// A figure in a note: four significant digits, thousands separated ("9,251", "0.0123").
std::string number_label(double v);

/// Colours of the palette before dashes start.
constexpr size_t kPaletteSize = 12;

/// Colour of the i-th curve ("#rrggbb"): twelve qualitative colours, then again.
const char* series_colour(size_t i);

/// SVG stroke-dasharray of the i-th curve: "" (solid) for the first twelve, then a
/// different pattern for each further round of the palette.
const char* series_dash(size_t i);

}  // namespace sweep::plot
