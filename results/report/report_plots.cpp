#include "report_plots.h"

#include <algorithm>  // min, max, clamp, sort
#include <cmath>      // log10, isfinite
#include <cstdio>     // snprintf
#include <optional>

#include "report.h"  // html_escape

namespace sweep::report_plot {
namespace {

// Chart geometry in SVG units; the legend extends the SVG below the plot area.
constexpr double kWidth = 720, kHeight = 360;
constexpr double kLeft = 70, kRight = 20, kTop = 20, kBottom = 40;
constexpr double kLegendRow = 18;
// Past this many curves a legend stops helping; the tables name every group anyway.
constexpr size_t kLegendMax = 40;

std::string svg_text(double x, double y, const char* anchor, const std::string& escaped,
                     const std::string& extra = "") {
  return "<text x=\"" + coord(x) + "\" y=\"" + coord(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">" + escaped +
         "</text>\n";
}

std::string svg_line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return "<line " + attrs + " x1=\"" + coord(x1) + "\" y1=\"" + coord(y1) + "\" x2=\"" + coord(x2) + "\" y2=\"" +
         coord(y2) + "\"/>\n";
}

std::string svg_open(double w, double h, const std::string& aria) {
  return "<svg width=\"" + coord(w) + "\" height=\"" + coord(h) + "\" viewBox=\"0 0 " + coord(w) + " " + coord(h) +
         "\" role=\"img\" aria-label=\"" + html_escape(aria) + "\">\n";
}

// A label past `max` bytes is cut (80 fit a legend line beside its swatch at 12 px); the
// tooltip keeps the whole name.
std::string legend_text(const std::string& label, size_t max = 80) {
  if (label.size() <= max) return html_escape(label);
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(label[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
  return html_escape(label.substr(0, cut)) + "&#8230;";
}

// Where y lies between the limits (0 bottom, 1 top), unclamped; -inf for <= 0 on a log axis.
double yfrac(const plot::Limits& yl, double y) {
  if (yl.log) return y > 0 ? (std::log10(y) - std::log10(yl.lo)) / (std::log10(yl.hi) - std::log10(yl.lo)) : -INFINITY;
  return (y * 0.5 - yl.lo * 0.5) / (yl.hi * 0.5 - yl.lo * 0.5);  // halved: finite near DBL_MAX
}

// The y axis of a plot box: gridlines and labelled ticks at nice numbers (decades on a log axis).
std::string y_axis(const plot::Limits& yl, double left, double width, double top, double height,
                   const std::string& label) {
  std::string s;
  const double base = top + height;
  auto py = [&](double y) { return base - std::clamp(yfrac(yl, y), 0.0, 1.0) * height; };
  const std::vector<double> yt = yl.log ? plot::log_ticks(yl.lo, yl.hi) : plot::nice_ticks(yl.lo, yl.hi);
  const double ystep = plot::tick_step(yt);
  for (double y : yt) {
    s += svg_line(left, py(y), left + width, py(y), "class=\"grid\"");
    s += svg_line(left - 4, py(y), left, py(y), "class=\"axis\"");
    s += svg_text(left - 6, py(y) + 4, "end", plot::tick_label(y, yl.log ? y : ystep), " class=\"tick y\"");
  }
  s += svg_line(left, top, left, base, "class=\"axis\"");
  s += svg_text(16, top + height / 2, "middle", html_escape(label) + (yl.log ? " (log scale)" : ""),
                " transform=\"rotate(-90 16 " + coord(top + height / 2) + ")\"");
  return s;
}

// The x axis: gridlines and labelled ticks.
std::string x_axis(double lo, double hi, bool integer, double left, double width, double top, double height,
                   const std::string& label) {
  std::string s;
  const double base = top + height;
  auto px = [&](double x) {
    const double f = (x - lo) / (hi - lo);
    return left + (hi > lo && std::isfinite(f) ? f : 0.5) * width;
  };
  const std::vector<double> xt = plot::nice_ticks(lo, hi, integer);
  const double xstep = plot::tick_step(xt);
  for (double x : xt) {
    s += svg_line(px(x), top, px(x), base, "class=\"grid\"");
    s += svg_line(px(x), base, px(x), base + 4, "class=\"axis\"");
    s += svg_text(px(x), base + 16, "middle", plot::tick_label(x, xstep), " class=\"tick x\"");
  }
  s += svg_line(left, base, left + width, base, "class=\"axis\"");
  s += svg_text(left + width / 2, base + 34, "middle", html_escape(label));
  return s;
}

std::string dash_attr(size_t i) {
  const std::string pattern = plot::series_dash(i);
  return pattern.empty() ? "" : " stroke-dasharray=\"" + pattern + "\"";
}

}  // namespace

std::string coord(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

Scale shared_scale(const std::vector<const LineChart*>& charts) {
  Scale sc;
  std::vector<std::vector<double>> bulk, all;
  for (const LineChart* c : charts) {
    for (const Series& s : c->series) {
      for (size_t k = 0; k < s.x.size() && k < s.y.size(); ++k)
        if (std::isfinite(s.x[k]) && std::isfinite(s.y[k]))
          sc.any = true, sc.x_lo = std::min(sc.x_lo, s.x[k]), sc.x_hi = std::max(sc.x_hi, s.x[k]);
      for (const auto* v : {&s.y, &s.lo, &s.hi}) {
        if (v->empty()) continue;
        all.push_back(*v);
        if (s.sets_scale) bulk.push_back(*v);
      }
    }
    for (const RefLine& l : c->lines) bulk.push_back({l.y}), all.push_back({l.y});
  }
  sc.y = plot::robust_limits(bulk.empty() ? all : bulk);
  return sc;
}

std::string svg_line_chart(const LineChart& chart, const Scale& sc) {
  bool any = false;
  for (const Series& s : chart.series)
    for (double v : s.y) any = any || std::isfinite(v);
  if (!any) return "<p>No finite values to plot.</p>\n";

  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom, base = kTop + ph;
  const plot::Limits& yl = sc.y;
  auto px = [&](double x) {
    const double f = (x - sc.x_lo) / (sc.x_hi - sc.x_lo);
    return kLeft + (sc.x_hi > sc.x_lo && std::isfinite(f) ? f : 0.5) * pw;
  };
  auto py = [&](double y) { return base - std::clamp(yfrac(yl, y), 0.0, 1.0) * ph; };

  // Curves with points past the limits: drawn clipped at the edge, marked and named below.
  struct Clip {
    size_t series;
    double x, value;
    bool above;
  };
  std::vector<Clip> clips;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const Series& s = chart.series[i];
    std::optional<Clip> worst;
    for (size_t k = 0; k < s.x.size() && k < s.y.size(); ++k) {
      const double f = yfrac(yl, s.y[k]);
      if (!std::isfinite(s.y[k]) || (f >= 0 && f <= 1)) continue;
      const bool above = f > 1;
      if (!worst || (above && (!worst->above || s.y[k] > worst->value)) ||
          (!above && !worst->above && s.y[k] < worst->value))
        worst = Clip{i, s.x[k], s.y[k], above};
    }
    if (worst) clips.push_back(*worst);
  }

  const size_t n_series = chart.series.size();
  const size_t legend = std::min(n_series, kLegendMax) + (n_series > kLegendMax ? 1 : 0);
  const double notes_top = kHeight + 4, legend_top = notes_top + kLegendRow * double(clips.size());
  const double total_h = legend_top + kLegendRow * double(legend) + 8;
  std::string s = svg_open(kWidth, total_h, chart.y_label + " against " + chart.x_label + ": " + chart.title);
  s += x_axis(sc.x_lo, sc.x_hi, true, kLeft, pw, kTop, ph - 0, chart.x_label);
  s += y_axis(yl, kLeft, pw, kTop, ph, chart.y_label);

  // Bands first, so that every line stays visible over them.
  for (size_t i = 0; i < n_series; ++i) {
    const Series& c = chart.series[i];
    if (c.lo.size() != c.x.size() || c.hi.size() != c.x.size() || c.x.size() < 2 || c.lo == c.hi) continue;
    std::string pts;
    for (size_t k = 0; k < c.x.size(); ++k) pts += (k ? " " : "") + coord(px(c.x[k])) + "," + coord(py(c.hi[k]));
    for (size_t k = c.x.size(); k-- > 0;) pts += " " + coord(px(c.x[k])) + "," + coord(py(c.lo[k]));
    s += "<polygon class=\"band\" fill=\"" + std::string(plot::series_colour(i)) + "\" points=\"" + pts + "\"><title>" +
         html_escape(c.label) + " (band)</title></polygon>\n";
  }
  for (const RefLine& l : chart.lines) {
    if (!std::isfinite(l.y)) continue;
    s += svg_line(kLeft, py(l.y), kLeft + pw, py(l.y), "class=\"ref\"");
    s += svg_text(kLeft + pw - 4, py(l.y) - 4, "end", html_escape(l.label), " class=\"ref\"");
  }
  for (size_t i = 0; i < n_series; ++i) {
    const Series& c = chart.series[i];
    const std::string colour = plot::series_colour(i), dash = dash_attr(i), label = html_escape(c.label);
    std::string points;
    size_t drawn = 0;
    for (size_t k = 0; k < c.x.size() && k < c.y.size(); ++k) {
      if (!std::isfinite(c.y[k])) continue;
      points += (drawn++ ? " " : "") + coord(px(c.x[k])) + "," + coord(py(c.y[k]));
    }
    if (drawn >= 2) {
      s += "<polyline stroke=\"" + colour + "\"" + dash + " points=\"" + points + "\"><title>" + label +
           "</title></polyline>\n";
    } else if (drawn == 1) {  // a one-point polyline draws nothing
      const size_t comma = points.find(',');
      s += "<circle fill=\"" + colour + "\" r=\"3\" cx=\"" + points.substr(0, comma) + "\" cy=\"" +
           points.substr(comma + 1) + "\"><title>" + label + "</title></circle>\n";
    }
    if (i >= kLegendMax) continue;
    const double ly = legend_top + kLegendRow * double(i);
    s += "<line stroke=\"" + colour + "\" stroke-width=\"3\"" + dash + " x1=\"" + coord(kLeft) + "\" y1=\"" +
         coord(ly + 8) + "\" x2=\"" + coord(kLeft + 24) + "\" y2=\"" + coord(ly + 8) + "\"/>\n";
    // The legend names what differs; hovering it gives the curve's whole label.
    s += svg_text(kLeft + 30, ly + 12, "start",
                  legend_text(c.legend) + (drawn ? "" : " &#8212; no finite value") + "<title>" + label + "</title>");
  }
  // A triangle at the edge where each clipped curve leaves the plot, and a note naming it.
  for (size_t n = 0; n < clips.size(); ++n) {
    const Clip& k = clips[n];
    // Named as in the legend, which fits the line; the marker's tooltip has the whole label.
    const Series& c = chart.series[k.series];
    const std::string value = (k.above ? " peaks at " : " dips to ") + plot::number_label(k.value);
    const std::string note = "clipped: " + c.label + value;
    const double x = px(k.x), y = k.above ? kTop : base, d = k.above ? -1 : 1;
    s += "<path class=\"clipped\" d=\"M" + coord(x) + " " + coord(y + d * 7) + " L" + coord(x - 5) + " " +
         coord(y - d * 2) + " L" + coord(x + 5) + " " + coord(y - d * 2) + " Z\"><title>" + html_escape(note) +
         "</title></path>\n";
    s += svg_text(kLeft, notes_top + kLegendRow * double(n) + 12, "start",
                  (k.above ? "&#9650; " : "&#9660; ") + legend_text("clipped: " + c.legend + value), " class=\"note\"");
  }
  if (n_series > kLegendMax)
    s += svg_text(kLeft, legend_top + kLegendRow * double(kLegendMax) + 12, "start",
                  "&#8230; and " + std::to_string(n_series - kLegendMax) + " more curves (hover a curve for its name)");
  return s + "</svg>\n";
}

std::string svg_parallel(const std::vector<ParallelAxis>& axes, const std::vector<ParallelLine>& lines,
                         const std::string& title) {
  if (axes.size() < 2 || lines.empty()) return "";
  constexpr double kTopP = 40, kPlotH = 300, kMargin = 110, kGap = 150;
  const double width = 2 * kMargin + kGap * double(axes.size() - 1), height = kTopP + kPlotH + 30;
  std::string s = svg_open(width, height, "parallel coordinates: " + title);
  // Each numeric axis spans its lines' finite values (padded); categories sit evenly.
  std::vector<plot::Limits> lim(axes.size());
  for (size_t a = 0; a < axes.size(); ++a) {
    if (!axes[a].categories.empty()) continue;
    std::vector<double> v;
    for (const auto& l : lines)
      if (a < l.values.size() && std::isfinite(l.values[a])) v.push_back(l.values[a]);
    lim[a] = plot::robust_limits({v});
    lim[a].log = false;  // one line per run: a plain axis reads best
    if (!v.empty()) {
      const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
      const double pad = *hi > *lo ? 0.05 * (*hi - *lo) : (*lo == 0 ? 1 : std::abs(*lo) * 0.1);
      lim[a].lo = *lo - pad, lim[a].hi = *hi + pad;
    }
  }
  auto ax = [&](size_t a) { return kMargin + kGap * double(a); };
  auto ay = [&](size_t a, double v) {
    if (!axes[a].categories.empty()) {
      const size_t n = axes[a].categories.size();
      return kTopP + kPlotH - (n == 1 ? 0.5 : v / double(n - 1)) * kPlotH;
    }
    return kTopP + kPlotH - std::clamp(yfrac(lim[a], v), 0.0, 1.0) * kPlotH;
  };
  for (size_t a = 0; a < axes.size(); ++a) {
    s += svg_line(ax(a), kTopP, ax(a), kTopP + kPlotH, "class=\"axis\"");
    // Names and values cut to what fits between two axes (150 units); hover for the whole.
    s += svg_text(ax(a), kTopP - 22, "middle",
                  legend_text(axes[a].name, 22) + "<title>" + html_escape(axes[a].name) + "</title>",
                  " class=\"tick x\"");
    if (!axes[a].categories.empty()) {
      for (size_t c = 0; c < axes[a].categories.size(); ++c)
        s += svg_text(
            ax(a) - 6, ay(a, double(c)) + 4, "end",
            legend_text(axes[a].categories[c], 10) + "<title>" + html_escape(axes[a].categories[c]) + "</title>",
            " class=\"tick y\"");
    } else {
      // The last axis (the objective) is labelled on its right, clear of the lines.
      const bool right = a + 1 == axes.size();
      const double d = right ? 1 : -1;
      const std::vector<double> t = plot::nice_ticks(lim[a].lo, lim[a].hi);
      const double step = plot::tick_step(t);
      for (double v : t) {
        s += svg_line(ax(a) + 4 * d, ay(a, v), ax(a), ay(a, v), "class=\"axis\"");
        s += svg_text(ax(a) + 6 * d, ay(a, v) + 4, right ? "start" : "end", plot::tick_label(v, step),
                      " class=\"tick y\"");
      }
    }
  }
  // Colour by the last axis (the objective): rank among the finite ones.
  std::vector<double> last;
  for (const auto& l : lines)
    if (!l.values.empty() && std::isfinite(l.values.back())) last.push_back(l.values.back());
  std::sort(last.begin(), last.end());
  std::string body, top;
  for (const auto& l : lines) {
    std::string pts;
    bool gap = false;
    for (size_t a = 0; a < axes.size(); ++a) {
      if (a >= l.values.size() || !std::isfinite(l.values[a])) {
        gap = true;
        continue;
      }
      pts += (pts.empty() ? "" : " ") + coord(ax(a)) + "," + coord(ay(a, l.values[a]));
    }
    std::string colour = "#bbbbbb";  // no finite objective
    if (!l.values.empty() && std::isfinite(l.values.back()) && !last.empty()) {
      const double rank = last.size() > 1
                              ? double(std::lower_bound(last.begin(), last.end(), l.values.back()) - last.begin()) /
                                    double(last.size() - 1)
                              : 0;
      char buf[16];  // dark blue (best) to light orange (worst)
      std::snprintf(buf, sizeof buf, "#%02x%02x%02x", int(31 + rank * (240 - 31)), int(70 + rank * (160 - 70)),
                    int(140 + rank * (60 - 140)));
      colour = buf;
    }
    const std::string line = "<polyline class=\"pc\" stroke=\"" + colour + "\"" +
                             (l.highlight ? " stroke-width=\"3\"" : "") + (gap ? " stroke-dasharray=\"2 3\"" : "") +
                             " points=\"" + pts + "\"><title>" + html_escape(l.label) + "</title></polyline>\n";
    (l.highlight ? top : body) += line;
  }
  return s + body + top + "</svg>\n";
}

std::string svg_scatter(const std::vector<ScatterPoint>& points, const std::string& x_label, const std::string& y_label,
                        const std::string& title) {
  std::vector<double> xs, ys;
  for (const auto& p : points)
    if (std::isfinite(p.x) && std::isfinite(p.y)) xs.push_back(p.x), ys.push_back(p.y);
  if (xs.empty()) return "";
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  plot::Limits xl = plot::robust_limits({xs}), yl = plot::robust_limits({ys});
  xl.log = false;
  const auto [x0, x1] = std::minmax_element(xs.begin(), xs.end());
  const double xpad = *x1 > *x0 ? 0.05 * (*x1 - *x0) : std::max(1.0, std::abs(*x0) * 0.1);
  xl.lo = *x0 - xpad, xl.hi = *x1 + xpad;
  auto px = [&](double x) { return kLeft + std::clamp(yfrac(xl, x), 0.0, 1.0) * pw; };
  auto py = [&](double y) { return kTop + ph - std::clamp(yfrac(yl, y), 0.0, 1.0) * ph; };
  std::string s = svg_open(kWidth, kHeight + 24, y_label + " against " + x_label + ": " + title);
  s += x_axis(xl.lo, xl.hi, false, kLeft, pw, kTop, ph, x_label);
  s += y_axis(yl, kLeft, pw, kTop, ph, y_label);
  // The front from the fastest to the best: the line no run beats on both axes.
  std::vector<const ScatterPoint*> front;
  for (const auto& p : points)
    if (p.front && std::isfinite(p.x) && std::isfinite(p.y)) front.push_back(&p);
  std::sort(front.begin(), front.end(), [](const ScatterPoint* a, const ScatterPoint* b) { return a->x < b->x; });
  if (front.size() >= 2) {
    std::string pts;
    for (const auto* p : front) pts += (pts.empty() ? "" : " ") + coord(px(p->x)) + "," + coord(py(p->y));
    s += "<polyline class=\"front\" points=\"" + pts + "\"><title>Pareto front</title></polyline>\n";
  }
  for (const auto& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    s += "<circle class=\"" + std::string(p.front ? "front" : "point") + "\" r=\"" + (p.front ? "5" : "3.5") +
         "\" cx=\"" + coord(px(p.x)) + "\" cy=\"" + coord(py(p.y)) + "\"><title>" + html_escape(p.label) +
         (p.front ? " (Pareto front)" : "") + "</title></circle>\n";
  }
  return s + "</svg>\n";
}

}  // namespace sweep::report_plot
