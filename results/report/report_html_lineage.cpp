// The report's lineage section (report_html_parts.h): the runs `sweep resume` and
// `sweep fork` started from another run's checkpoint, drawn where they branch off.
#include <algorithm>
#include <map>
#include <set>

#include "compare.h"  // lineage_changes
#include "report_format.h"
#include "report_html_parts.h"
#include "report_plots.h"  // LineChart, chart_figure

namespace sweep::report_html {
namespace {

// "train.lr: 0.003 -> 0.001; train.seed: 0 -> 1": the keys whose values differ.
std::string config_changes(const Record& parent, const Record& child) {
  std::string out;
  for (const ValueDiff& d : lineage_changes(parent.config, child.config))
    out += (out.empty() ? "" : "; ") + d.key + ": " + (d.a.empty() ? "(unset)" : d.a) + " -> " +
           (d.b.empty() ? "(unset)" : d.b);
  return out;
}

// A run's losses from step `from` on, as a curve.
report_plot::Series loss_series(const Record& r, int64_t from, const std::string& label) {
  report_plot::Series s;
  s.label = s.legend = label;
  for (const auto& st : r.steps)
    if (st.step >= from) s.x.push_back(double(st.step)), s.y.push_back(st.loss);
  return s;
}

}  // namespace

std::string lineage_section(const SweepRecords& sweep) {
  std::map<std::string, size_t> by_id;
  for (size_t i = 0; i < sweep.runs.size(); ++i) by_id.emplace(sweep.runs[i].run_id, i);
  std::map<size_t, std::vector<size_t>> children;  // a parent among the records -> its children
  std::vector<size_t> orphans;                     // a child whose parent's record is not here
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    const RecordLineage& l = sweep.runs[i].lineage;
    if (l.kind.empty()) continue;
    const auto p = by_id.find(l.parent_run_id);
    if (p == by_id.end() || p->second == i)
      orphans.push_back(i);
    else
      children[p->second].push_back(i);
  }
  if (children.empty() && orphans.empty()) return "";
  std::string h =
      "<h2>Lineage</h2>\n<p>Runs started from another run's checkpoint (<code>sweep resume</code>, <code>sweep "
      "fork</code>). Each family is drawn on one chart: the first run whole, each run started from it from the "
      "step it branched off (its rows before that step are its parent's).</p>\n";
  std::set<size_t> drawn;
  for (const auto& [root, kids] : children) {
    // A family from its root: a parent that is nobody's child here (or, in a loop, the first met).
    const RecordLineage& rl = sweep.runs[root].lineage;
    const auto up = rl.kind.empty() ? by_id.end() : by_id.find(rl.parent_run_id);
    if (up != by_id.end() && children.count(up->second) && !drawn.count(up->second)) continue;
    if (drawn.count(root)) continue;
    report_plot::LineChart c;
    c.title = "lineage of " + sweep.runs[root].run_id, c.y_label = "loss";
    std::string list;
    std::vector<std::pair<size_t, int>> todo{{root, 0}};  // depth-first, with the depth for the list
    while (!todo.empty()) {
      const auto [i, depth] = todo.back();
      todo.pop_back();
      if (!drawn.insert(i).second) continue;
      const Record& r = sweep.runs[i];
      if (i == root) {
        c.series.push_back(loss_series(r, 0, r.run_id));
        list += "<li>" + html_escape(r.run_id) + "</li>\n";
      } else {
        const Record& parent = sweep.runs[by_id.at(r.lineage.parent_run_id)];
        c.series.push_back(
            loss_series(r, r.lineage.parent_step,
                        r.run_id + " (" + r.lineage.kind + " at step " + std::to_string(r.lineage.parent_step) + ")"));
        const std::string changes = config_changes(parent, r);
        list += "<li style=\"margin-left:" + std::to_string(2 * depth) + "em\">" + html_escape(r.run_id) + ": " +
                html_escape(r.lineage.kind) + " from " + html_escape(parent.run_id) + " at step " +
                std::to_string(r.lineage.parent_step) + (changes.empty() ? "" : " (" + html_escape(changes) + ")") +
                "</li>\n";
      }
      if (const auto k = children.find(i); k != children.end())
        for (auto it = k->second.rbegin(); it != k->second.rend(); ++it) todo.push_back({*it, depth + 1});
    }
    h += "<h3>" + html_escape(sweep.runs[root].run_id) + "</h3>\n<ul class=\"lineage\">\n" + list + "</ul>\n" +
         report_plot::chart_figure(c, report_plot::shared_scale({&c}));
  }
  if (!orphans.empty()) {
    h += "<p>Started from a run whose record is not among these (a failed or partial run):</p>\n<ul>\n";
    for (size_t i : orphans) {
      const Record& r = sweep.runs[i];
      h += "<li>" + html_escape(r.run_id) + ": " + html_escape(r.lineage.kind) + " from " +
           html_escape(r.lineage.parent_run_id) + " at step " + std::to_string(r.lineage.parent_step) + "</li>\n";
    }
    h += "</ul>\n";
  }
  return h;
}

}  // namespace sweep::report_html
