// The report's lineage section (report_html_parts.h): the runs `sweep resume` and
// `sweep fork` started from another run's checkpoint, drawn where they branch off.
#include "report_format.h"
#include "report_html_parts.h"
#include "report_plots.h"  // LineChart, chart_figure

namespace sweep::report_html {
namespace {

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
  const std::vector<LineageLine> lines = lineage_lines(sweep);
  if (lines.empty()) return "";
  std::string h =
      "<h2>Lineage</h2>\n<p>Runs started from another run's checkpoint (<code>sweep resume</code>, <code>sweep "
      "fork</code>). Each family is drawn on one chart: the first run whole, each run started from it from the "
      "step it branched off (its rows before that step are its parent's).</p>\n";
  bool orphans = false;
  for (size_t k = 0; k < lines.size();) {
    if (!lines[k].parent_here) {  // the orphans come last, listed without a chart
      if (!orphans) h += "<p>Started from a run whose record is not among these (a failed or partial run):</p>\n<ul>\n";
      orphans = true;
      h += "<li>" + html_escape(lineage_text(sweep, lines[k++])) + "</li>\n";
      continue;
    }
    const size_t root = lines[k].root;
    report_plot::LineChart c;
    c.title = "lineage of " + sweep.runs[root].run_id, c.y_label = "loss";
    std::string list;
    for (; k < lines.size() && lines[k].parent_here && lines[k].root == root; ++k) {
      const Record& r = sweep.runs[lines[k].run];
      const bool first = lines[k].run == root;
      c.series.push_back(first ? loss_series(r, 0, r.run_id)
                               : loss_series(r, r.lineage.parent_step,
                                             r.run_id + " (" + r.lineage.kind + " at step " +
                                                 std::to_string(r.lineage.parent_step) + ")"));
      list +=
          (first ? std::string("<li>") : "<li style=\"margin-left:" + std::to_string(2 * lines[k].depth) + "em\">") +
          html_escape(lineage_text(sweep, lines[k])) + "</li>\n";
    }
    h += "<h3>" + html_escape(sweep.runs[root].run_id) + "</h3>\n<ul class=\"lineage\">\n" + list + "</ul>\n" +
         report_plot::chart_figure(c, report_plot::shared_scale({&c}));
  }
  if (orphans) h += "</ul>\n";
  return h;
}

}  // namespace sweep::report_html
