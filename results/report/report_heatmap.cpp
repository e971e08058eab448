#include "report_heatmap.h"

#include <algorithm>  // min, max, clamp
#include <cmath>      // isfinite, log10
#include <cstdio>     // snprintf

#include "plot_axes.h"     // nice_ticks, tick_label, number_label
#include "report.h"        // html_escape
#include "report_plots.h"  // coord, kMaxPlotWidth

namespace sweep::report_plot {
namespace {

// Geometry in SVG units (CSS px): cells fill about kMapW unless each would be wider than
// kMaxCellW; rows are kMaxRowH high unless there are many.
constexpr double kMapW = 720, kMaxCellW = 24, kMaxRowH = 22, kMinRowH = 3, kMapH = 320;
constexpr double kTop = 10, kKeyH = 60, kCharW = 7.4;  // kKeyH: the step axis and the colour key
constexpr int kKeySwatches = 12;

// A ramp from dark blue through teal and green to yellow (viridis' ends): a lighter cell
// is a larger value, and it reads without colour vision of red and green.
std::string ramp(double t) {
  static const double stops[][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  t = std::clamp(t, 0.0, 1.0) * 4;
  const int k = std::min(3, int(t));
  const double f = t - k;
  const auto channel = [&](int c) { return int(std::lround(stops[k][c] + f * (stops[k + 1][c] - stops[k][c]))); };
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", channel(0), channel(1), channel(2));
  return buf;
}

// Where a value lies in the colour key: 0 at lo, 1 at hi.
struct Key {
  double lo = INFINITY, hi = -INFINITY;
  bool log = false;
  double at(double v) const {
    if (!(hi > lo)) return 0.5;
    return log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
  }
  double value(double t) const { return log ? lo * std::pow(hi / lo, t) : lo + t * (hi - lo); }
};

std::string rect(double x, double y, double w, double h, const std::string& attrs) {
  return "<rect x=\"" + coord(x) + "\" y=\"" + coord(y) + "\" width=\"" + coord(w) + "\" height=\"" + coord(h) + "\" " +
         attrs;
}

std::string text(double x, double y, const char* anchor, const std::string& escaped, const std::string& extra = "") {
  return "<text x=\"" + coord(x) + "\" y=\"" + coord(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">" + escaped +
         "</text>\n";
}

std::string steps_text(const HeatMap& m, std::pair<size_t, size_t> col) {
  const int64_t a = m.steps[col.first], b = m.steps[col.second - 1];
  return a == b ? "step " + std::to_string(a) : "steps " + std::to_string(a) + "-" + std::to_string(b);
}

}  // namespace

std::vector<std::pair<size_t, size_t>> heat_columns(size_t n) {
  const size_t cols = std::min(n, kHeatColumns);
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t j = 0; j < cols; ++j) out.emplace_back(j * n / cols, (j + 1) * n / cols);
  return out;
}

std::string svg_heatmap(const HeatMap& m) {
  const auto cols = heat_columns(m.steps.size());
  // Each cell: the largest finite value of its column's steps.
  std::vector<std::vector<double>> cell(m.rows.size(), std::vector<double>(cols.size(), NAN));
  Key key;
  bool positive = true;
  for (size_t r = 0; r < m.rows.size(); ++r)
    for (size_t j = 0; j < cols.size(); ++j) {
      for (size_t k = cols[j].first; k < cols[j].second && r < m.values.size() && k < m.values[r].size(); ++k)
        if (std::isfinite(m.values[r][k]) && !(m.values[r][k] <= cell[r][j])) cell[r][j] = m.values[r][k];
      if (!std::isfinite(cell[r][j])) continue;
      key.lo = std::min(key.lo, cell[r][j]), key.hi = std::max(key.hi, cell[r][j]);
      positive = positive && cell[r][j] > 0;
    }
  if (!(key.hi >= key.lo)) return "<p class=\"missing\">" + html_escape(m.title) + ": no finite value</p>\n";
  key.log = positive && key.hi > 1.5 * key.lo;

  size_t widest = 0;
  for (const auto& name : m.rows) widest = std::max(widest, name.size());
  const double left = 16 + kCharW * double(widest);
  const double cell_w = std::min(kMaxCellW, std::min(kMapW, kMaxPlotWidth - left - 20) / double(cols.size()));
  const double row_h = std::clamp(kMapH / double(std::max<size_t>(m.rows.size(), 1)), kMinRowH, kMaxRowH);
  const double map_w = cell_w * double(cols.size()), map_h = row_h * double(m.rows.size());
  // The colour key: its words and smallest value, the swatches, the largest value.
  const std::string key_text = m.value_label + (key.log ? " (log scale)" : "") + ": " + plot::number_label(key.lo);
  const double key_x = left + kCharW * double(key_text.size()) + 10;
  const double width = std::max(left + map_w + 20, key_x + 24.0 * kKeySwatches + 90),
               height = kTop + map_h + kKeyH + 10;

  std::string s = "<svg class=\"heatmap\" data-rows=\"" + std::to_string(m.rows.size()) + "\" data-columns=\"" +
                  std::to_string(cols.size()) + "\" width=\"" + coord(width) + "\" height=\"" + coord(height) +
                  "\" viewBox=\"0 0 " + coord(width) + " " + coord(height) + "\" role=\"img\" aria-label=\"" +
                  html_escape(m.title) + "\">\n<g class=\"cells\">\n";
  for (size_t r = 0; r < m.rows.size(); ++r)
    for (size_t j = 0; j < cols.size(); ++j) {
      const double v = cell[r][j];
      const std::string tip =
          m.rows[r] + ", " + steps_text(m, cols[j]) + ": " +
          (std::isfinite(v) ? (cols[j].second - cols[j].first > 1 ? "largest " : "") + plot::number_label(v)
                            : std::string("none"));
      s += rect(left + cell_w * double(j), kTop + row_h * double(r), cell_w, row_h,
                std::isfinite(v) ? "class=\"cell\" fill=\"" + ramp(key.at(v)) + "\">"
                                 : std::string("class=\"cell none\" fill=\"#e4e4e4\">")) +
           "<title>" + html_escape(tip) + "</title></rect>\n";
    }
  s += "</g>\n";
  // Row names: every one when they have room, else every k-th.
  const size_t every = size_t(std::ceil(12.0 / row_h));
  for (size_t r = 0; r < m.rows.size(); r += every)
    s += text(left - 6, kTop + row_h * (double(r) + 0.5) + 4, "end", html_escape(m.rows[r]), " class=\"tick y\"");
  // Step ticks under the columns that hold them.
  const double base = kTop + map_h;
  const std::vector<double> ticks = plot::nice_ticks(double(m.steps.front()), double(m.steps.back()), true);
  const double step = plot::tick_step(ticks);
  for (double t : ticks)
    for (size_t j = 0; j < cols.size(); ++j)
      if (double(m.steps[cols[j].second - 1]) >= t) {
        const double x = left + cell_w * (double(j) + 0.5);
        s += "<line class=\"axis\" x1=\"" + coord(x) + "\" y1=\"" + coord(base) + "\" x2=\"" + coord(x) + "\" y2=\"" +
             coord(base + 4) + "\"/>\n";
        s += text(x, base + 16, "middle", plot::tick_label(t, step), " class=\"tick x\"");
        break;
      }
  s += text(left + map_w / 2, base + 32, "middle", "step");
  // The colour key: swatches from the smallest value to the largest.
  const double ky = base + 44;
  s += text(key_x - 6, ky + 12, "end", html_escape(key_text));
  const double kx = key_x;
  for (int i = 0; i < kKeySwatches; ++i)
    s += rect(kx + 24.0 * i, ky, 24, 14,
              "class=\"key\" fill=\"" + ramp((i + 0.5) / kKeySwatches) + "\"><title>" +
                  plot::number_label(key.value((i + 0.5) / kKeySwatches)) + "</title></rect>\n");
  s += text(kx + 24.0 * kKeySwatches + 6, ky + 12, "start", plot::number_label(key.hi));
  return s + "</svg>\n";
}

}  // namespace sweep::report_plot
