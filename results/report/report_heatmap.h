// A heat map as inline SVG: rows (ranks) against steps, each cell coloured by its value on
// a log scale, so that one rank whose figure is off shows as a stripe. Like the report's
// other plots, plain text in, escaped here, no script. Internal to sweep_report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sweep::report_plot {

/// The most columns a heat map draws: more steps than this are binned, consecutive steps
/// to a column, each cell the largest value of its steps (a spike stays visible).
constexpr size_t kHeatColumns = 120;

struct HeatMap {
  std::string title;                        ///< the aria label
  std::string value_label;                  ///< what a value is ("gradient norm"), in the colour key
  std::vector<std::string> rows;            ///< row names, top to bottom ("rank 0")
  std::vector<int64_t> steps;               ///< each column's step, ascending
  std::vector<std::vector<double>> values;  ///< [row][column]; NaN where there is none
};

/// The map as an <svg class="heatmap" data-rows="R" data-columns="C">: one <rect
/// class="cell"> per row and (binned) column with a tooltip of its row, step(s) and value
/// (class "cell none", grey, where no value is finite), row names at the left, step ticks
/// below, and a colour key from the smallest to the largest value (log10 when every value
/// is positive and they span more than a factor of 1.5, else linear). A sentence when
/// nothing is finite.
std::string svg_heatmap(const HeatMap& map);

/// The columns the map draws for `n` steps: [first, last) index ranges, at most kHeatColumns.
std::vector<std::pair<size_t, size_t>> heat_columns(size_t n);

}  // namespace sweep::report_plot
