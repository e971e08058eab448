// The HTML report: one static page, inline CSS and SVG, no script, nothing fetched, so it
// can be mailed or archived with the sweep and opened offline. Every string that came
// from a record goes through html_escape.
#include <algorithm>  // min, max, clamp, all_of
#include <cmath>      // log10, isfinite
#include <cstdlib>    // strtod
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "plot_axes.h"  // palette
#include "report.h"
#include "report_format.h"
#include "report_html_parts.h"  // td, the search section
#include "report_plots.h"       // line charts, parallel coordinates, scatter
#include "report_telemetry.h"   // telemetry_section_html
#include "run_health.h"         // spike_decisions, straggler_ranks
#include "run_status.h"         // status_is

namespace sweep {
namespace {

using namespace report_fmt;
using report_html::td;

constexpr const char* kStyle =
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\n"
    "table{border-collapse:collapse;margin:1em 0}\n"
    "th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}\n"
    "th{background:#f4f4f4}\n"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
    "td.hash{font-family:monospace}\n"
    ".failure{color:#b00;font-size:smaller}\n"
    ".lineage{color:#555;font-size:smaller}\n"
    ".flag{color:#b00;font-weight:bold}\n"
    ".ok{color:#2a7}\n"
    ".missing{color:#999}\n"
    ".bar{display:inline-block;height:0.8em;background:#4e79a7}\n"
    "pre{background:#f7f7f7;padding:6px;max-width:100em;overflow-x:auto;font-size:smaller}\n"
    "svg{display:block;margin:1em 0;font:12px sans-serif;max-width:100%;height:auto}\n"
    "svg .axis{stroke:#444;stroke-width:1}\n"
    "svg .grid{stroke:#e4e4e4;stroke-width:1}\n"
    "svg .clipped{fill:#d00;stroke:#fff;stroke-width:1}\n"
    "svg text.note{fill:#b00}\n"
    ".wide{overflow-x:auto;max-width:100%}\n"
    "td.id{overflow-wrap:anywhere;min-width:10em;max-width:28em}\n"
    "svg polyline{fill:none;stroke-width:1.5}\n"
    "tr.best td{background:#eef7ee;font-weight:bold}\n"
    "svg polygon.band{fill-opacity:0.15;stroke:none}\n"
    "svg line.ref{stroke:#888;stroke-dasharray:6 3}\n"
    "svg text.ref{fill:#666}\n"
    "svg g.spike rect{fill:#d62728;fill-opacity:.08}\n"
    "svg g.spike line.mark{stroke:#d62728;stroke-dasharray:3 3}\n"
    "svg polyline.pc{stroke-opacity:0.7}\n"
    "svg polyline.front{stroke:#d62728;stroke-width:1.5;stroke-dasharray:4 2}\n"
    "svg circle.point{fill:#4e79a7;fill-opacity:0.6}\n"
    "svg circle.front{fill:#4e79a7;stroke:#d62728;stroke-width:2}\n"
    "svg .curves:hover>g.s{opacity:.2}\nsvg .curves>g.s:hover{opacity:1}\n"
    "svg text.end{font-size:11px;fill:#222}\n"
    "svg polyline.leader{stroke-width:1;stroke-opacity:.7}\nsvg polyline.leader.early{stroke-dasharray:1 "
    "3;stroke-opacity:.4}\n"
    "svg circle.trial{stroke:#08306b;stroke-width:.5}\nsvg circle.best{stroke:#d62728;stroke-width:2.5}\n"
    "figure.chart{margin:0 0 1.5em}\nfigure.chart svg{margin-bottom:.3em}\n"
    ".legend{columns:3 22em;column-gap:2em;margin:0;font-size:12px}\nul.legend{list-style:none;padding:0}\n"
    ".legend li{break-inside:avoid;overflow-wrap:anywhere;padding:1px 0}\n"
    "svg.swatch{display:inline-block;margin:0 6px 0 0;vertical-align:middle}\n"
    "p.note{color:#b00;margin:.2em 0}\n"
    ".panels{display:flex;flex-wrap:wrap;gap:0 16px}\n.panels svg{margin:.5em 0}\n"
    "td.base{color:#999}\nth.obj,td.obj{position:sticky;left:0;z-index:1}\ntd.obj{background:#fff}\n"
    "th.key{min-width:3em}\n"
    // The results table is read across: set tight enough that seven-tricks' 18 columns fit a
    // 1400 px window; a wider one scrolls in its box with the objective held at the left.
    "table.results{font-size:14px}\ntable.results th,table.results td{padding:3px 5px}\n"
    "table.results td.num:not(.obj){white-space:nowrap}\n"
    // A table of runs is one line a run: notes and flag sentences open from their summary,
    // and the run id stays at the left while the table scrolls.
    "table.runs td{white-space:nowrap}\n"
    "table.runs td:first-child,table.runs th:first-child{position:sticky;left:0;z-index:1}\n"
    "table.runs td:first-child{background:#fff}\n"
    "details.more{display:inline-block;vertical-align:top;margin-left:.4em}\n"
    "details.more>summary{color:#555;cursor:pointer}\n"
    "details.more[open]{display:block;margin:0;white-space:normal;max-width:40em}\n";

// A key's name as a column heading: a long one may break after an underscore or a dot.
std::string breakable(std::string escaped) {
  for (size_t at = 0; (at = escaped.find_first_of("_.", at)) != std::string::npos; at += 6)
    escaped.insert(at + 1, "<wbr>");
  return escaped;
}

// A config value as a cell: "unset" and "" are shown as such, not as a blank.
std::string value_cell(const std::string& v) {
  if (v == "unset") return td("unset", "missing");
  return v.empty() ? td("(empty)", "missing") : td(html_escape(v));
}

// A group of one run is named by its run id; a group of seeds by its values.
std::string curve_label(const SweepRecords& sweep, const RunGroup& g) {
  const std::string vary = values_text(g);
  if (g.runs.size() == 1) return sweep.runs[g.runs[0]].run_id + (vary.empty() ? "" : " (" + vary + ")");
  return (vary.empty() ? std::string("all") : vary) + " (mean of " + std::to_string(g.runs.size()) + " runs)";
}

// A group whose every run diverged: drawn, but it does not set the y scale.
bool all_diverged(const SweepRecords& sweep, const RunGroup& g) {
  return !g.runs.empty() && std::all_of(g.runs.begin(), g.runs.end(),
                                        [&](size_t i) { return status_is(sweep.runs[i].status, RunStatus::diverged); });
}

// A chart of one curve per group of `chart`, its band when the group has several runs;
// `curve_of(g)` gives group g's curve.
report_plot::LineChart group_chart(const SweepRecords& sweep, const ReportModel& m, const Chart& chart,
                                   const std::string& y_label, const std::function<Curve(size_t)>& curve_of) {
  report_plot::LineChart c;
  c.title = chart.title, c.y_label = y_label;
  // How many runs a curve averages, in its legend where that is not what most curves average.
  std::map<size_t, size_t> sizes;
  for (size_t g : chart.groups) ++sizes[m.groups[g].runs.size()];
  size_t usual = 0, most = 0;
  for (const auto& [n, count] : sizes)
    if (count > most) usual = n, most = count;
  for (size_t i = 0; i < chart.groups.size(); ++i) {
    const RunGroup& g = m.groups[chart.groups[i]];
    const Curve curve = curve_of(chart.groups[i]);
    report_plot::Series s;
    s.label = curve_label(sweep, g);
    s.legend = i < chart.labels.size() ? chart.labels[i] : values_text(g);
    if (g.runs.size() != usual) s.legend += " (" + plural(g.runs.size(), "run") + ")";
    s.x.assign(curve.steps.begin(), curve.steps.end());
    s.y = curve.mean;
    if (g.runs.size() > 1) s.lo = curve.lo, s.hi = curve.hi;
    s.sets_scale = !all_diverged(sweep, g);
    c.series.push_back(std::move(s));
  }
  return c;
}

// Whether any run recorded `field` as something other than 0 (writers that do not measure
// a figure leave it 0).
bool recorded(const SweepRecords& sweep, double StepMetrics::*field) {
  return std::any_of(sweep.runs.begin(), sweep.runs.end(), [&](const Record& r) {
    return std::any_of(r.steps.begin(), r.steps.end(), [&](const StepMetrics& s) { return s.*field != 0; });
  });
}

// The spike decisions of the runs of `chart`'s groups, at most kMarksShown of them (the
// runs table lists every one).
constexpr size_t kMarksShown = 40;
std::vector<report_plot::StepMark> chart_spike_marks(const SweepRecords& sweep, const ReportModel& m,
                                                     const Chart& chart) {
  std::vector<report_plot::StepMark> marks;
  for (size_t g : chart.groups)
    for (size_t i : m.groups[g].runs)
      for (auto& mark : report_html::spike_step_marks(sweep.runs[i], "run " + sweep.runs[i].run_id))
        if (marks.size() < kMarksShown) marks.push_back(std::move(mark));
  return marks;
}

// A per-group figure as one chart per panel of m.charts (one when the report has one),
// sharing their scales so that the panels compare; `lines` are drawn on every panel and
// each panel is titled with a heading of `level` when there are several. With `spikes`,
// the spike decisions of its runs are marked on each panel.
std::string panel_charts(const SweepRecords& sweep, const ReportModel& m, const std::string& y_label,
                         const std::function<Curve(size_t)>& curve_of, const std::vector<report_plot::RefLine>& lines,
                         const char* level, bool log_y = false, bool spikes = false) {
  std::vector<report_plot::LineChart> charts;
  charts.reserve(m.charts.size());
  for (const auto& c : m.charts) {
    charts.push_back(group_chart(sweep, m, c, y_label, curve_of));
    charts.back().lines = lines;
    charts.back().log_y = log_y;
    if (spikes) charts.back().marks = chart_spike_marks(sweep, m, c);
  }
  std::vector<const report_plot::LineChart*> panels;
  panels.reserve(charts.size());
  for (const auto& c : charts) panels.push_back(&c);
  const report_plot::Scale scale = report_plot::shared_scale(panels);
  std::string h;
  for (size_t i = 0; i < charts.size(); ++i) {
    if (m.charts.size() > 1 || !m.group_by.empty())
      h += std::string("<") + level + ">" + html_escape(m.charts[i].title) + "</" + level + ">\n";
    h += report_plot::chart_figure(charts[i], scale);
  }
  return h;
}

// A per-step diagnostic: each group's mean with its band, panel by panel.
std::string diagnostic_charts(const SweepRecords& sweep, const ReportModel& m, double StepMetrics::*field,
                              const std::string& y_label, const std::vector<report_plot::RefLine>& lines, bool log_y) {
  return panel_charts(
      sweep, m, y_label, [&](size_t g) { return group_curve(sweep.runs, m.groups[g].runs, field); }, lines, "h4",
      log_y);
}

std::string summary(const SweepRecords& sweep, const ReportModel& m) {
  std::string h =
      "<p class=\"summary\">" + plural(m.total, "run") + ", " + plural(problem_count(sweep, m), "problem") + "</p>\n";
  h += "<table>\n<tbody>\n<tr><th>runs</th><td>" + html_escape(counts_text(m)) + "</td></tr>\n";
  h +=
      "<tr><th>wall time</th><td>" + seconds(m.wall_time_s) + " (first run started to last record written)</td></tr>\n";
  h += "<tr><th>training time</th><td>" + seconds(m.train_time_s) +
       " (step and recording time, summed over runs)</td></tr>\n";
  return h + "</tbody>\n</table>\n";
}

// The results: a row per group, best first. The objective and the varying keys come
// first, so that a wide table shows them before it scrolls; a key's most common value is
// grey when it covers most groups (a base and one change per knob), so the change stands out.
std::string groups_table(const SweepRecords& sweep, const ReportModel& m) {
  (void)sweep;
  std::vector<std::string> common(m.columns.size());
  for (size_t k = 0; k < m.columns.size(); ++k) {
    std::map<std::string, size_t> n;
    for (const auto& g : m.groups) ++n[g.values[k].second];
    for (const auto& [v, c] : n)
      if (2 * c > m.groups.size() && m.groups.size() > 2) common[k] = v;
  }
  // Columns no group has a figure for are left out, and the status when every run completed.
  const bool evaluated =
      std::any_of(m.groups.begin(), m.groups.end(), [](const RunGroup& g) { return std::isfinite(g.best_eval_loss); });
  const bool measured =
      std::any_of(m.groups.begin(), m.groups.end(), [](const RunGroup& g) { return g.memory_bytes >= 0; });
  const bool eventful = std::any_of(m.groups.begin(), m.groups.end(), [](const RunGroup& g) {
    return g.status != std::to_string(g.runs.size()) + " completed";
  });
  std::string t = "<table class=\"results\">\n<thead><tr><th class=\"obj\">" + html_escape(objective_title(m)) +
                  " (mean &#177; std over seeds)</th>";
  for (size_t k = 0; k < m.columns.size(); ++k)
    t += "<th class=\"key\" title=\"" + html_escape(m.columns[k]) + "\">" + breakable(html_escape(m.short_columns[k])) +
         "</th>";
  t += "<th>runs</th><th>health</th><th>best loss</th>" + std::string(evaluated ? "<th>best eval loss</th>" : "") +
       "<th>tokens/s (median)</th>" + (measured ? "<th>memory per rank</th>" : "") +
       (eventful ? "<th>status</th>" : "");
  // "reproducibility" may break after "repro", so that the word does not set the column's width.
  if (m.classes_matter) t += "<th title=\"reproducibility class\">repro&shy;ducibility class</th>";
  t += "</tr></thead>\n<tbody>\n";
  const std::string head = t;
  t = "<h2>Results</h2>\n";
  bool open = false;
  for (size_t gi = 0; gi < m.groups.size(); ++gi) {
    const RunGroup& g = m.groups[gi];
    // The groups without an objective come last (sorted so), listed apart: never ranked.
    if (!g.ranked() && (gi == 0 || m.groups[gi - 1].ranked())) {
      if (open) t += "</tbody>\n</table>\n";
      t += "<p><strong>Not ranked</strong>: no run of these has a finite objective (a diverged, failed or interrupted "
           "run has none: "
           "its figures are partial).</p>\n";
      open = false;
    }
    if (!open) t += head, open = true;
    // Groups are sorted best first: the first with a finite objective is the best.
    t += gi == 0 && std::isfinite(g.objective_mean) ? "<tr class=\"best\" title=\"best\">" : "<tr>";
    t += td(html_escape(objective_cell(m, g)), "num obj");
    for (size_t k = 0; k < g.values.size(); ++k) {
      const auto& [key, v] = g.values[k];
      const std::string shown = shown_value(m, key, v);
      if (v == "unset" || v.empty())
        t += value_cell(v);
      else
        t += std::string("<td") + (v == common[k] ? " class=\"base\"" : "") +
             (shown != v ? " title=\"" + html_escape(v) + "\"" : "") + ">" + html_escape(shown) + "</td>";
    }
    const std::string health = group_health(m, g);
    t += td(std::to_string(g.runs.size()), "num") +
         (health.empty() ? td("ok", "ok") : td(html_escape(health), "flag")) + td(g6(g.best_loss), "num") +
         (evaluated ? td(g6(g.best_eval_loss), "num") : "") + td(g6(g.tokens_per_s), "num") +
         (measured ? td(mib(g.memory_bytes), "num") : "") + (eventful ? td(html_escape(g.status)) : "");
    if (m.classes_matter) {
      std::string classes;
      for (size_t i : g.runs) {
        const EquivalenceClass& c = m.classes[m.runs[i].equivalence];
        classes += (classes.empty() ? "" : " ") + c.name + (c.runs.size() > 1 ? "" : "&#185;");
      }
      t += td(classes);
    }
    t += "</tr>\n";
  }
  if (!open) t += head;
  t += "</tbody>\n</table>\n<p>Best " + html_escape(objective_title(m)) +
       " first, the best row highlighted (the final eval loss of a run that evaluated held-out data, else the mean "
       "training loss of its last " +
       std::to_string(kLossWindow) + " steps); a value in grey is the one most groups have.</p>\n";
  if (m.classes_matter)
    t += "<p>Reproducibility class: runs whose parameter checksums agree at every recorded step share one (C1, C2, "
         "...); runs that differ only in layout must. &#185; a class of one run.</p>\n";
  if (!m.long_values.empty()) {
    t += "<p>Values too long for the table and the legends:</p>\n<table>\n<thead><tr><th>shown as</th><th>key</th>"
         "<th>value</th></tr></thead>\n<tbody>\n";
    for (const auto& l : m.long_values)
      t += "<tr>" + td(html_escape(l.alias)) + td(html_escape(l.key)) + td(html_escape(l.value), "id") + "</tr>\n";
    t += "</tbody>\n</table>\n";
  }
  return t;
}

// A one-knob-at-a-time sweep's effects: each point against the base point, the largest
// change first, a bar of its size in the delta's cell.
std::string base_delta_table(const SweepRecords& sweep, const ReportModel& m) {
  const std::string objective = html_escape(objective_title(m));
  std::string t = "<h2>Effect of each change on the " + objective + ", against the base point</h2>\n<p>" +
                  html_escape(base_note(sweep, m)) +
                  "</p>\n<table>\n<thead><tr><th>change from the base</th><th>seeds</th><th>" + objective +
                  "</th><th>base " + objective + "</th><th>delta</th><th>delta %</th></tr></thead>\n<tbody>\n";
  double widest = 0;
  for (const auto& d : m.base_deltas.points)
    if (std::isfinite(d.delta)) widest = std::max(widest, std::abs(d.delta));
  for (const auto& d : m.base_deltas.points) {
    const double w = widest > 0 && std::isfinite(d.delta) ? 120 * std::abs(d.delta) / widest : 0;
    t += "<tr>" + td(html_escape(changes_text(m, d))) +
         td(html_escape(delta_seeds(d)), d.seeds.empty() ? "flag" : "num") + td(g6(d.objective), "num") +
         td(g6(d.base_objective), "num") +
         td(html_escape(delta_text(d)) + " <span class=\"bar\" style=\"width:" + report_plot::coord(w) + "px\"></span>",
            "num") +
         td(signed_percent(d.relative), "num") + "</tr>\n";
  }
  return t + "</tbody>\n</table>\n<p>" + html_escape(kBaseDeltaMethod) + "</p>\n";
}

std::string effects_table(const SweepRecords& sweep, const ReportModel& m) {
  if (m.base_deltas.one_knob()) return base_delta_table(sweep, m);
  if (m.effects.empty()) return "";
  const std::string objective = html_escape(objective_title(m));
  std::string t = "<h2>Effect of each axis on the " + objective +
                  "</h2>\n<table>\n<thead><tr><th>axis</th><th>spread of means</th><th>" +
                  (m.rank_importance ? "importance (rank eta squared)" : "variance explained") + "</th><th>" +
                  (m.rank_importance ? "value or bin" : "value") + "</th><th>runs</th><th>mean " + objective +
                  "</th></tr></thead>\n<tbody>\n";
  double widest = 0;
  for (const auto& e : m.effects) widest = std::max(widest, m.rank_importance ? e.importance : e.spread);
  for (const auto& e : m.effects) {
    const std::string rows = std::to_string(e.values.size());
    for (size_t i = 0; i < e.values.size(); ++i) {
      t += "<tr>";
      if (i == 0) {
        const double share = m.rank_importance ? e.importance : e.spread;
        const double w = widest > 0 && std::isfinite(share) ? 120 * share / widest : 0;
        const std::string rho = m.rank_importance ? rho_text(e) : "";
        t += "<td rowspan=\"" + rows + "\">" + html_escape(e.key) + "</td><td rowspan=\"" + rows + "\" class=\"num\">" +
             g6(e.spread) +
             (m.rank_importance ? "" : " <span class=\"bar\" style=\"width:" + report_plot::coord(w) + "px\"></span>") +
             "</td><td rowspan=\"" + rows + "\">" +
             (m.rank_importance ? "<span class=\"bar\" style=\"width:" + report_plot::coord(w) + "px\"></span> " : "") +
             html_escape(effect_notes(e, m.rank_importance)) + (rho.empty() ? "" : "; " + rho) + "</td>";
      }
      t +=
          td(html_escape(e.values[i])) + td(std::to_string(e.counts[i]), "num") + td(g6(e.means[i]), "num") + "</tr>\n";
    }
  }
  return t + "</tbody>\n</table>\n<p>" + html_escape(importance_method(m)) + "</p>\n";
}

// "fp16 minus fp32" as curves: each group's paired differences against its baseline partner.
std::string baseline_section(const SweepRecords& sweep, const ReportModel& m) {
  if (m.baseline_key.empty()) return "";
  std::string h = "<h2>Differences against " + html_escape(m.baseline_key + "=" + m.baseline_value) + "</h2>\n";
  if (m.baseline_diffs.empty()) h += "<p>No group has a partner at the baseline value with a seed in common.</p>\n";
  report_plot::LineChart c;
  c.title = "differences against " + m.baseline_key + "=" + m.baseline_value;
  c.y_label = "loss minus baseline";
  c.lines.push_back({0, "baseline"});
  // The legend names the compared value and only the other keys that differ between curves.
  std::vector<bool> differs;
  for (const auto& d : m.baseline_diffs) {
    const auto& v = m.groups[d.group].values;
    const auto& first = m.groups[m.baseline_diffs[0].group].values;
    differs.resize(std::max(differs.size(), v.size()), false);
    for (size_t k = 0; k < v.size(); ++k)
      if (k >= first.size() || v[k] != first[k]) differs[k] = true;
  }
  std::string rows;
  for (size_t i = 0; i < m.baseline_diffs.size(); ++i) {
    const BaselineDiff& d = m.baseline_diffs[i];
    report_plot::Series s;
    s.label = diff_title(m, d);
    std::string other, rest;
    const auto& v = m.groups[d.group].values;
    for (size_t k = 0; k < v.size(); ++k) {
      if (v[k].first == m.baseline_key)
        other = v[k].second;
      else if (differs[k])
        rest += (rest.empty() ? "" : ", ") + v[k].first + "=" + v[k].second;
    }
    s.legend = other + " minus " + m.baseline_value + (rest.empty() ? "" : " at " + rest);
    s.x.assign(d.steps.begin(), d.steps.end());
    s.y = d.mean;
    if (d.seeds.size() > 1) s.lo = d.lo, s.hi = d.hi;
    s.sets_scale = !all_diverged(sweep, m.groups[d.group]);
    c.series.push_back(std::move(s));
    std::string seeds;
    for (const auto& x : d.seeds) seeds += (seeds.empty() ? "" : ", ") + x;
    rows += "<tr>" + td(html_escape(diff_title(m, d))) + td(html_escape(seeds)) + td(html_escape(diff_text(d)), "num") +
            "</tr>\n";
  }
  if (!c.series.empty()) {
    h += "<p>Each curve is the mean over seeds of a run's loss minus the loss of the run with the same seed and "
         "the baseline value, step by step; its band spans the smallest to the largest of those differences. "
         "Below zero is better than the baseline.</p>\n";
    h += report_plot::chart_figure(c, report_plot::shared_scale({&c}));
    h += "<table>\n<thead><tr><th>difference</th><th>seeds paired</th><th>" + html_escape(objective_title(m)) +
         " difference (mean, min, max over seeds)</th></tr></thead>\n<tbody>\n" + rows + "</tbody>\n</table>\n";
  }
  if (!m.baseline_unpaired.empty()) {
    h += "<p>Without a partner at the baseline value:</p>\n<ul>\n";
    for (const auto& u : m.baseline_unpaired) h += "<li>" + html_escape(u) + "</li>\n";
    h += "</ul>\n";
  }
  return h;
}

// Each rank's step time, step by step, for the multi-rank run whose slowest rank is
// furthest from the ranks' median: a straggler is the line above the others.
std::string straggler_chart(const SweepRecords& sweep, const ReportModel& m) {
  size_t worst = SIZE_MAX;
  for (size_t i = 0; i < sweep.runs.size(); ++i)
    if (sweep.runs[i].world_size > 1 && std::isfinite(m.runs[i].slowest_rank_ratio) &&
        (worst == SIZE_MAX || m.runs[i].slowest_rank_ratio > m.runs[worst].slowest_rank_ratio))
      worst = i;
  if (worst == SIZE_MAX) return "";
  const Record& r = sweep.runs[worst];
  report_plot::LineChart c;
  c.title = r.run_id, c.y_label = "step time (s)";
  for (int64_t rank = 0; rank < r.world_size; ++rank) {
    report_plot::Series s;
    s.label = s.legend = "rank " + std::to_string(rank);
    for (size_t k = 0; k < r.rank_step_time_s.size() && k < r.steps.size(); ++k)
      if (size_t(rank) < r.rank_step_time_s[k].size() && std::isfinite(r.rank_step_time_s[k][size_t(rank)]))
        s.x.push_back(double(r.steps[k].step)), s.y.push_back(r.rank_step_time_s[k][size_t(rank)]);
    c.series.push_back(std::move(s));
  }
  return "<h3>Per-rank step time</h3>\n<p>" + html_escape(r.run_id) +
         ", the multi-rank run whose slowest rank is furthest from the median of its ranks: rank " +
         std::to_string(m.runs[worst].slowest_rank) + " at " + g6(m.runs[worst].slowest_rank_ratio) +
         "x the median step time.</p>\n" + report_plot::chart_figure(c, report_plot::shared_scale({&c}));
}

// The seven tricks' diagnostics: gradient norm against the clip threshold, learning rate,
// loss scale, throughput, and per run the share clipped, skipped steps, the slowest rank
// and memory per rank by ZeRO stage.
// Above a table or plot of runs one by one: which runs it shows, when not all
// (ReportModel::html_runs).
std::string shown_runs_note(const ReportModel& m) {
  if (m.html_runs.size() == m.runs.size()) return "";
  return "<p>" + std::to_string(m.html_runs.size()) + " of " + std::to_string(m.runs.size()) + " runs shown: the " +
         std::to_string(kHtmlRuns) + " with the lowest " + html_escape(objective_title(m)) +
         ", and every run with a health flag or on the Pareto front. The CSV and JSON reports (<code>sweep report "
         "--format csv</code>) list every run.</p>\n";
}

// The slowest rank and its ratio, red only where the straggler flag names that rank: the
// flag's rule (the trainer's ratio and excess thresholds) is the one rule, and a ratio
// the flag let pass is not painted by another. Measured on shared cores: said, not red.
std::string slowest_rank_cell(const Record& r, const ReportRun& f) {
  if (f.slowest_rank < 0) return td("-");
  const std::vector<int> named = straggler_ranks(r);
  const bool flagged =
      std::any_of(f.health.begin(), f.health.end(), [](const HealthFlag& h) { return h.name == kFlagStraggler; }) &&
      std::binary_search(named.begin(), named.end(), f.slowest_rank);
  return td("rank " + std::to_string(f.slowest_rank) + " (" + g6(f.slowest_rank_ratio) + "x" +
                (f.shared_cores() ? ", shared cores" : "") + ")",
            flagged ? "flag" : nullptr);
}

std::string diagnostics_section(const SweepRecords& sweep, const ReportModel& m) {
  std::string h =
      "<h2>Diagnostics</h2>\n<p>Mean over each group's seeds, with the band of their smallest to "
      "largest value.</p>\n";
  std::vector<report_plot::RefLine> clips;
  std::set<std::string> seen;
  for (const auto& r : sweep.runs) {
    const std::string v = report_value(r, "train.clip_norm");
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (*end == '\0' && x > 0 && seen.insert(v).second) clips.push_back({x, "clip_norm " + v});
  }
  auto panel = [&](const std::string& title, double StepMetrics::*field, const std::string& y_label,
                   const std::vector<report_plot::RefLine>& lines, bool log_y = false) {
    h +=
        "<h3>" + title + "</h3>\n" +
        (recorded(sweep, field) ? diagnostic_charts(sweep, m, field, y_label, lines, log_y) : "<p>Not recorded.</p>\n");
  };
  panel("Gradient norm (before clipping)", &StepMetrics::grad_norm, "gradient norm", clips);
  panel("Learning rate", &StepMetrics::lr, "learning rate", {});
  const bool scaled = std::any_of(sweep.runs.begin(), sweep.runs.end(), [](const Record& r) {
    return std::any_of(r.steps.begin(), r.steps.end(), [](const StepMetrics& s) { return s.loss_scale != 1; });
  });
  // On a log axis: fp16's scale (65536 and its halvings) and the 1 of every other run are
  // decades apart, and each is a curve to see, not an outlier to clip.
  if (scaled) panel("Loss scale (fp16)", &StepMetrics::loss_scale, "loss scale", {}, /*log_y=*/true);
  panel("Throughput", &StepMetrics::tokens_per_s, "tokens/s", {});
  h += straggler_chart(sweep, m);

  h += shown_runs_note(m) +
       "<table class=\"runs\">\n<thead><tr><th>run</th><th>clip_norm</th><th>steps clipped</th><th>steps skipped</th>"
       "<th>slowest rank (median step time over the ranks' median)</th><th>ZeRO stage</th><th>ranks</th>"
       "<th>memory per rank (params + grads + optimizer)</th><th>step peak per rank</th></tr></thead>\n<tbody>\n";
  for (size_t i : m.html_runs) {
    const Record& r = sweep.runs[i];
    const ReportRun& f = m.runs[i];
    std::string held, peak;
    for (size_t k = 0; k < r.memory.params.size(); ++k) {
      const int64_t b = r.memory.params[k] + (k < r.memory.grads.size() ? r.memory.grads[k] : 0) +
                        (k < r.memory.optimizer.size() ? r.memory.optimizer[k] : 0);
      held += (held.empty() ? "" : ", ") + mib(b);
    }
    for (int64_t b : r.memory.step_peak) peak += (peak.empty() ? "" : ", ") + mib(b);
    h += "<tr>" + td(html_escape(r.run_id), "id") + value_cell(report_value(r, "train.clip_norm")) +
         td(percent(f.clipped_share), "num") + td(std::to_string(f.skipped_steps), "num") + slowest_rank_cell(r, f) +
         value_cell(report_value(r, "dist.zero_stage")) + td(std::to_string(r.world_size), "num") +
         td(held.empty() ? "-" : held, "num") + td(peak.empty() ? "-" : peak, "num") + "</tr>\n";
  }
  return h + "</tbody>\n</table>\n";
}

// Every run at once: a parallel-coordinates plot over the varying keys and the objective,
// and, when something varies that changes throughput by design, the objective against
// throughput with its Pareto front.
std::string all_runs_section(const SweepRecords& sweep, const ReportModel& m) {
  std::vector<report_plot::ParallelAxis> axes;
  const std::vector<std::string> names = short_key_names(m.varying);
  for (size_t k = 0; k < m.varying.size(); ++k)  // each key's values in their natural order, as its effect has them
    for (const auto& e : m.effects)
      if (e.key == m.varying[k]) axes.push_back(report_html::key_axis(sweep, e, names[k]));
  axes.push_back({objective_title(m), "", {}, false});
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < m.runs.size(); ++i)
    if (std::isfinite(m.runs[i].objective) && (best == SIZE_MAX || m.runs[i].objective < m.runs[best].objective))
      best = i;
  std::vector<report_plot::ParallelLine> lines;
  std::vector<report_plot::ScatterPoint> points;
  for (size_t i : m.html_runs) {
    report_plot::ParallelLine l;
    l.label = sweep.runs[i].run_id;
    for (size_t a = 0; a + 1 < axes.size(); ++a) {
      const std::string v = report_value(sweep.runs[i], axes[a].title);
      l.values.push_back(report_html::axis_value(axes[a], v));
      l.label += ", " + axes[a].title + "=" + v;
    }
    l.values.push_back(m.runs[i].objective);
    l.label += ": " + objective_title(m) + " " + g6(m.runs[i].objective);
    l.highlight = i == best;
    lines.push_back(l);
    points.push_back({l.label + ", " + g6(m.runs[i].tokens_per_s_median) + " tokens/s", m.runs[i].tokens_per_s_median,
                      m.runs[i].objective, m.runs[i].pareto});
  }
  for (auto& a : axes)  // long values by their aliases, as the results table shows them
    for (auto& c : a.categories) c = shown_value(m, a.title, c);
  std::string h;
  if (axes.size() >= 2) {
    h += "<h2>All runs</h2>\n<p>One line per run through its values of every varying key and its " +
         html_escape(objective_title(m)) +
         ", coloured from the best (dark blue) to the worst (light orange); the "
         "best run is drawn thick, a run without a finite objective grey and dashed. Hover an axis name for its "
         "key.</p>\n" +
         shown_runs_note(m);
    h += report_plot::svg_parallel(axes, lines, m.title);
  }
  if (m.throughput_varies_with.empty()) {
    h += "<p>Throughput: no key that changes it by design varies (precision, layout, kernels, model size), so the "
         "differences in tokens/s between these runs are the machine's noise and no trade-off against the " +
         html_escape(objective_title(m)) + " is drawn.</p>\n";
    return h;
  }
  const std::string scatter = report_plot::svg_scatter(points, "tokens/s (median)", objective_title(m), m.title);
  std::string keys;
  for (const auto& k : m.throughput_varies_with) keys += (keys.empty() ? "" : ", ") + k;
  if (!scatter.empty())
    h += "<h2>" + html_escape(objective_title(m)) + " against throughput</h2>\n<p>" + html_escape(keys) +
         " change throughput by design. Ringed runs are the Pareto front: no other run has both a lower " +
         html_escape(objective_title(m)) + " and more tokens/s.</p>\n" + scatter;
  return h;
}

// The ids of `runs`, the first kHtmlIdsPerCell of them, then how many more.
std::string run_list_text(const SweepRecords& sweep, const std::vector<size_t>& runs) {
  std::string s;
  for (size_t k = 0; k < runs.size() && k < kHtmlIdsPerCell; ++k)
    s += (s.empty() ? "" : ", ") + sweep.runs[runs[k]].run_id;
  if (runs.size() > kHtmlIdsPerCell) s += " and " + std::to_string(runs.size() - kHtmlIdsPerCell) + " more";
  return s;
}

std::string run_list(const SweepRecords& sweep, const std::vector<size_t>& runs) {
  return html_escape(run_list_text(sweep, runs));
}

std::string reproducibility(const SweepRecords& sweep, const ReportModel& m) {
  std::string h = "<h2>Reproducibility</h2>\n";
  if (!m.classes_matter)
    return h +
           "<p>Every run has a checksum trajectory of its own and no runs differ only in layout, so nothing "
           "here is held to identity: sweeps over layout keys (world size, accumulation, ZeRO stage, data "
           "workers) and invariance checks list their classes of bit-identical runs here.</p>\n";
  size_t shared = 0;
  std::string rows;
  for (const auto& c : m.classes) {
    if (c.runs.size() < 2) continue;
    if (++shared > kHtmlIdenticalSets) continue;  // (counted, not listed)
    const Record& r = sweep.runs[c.runs[0]];
    rows += "<tr>" + td(c.name) + td(std::to_string(c.runs.size()), "num") +
            td(r.checksums.empty() ? "-" : hex16(r.checksums.back().params), "hash") +
            td(run_list(sweep, c.runs), "id") + "</tr>\n";
  }
  h += "<p>" + std::to_string(m.classes.size()) + (m.classes.size() == 1 ? " class" : " classes") +
       " of identical checksum trajectories; " + std::to_string(shared) + " shared by two or more runs" +
       (shared > kHtmlIdenticalSets ? ", the first " + std::to_string(kHtmlIdenticalSets) + " listed" : "") + ".</p>\n";
  if (!rows.empty())
    h += "<table>\n<thead><tr><th>class</th><th>runs</th><th>final params checksum</th><th>run "
         "ids</th></tr></thead>\n<tbody>\n" +
         rows + "</tbody>\n</table>\n";
  if (m.layout_sets.empty())
    return h + "<p>No runs differ only in layout (world size, accumulation, ZeRO stage, data workers).</p>\n";
  h += "<h3>Runs that should be identical</h3>\n<p>They differ only in layout keys with the same global "
       "batch.</p>\n<table>\n"
       "<thead><tr><th>verdict</th><th>runs</th><th>first difference</th></tr></thead>\n<tbody>\n";
  size_t identical_shown = 0;
  for (const auto& s : m.layout_sets) {
    if (s.identical && identical_shown++ == kHtmlIdenticalSets) {
      const size_t more = m.layout_sets.size() - size_t(&s - m.layout_sets.data());
      h += "<tr>" + td("identical", "ok") + td("and " + std::to_string(more) + " more identical sets") + td("") +
           "</tr>\n";
      break;
    }
    std::string note = html_escape(s.first_difference);
    if (!s.by_design.empty())
      note += std::string(note.empty() ? "" : "<br>") + "same math, other bits by design: " +
              html_escape(run_list_text(sweep, s.by_design) + "; " + s.by_design_note);
    h += "<tr>" + (s.identical ? td("identical", "ok") : td("NOT IDENTICAL", "flag")) +
         td(run_list(sweep, s.runs), "id") + td(note) + "</tr>\n";
  }
  return h +
         "</tbody>\n</table>\n<p>The native all-reduce does the same math in another order: its runs are held "
         "to identity only with runs of their own layout, and their largest relative loss difference from the "
         "set's first run is given instead. With train.leaf the micro-batch is layout too.</p>\n";
}

// Runs in benchmark mode beside their deterministic partners: the throughput determinism costs.
std::string determinism_section(const SweepRecords& sweep, const ReportModel& m) {
  if (m.determinism_costs.empty()) return "";
  std::string h =
      "<h3>What determinism costs</h3>\n<p>Runs that differ only in train.deterministic: tokens/s (median over "
      "steps) of each, and the deterministic step time over the benchmark step time.</p>\n<table>\n"
      "<thead><tr><th>deterministic run</th><th>tokens/s</th><th>benchmark run</th><th>tokens/s</th>"
      "<th>cost</th></tr></thead>\n<tbody>\n";
  for (const auto& c : m.determinism_costs)
    h += "<tr>" + td(html_escape(sweep.runs[c.deterministic].run_id), "id") +
         td(g6(c.deterministic_tokens_per_s), "num") + td(html_escape(sweep.runs[c.benchmark].run_id), "id") +
         td(g6(c.benchmark_tokens_per_s), "num") +
         td(std::isfinite(c.cost) ? g4(c.cost) + "x"
            : c.refused.empty()   ? "-"
                                  : "refused: " + html_escape(c.refused),
            "num") +
         "</tr>\n";
  return h + "</tbody>\n</table>\n";
}

// Notes of a cell that would make its row taller than its neighbours: behind a summary
// ("2 notes", a flag's name) that opens them in place. "" for none.
std::string more(const std::string& summary, const std::string& escaped_notes) {
  return escaped_notes.empty()
             ? ""
             : "<details class=\"more\"><summary>" + summary + "</summary>" + escaped_notes + "</details>";
}

std::string runs_table(const SweepRecords& sweep, const ReportModel& m, const std::string& run_href) {
  std::string t =
      "<h2>Runs</h2>\n" + shown_runs_note(m) + "<table class=\"runs\">\n<thead><tr><th>run</th><th>status</th>";
  for (const auto& k : m.varying) t += "<th>" + breakable(html_escape(k)) + "</th>";
  t += "<th>steps</th><th>final loss</th><th>train loss (last " + std::to_string(kLossWindow) +
       ")</th><th>final eval loss</th><th>best eval loss (step)</th><th>tokens/s "
       "(median)</th><th>health</th><th>params checksum</th>" +
       std::string(m.classes_matter ? "<th>class</th>" : "") + "</tr></thead>\n<tbody>\n";
  for (size_t i : m.html_runs) {
    const Record& r = sweep.runs[i];
    std::string notes;
    size_t n_notes = 0;
    if (!r.failure.empty()) notes += "<div class=\"failure\">" + html_escape(r.failure) + "</div>", ++n_notes;
    if (!r.lineage.kind.empty())  // sweep resume / sweep fork: the run it continues
      notes += "<div class=\"lineage\">" + html_escape(r.lineage.kind) + " from " +
               html_escape(r.lineage.parent_run_id) + " at step " + std::to_string(r.lineage.parent_step) + "</div>",
          ++n_notes;
    for (const std::string& d : spike_decisions(r))  // train.spike_policy: skipped or rewound
      notes += "<div class=\"lineage\">spike policy: " + html_escape(d) + "</div>", ++n_notes;
    t += "<tr>" + report_html::run_cell(r.run_id, run_href) +
         td(html_escape(r.status + (r.verified ? "" : " (unverified)")) + more(plural(n_notes, "note"), notes));
    for (const auto& k : m.varying) t += value_cell(report_value(r, k));
    const ReportRun& f = m.runs[i];
    std::string health = f.health.empty() ? "<span class=\"ok\">ok</span>" : "";
    for (const auto& h : f.health) {
      const std::string name = "<span class=\"flag\">" + html_escape(h.name) + "</span>";
      health +=
          h.detail.empty() ? name + " " : more(name, "<span class=\"failure\">" + html_escape(h.detail) + "</span>");
    }
    t += td(std::to_string(r.steps.size()), "num") + td(g6(f.final_loss), "num") + td(g6(f.train_loss_end), "num") +
         td(g6(f.final_eval_loss), "num") +
         td(f.best_eval_step < 0 ? "-" : g6(f.best_eval_loss) + " (" + std::to_string(f.best_eval_step) + ")", "num") +
         td(g6(f.tokens_per_s_median) + (f.shared_cores() ? " (shared cores)" : ""), "num") + td(health) +
         td(r.checksums.empty() ? "-" : hex16(r.checksums.back().params), "hash") +
         (m.classes_matter ? td(m.classes[m.runs[i].equivalence].name) : "") + "</tr>\n";
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

// A failed run's cause; a running run's step in an element of its own (class "step",
// data-run its id), which the served page's script advances in place (harness/serve).
std::string cause_html(const FailedRun& f) {
  const std::string step = "step " + std::to_string(f.step) + " of";
  const size_t at = status_is(f.status, RunStatus::running) && f.step >= 0 ? f.cause.find(step) : std::string::npos;
  if (at == std::string::npos) return html_escape(f.cause);
  const size_t number = at + 5, end = number + std::to_string(f.step).size();
  return html_escape(f.cause.substr(0, number)) + "<span class=\"step\" data-run=\"" + html_escape(f.run_id) + "\">" +
         html_escape(f.cause.substr(number, end - number)) + "</span>" + html_escape(f.cause.substr(end));
}

std::string failed_runs(const SweepRecords& sweep, const std::string& run_href) {
  if (sweep.failed.empty()) return "";
  const bool running = std::any_of(sweep.failed.begin(), sweep.failed.end(),
                                   [](const FailedRun& f) { return status_is(f.status, RunStatus::running); });
  std::string h = std::string("<h2>") + (running ? "Running and failed runs" : "Failed runs") +
                  "</h2>\n<table>\n<thead><tr><th>run</th><th>status</th><th>cause</th><th>end of "
                  "log</th></tr></thead>\n<tbody>\n";
  for (const auto& f : sweep.failed)
    h += "<tr>" + report_html::run_cell(f.run_id, run_href) + td(html_escape(f.status)) + td(cause_html(f), "failure") +
         td(f.log_tail.empty() ? "<span class=\"missing\">no log</span>"
                               : "<pre>" + html_escape(f.log_tail) + "</pre>") +
         "</tr>\n";
  return h + "</tbody>\n</table>\n";
}

// Each run's newest `sweep diagnose` verdict, one line a run (kept beside its record).
std::string diagnoses_section(const SweepRecords& sweep, const std::string& run_href) {
  if (sweep.diagnoses.empty()) return "";
  std::string h =
      "<h2>Diagnoses</h2>\n<p>The newest <code>sweep diagnose</code> verdict of each run that has one: its bad "
      "step replayed on its own layout, with the ranks' shares rotated and on one rank, compared bit for bit "
      "(the evidence is in the verdict file named).</p>\n<table>\n<thead><tr><th>run</th><th>verdict</th></tr>"
      "</thead>\n<tbody>\n";
  for (const auto& [id, line] : sweep.diagnoses)
    h += "<tr>" + report_html::run_cell(id, run_href) + td(html_escape(line), "diagnosis") + "</tr>\n";
  return h + "</tbody>\n</table>\n";
}

// Every table in a box that scrolls sideways, so a wide one does not widen the page. No
// user string can hold "<table": they are all escaped.
std::string wrap_tables(std::string h) {
  for (size_t at = 0; (at = h.find("<table", at)) != std::string::npos; at += 30)
    if (h[at + 6] == '>' || h[at + 6] == ' ') h.insert(at, "<div class=\"wide\">");
  for (size_t at = 0; (at = h.find("</table>", at)) != std::string::npos; at += 14) h.insert(at + 8, "</div>");
  return h;
}

}  // namespace

std::string render_html(const SweepRecords& sweep, const ReportModel& m, const std::string& run_href) {
  std::string h = kHtmlReportStart + ("<title>" + html_escape(m.title) + "</title>\n<style>\n");
  h += kStyle;
  h += "</style>\n</head>\n<body>\n<h1>" + html_escape(m.title) + "</h1>\n";
  h += summary(sweep, m);
  if (sweep.runs.empty()) {
    h += "<p>no completed runs</p>\n";
  } else {
    h += groups_table(sweep, m);
    h += "<h2>Loss curves</h2>\n<p>The mean over each group's seeds; the band spans their smallest to largest "
         "loss at each step. Each curve is named at its end; hover one to pick it out.</p>\n";
    if (!m.facet_by.empty())
      h += "<p>One panel per value of " + html_escape(m.facet_by) + ": more than " + std::to_string(kCurvesPerChart) +
           " curves on one chart cannot be told apart. The panels share their scales, and so do the other charts' "
           "panels below.</p>\n";
    h += panel_charts(
        sweep, m, "loss",
        [&](size_t g) {
          const RunGroup& r = m.groups[g];
          return Curve{r.curve_steps, r.curve_loss, r.curve_lo, r.curve_hi};
        },
        {}, "h3", /*log_y=*/false, /*spikes=*/true);
    // Held-out loss and a program's own metrics, a chart each (a panel each), every group on it.
    const std::vector<std::string> curves = metric_curves(sweep.runs);
    if (!curves.empty()) {
      h += "<h2>Held-out loss and the programs' own metrics</h2>\n<p>Each group's mean over its seeds at the "
           "steps it recorded them, with the band of its seeds; eval_ curves are held-out evaluations.</p>\n";
      for (const std::string& name : curves)
        h += "<h3>" + html_escape(name) + "</h3>\n" +
             panel_charts(
                 sweep, m, name, [&](size_t g) { return metric_curve(sweep.runs, m.groups[g].runs, name); }, {}, "h4");
    }
    h += baseline_section(sweep, m);
    h += report_html::search_section(sweep, m);
    h += report_html::lineage_section(sweep);
    h += effects_table(sweep, m);
    h += all_runs_section(sweep, m);
    h += diagnostics_section(sweep, m);
    h += telemetry_section_html(sweep, m);
    h += reproducibility(sweep, m);
    h += determinism_section(sweep, m);
    h += runs_table(sweep, m, run_href);
    h += environment(m);
  }
  h += failed_runs(sweep, run_href);
  h += diagnoses_section(sweep, run_href);
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

namespace report_html {

const char* style() { return kStyle; }

std::string wrap_tables_in_boxes(std::string h) { return wrap_tables(std::move(h)); }

std::string run_cell(const std::string& run_id, const std::string& run_href) {
  if (run_href.empty()) return td(html_escape(run_id), "id");
  return td("<a href=\"" + html_escape(run_href + run_id) + "\">" + html_escape(run_id) + "</a>", "id");
}

std::vector<report_plot::StepMark> spike_step_marks(const Record& r, const std::string& who) {
  std::vector<report_plot::StepMark> out;
  for (const SpikeMark& m : spike_marks(r)) {
    // A rewind went back to the state after the step before its first left-out one.
    const double from = double(m.left_out_from < m.step ? m.left_out_from - 1 : m.step);
    out.push_back({from, double(m.step), who.empty() ? m.text : who + ": " + m.text});
  }
  return out;
}

report_plot::ParallelAxis key_axis(const SweepRecords& sweep, const AxisEffect& e, const std::string& name) {
  report_plot::ParallelAxis a{name, e.key, e.values, false};
  double lo = INFINITY, hi = -INFINITY;
  std::set<std::string> distinct;
  for (const auto& r : sweep.runs) {
    const std::string v = report_value(r, e.key);
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !std::isfinite(x)) return a;  // not every value a number
    lo = std::min(lo, x), hi = std::max(hi, x);
    distinct.insert(v);
  }
  if (!e.binned && distinct.size() <= kMaxLevels) return a;
  a.categories.clear();
  a.log = lo > 0 && hi / lo >= 20;
  return a;
}

double axis_value(const report_plot::ParallelAxis& a, const std::string& v) {
  if (a.categories.empty()) return std::strtod(v.c_str(), nullptr);
  return double(std::find(a.categories.begin(), a.categories.end(), v) - a.categories.begin());
}

}  // namespace report_html

}  // namespace sweep
