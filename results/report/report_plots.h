// The HTML report's plots as inline SVG: line charts of a per-step figure (a mean curve
// per group with its band, each curve labelled at its end, reference lines, a shared scale
// across small multiples, outliers drawn clipped) with their legend, a parallel-coordinates
// plot of all runs that fits the page, the objective against one parameter (a slice), and a
// scatter with its Pareto front. Every string given here is plain text; these functions
// escape it. Internal to sweep_results.
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
  std::string legend;                ///< what the legend and its end label say (only what differs)
  std::vector<double> x, y, lo, hi;  ///< lo and hi: the band around y (empty: none)
  bool sets_scale = true;            ///< false for a diverged curve: drawn clipped, not scaling
  std::string colour;                ///< "" = the palette's, by the curve's place
  double width = 1.5;                ///< stroke width
};

/// A horizontal reference line (a clip threshold, zero), labelled at its right end.
struct RefLine {
  double y = 0;
  std::string label;
};

/// A stretch of steps a curve's run went back over (a spike decision's rewind: from the
/// state it went back to, to the spiking step), shaded, with a dashed line at its end;
/// `from` == `to` is the line alone (an update skipped). Its tooltip says the decision.
struct StepMark {
  double from = 0, to = 0;
  std::string title;
};

struct LineChart {
  std::string title;             ///< for the aria label
  std::string x_label = "step";  ///< integer steps
  std::string y_label;
  std::vector<Series> series;
  std::vector<RefLine> lines;
  std::vector<StepMark> marks;  ///< class "spike": each a <g> with its <title>
  bool end_labels = true;       ///< with two or more curves, name each at its end (right of the plot)
  bool log_y = false;           ///< a log y axis over every point (plot::log_limits): a figure that spans decades
};

/// The scale some charts share (the --group-by panels, so that they compare).
struct Scale {
  double x_lo = INFINITY, x_hi = -INFINITY;
  plot::Limits y;
  bool any = false;  ///< some series has a finite point
};

/// The scale of `charts` together: x over every finite point, y robust over the series
/// that set the scale (their bands included) and the reference lines; or, when a chart
/// asks for a log y axis, y over every point of every series on one.
Scale shared_scale(const std::vector<const LineChart*>& charts);

/// Past this many characters a curve's end label is its number in the legend ("3").
constexpr size_t kEndLabelMax = 40;

/// The chart as an <svg> element (or a sentence when nothing is finite): gridlines and
/// labelled ticks on both axes (text class "tick x" and "tick y"), each curve in a group
/// of its own (class "s": hovering one fades the others) with its translucent band, its
/// name at its end (class "end", moved apart so none overlaps, a leader line back to the
/// curve), dashed reference lines, the step marks under the curves, and clipped points
/// marked at the edge.
std::string svg_line_chart(const LineChart& chart, const Scale& scale);

/// The chart's legend as an HTML list that wraps rather than cuts: each curve's swatch
/// (its colour and dash, class "swatch") and legend; numbered where an end label is a
/// number. Then one line per curve drawn clipped. "" for a chart of one unnamed curve.
std::string html_legend(const LineChart& chart, const Scale& scale);

/// svg_line_chart and html_legend in a <figure class="chart">.
std::string chart_figure(const LineChart& chart, const Scale& scale);

/// One axis of a parallel-coordinates plot: its values are either categories (placed
/// evenly in the given order) or numbers (a nice-tick axis, or decades when `log`).
struct ParallelAxis {
  std::string name;                     ///< as the axis is labelled (a short key name)
  std::string title;                    ///< its tooltip (the whole key)
  std::vector<std::string> categories;  ///< non-empty: a categorical axis
  bool log = false;                     ///< a numeric axis over decades (values > 0)
};

/// One line of it: a category index per categorical axis, a number per numeric axis.
struct ParallelLine {
  std::string label;           ///< tooltip
  std::vector<double> values;  ///< per axis: category index, or the number (NaN: left out)
  bool highlight = false;      ///< drawn on top, thicker (the best)
};

/// Widest a plot may be (SVG units = CSS px): what a 1400 px window shows beside the margins.
constexpr double kMaxPlotWidth = 1240;

/// Lines coloured from good (dark blue) to bad (light orange) by their value on the last
/// axis, where lower is better. The axes share at most kMaxPlotWidth; names that would
/// meet are set on two rows.
std::string svg_parallel(const std::vector<ParallelAxis>& axes, const std::vector<ParallelLine>& lines,
                         const std::string& title);

/// One point of a slice plot: a run's value of one parameter and its objective.
struct SlicePoint {
  std::string label;  ///< tooltip
  double x = 0;       ///< the value, or the category's index
  double y = 0;       ///< the objective
  double order = 0;   ///< in [0, 1]: when it ran among the trials (light first, dark last)
  bool best = false;  ///< ringed
};

/// The objective against one parameter: a numeric x axis (log when `log`), or categories.
std::string svg_slice(const std::vector<SlicePoint>& points, const ParallelAxis& x, const std::string& y_label);

struct ScatterPoint {
  std::string label;  ///< tooltip
  double x = 0, y = 0;
  bool front = false;  ///< on the Pareto front: marked and joined by the front's line
};

std::string svg_scatter(const std::vector<ScatterPoint>& points, const std::string& x_label, const std::string& y_label,
                        const std::string& title);

}  // namespace sweep::report_plot
