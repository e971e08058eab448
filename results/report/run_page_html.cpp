// The page of one run (run_pages.h): `sweep show`'s lines and every curve the record holds.
#include <cmath>  // isfinite
#include <functional>
#include <map>

#include "report.h"             // html_escape, metric_curves, metric_points
#include "report_format.h"      // plural
#include "report_html_parts.h"  // style, td, wrap_tables_in_boxes
#include "report_plots.h"       // LineChart, chart_figure
#include "report_telemetry.h"   // telemetry_html
#include "run_pages.h"

namespace sweep {
namespace {

using report_html::td;
using report_plot::LineChart;
using report_plot::Series;

/// A series of (step, value) points, NaNs left out.
Series series_of(const std::string& label, const std::vector<std::pair<int64_t, double>>& points) {
  Series s;
  s.label = s.legend = label;
  for (const auto& [step, v] : points)
    if (std::isfinite(v)) s.x.push_back(double(step)), s.y.push_back(v);
  return s;
}

/// One chart in a section named by its curve (data-curve), titled by it.
std::string curve_section(const std::string& name, LineChart chart) {
  if (chart.title.empty()) chart.title = name;
  if (chart.y_label.empty()) chart.y_label = name;
  std::vector<const LineChart*> one{&chart};
  return "<section class=\"curve\" data-curve=\"" + html_escape(name) + "\">\n<h3>" + html_escape(name) + "</h3>\n" +
         report_plot::chart_figure(chart, report_plot::shared_scale(one)) + "</section>\n";
}

/// A StepMetrics field as points; none when the record never set it off its default
/// (`unset`: writers that do not measure a figure leave it there).
std::vector<std::pair<int64_t, double>> field_points(const Record& r, double StepMetrics::*field, double unset) {
  std::vector<std::pair<int64_t, double>> out;
  bool set = false;
  for (const auto& s : r.steps) {
    out.emplace_back(s.step, s.*field);
    set = set || (std::isfinite(s.*field) && s.*field != unset);
  }
  return set ? out : decltype(out){};
}

/// A [step][rank] table as one curve per rank; "" when no rank has a finite value.
std::string per_rank_section(const Record& r, const std::vector<std::vector<double>>& rows, const std::string& name) {
  if (r.world_size < 2 || rows.empty()) return "";
  LineChart c;
  for (int64_t k = 0; k < r.world_size; ++k) {
    std::vector<std::pair<int64_t, double>> pts;
    for (size_t i = 0; i < rows.size() && i < r.steps.size(); ++i)
      if (size_t(k) < rows[i].size()) pts.emplace_back(r.steps[i].step, rows[i][size_t(k)]);
    Series s = series_of("rank " + std::to_string(k), pts);
    if (!s.y.empty()) c.series.push_back(std::move(s));
  }
  return c.series.empty() ? "" : curve_section(name, std::move(c));
}

/// The training loss with the held-out loss on it; then each of the program's own metrics
/// and evaluation metrics (metric_curves' names: what the report draws of the sweep).
std::string metric_sections(const Record& r) {
  LineChart loss;
  loss.series.push_back(series_of("loss", field_points(r, &StepMetrics::loss, NAN)));
  loss.marks = report_html::spike_step_marks(r);
  if (!r.evals.empty()) loss.series.push_back(series_of("eval_loss", metric_points(r, "eval_loss")));
  std::string h = curve_section("loss", std::move(loss));
  for (const std::string& name : metric_curves({r})) {
    LineChart c;
    c.series.push_back(series_of(name, metric_points(r, name)));
    h += curve_section(name, std::move(c));
  }
  return h;
}

/// What the run measured of itself: the StepMetrics figures it set, per rank, per tensor.
std::string telemetry_sections(const Record& r) {
  std::string h;
  struct Field {
    const char* name;
    double StepMetrics::*field;
    double unset;
    bool log_y;
  };
  for (const Field& f :
       {Field{"lr", &StepMetrics::lr, 0, false}, Field{"grad_norm", &StepMetrics::grad_norm, 0, true},
        Field{"clip_coef", &StepMetrics::clip_coef, 1, false}, Field{"loss_scale", &StepMetrics::loss_scale, 1, true},
        Field{"tokens_per_s", &StepMetrics::tokens_per_s, 0, false},
        Field{"step_time_s", &StepMetrics::step_time_s, 0, false},
        Field{"record_time_s", &StepMetrics::record_time_s, 0, false}}) {
    const auto pts = field_points(r, f.field, f.unset);
    if (pts.empty()) continue;
    LineChart c;
    c.log_y = f.log_y;
    c.series.push_back(series_of(f.name, pts));
    h += curve_section(f.name, std::move(c));
  }
  h += per_rank_section(r, r.rank_step_time_s, "step_time_s per rank");
  h += per_rank_section(r, r.rank_grad_norm, "grad_norm per rank");
  h += telemetry_html(r);  // each rank's norm as a heat map, the largest tensors, MoE load
  return h;
}

/// `sweep show`'s lines but config and environment, which have tables of their own.
std::string show_table(const RecordView& v) {
  std::string t = "<table class=\"show\">\n<tbody>\n";
  for (const auto& [key, value] : v.lines) {
    if (key == "config" || key == "environment") continue;
    const bool flag = key.rfind("  ", 0) == 0;  // a health flag's sentence
    // (data-key: what a served page's script finds, the progress of a run that trains.)
    t += "<tr data-key=\"" + html_escape(flag ? key.substr(2) : key) + "\">" +
         td(html_escape(flag ? key.substr(2) : key), flag ? "flag" : nullptr) + td(html_escape(value)) + "</tr>\n";
  }
  return t + "</tbody>\n</table>\n";
}

std::string map_table(const std::string& id, const std::map<std::string, std::string>& m) {
  std::string t = "<table id=\"" + id + "\">\n<thead><tr><th>key</th><th>value</th></tr></thead>\n<tbody>\n";
  for (const auto& [k, v] : m)
    if (!v.empty()) t += "<tr>" + td(html_escape(k)) + td(html_escape(v)) + "</tr>\n";
  return t + "</tbody>\n</table>\n";
}

}  // namespace

std::string report_page_start(const std::string& title) {
  return kHtmlReportStart + ("<title>" + html_escape(title) + "</title>\n<style>\n") + report_html::style() +
         "</style>\n</head>\n<body>\n<h1>" + html_escape(title) + "</h1>\n";
}

std::string render_run_html(const RecordView& v, const std::string& log_tail, const std::string& compare_href) {
  const Record& r = v.record;
  std::string h = report_page_start("run " + r.run_id);
  h += show_table(v);
  if (!compare_href.empty())
    h += "<form class=\"compare\" method=\"get\" action=\"" + html_escape(compare_href) +
         "\"><input type=\"hidden\" name=\"a\" value=\"" + html_escape(r.run_id) +
         "\"><label>compare with run <input name=\"b\" size=\"18\" placeholder=\"ID, or SWEEP/ID\" "
         "required></label> <button>compare</button></form>\n";
  h += "<h2>Curves</h2>\n" + metric_sections(r);
  if (const std::string t = telemetry_sections(r); !t.empty()) h += "<h2>Telemetry</h2>\n" + t;
  h += "<h2>Config</h2>\n" + map_table("config", r.config);
  h += "<h2>Environment</h2>\n" + map_table("environment", r.environment);
  h +=
      "<h2>End of the rank-0 log</h2>\n" + (log_tail.empty() ? std::string("<p class=\"missing\">no log</p>\n")
                                                             : "<pre id=\"log\">" + html_escape(log_tail) + "</pre>\n");
  return report_html::wrap_tables_in_boxes(h) + "</body>\n</html>\n";
}

}  // namespace sweep
