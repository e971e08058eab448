#include "report_plots.h"

#include <algorithm>  // min, max, clamp, sort
#include <cmath>      // log10, isfinite
#include <cstdio>     // snprintf
#include <optional>

#include "report.h"  // html_escape

namespace sweep::report_plot {
namespace {

// Chart geometry in SVG units (CSS px).
constexpr double kPlotW = 630, kPlotH = 300;
constexpr double kMinLeft = 70, kRight = 20, kTop = 20, kBottom = 44;
// End labels: their spacing, and an upper bound of one character's advance at their
// 11 px (DejaVu Sans: "=" 9.2 px, "m" 10.7 px, digits 7 px, most lower case 6-7 px).
constexpr double kEndGap = 13, kCharW = 7.4;
// A slice plot: three fit beside each other in a 1400 px window.
constexpr double kSliceW = 410, kSliceH = 290, kSliceMinLeft = 64, kSliceRight = 16, kSliceTop = 14;

std::string svg_text(double x, double y, const char* anchor, const std::string& escaped,
                     const std::string& extra = "") {
  return "<text x=\"" + coord(x) + "\" y=\"" + coord(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">" + escaped +
         "</text>\n";
}

std::string svg_line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return "<line " + attrs + " x1=\"" + coord(x1) + "\" y1=\"" + coord(y1) + "\" x2=\"" + coord(x2) + "\" y2=\"" +
         coord(y2) + "\"/>\n";
}

std::string svg_open(double w, double h, const std::string& aria, const std::string& cls = "") {
  return "<svg" + (cls.empty() ? std::string() : " class=\"" + cls + "\"") + " width=\"" + coord(w) + "\" height=\"" +
         coord(h) + "\" viewBox=\"0 0 " + coord(w) + " " + coord(h) + "\" role=\"img\" aria-label=\"" +
         html_escape(aria) + "\">\n";
}

// Characters of a UTF-8 text (its lead bytes).
size_t chars(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

// A label past `max` characters is cut, with the whole of it in its tooltip: only where a
// place on an axis has room for no more (an axis name, a category).
std::string cut_text(const std::string& label, size_t max) {
  if (chars(label) <= max) return html_escape(label);
  size_t cut = 0, n = 0;
  while (cut < label.size() && n < max - 1) {
    ++cut;
    while (cut < label.size() && (static_cast<unsigned char>(label[cut]) & 0xC0) == 0x80) ++cut;
    ++n;
  }
  return html_escape(label.substr(0, cut)) + "&#8230;";
}

// Where y lies between the limits (0 bottom, 1 top), unclamped; -inf for <= 0 on a log axis.
double yfrac(const plot::Limits& yl, double y) {
  if (yl.log) return y > 0 ? (std::log10(y) - std::log10(yl.lo)) / (std::log10(yl.hi) - std::log10(yl.lo)) : -INFINITY;
  return (y * 0.5 - yl.lo * 0.5) / (yl.hi * 0.5 - yl.lo * 0.5);  // halved: finite near DBL_MAX
}

// Ticks of a log axis: 1, 2 and 5 times each power of ten inside it when that gives no
// more than 8, else decades (log_ticks).
std::vector<double> log_axis_ticks(double lo, double hi) {
  std::vector<double> t;
  for (int k = int(std::floor(std::log10(lo))); k <= int(std::ceil(std::log10(hi))); ++k)
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10.0, k);
      if (v >= lo * (1 - 1e-12) && v <= hi * (1 + 1e-12)) t.push_back(v);
    }
  return t.size() >= 2 && t.size() <= 8 ? t : plot::log_ticks(lo, hi);
}

// The ticks of a y axis and their labels: nice numbers (decades on a log axis).
std::vector<std::pair<double, std::string>> y_ticks(const plot::Limits& yl) {
  const std::vector<double> yt = yl.log ? plot::log_ticks(yl.lo, yl.hi) : plot::nice_ticks(yl.lo, yl.hi);
  const double ystep = plot::tick_step(yt);
  std::vector<std::pair<double, std::string>> out;
  out.reserve(yt.size());
  for (double y : yt) out.emplace_back(y, plot::tick_label(y, yl.log ? y : ystep));
  return out;
}

// The left edge of a plot box whose y tick labels must fit between it and the axis title
// (rotated, at x = 16): at least `least`.
double left_edge(const plot::Limits& yl, double least) {
  size_t widest = 0;
  for (const auto& [y, label] : y_ticks(yl)) widest = std::max(widest, label.size());
  return std::max(least, 34 + kCharW * double(widest));
}

// The y axis of a plot box: gridlines and labelled ticks at nice numbers (decades on a log axis).
std::string y_axis(const plot::Limits& yl, double left, double width, double top, double height,
                   const std::string& label) {
  std::string s;
  const double base = top + height;
  auto py = [&](double y) { return base - std::clamp(yfrac(yl, y), 0.0, 1.0) * height; };
  for (const auto& [y, tick] : y_ticks(yl)) {
    s += svg_line(left, py(y), left + width, py(y), "class=\"grid\"");
    s += svg_line(left - 4, py(y), left, py(y), "class=\"axis\"");
    s += svg_text(left - 6, py(y) + 4, "end", tick, " class=\"tick y\"");
  }
  s += svg_line(left, top, left, base, "class=\"axis\"");
  s += svg_text(16, top + height / 2, "middle", html_escape(label) + (yl.log ? " (log scale)" : ""),
                " transform=\"rotate(-90 16 " + coord(top + height / 2) + ")\"");
  return s;
}

// The x axis: gridlines and labelled ticks, at nice numbers or (log) 1-2-5 per decade.
std::string x_axis(const plot::Limits& xl, bool integer, double left, double width, double top, double height,
                   const std::string& label) {
  std::string s;
  const double base = top + height;
  auto px = [&](double x) {
    const double f = yfrac(xl, x);
    return left + (xl.hi > xl.lo && std::isfinite(f) ? std::clamp(f, 0.0, 1.0) : 0.5) * width;
  };
  const std::vector<double> xt = xl.log ? log_axis_ticks(xl.lo, xl.hi) : plot::nice_ticks(xl.lo, xl.hi, integer);
  const double xstep = plot::tick_step(xt);
  for (double x : xt) {
    s += svg_line(px(x), top, px(x), base, "class=\"grid\"");
    s += svg_line(px(x), base, px(x), base + 4, "class=\"axis\"");
    s += svg_text(px(x), base + 16, "middle", xl.log ? plot::number_label(x) : plot::tick_label(x, xstep),
                  " class=\"tick x\"");
  }
  s += svg_line(left, base, left + width, base, "class=\"axis\"");
  s += svg_text(left + width / 2, base + 34, "middle", html_escape(label) + (xl.log ? " (log scale)" : ""));
  return s;
}

plot::Limits linear(double lo, double hi) {
  plot::Limits l;
  l.lo = lo, l.hi = hi, l.log = false;
  return l;
}

std::string dash_attr(const std::string& pattern) {
  return pattern.empty() ? "" : " stroke-dasharray=\"" + pattern + "\"";
}

std::string colour_of(const Series& s, size_t i) { return s.colour.empty() ? plot::series_colour(i) : s.colour; }
std::string dash_of(const Series& s, size_t i) { return s.colour.empty() ? plot::series_dash(i) : ""; }

// What each curve's end label says: its legend, or its number when that is too long.
std::vector<std::string> end_texts(const LineChart& chart) {
  std::vector<std::string> out;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const std::string& l = chart.series[i].legend;
    out.push_back(chars(l) <= kEndLabelMax && !l.empty() ? l : std::to_string(i + 1));
  }
  return out;
}

bool labelled_ends(const LineChart& chart) { return chart.end_labels && chart.series.size() >= 2; }

// A curve with points past the limits: drawn clipped at the edge, marked and named.
struct Clip {
  size_t series;
  double x, value;
  bool above;
};

std::vector<Clip> clipped_points(const LineChart& chart, const plot::Limits& yl) {
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
  return clips;
}

// Label positions that keep `gap` apart inside [top, bottom], each as near its wish as
// that allows: pushed down from the top, then up from the bottom.
std::vector<double> spread(const std::vector<double>& wish, double gap, double top, double bottom) {
  std::vector<size_t> order(wish.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return wish[a] < wish[b]; });
  std::vector<double> y(wish.size());
  double prev = top - gap;
  for (size_t i : order) prev = y[i] = std::max(std::clamp(wish[i], top, bottom), prev + gap);
  double next = bottom + gap;
  for (size_t k = order.size(); k-- > 0;) next = y[order[k]] = std::min(y[order[k]], next - gap);
  return y;
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
  bool log_y = false;
  for (const LineChart* c : charts) {
    log_y = log_y || c->log_y;
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
  sc.y = log_y ? plot::log_limits(all) : plot::robust_limits(bulk.empty() ? all : bulk);
  // Every point at one x (a figure recorded at a single step): a range around it, so the
  // axis has ticks on both sides rather than one.
  if (sc.any && sc.x_lo == sc.x_hi) {
    const double d = std::max(1.0, std::fabs(sc.x_lo) * 0.05);
    sc.x_lo -= d, sc.x_hi += d;
  }
  return sc;
}

std::string svg_line_chart(const LineChart& chart, const Scale& sc) {
  bool any = false;
  for (const Series& s : chart.series)
    for (double v : s.y) any = any || std::isfinite(v);
  if (!any) return "<p>No finite values to plot.</p>\n";

  const size_t n_series = chart.series.size();
  // Each curve's last finite point, where its end label points.
  std::vector<std::optional<std::pair<double, double>>> ends(n_series);
  for (size_t i = 0; i < n_series; ++i)
    for (size_t k = 0; k < chart.series[i].x.size() && k < chart.series[i].y.size(); ++k)
      if (std::isfinite(chart.series[i].y[k])) ends[i] = std::make_pair(chart.series[i].x[k], chart.series[i].y[k]);
  const bool labels = labelled_ends(chart);
  const std::vector<std::string> texts = end_texts(chart);
  size_t widest = 0, labelled = 0;
  for (size_t i = 0; labels && i < n_series; ++i)
    if (ends[i]) widest = std::max(widest, chars(texts[i])), ++labelled;
  const double gutter = labels ? 22 + kCharW * double(widest) : 0;
  const double pw = kPlotW, ph = std::max(kPlotH, kEndGap * double(labelled) + 10), base = kTop + ph;
  const plot::Limits& yl = sc.y;
  const double left = left_edge(yl, kMinLeft);
  auto px = [&](double x) {
    const double f = (x - sc.x_lo) / (sc.x_hi - sc.x_lo);
    return left + (sc.x_hi > sc.x_lo && std::isfinite(f) ? f : 0.5) * pw;
  };
  auto py = [&](double y) { return base - std::clamp(yfrac(yl, y), 0.0, 1.0) * ph; };
  const std::vector<Clip> clips = clipped_points(chart, yl);

  std::string s = svg_open(left + pw + gutter + kRight, base + kBottom,
                           chart.y_label + " against " + chart.x_label + ": " + chart.title, "lines");
  s += x_axis(linear(sc.x_lo, sc.x_hi), true, left, pw, kTop, ph, chart.x_label);
  s += y_axis(yl, left, pw, kTop, ph, chart.y_label);
  for (const RefLine& l : chart.lines) {
    if (!std::isfinite(l.y)) continue;
    s += svg_line(left, py(l.y), left + pw, py(l.y), "class=\"ref\"");
    s += svg_text(left + pw - 4, py(l.y) - 4, "end", html_escape(l.label), " class=\"ref\"");
  }
  // Under the curves: what a spike decision went back over, and where it was taken.
  for (const StepMark& m : chart.marks) {
    if (!std::isfinite(m.from) || !std::isfinite(m.to)) continue;
    const double x0 = std::clamp(px(std::min(m.from, m.to)), left, left + pw);
    const double x1 = std::clamp(px(std::max(m.from, m.to)), left, left + pw);
    s += "<g class=\"spike\"><title>" + html_escape(m.title) + "</title>";
    if (x1 > x0)
      s += "<rect x=\"" + coord(x0) + "\" y=\"" + coord(kTop) + "\" width=\"" + coord(x1 - x0) + "\" height=\"" +
           coord(ph) + "\"/>";
    s += svg_line(x1, kTop, x1, base, "class=\"mark\"") + "</g>\n";
  }
  // Where each end label goes: beside the plot, as near its curve's end as the others allow.
  std::vector<double> wish, at;
  std::vector<size_t> who;
  for (size_t i = 0; labels && i < n_series; ++i)
    if (ends[i]) wish.push_back(py(ends[i]->second)), who.push_back(i);
  at = spread(wish, kEndGap, kTop + 4, base);
  std::vector<double> label_y(n_series, NAN);
  for (size_t k = 0; k < who.size(); ++k) label_y[who[k]] = at[k];

  s += "<g class=\"curves\">\n";
  for (size_t i = 0; i < n_series; ++i) {
    const Series& c = chart.series[i];
    const std::string colour = colour_of(c, i), dash = dash_attr(dash_of(c, i)), label = html_escape(c.label);
    s += "<g class=\"s\">\n";
    // The band under its line; translucent, so the lines of other curves show through.
    if (c.lo.size() == c.x.size() && c.hi.size() == c.x.size() && c.x.size() >= 2 && c.lo != c.hi) {
      std::string pts;
      for (size_t k = 0; k < c.x.size(); ++k) pts += (k ? " " : "") + coord(px(c.x[k])) + "," + coord(py(c.hi[k]));
      for (size_t k = c.x.size(); k-- > 0;) pts += " " + coord(px(c.x[k])) + "," + coord(py(c.lo[k]));
      s += "<polygon class=\"band\" fill=\"" + colour + "\" points=\"" + pts + "\"><title>" + label +
           " (band)</title></polygon>\n";
    }
    std::string points;
    size_t drawn = 0;
    for (size_t k = 0; k < c.x.size() && k < c.y.size(); ++k) {
      if (!std::isfinite(c.y[k])) continue;
      points += (drawn++ ? " " : "") + coord(px(c.x[k])) + "," + coord(py(c.y[k]));
    }
    const std::string width = c.width == 1.5 ? "" : " stroke-width=\"" + coord(c.width) + "\"";
    if (drawn >= 2) {
      s += "<polyline stroke=\"" + colour + "\"" + dash + width + " points=\"" + points + "\"><title>" + label +
           "</title></polyline>\n";
    } else if (drawn == 1) {  // a one-point polyline draws nothing
      const size_t comma = points.find(',');
      s += "<circle fill=\"" + colour + "\" r=\"3\" cx=\"" + points.substr(0, comma) + "\" cy=\"" +
           points.substr(comma + 1) + "\"><title>" + label + "</title></circle>\n";
    }
    if (std::isfinite(label_y[i])) {
      // A leader from the curve's end to its name: a short elbow from the right edge, a
      // dotted line across the plot from a curve that ended early.
      const double x0 = px(ends[i]->first), y0 = py(ends[i]->second), x1 = left + pw + 14;
      const bool early = x0 < left + pw - 1;
      s += std::string("<polyline class=\"leader") + (early ? " early" : "") + "\" stroke=\"" + colour +
           "\" points=\"" + coord(x0 + 2) + "," + coord(y0) + " " +
           (early ? "" : coord(left + pw + 6) + "," + coord(label_y[i]) + " ") + coord(x1 - 3) + "," +
           coord(label_y[i]) + "\"/>\n";
      s += svg_text(x1, label_y[i] + 4, "start", html_escape(texts[i]) + "<title>" + label + "</title>",
                    " class=\"end\"");
    }
    s += "</g>\n";
  }
  s += "</g>\n";
  // A triangle at the edge where each clipped curve leaves the plot; the legend names it.
  for (const Clip& k : clips) {
    const Series& c = chart.series[k.series];
    const std::string note =
        "clipped: " + c.label + (k.above ? " peaks at " : " dips to ") + plot::number_label(k.value);
    const double x = px(k.x), y = k.above ? kTop : base, d = k.above ? -1 : 1;
    s += "<path class=\"clipped\" d=\"M" + coord(x) + " " + coord(y + d * 7) + " L" + coord(x - 5) + " " +
         coord(y - d * 2) + " L" + coord(x + 5) + " " + coord(y - d * 2) + " Z\"><title>" + html_escape(note) +
         "</title></path>\n";
  }
  return s + "</svg>\n";
}

std::string html_legend(const LineChart& chart, const Scale& sc) {
  if (chart.series.empty() || (chart.series.size() == 1 && chart.series[0].legend.empty())) return "";
  const std::vector<std::string> texts = end_texts(chart);
  bool numbered = false;
  for (size_t i = 0; labelled_ends(chart) && i < chart.series.size(); ++i)
    numbered = numbered || texts[i] != chart.series[i].legend;
  std::string h = numbered ? "<ol class=\"legend\">\n" : "<ul class=\"legend\">\n";
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const Series& c = chart.series[i];
    bool finite = false;
    for (double v : c.y) finite = finite || std::isfinite(v);
    h += "<li title=\"" + html_escape(c.label) + "\"><svg class=\"swatch\" width=\"26\" height=\"10\" " +
         "aria-hidden=\"true\"><line x1=\"1\" y1=\"5\" x2=\"25\" y2=\"5\" stroke=\"" + colour_of(c, i) +
         "\" stroke-width=\"3\"" + dash_attr(dash_of(c, i)) + "/></svg>" + html_escape(c.legend) +
         (finite ? "" : " &#8212; no finite value") + "</li>\n";
  }
  h += numbered ? "</ol>\n" : "</ul>\n";
  for (const Clip& k : clipped_points(chart, sc.y))
    h += std::string("<p class=\"note\">") + (k.above ? "&#9650; " : "&#9660; ") +
         "clipped: " + html_escape(chart.series[k.series].legend) + (k.above ? " peaks at " : " dips to ") +
         plot::number_label(k.value) + "</p>\n";
  return h;
}

std::string chart_figure(const LineChart& chart, const Scale& scale) {
  std::string svg = svg_line_chart(chart, scale);
  if (svg.rfind("<svg", 0) != 0) return svg;
  return "<figure class=\"chart\">\n" + svg + html_legend(chart, scale) + "</figure>\n";
}

std::string svg_parallel(const std::vector<ParallelAxis>& axes, const std::vector<ParallelLine>& lines,
                         const std::string& title) {
  if (axes.size() < 2 || lines.empty()) return "";
  constexpr double kTopP = 52, kPlotH = 300, kMarginL = 100, kMarginR = 80;
  const double gap = std::min(150.0, (kMaxPlotWidth - kMarginL - kMarginR) / double(axes.size() - 1));
  const bool two_rows = gap < 130;  // names that would meet take turns above each other
  const double width = kMarginL + kMarginR + gap * double(axes.size() - 1), height = kTopP + kPlotH + 30;
  std::string s = svg_open(width, height, "parallel coordinates: " + title);
  // Each numeric axis spans its lines' finite values (padded); categories sit evenly.
  std::vector<plot::Limits> lim(axes.size());
  for (size_t a = 0; a < axes.size(); ++a) {
    if (!axes[a].categories.empty()) continue;
    std::vector<double> v;
    for (const auto& l : lines)
      if (a < l.values.size() && std::isfinite(l.values[a]) && (!axes[a].log || l.values[a] > 0))
        v.push_back(l.values[a]);
    lim[a] = plot::robust_limits({v});
    lim[a].log = axes[a].log;
    if (!v.empty()) {
      const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
      if (axes[a].log) {
        const double pad = *hi > *lo ? std::pow(*hi / *lo, 0.05) : 2;
        lim[a].lo = *lo / pad, lim[a].hi = *hi * pad;
      } else {
        const double pad = *hi > *lo ? 0.05 * (*hi - *lo) : (*lo == 0 ? 1 : std::abs(*lo) * 0.1);
        lim[a].lo = *lo - pad, lim[a].hi = *hi + pad;
      }
    }
  }
  auto ax = [&](size_t a) { return kMarginL + gap * double(a); };
  auto ay = [&](size_t a, double v) {
    if (!axes[a].categories.empty()) {
      const size_t n = axes[a].categories.size();
      return kTopP + kPlotH - (n == 1 ? 0.5 : v / double(n - 1)) * kPlotH;
    }
    return kTopP + kPlotH - std::clamp(yfrac(lim[a], v), 0.0, 1.0) * kPlotH;
  };
  const size_t name_chars = size_t(((two_rows ? 2 : 1) * gap - 12) / kCharW);
  const size_t value_chars = size_t(std::max(4.0, (gap - 14) / kCharW));
  for (size_t a = 0; a < axes.size(); ++a) {
    s += svg_line(ax(a), kTopP, ax(a), kTopP + kPlotH, "class=\"axis\"");
    const double name_y = kTopP - (two_rows && a % 2 ? 12 : 28);
    s += svg_text(ax(a), name_y, "middle",
                  cut_text(axes[a].name, name_chars) + "<title>" +
                      html_escape(axes[a].title.empty() ? axes[a].name : axes[a].title) + "</title>",
                  " class=\"tick x\"");
    if (!axes[a].categories.empty()) {
      for (size_t c = 0; c < axes[a].categories.size(); ++c)
        s += svg_text(ax(a) - 6, ay(a, double(c)) + 4, "end",
                      cut_text(axes[a].categories[c], a == 0 ? size_t((kMarginL - 10) / kCharW) : value_chars) +
                          "<title>" + html_escape(axes[a].categories[c]) + "</title>",
                      " class=\"tick y\"");
    } else {
      // The last axis (the objective) is labelled on its right, clear of the lines.
      const bool right = a + 1 == axes.size();
      const double d = right ? 1 : -1;
      const std::vector<double> t =
          lim[a].log ? log_axis_ticks(lim[a].lo, lim[a].hi) : plot::nice_ticks(lim[a].lo, lim[a].hi);
      const double step = plot::tick_step(t);
      for (double v : t) {
        s += svg_line(ax(a) + 4 * d, ay(a, v), ax(a), ay(a, v), "class=\"axis\"");
        s += svg_text(ax(a) + 6 * d, ay(a, v) + 4, right ? "start" : "end",
                      lim[a].log ? plot::number_label(v) : plot::tick_label(v, step), " class=\"tick y\"");
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
    bool gap_in_line = false;
    for (size_t a = 0; a < axes.size(); ++a) {
      if (a >= l.values.size() || !std::isfinite(l.values[a]) || (axes[a].log && !(l.values[a] > 0))) {
        gap_in_line = true;
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
                             (l.highlight ? " stroke-width=\"3\"" : "") +
                             (gap_in_line ? " stroke-dasharray=\"2 3\"" : "") + " points=\"" + pts + "\"><title>" +
                             html_escape(l.label) + "</title></polyline>\n";
    (l.highlight ? top : body) += line;
  }
  return s + body + top + "</svg>\n";
}

std::string svg_slice(const std::vector<SlicePoint>& points, const ParallelAxis& x, const std::string& y_label) {
  std::vector<double> xs, ys;
  for (const auto& p : points)
    if (std::isfinite(p.x) && std::isfinite(p.y) && (!x.log || p.x > 0)) xs.push_back(p.x), ys.push_back(p.y);
  if (xs.empty()) return "";
  plot::Limits yl = plot::robust_limits({ys}), xl;
  const double slice_left = left_edge(yl, kSliceMinLeft);
  const double pw = kSliceW - slice_left - kSliceRight, ph = kSliceH - kSliceTop - kBottom, base = kSliceTop + ph;
  const bool categorical = !x.categories.empty();
  const auto [x0, x1] = std::minmax_element(xs.begin(), xs.end());
  if (categorical) {
    xl = linear(-0.5, double(x.categories.size()) - 0.5);
  } else if (x.log) {
    const double pad = *x1 > *x0 ? std::pow(*x1 / *x0, 0.05) : 2;
    xl.lo = *x0 / pad, xl.hi = *x1 * pad, xl.log = true;
  } else {
    const double pad = *x1 > *x0 ? 0.05 * (*x1 - *x0) : std::max(1.0, std::abs(*x0) * 0.1);
    xl = linear(*x0 - pad, *x1 + pad);
  }
  auto px = [&](double v) { return slice_left + std::clamp(yfrac(xl, v), 0.0, 1.0) * pw; };
  auto py = [&](double v) { return base - std::clamp(yfrac(yl, v), 0.0, 1.0) * ph; };
  std::string s = svg_open(kSliceW, kSliceH, y_label + " against " + (x.title.empty() ? x.name : x.title), "slice");
  if (categorical) {
    const size_t room = size_t(std::max(3.0, pw / double(x.categories.size()) / kCharW));
    for (size_t c = 0; c < x.categories.size(); ++c) {
      s += svg_line(px(double(c)), kSliceTop, px(double(c)), base, "class=\"grid\"");
      s += svg_text(px(double(c)), base + 16, "middle",
                    cut_text(x.categories[c], room) + "<title>" + html_escape(x.categories[c]) + "</title>",
                    " class=\"tick x\"");
    }
    s += svg_line(slice_left, base, slice_left + pw, base, "class=\"axis\"");
    s += svg_text(slice_left + pw / 2, base + 34, "middle", html_escape(x.name));
  } else {
    s += x_axis(xl, false, slice_left, pw, kSliceTop, ph, x.name);
  }
  s += y_axis(yl, slice_left, pw, kSliceTop, ph, y_label);
  std::string best;
  for (const auto& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y) || (x.log && !(p.x > 0))) continue;
    char fill[16];  // light blue (first trials) to dark blue (last)
    const double t = std::clamp(p.order, 0.0, 1.0);
    std::snprintf(fill, sizeof fill, "#%02x%02x%02x", int(198 + t * (8 - 198)), int(219 + t * (48 - 219)),
                  int(239 + t * (107 - 239)));
    const std::string dot = "<circle class=\"" + std::string(p.best ? "best" : "trial") + "\" fill=\"" + fill +
                            "\" r=\"" + (p.best ? "5.5" : "4") + "\" cx=\"" + coord(px(p.x)) + "\" cy=\"" +
                            coord(py(p.y)) + "\"><title>" + html_escape(p.label) + "</title></circle>\n";
    (p.best ? best : s) += dot;
  }
  return s + best + "</svg>\n";
}

std::string svg_scatter(const std::vector<ScatterPoint>& points, const std::string& x_label, const std::string& y_label,
                        const std::string& title) {
  std::vector<double> xs, ys;
  for (const auto& p : points)
    if (std::isfinite(p.x) && std::isfinite(p.y)) xs.push_back(p.x), ys.push_back(p.y);
  if (xs.empty()) return "";
  const double pw = kPlotW, ph = kPlotH;
  plot::Limits yl = plot::robust_limits({ys});
  const double left = left_edge(yl, kMinLeft);
  const auto [x0, x1] = std::minmax_element(xs.begin(), xs.end());
  const double xpad = *x1 > *x0 ? 0.05 * (*x1 - *x0) : std::max(1.0, std::abs(*x0) * 0.1);
  const plot::Limits xl = linear(*x0 - xpad, *x1 + xpad);
  auto px = [&](double x) { return left + std::clamp(yfrac(xl, x), 0.0, 1.0) * pw; };
  auto py = [&](double y) { return kTop + ph - std::clamp(yfrac(yl, y), 0.0, 1.0) * ph; };
  std::string s = svg_open(left + pw + kRight, kTop + ph + kBottom, y_label + " against " + x_label + ": " + title);
  s += x_axis(xl, false, left, pw, kTop, ph, x_label);
  s += y_axis(yl, left, pw, kTop, ph, y_label);
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
