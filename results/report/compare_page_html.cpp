// The page of two runs side by side (run_pages.h): `sweep compare`'s words and their losses
// overlaid.
#include <cmath>  // isfinite

#include "report.h"             // html_escape
#include "report_html_parts.h"  // style, td, wrap_tables_in_boxes
#include "report_plots.h"       // LineChart, chart_figure
#include "run_figures.h"        // run_figures, figures_text
#include "run_health.h"         // run_health, health_names
#include "run_pages.h"

namespace sweep {
namespace {

using report_html::td;

/// One run's line, as `sweep compare` prints it before the verdict.
std::string run_line(const char* side, const std::string& name, const Record& r, const std::string& partial) {
  const std::string flags = health_names(run_health(r));
  std::string h = "<tr><th>" + std::string(side) + "</th>" + td(html_escape(name), "id") +
                  td(html_escape(figures_text(run_figures(r)))) + td(html_escape(flags.empty() ? "ok" : flags));
  const std::string note =
      !partial.empty() ? "partial: " + partial + "; its rows as of the last flush, not verified"
      : !r.verified    ? "unverified: a record of schema version " + std::to_string(r.schema_version) + " has no digest"
                       : "";
  return h + td(html_escape(note)) + "</tr>\n";
}

/// The two losses on one chart.
std::string loss_chart(const Record& a, const Record& b) {
  report_plot::LineChart c;
  c.title = "loss of A and B", c.y_label = "loss";
  for (const Record* r : {&a, &b}) {
    report_plot::Series s;
    s.label = s.legend = r == &a ? "A" : "B";
    for (const auto& st : r->steps)
      if (std::isfinite(st.loss)) s.x.push_back(double(st.step)), s.y.push_back(st.loss);
    if (r == &b) s.width = 3;  // under A's line where they agree, so both stay visible
    c.series.push_back(std::move(s));
  }
  std::swap(c.series[0], c.series[1]);  // B drawn first, wider
  std::vector<const report_plot::LineChart*> one{&c};
  return report_plot::chart_figure(c, report_plot::shared_scale(one));
}

std::string diff_table(const char* id, const std::vector<ValueDiff>& diffs) {
  if (diffs.empty()) return "<p id=\"" + std::string(id) + "\">none</p>\n";
  std::string t =
      "<table id=\"" + std::string(id) + "\">\n<thead><tr><th>key</th><th>A</th><th>B</th></tr></thead>\n<tbody>\n";
  for (const auto& d : diffs)
    t += "<tr>" + td(html_escape(d.key)) + td(html_escape(d.a)) + td(html_escape(d.b)) + "</tr>\n";
  return t + "</tbody>\n</table>\n";
}

}  // namespace

std::string render_compare_html(const Record& a, const Record& b, const RecordComparison& c, const std::string& a_name,
                                const std::string& b_name, const std::string& partial_a, const std::string& partial_b) {
  std::string h = report_page_start("compare " + a.run_id + " and " + b.run_id);
  h += "<table>\n<thead><tr><th></th><th>run</th><th>figures</th><th>health</th><th>note</th></tr></thead>\n<tbody>\n" +
       run_line("A", a_name, a, partial_a) + run_line("B", b_name, b, partial_b) + "</tbody>\n</table>\n";
  const bool any_partial = !partial_a.empty() || !partial_b.empty();
  // The verdict in `sweep compare`'s words; the first differing step apart, for a reader
  // who wants only that.
  h += "<p id=\"verdict\" class=\"" + std::string(c.match() ? "ok" : "flag") + "\">" +
       html_escape((any_partial ? "over the rows the partial records hold: " : "") + verdict_line(c)) + "</p>\n";
  const int64_t first = c.divergent_step();
  h += "<p id=\"first-difference\">" +
       (c.bitwise()        ? std::string("identical: no step differs")
        : first != kNoStep ? "first differing step: " + std::to_string(first)
                           : std::string("the training steps agree; see below for what differs")) +
       "</p>\n";
  const std::vector<std::string> details = detail_lines(c);
  if (!details.empty()) {
    h += "<ul id=\"details\">\n";
    for (const auto& l : details) h += "<li>" + html_escape(l) + "</li>\n";
    h += "</ul>\n";
  }
  h += "<h2>Loss</h2>\n" + loss_chart(a, b);
  h += "<h2>Config differences</h2>\n" + diff_table("config-diff", c.config);
  h += "<h2>Environment differences</h2>\n" + diff_table("environment-diff", c.environment);
  return report_html::wrap_tables_in_boxes(h) + "</body>\n</html>\n";
}

}  // namespace sweep
