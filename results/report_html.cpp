// The HTML report: one static page, inline CSS and SVG, no script, nothing fetched, so it
// can be mailed or archived with the sweep and opened offline. Every string that came
// from a record goes through html_escape.
#include <algorithm>  // min, max, clamp, all_of
#include <cmath>      // log10, isfinite
#include <optional>

#include "plot_axes.h"  // ticks, robust limits, palette
#include "report.h"
#include "report_format.h"

namespace sweep {
namespace {

using namespace report_fmt;

// Chart geometry in SVG units; the legend extends the SVG below the plot area.
constexpr double kWidth = 720, kHeight = 360;
constexpr double kLeft = 70, kRight = 20, kTop = 20, kBottom = 40;
constexpr double kLegendRow = 18;
// Past this many curves a legend stops helping; the table names every group anyway.
constexpr size_t kLegendMax = 40;

constexpr const char* kStyle =
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\n"
    "table{border-collapse:collapse;margin:1em 0}\n"
    "th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}\n"
    "th{background:#f4f4f4}\n"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
    "td.hash{font-family:monospace}\n"
    ".failure{color:#b00;font-size:smaller}\n"
    ".flag{color:#b00;font-weight:bold}\n"
    ".ok{color:#2a7}\n"
    ".missing{color:#999}\n"
    ".bar{display:inline-block;height:0.8em;background:#4e79a7}\n"
    "pre{background:#f7f7f7;padding:6px;max-width:100em;overflow-x:auto;font-size:smaller}\n"
    "svg{display:block;margin:1em 0;font:12px sans-serif}\n"
    "svg .axis{stroke:#444;stroke-width:1}\n"
    "svg .grid{stroke:#e4e4e4;stroke-width:1}\n"
    "svg .clipped{fill:#d00;stroke:#fff;stroke-width:1}\n"
    "svg text.note{fill:#b00}\n"
    ".wide{overflow-x:auto;max-width:100%}\n"
    "td.id{overflow-wrap:anywhere;min-width:10em;max-width:28em}\n"
    "svg polyline{fill:none;stroke-width:1.5}\n";

// One decimal is below a pixel and keeps large charts small.
std::string coord(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string td(const std::string& escaped, const char* cls = nullptr) {
  return cls ? "<td class=\"" + std::string(cls) + "\">" + escaped + "</td>" : "<td>" + escaped + "</td>";
}

std::string svg_text(double x, double y, const char* anchor, const std::string& escaped,
                     const std::string& extra = "") {
  return "<text x=\"" + coord(x) + "\" y=\"" + coord(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">" + escaped +
         "</text>\n";
}

// A config value as a cell: "unset" and "" are shown as such, not as a blank.
std::string value_cell(const std::string& v) {
  if (v == "unset") return td("unset", "missing");
  return v.empty() ? td("(empty)", "missing") : td(html_escape(v));
}

// A legend line past the chart's width is cut; the curve's tooltip keeps the whole name.
std::string legend_text(const std::string& label) {
  constexpr size_t kMax = 100;
  if (label.size() <= kMax) return html_escape(label);
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(label[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
  return html_escape(label.substr(0, cut)) + "&#8230;";
}

// A group of one run is named by its run id; a group of seeds by its values.
std::string curve_label(const SweepRecords& sweep, const RunGroup& g) {
  const std::string vary = values_text(g);
  if (g.runs.size() == 1) return sweep.runs[g.runs[0]].run_id + (vary.empty() ? "" : " (" + vary + ")");
  return (vary.empty() ? std::string("all") : vary) + " (mean of " + std::to_string(g.runs.size()) + " runs)";
}

// A group whose every run diverged: drawn, but it does not set the y scale.
bool all_diverged(const SweepRecords& sweep, const RunGroup& g) {
  return !g.runs.empty() &&
         std::all_of(g.runs.begin(), g.runs.end(), [&](size_t i) { return sweep.runs[i].status == "diverged"; });
}

// The scales every chart of the report shares, so that the --group-by panels compare.
struct Scales {
  double x_lo = INFINITY, x_hi = -INFINITY;  // steps
  plot::Limits y;
};

Scales chart_scales(const SweepRecords& sweep, const ReportModel& m) {
  Scales sc;
  std::vector<std::vector<double>> bulk, all;
  for (const Chart& c : m.charts)
    for (size_t gi : c.groups) {
      const RunGroup& g = m.groups[gi];
      for (int64_t step : g.curve_steps)
        sc.x_lo = std::min(sc.x_lo, double(step)), sc.x_hi = std::max(sc.x_hi, double(step));
      all.push_back(g.curve_loss);
      if (!all_diverged(sweep, g)) bulk.push_back(g.curve_loss);
    }
  sc.y = plot::robust_limits(bulk.empty() ? all : bulk);
  return sc;
}

// What the legend calls each curve of a chart: only the keys whose values differ between
// its curves (the group-by key and constant keys say nothing); the full label otherwise.
std::vector<std::string> legend_names(const SweepRecords& sweep, const ReportModel& m, const Chart& chart) {
  std::vector<bool> differs;
  for (size_t gi : chart.groups) {
    const RunGroup &g = m.groups[gi], &first = m.groups[chart.groups[0]];
    differs.resize(std::max(differs.size(), g.values.size()), false);
    for (size_t k = 0; k < g.values.size(); ++k)
      if (k >= first.values.size() || first.values[k] != g.values[k]) differs[k] = true;
  }
  std::vector<std::string> names;
  for (size_t gi : chart.groups) {
    const RunGroup& g = m.groups[gi];
    std::string name;
    for (size_t k = 0; k < g.values.size(); ++k)
      if (differs[k]) name += (name.empty() ? "" : ", ") + g.values[k].first + "=" + g.values[k].second;
    if (name.empty())
      name = curve_label(sweep, g);
    else if (g.runs.size() > 1)
      name += " (mean of " + std::to_string(g.runs.size()) + ")";
    names.push_back(name);
  }
  return names;
}

std::string svg_line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return "<line " + attrs + " x1=\"" + coord(x1) + "\" y1=\"" + coord(y1) + "\" x2=\"" + coord(x2) + "\" y2=\"" +
         coord(y2) + "\"/>\n";
}

std::string svg_chart(const SweepRecords& sweep, const ReportModel& m, const Chart& chart, const Scales& sc) {
  bool any = false;
  for (size_t g : chart.groups)
    for (double v : m.groups[g].curve_loss) any = any || std::isfinite(v);
  if (!any) return "<p>No finite loss values to plot.</p>\n";

  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom, base = kTop + ph;
  const plot::Limits& yl = sc.y;
  auto px = [&](double x) {
    const double f = (x - sc.x_lo) / (sc.x_hi - sc.x_lo);
    return kLeft + (sc.x_hi > sc.x_lo && std::isfinite(f) ? f : 0.5) * pw;
  };
  // Where y lies between the limits (0 bottom, 1 top), unclamped; -inf for <= 0 on a log axis.
  auto yfrac = [&](double y) {
    if (yl.log)
      return y > 0 ? (std::log10(y) - std::log10(yl.lo)) / (std::log10(yl.hi) - std::log10(yl.lo)) : -INFINITY;
    return (y * 0.5 - yl.lo * 0.5) / (yl.hi * 0.5 - yl.lo * 0.5);  // halved: finite near DBL_MAX
  };
  auto py = [&](double y) { return base - std::clamp(yfrac(y), 0.0, 1.0) * ph; };

  // Curves with points past the limits: drawn clipped at the edge, marked and named below.
  struct Clip {
    size_t curve;
    double step, value;
    bool above;
  };
  std::vector<Clip> clips;
  for (size_t i = 0; i < chart.groups.size(); ++i) {
    const RunGroup& g = m.groups[chart.groups[i]];
    std::optional<Clip> worst;
    for (size_t k = 0; k < g.curve_steps.size(); ++k) {
      const double f = yfrac(g.curve_loss[k]);
      if (f >= 0 && f <= 1) continue;
      const bool above = f > 1;
      if (!worst || (above && (!worst->above || g.curve_loss[k] > worst->value)) ||
          (!above && !worst->above && g.curve_loss[k] < worst->value))
        worst = Clip{i, double(g.curve_steps[k]), g.curve_loss[k], above};
    }
    if (worst) clips.push_back(*worst);
  }

  const std::vector<std::string> names = legend_names(sweep, m, chart);
  const size_t legend = std::min(chart.groups.size(), kLegendMax) + (chart.groups.size() > kLegendMax ? 1 : 0);
  const double notes_top = kHeight + 4, legend_top = notes_top + kLegendRow * double(clips.size());
  const double total_h = legend_top + kLegendRow * double(legend) + 8;
  std::string s = "<svg width=\"" + coord(kWidth) + "\" height=\"" + coord(total_h) + "\" viewBox=\"0 0 " +
                  coord(kWidth) + " " + coord(total_h) +
                  "\" role=\"img\" aria-label=\"loss against step: " + html_escape(chart.title) + "\">\n";

  // Gridlines and labelled ticks at nice numbers on both axes (decades on a log axis).
  const std::vector<double> xt = plot::nice_ticks(sc.x_lo, sc.x_hi, true);
  const double xstep = plot::tick_step(xt);
  for (double x : xt) {
    s += svg_line(px(x), kTop, px(x), base, "class=\"grid\"");
    s += svg_line(px(x), base, px(x), base + 4, "class=\"axis\"");
    s += svg_text(px(x), base + 16, "middle", plot::tick_label(x, xstep), " class=\"tick\"");
  }
  const std::vector<double> yt = yl.log ? plot::log_ticks(yl.lo, yl.hi) : plot::nice_ticks(yl.lo, yl.hi);
  const double ystep = plot::tick_step(yt);
  for (double y : yt) {
    s += svg_line(kLeft, py(y), kLeft + pw, py(y), "class=\"grid\"");
    s += svg_line(kLeft - 4, py(y), kLeft, py(y), "class=\"axis\"");
    s += svg_text(kLeft - 6, py(y) + 4, "end", plot::tick_label(y, yl.log ? y : ystep), " class=\"tick\"");
  }
  s += svg_line(kLeft, base, kLeft + pw, base, "class=\"axis\"");
  s += svg_line(kLeft, kTop, kLeft, base, "class=\"axis\"");
  s += svg_text(kLeft + pw / 2, kHeight - 6, "middle", "step");
  s += svg_text(16, kTop + ph / 2, "middle", yl.log ? "loss (log scale)" : "loss",
                " transform=\"rotate(-90 16 " + coord(kTop + ph / 2) + ")\"");

  for (size_t i = 0; i < chart.groups.size(); ++i) {
    const RunGroup& g = m.groups[chart.groups[i]];
    const std::string colour = plot::series_colour(i);
    const std::string dash_pattern = plot::series_dash(i);
    const std::string dash = dash_pattern.empty() ? "" : " stroke-dasharray=\"" + dash_pattern + "\"";
    const std::string label = html_escape(curve_label(sweep, g));
    const size_t n = g.curve_steps.size();
    std::string points;
    for (size_t k = 0; k < n; ++k)
      points += (k ? " " : "") + coord(px(double(g.curve_steps[k]))) + "," + coord(py(g.curve_loss[k]));
    if (n >= 2) {
      s += "<polyline stroke=\"" + colour + "\"" + dash + " points=\"" + points + "\"><title>" + label +
           "</title></polyline>\n";
    } else if (n == 1) {  // a one-point polyline draws nothing
      s += "<circle fill=\"" + colour + "\" r=\"3\" cx=\"" + coord(px(double(g.curve_steps[0]))) + "\" cy=\"" +
           coord(py(g.curve_loss[0])) + "\"><title>" + label + "</title></circle>\n";
    }
    if (i >= kLegendMax) continue;
    const double ly = legend_top + kLegendRow * double(i);
    s += "<line stroke=\"" + colour + "\" stroke-width=\"3\"" + dash + " x1=\"" + coord(kLeft) + "\" y1=\"" +
         coord(ly + 8) + "\" x2=\"" + coord(kLeft + 24) + "\" y2=\"" + coord(ly + 8) + "\"/>\n";
    // The legend names what differs; hovering it gives the curve's whole label.
    s += svg_text(kLeft + 30, ly + 12, "start",
                  legend_text(names[i]) + (n ? "" : " &#8212; no finite loss") + "<title>" + label + "</title>");
  }
  // A triangle at the edge where each clipped curve leaves the plot, and a note naming it.
  for (size_t c = 0; c < clips.size(); ++c) {
    const Clip& k = clips[c];
    const std::string who = curve_label(sweep, m.groups[chart.groups[k.curve]]);
    const std::string note = "clipped: " + who + (k.above ? " peaks at " : " dips to ") + plot::number_label(k.value);
    const double x = px(k.step), y = k.above ? kTop : base, d = k.above ? -1 : 1;
    s += "<path class=\"clipped\" d=\"M" + coord(x) + " " + coord(y + d * 7) + " L" + coord(x - 5) + " " +
         coord(y - d * 2) + " L" + coord(x + 5) + " " + coord(y - d * 2) + " Z\"><title>" + html_escape(note) +
         "</title></path>\n";
    s += svg_text(kLeft, notes_top + kLegendRow * double(c) + 12, "start",
                  (k.above ? "&#9650; " : "&#9660; ") + legend_text(note), " class=\"note\"");
  }
  if (chart.groups.size() > kLegendMax)
    s += svg_text(kLeft, legend_top + kLegendRow * double(kLegendMax) + 12, "start",
                  "&#8230; and " + std::to_string(chart.groups.size() - kLegendMax) +
                      " more curves (hover a curve for its name)");
  return s + "</svg>\n";
}

std::string summary(const SweepRecords& sweep, const ReportModel& m) {
  std::string h = "<p class=\"summary\">" + plural(sweep.runs.size(), "run") + ", " +
                  plural(problem_count(sweep, m), "problem") + "</p>\n";
  h += "<table>\n<tbody>\n<tr><th>runs</th><td>" + html_escape(counts_text(m)) + "</td></tr>\n";
  h +=
      "<tr><th>wall time</th><td>" + seconds(m.wall_time_s) + " (first run started to last record written)</td></tr>\n";
  h += "<tr><th>training time</th><td>" + seconds(m.train_time_s) +
       " (step and recording time, summed over runs)</td></tr>\n";
  return h + "</tbody>\n</table>\n";
}

std::string groups_table(const SweepRecords& sweep, const ReportModel& m) {
  std::string t = "<h2>Results</h2>\n<table>\n<thead><tr>";
  for (const auto& k : m.columns) t += "<th>" + html_escape(k) + "</th>";
  t += "<th>runs</th><th>" + html_escape(objective_title(m)) +
       " (mean &#177; std over seeds)</th><th>best loss</th><th>best eval loss</th><th>tokens/s (median)</th>"
       "<th>memory per rank</th><th>status</th><th>health</th><th>reproducibility class</th></tr></thead>\n<tbody>\n";
  for (const auto& g : m.groups) {
    t += "<tr>";
    for (const auto& kv : g.values) t += value_cell(kv.second);
    std::string classes;
    for (size_t i : g.runs) {
      const EquivalenceClass& c = m.classes[m.runs[i].equivalence];
      classes += (classes.empty() ? "" : " ") + c.name + (c.runs.size() > 1 ? "" : "&#185;");
    }
    const std::string health = group_health(m, g);
    t += td(std::to_string(g.runs.size()), "num") + td(html_escape(objective_cell(m, g)), "num") +
         td(g6(g.best_loss), "num") + td(g6(g.best_eval_loss), "num") + td(g6(g.tokens_per_s), "num") +
         td(mib(g.memory_bytes), "num") + td(html_escape(g.status)) +
         (health.empty() ? td("ok", "ok") : td(html_escape(health), "flag")) + td(classes) + "</tr>\n";
  }
  return t + "</tbody>\n</table>\n<p>Best " + html_escape(objective_title(m)) +
         " first (the final eval loss of a run that evaluated held-out data, else the mean training loss of its "
         "last " +
         std::to_string(kLossWindow) +
         " steps).</p>\n<p>&#185; a class of one run: no other run has its checksum trajectory.</p>\n";
}

std::string effects_table(const ReportModel& m) {
  if (m.effects.empty()) return "";
  std::string t =
      "<h2>Effect of each axis on the " + html_escape(objective_title(m)) +
      "</h2>\n<table>\n<thead><tr><th>axis</th><th>spread of means</th><th>value</th><th>runs</th><th>mean " +
      html_escape(objective_title(m)) + "</th></tr></thead>\n<tbody>\n";
  double widest = 0;
  for (const auto& e : m.effects) widest = std::max(widest, e.spread);
  for (const auto& e : m.effects) {
    for (size_t i = 0; i < e.values.size(); ++i) {
      t += "<tr>";
      if (i == 0) {
        const double w = widest > 0 ? 120 * e.spread / widest : 0;
        t += "<td rowspan=\"" + std::to_string(e.values.size()) + "\">" + html_escape(e.key) + "</td><td rowspan=\"" +
             std::to_string(e.values.size()) + "\" class=\"num\">" + g6(e.spread) +
             " <span class=\"bar\" style=\"width:" + coord(w) + "px\"></span></td>";
      }
      t +=
          td(html_escape(e.values[i])) + td(std::to_string(e.counts[i]), "num") + td(g6(e.means[i]), "num") + "</tr>\n";
    }
  }
  return t + "</tbody>\n</table>\n";
}

std::string run_list(const SweepRecords& sweep, const std::vector<size_t>& runs) {
  std::string s;
  for (size_t i : runs) s += (s.empty() ? "" : ", ") + html_escape(sweep.runs[i].run_id);
  return s;
}

std::string reproducibility(const SweepRecords& sweep, const ReportModel& m) {
  std::string h = "<h2>Reproducibility</h2>\n";
  size_t shared = 0;
  std::string rows;
  for (const auto& c : m.classes) {
    if (c.runs.size() < 2) continue;
    ++shared;
    const Record& r = sweep.runs[c.runs[0]];
    rows += "<tr>" + td(c.name) + td(std::to_string(c.runs.size()), "num") +
            td(r.checksums.empty() ? "-" : hex16(r.checksums.back().params), "hash") +
            td(run_list(sweep, c.runs), "id") + "</tr>\n";
  }
  h += "<p>" + std::to_string(m.classes.size()) + (m.classes.size() == 1 ? " class" : " classes") +
       " of identical checksum trajectories; " + std::to_string(shared) + " shared by two or more runs.</p>\n";
  if (!rows.empty())
    h += "<table>\n<thead><tr><th>class</th><th>runs</th><th>final params checksum</th><th>run "
         "ids</th></tr></thead>\n<tbody>\n" +
         rows + "</tbody>\n</table>\n";
  if (m.layout_sets.empty())
    return h + "<p>No runs differ only in layout (world size, accumulation, ZeRO stage, data workers).</p>\n";
  h += "<h3>Runs that should be identical</h3>\n<p>They differ only in layout keys with the same global "
       "batch.</p>\n<table>\n"
       "<thead><tr><th>verdict</th><th>runs</th><th>first difference</th></tr></thead>\n<tbody>\n";
  for (const auto& s : m.layout_sets)
    h += "<tr>" + (s.identical ? td("identical", "ok") : td("NOT IDENTICAL", "flag")) +
         td(run_list(sweep, s.runs), "id") + td(html_escape(s.first_difference)) + "</tr>\n";
  return h + "</tbody>\n</table>\n";
}

std::string runs_table(const SweepRecords& sweep, const ReportModel& m) {
  std::string t = "<h2>Runs</h2>\n<table>\n<thead><tr><th>run</th><th>status</th>";
  for (const auto& k : m.varying) t += "<th>" + html_escape(k) + "</th>";
  t += "<th>steps</th><th>final loss</th><th>train loss (last " + std::to_string(kLossWindow) +
       ")</th><th>final eval loss</th><th>best eval loss (step)</th><th>tokens/s "
       "(median)</th><th>health</th><th>params checksum</th><th>class</th></tr></thead>\n"
       "<tbody>\n";
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    const Record& r = sweep.runs[i];
    t += "<tr>" + td(html_escape(r.run_id), "id") + "<td>" + html_escape(r.status);
    if (!r.failure.empty()) t += "<div class=\"failure\">" + html_escape(r.failure) + "</div>";
    t += "</td>";
    for (const auto& k : m.varying) t += value_cell(report_value(r, k));
    const ReportRun& f = m.runs[i];
    std::string health = f.health.empty() ? "<span class=\"ok\">ok</span>" : "";
    for (const auto& h : f.health)
      health += "<div><span class=\"flag\">" + html_escape(h.name) + "</span> <span class=\"failure\">" +
                html_escape(h.detail) + "</span></div>";
    t += td(std::to_string(r.steps.size()), "num") + td(g6(f.final_loss), "num") + td(g6(f.train_loss_end), "num") +
         td(g6(f.final_eval_loss), "num") +
         td(f.best_eval_step < 0 ? "-" : g6(f.best_eval_loss) + " (" + std::to_string(f.best_eval_step) + ")", "num") +
         td(g6(f.tokens_per_s_median), "num") + td(health) +
         td(r.checksums.empty() ? "-" : hex16(r.checksums.back().params), "hash") +
         td(m.classes[m.runs[i].equivalence].name) + "</tr>\n";
  }
  return t + "</tbody>\n</table>\n";
}

std::string environment(const ReportModel& m) {
  if (m.environment.empty()) return "";
  std::string t = "<h2>Environment</h2>\n<table>\n<thead><tr><th>key</th><th>value (runs)</th></tr></thead>\n<tbody>\n";
  for (const auto& e : m.environment) {
    const bool differs = e.values.size() > 1;
    std::string v;
    for (const auto& [value, n] : e.values)
      v += (v.empty() ? "" : "<br>") + html_escape(value.empty() ? "(empty)" : value) +
           (differs ? " (" + std::to_string(n) + ")" : "");
    t += "<tr>" + (differs ? td(html_escape(e.key) + " <span class=\"flag\">differs</span>") : td(html_escape(e.key))) +
         td(v) + "</tr>\n";
  }
  return t + "</tbody>\n</table>\n";
}

std::string failed_runs(const SweepRecords& sweep) {
  if (sweep.failed.empty()) return "";
  std::string h =
      "<h2>Failed runs</h2>\n<table>\n<thead><tr><th>run</th><th>status</th><th>cause</th><th>end of "
      "log</th></tr></thead>\n<tbody>\n";
  for (const auto& f : sweep.failed)
    h += "<tr>" + td(html_escape(f.run_id), "id") + td(html_escape(f.status)) + td(html_escape(f.cause), "failure") +
         td(f.log_tail.empty() ? "<span class=\"missing\">no log</span>"
                               : "<pre>" + html_escape(f.log_tail) + "</pre>") +
         "</tr>\n";
  return h + "</tbody>\n</table>\n";
}

// Every table in a box that scrolls sideways, so a wide one does not widen the page. No
// user string can hold "<table>": they are all escaped.
std::string wrap_tables(std::string h) {
  for (size_t at = 0; (at = h.find("<table>", at)) != std::string::npos; at += 30) h.insert(at, "<div class=\"wide\">");
  for (size_t at = 0; (at = h.find("</table>", at)) != std::string::npos; at += 14) h.insert(at + 8, "</div>");
  return h;
}

}  // namespace

std::string render_html(const SweepRecords& sweep, const ReportModel& m) {
  std::string h = kHtmlReportStart + ("<title>" + html_escape(m.title) + "</title>\n<style>\n");
  h += kStyle;
  h += "</style>\n</head>\n<body>\n<h1>" + html_escape(m.title) + "</h1>\n";
  h += summary(sweep, m);
  if (sweep.runs.empty()) {
    h += "<p>no completed runs</p>\n";
  } else {
    h += groups_table(sweep, m);
    h += "<h2>Loss curves</h2>\n";
    const Scales scales = chart_scales(sweep, m);
    for (const auto& c : m.charts) {
      if (m.charts.size() > 1 || !m.group_by.empty()) h += "<h3>" + html_escape(c.title) + "</h3>\n";
      h += svg_chart(sweep, m, c, scales);
    }
    h += effects_table(m);
    h += reproducibility(sweep, m);
    h += runs_table(sweep, m);
    h += environment(m);
  }
  h += failed_runs(sweep);
  // Problems already shown as a failed run are not repeated.
  std::string problems;
  for (const auto& p : sweep.problems) {
    bool shown =
        std::any_of(sweep.failed.begin(), sweep.failed.end(), [&](const FailedRun& f) { return f.problem == p; });
    if (!shown) problems += "<li>" + html_escape(p) + "</li>\n";
  }
  if (!problems.empty()) h += "<h2>Problems</h2>\n<ul>\n" + problems + "</ul>\n";
  return wrap_tables(h) + "</body>\n</html>\n";
}

}  // namespace sweep
