// The HTML report's plots as inline SVG: line charts of a per-step figure (a mean curve
// per group with its band, reference lines, a shared scale across small multiples,
// outliers drawn clipped), a parallel-coordinates plot of all runs, and a scatter with its
// Pareto front. Every string given here is plain text; these functions escape it. Internal
// to sweep_results.
#pragma once

#include <cmath>  // INFINITY
#include <string>
#include <vector>

#include "plot_axes.h"  // Limits

namespace sweep::report_plot {

/// An SVG coordinate: one decimal is below a pixel and keeps large charts small.
std::string coord(double v);

/// One curve of a line chart.
struct Series {
  std::string label;                 ///< its whole name: the tooltip
  std::string legend;                ///< what the legend says (only what differs)
  std::vector<double> x, y, lo, hi;  ///< lo and hi: the band around y (empty: none)
  bool sets_scale = true;            ///< false for a diverged curve: drawn clipped, not scaling
};

/// A horizontal reference line (a clip threshold, zero), labelled at its right end.
struct RefLine {
  double y = 0;
  std::string label;
};

struct LineChart {
  std::string title;             ///< for the aria label
  std::string x_label = "step";  ///< integer steps
  std::string y_label;
  std::vector<Series> series;
  std::vector<RefLine> lines;
};

/// The scale some charts share (the --group-by panels, so that they compare).
struct Scale {
  double x_lo = INFINITY, x_hi = -INFINITY;
  plot::Limits y;
  bool any = false;  ///< some series has a finite point
};

/// The scale of `charts` together: x over every finite point, y robust over the series
/// that set the scale (their bands included) and the reference lines.
Scale shared_scale(const std::vector<const LineChart*>& charts);

/// The chart as an <svg> element (or a sentence when nothing is finite): gridlines and
/// labelled ticks on both axes (text class "tick x" and "tick y"), a translucent band per
/// series, dashed reference lines, clipped points marked at the edge with a note, and a
/// legend below.
std::string svg_line_chart(const LineChart& chart, const Scale& scale);

/// One axis of a parallel-coordinates plot: its values are either categories (placed
/// evenly in the given order) or numbers (a nice-tick axis).
struct ParallelAxis {
  std::string name;
  std::vector<std::string> categories;  ///< non-empty: a categorical axis
};

/// One line of it: a category index per categorical axis, a number per numeric axis.
struct ParallelLine {
  std::string label;           ///< tooltip
  std::vector<double> values;  ///< per axis: category index, or the number (NaN: left out)
  bool highlight = false;      ///< drawn on top, thicker (the best)
};

/// Lines coloured from good (dark blue) to bad (light orange) by their value on the last
/// axis, where lower is better.
std::string svg_parallel(const std::vector<ParallelAxis>& axes, const std::vector<ParallelLine>& lines,
                         const std::string& title);

struct ScatterPoint {
  std::string label;  ///< tooltip
  double x = 0, y = 0;
  bool front = false;  ///< on the Pareto front: marked and joined by the front's line
};

std::string svg_scatter(const std::vector<ScatterPoint>& points, const std::string& x_label, const std::string& y_label,
                        const std::string& title);

}  // namespace sweep::report_plot
