// The HTML report's search section: the best result against the compute spent; for a
// random or tpe search the objective against each parameter (slices, lighter for earlier
// trials); for successive halving every trial through the rungs it reached, and what each
// rung spent; then every decision of search.log.
#include <algorithm>  // find, min, max
#include <cmath>      // isfinite
#include <cstdio>     // snprintf
#include <cstdlib>    // strtod
#include <map>

#include "report_format.h"
#include "report_html_parts.h"
#include "report_plots.h"

namespace sweep::report_html {
namespace {

using namespace report_fmt;

std::string best_so_far_chart(const SearchProgress& sp) {
  if (sp.best_so_far.empty()) return "";
  report_plot::LineChart c;
  c.title = "best " + sp.metric + " against training steps spent";
  c.x_label = "training steps spent (all runs)";
  c.y_label = sp.metric + (sp.mode == "max" ? " (higher is better)" : " (lower is better)");
  report_plot::Series s;
  s.label = s.legend = sp.kind == "halving" || sp.kind == "asha" ? "best of each rung, at its steps" : "best so far";
  for (const auto& pt : sp.best_so_far) s.x.push_back(pt.compute), s.y.push_back(pt.best);
  c.series.push_back(std::move(s));
  return "<p>" +
         html_escape(sp.kind == "halving" || sp.kind == "asha"
                         ? "Each point is a rung once it ran: the compute spent so far and the best " + sp.metric +
                               " of that rung's trials after its steps (a promoted run resumes, so its earlier "
                               "steps are not spent again)."
                         : "Each point is a trial once it ran: the compute spent so far and the best " + sp.metric +
                               " up to it.") +
         "</p>\n" + report_plot::chart_figure(c, report_plot::shared_scale({&c}));
}

// The objective of every run against each searched key, coloured by when its trial ran.
std::string slices(const SweepRecords& sweep, const ReportModel& m) {
  const SearchProgress& sp = m.search;
  std::vector<std::string> keys = sp.keys;
  if (keys.empty())
    for (const auto& k : m.columns) keys.push_back(k);
  std::map<std::string, size_t> trial_of;  // run id -> its trial's place in the log
  for (size_t t = 0; t < sp.trials.size(); ++t)
    for (const auto& id : sp.trials[t].run_ids) trial_of.emplace(id, t);
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < m.runs.size(); ++i)
    if (std::isfinite(m.runs[i].objective) && (best == SIZE_MAX || m.runs[i].objective < m.runs[best].objective))
      best = i;
  const std::vector<std::string> names = short_key_names(keys);
  std::string plots;
  for (size_t k = 0; k < keys.size(); ++k) {
    const auto e =
        std::find_if(m.effects.begin(), m.effects.end(), [&](const AxisEffect& x) { return x.key == keys[k]; });
    if (e == m.effects.end()) continue;  // the key did not vary
    const report_plot::ParallelAxis axis = key_axis(sweep, *e, names[k]);
    std::vector<report_plot::SlicePoint> points;
    for (size_t i = 0; i < sweep.runs.size(); ++i) {
      const std::string v = report_value(sweep.runs[i], keys[k]);
      const auto t = trial_of.find(sweep.runs[i].run_id);
      const double order =
          t == trial_of.end() || sp.trials.size() < 2 ? 1 : double(t->second) / double(sp.trials.size() - 1);
      points.push_back({sweep.runs[i].run_id + (t == trial_of.end() ? "" : " (" + sp.trials[t->second].label + ")") +
                            ": " + keys[k] + "=" + v + ", " + objective_title(m) + " " + g6(m.runs[i].objective),
                        axis_value(axis, v), m.runs[i].objective, order, i == best});
    }
    plots += report_plot::svg_slice(points, axis, objective_title(m));
  }
  if (plots.empty()) return "";
  return "<h3>The " + html_escape(objective_title(m)) +
         " against each parameter</h3>\n<p>One point per run; lighter for earlier trials, darker for later ones "
         "(a tpe search's later trials gather where it expects the best), the best ringed in red. The importance "
         "of each parameter is in the table of effects below.</p>\n<div class=\"panels\">\n" +
         plots + "</div>\n";
}

// "#rrggbb" between light grey (0) and dark blue (1).
std::string climb_colour(double f) {
  char buf[16];
  f = std::clamp(f, 0.0, 1.0);
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", int(200 + f * (31 - 200)), int(200 + f * (78 - 200)),
                int(200 + f * (140 - 200)));
  return buf;
}

// Successive halving: each trial's metric at every rung it reached, and each rung's cost.
std::string rungs(const ReportModel& m) {
  const SearchProgress& sp = m.search;
  if (sp.rungs.empty()) return "";
  std::map<size_t, size_t> top_rung;  // bracket -> its last rung
  for (const auto& r : sp.rungs) top_rung[r.bracket] = std::max(top_rung[r.bracket], r.rung);
  report_plot::LineChart c;
  c.title = "each trial through its rungs";
  c.x_label = "steps trained";
  c.y_label = sp.metric;
  c.end_labels = false;
  for (const auto& p : sp.paths) {
    report_plot::Series s;
    const std::string trial = p.trial < sp.trials.size() ? sp.trials[p.trial].label : "trial";
    const std::string inputs = p.trial < sp.trials.size() ? sp.trials[p.trial].inputs : "";
    s.label = trial + " (" + inputs + "): " + p.fate + " at rung " + std::to_string(p.last_rung);
    s.legend = trial;
    for (const auto& [steps, v] : p.points) s.x.push_back(double(steps)), s.y.push_back(v);
    const size_t top = top_rung[p.bracket];
    s.colour = p.fate == "best of bracket" ? "#d62728" : climb_colour(top ? double(p.last_rung) / double(top) : 1);
    s.width = p.fate == "best of bracket" ? 3 : 1.5;
    c.series.push_back(std::move(s));
  }
  // The best on top: drawn last.
  std::stable_partition(c.series.begin(), c.series.end(),
                        [](const report_plot::Series& s) { return s.colour != "#d62728"; });
  std::string h = "<h3>Trials by rung</h3>\n<p>Each line is a trial through the rungs it reached, its " +
                  html_escape(sp.metric) +
                  " at each: light grey where it stopped at the first rung, darker the further it climbed, red the "
                  "best of its bracket. Hover a line for its trial and values.</p>\n";
  // The whole range: most trials are one point at the first rung, and the few that climbed
  // are what the chart is for, not outliers to clip.
  report_plot::Scale scale = report_plot::shared_scale({&c});
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& s : c.series)
    for (double v : s.y)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (hi > lo) scale.y.lo = lo - 0.05 * (hi - lo), scale.y.hi = hi + 0.05 * (hi - lo), scale.y.log = false;
  scale.x_lo = std::min(scale.x_lo, 0.0);  // the first rung's steps are a share of the whole
  h += "<figure class=\"chart\">\n" + report_plot::svg_line_chart(c, scale) + "</figure>\n";
  h += "<table>\n<thead><tr><th>bracket</th><th>rung</th><th>steps</th><th>trials</th><th>promoted</th>"
       "<th>steps spent (all runs)</th><th>spent so far</th></tr></thead>\n<tbody>\n";
  double total = 0;
  for (const auto& r : sp.rungs) {
    total += r.steps_spent;
    h += "<tr>" + td(std::to_string(r.bracket), "num") + td(std::to_string(r.rung), "num") +
         td(std::to_string(r.steps), "num") + td(std::to_string(r.trials), "num") +
         td(std::to_string(r.promoted), "num") + td(g6(r.steps_spent), "num") + td(g6(total), "num") + "</tr>\n";
  }
  return h +
         "</tbody>\n</table>\n<p>A promoted run resumes from its rung's checkpoint, so a rung spends only the "
         "steps it adds.</p>\n";
}

// Population-based training: for each numeric searched key, the value each member trained
// with at every step (a fork is a jump, to the value its new span drew), and a table of
// each member's schedule and whose checkpoint each span forked from.
std::string pbt_view(const SearchProgress& sp) {
  if (sp.members.empty()) return "";
  std::string h = "<section id=\"pbt-schedules\">\n<h3>Each member's schedule</h3>\n";
  for (const std::string& key : sp.keys) {
    report_plot::LineChart c;
    c.title = key + " each member trained with, by step";
    c.y_label = key;
    c.end_labels = false;
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& m : sp.members) {
      report_plot::Series s;
      s.label = m.label + (m.rank ? " (final rank " + std::to_string(m.rank) + ")" : "") + ": " + pbt_schedule_text(m);
      s.legend = m.label;
      for (const auto& span : m.spans) {
        const auto v = span.values.find(key);
        char* end = nullptr;
        const double x = v == span.values.end() ? NAN : std::strtod(v->second.c_str(), &end);
        if (v == span.values.end() || end == v->second.c_str() || !std::isfinite(x)) continue;
        s.x.push_back(double(span.from - 1)), s.y.push_back(x);
        s.x.push_back(double(span.to)), s.y.push_back(x);
        lo = std::min(lo, x), hi = std::max(hi, x);
      }
      // The palette's colours but its red, which marks the best.
      static const char* const kNotRed[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                            "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
      s.colour = kNotRed[size_t(&m - sp.members.data()) % (sizeof kNotRed / sizeof *kNotRed)];
      if (m.rank == 1) s.colour = "#d62728", s.width = 3;
      if (!s.x.empty()) c.series.push_back(std::move(s));
    }
    if (c.series.empty()) continue;  // a choice of words: the table says it
    c.log_y = lo > 0 && hi / lo >= 10;
    std::stable_partition(c.series.begin(), c.series.end(),
                          [](const report_plot::Series& s) { return s.colour != "#d62728"; });
    h += report_plot::chart_figure(c, report_plot::shared_scale({&c}));
  }
  h += "<p>" +
       html_escape(
           "Each line is a member: the value it trained with over each span of steps. At a decision a "
           "member of the bottom " +
           std::string("quantile forks from a top member's checkpoint and jumps to its new values; red is "
                       "the best at the final step. Hover a line for its whole schedule.")) +
       "</p>\n";
  h += "<table class=\"pbt-schedules\">\n<thead><tr><th>member</th><th>final rank</th><th>" + html_escape(sp.metric) +
       "</th><th>schedule</th></tr></thead>\n<tbody>\n";
  for (const auto& m : sp.members)
    h += "<tr>" + td(html_escape(m.label)) + td(m.rank ? std::to_string(m.rank) : "", "num") +
         td(g6(m.final_value), "num") + td(html_escape(pbt_schedule_text(m))) + "</tr>\n";
  return h + "</tbody>\n</table>\n</section>\n";
}

// A Pareto search: its trials on the first two metrics with the front joined, and a table
// of the non-dominated trials.
std::string pareto_view(const SearchProgress& sp) {
  if (sp.metrics.empty()) return "";
  size_t feasible = 0, front = 0, infeasible = 0;
  for (const auto& t : sp.pareto)
    feasible += t.feasible ? 1 : 0, front += t.front ? 1 : 0, infeasible += !t.failed && !t.feasible ? 1 : 0;
  const auto mode_of = [&](size_t k) { return k < sp.modes.size() ? sp.modes[k] : std::string("min"); };
  std::string objectives;
  for (size_t k = 0; k < sp.metrics.size(); ++k)
    objectives += (k ? ", " : "") + sp.metrics[k] + " (" + (mode_of(k) == "max" ? "higher" : "lower") + " is better)";
  std::string h = "<section id=\"pareto\">\n<h3>Pareto front</h3>\n<p>" +
                  html_escape("The trials no other feasible trial beats on every one of " + objectives +
                              " at once (at least as good on each, better on one)");
  if (!sp.constraints.empty()) {
    std::string c;
    for (size_t k = 0; k < sp.constraints.size(); ++k) c += (k ? " and " : "") + sp.constraints[k];
    h += html_escape("; feasible means " + c + ", and any feasible trial ranks above every infeasible one");
  }
  h += html_escape(": " + std::to_string(front) + " of " + std::to_string(sp.pareto.size()) + " trials, " +
                   std::to_string(feasible) + " feasible.") +
       "</p>\n";
  if (sp.metrics.size() >= 2) {
    std::vector<report_plot::ScatterPoint> points;
    for (const auto& t : sp.pareto) {
      if (!t.feasible) continue;
      const SearchProgress::Trial& trial = sp.trials[t.trial];
      points.push_back({trial.label + " (" + trial.inputs + "): " + sp.metrics[0] + " " + g6(t.values[0]) + ", " +
                            sp.metrics[1] + " " + g6(t.values[1]),
                        t.values[0], t.values[1], t.front});
    }
    h += "<p>" +
         html_escape("Each feasible trial on " + sp.metrics[0] + " and " + sp.metrics[1] +
                     "; the front is ringed and joined" +
                     (sp.metrics.size() > 2
                          ? " (it is the front of all " + std::to_string(sp.metrics.size()) + " metrics, seen from two)"
                          : "") +
                     (infeasible ? "; " + std::to_string(infeasible) + " infeasible trials are left out" : "") + ".") +
         "</p>\n" + report_plot::svg_scatter(points, sp.metrics[0], sp.metrics[1], "Pareto front");
  }
  h += "<table class=\"pareto-front\">\n<thead><tr><th>trial</th><th>values</th><th>runs</th>";
  for (const auto& metric : sp.metrics) h += "<th>" + html_escape(metric) + "</th>";
  h += "</tr></thead>\n<tbody>\n";
  for (const auto& t : sp.pareto) {
    if (!t.front) continue;
    const SearchProgress::Trial& trial = sp.trials[t.trial];
    std::string ids;
    for (const auto& id : trial.run_ids) ids += (ids.empty() ? "" : " ") + id;
    h += "<tr>" + td(trial.label) + td(trial.inputs) + td(ids);
    for (double v : t.values) h += td(g6(v), "num");
    h += "</tr>\n";
  }
  return h + "</tbody>\n</table>\n</section>\n";
}

}  // namespace

std::string search_section(const SweepRecords& sweep, const ReportModel& m) {
  const SearchProgress& sp = m.search;
  if (sp.kind.empty()) return "";
  std::string h = "<h2>Search (" + html_escape(sp.kind) + ")</h2>\n" + best_so_far_chart(sp);
  h += pareto_view(sp);
  if (sp.kind == "random" || sp.kind == "tpe") h += slices(sweep, m);
  if (sp.kind == "halving" || sp.kind == "asha") h += rungs(m);
  if (sp.kind == "pbt") h += pbt_view(sp);
  constexpr size_t kShown = 400;
  std::string text;
  for (size_t i = 0; i < sp.decisions.size() && i < kShown; ++i) text += sp.decisions[i] + "\n";
  h += "<p>The decisions, as search.log has them" +
       std::string(sp.decisions.size() > kShown
                       ? " (the first " + std::to_string(kShown) + " of " + std::to_string(sp.decisions.size()) + ")"
                       : "") +
       ":</p>\n<pre>" + html_escape(text) + "</pre>\n";
  return h;
}

}  // namespace sweep::report_html
