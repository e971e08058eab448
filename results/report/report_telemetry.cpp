#include "report_telemetry.h"

#include <algorithm>  // stable_partition
#include <cmath>      // isfinite
#include <functional>

#include "report_format.h"     // g6, plural, curve_samples
#include "report_heatmap.h"    // svg_heatmap
#include "report_plots.h"      // LineChart, chart_figure
#include "run_health.h"        // lower_median
#include "telemetry_series.h"  // expert_load_at, largest_tensors

namespace sweep {
namespace {

using report_fmt::g6;
using report_fmt::plural;
using report_plot::LineChart;
using report_plot::Series;

/// One part: its section, heading and what it shows.
std::string part(const char* name, const char* heading, const std::string& title, const std::string& note,
                 const std::string& body) {
  return std::string("<section class=\"telemetry-part\" data-part=\"") + name + "\">\n<" + heading + ">" +
         html_escape(title) + "</" + heading + ">\n<p>" + html_escape(note) + "</p>\n" + body + "</section>\n";
}

std::string figure(const LineChart& c) { return report_plot::chart_figure(c, report_plot::shared_scale({&c})); }

/// A curve over the telemetry rows, NaN points left out.
Series row_series(const Record& r, const std::string& label, const std::function<double(size_t)>& value) {
  Series s;
  s.label = s.legend = label;
  for (size_t i = 0; i < r.telemetry.size(); ++i)
    if (const double v = value(i); std::isfinite(v)) s.x.push_back(double(r.telemetry[i].step)), s.y.push_back(v);
  return s;
}

std::string rank_heatmap(const Record& r, const char* heading) {
  if (r.world_size < 2 || r.rank_grad_norm.empty()) return "";
  report_plot::HeatMap map;
  map.title = "run " + r.run_id + ": each rank's gradient norm per step";
  map.value_label = "gradient norm";
  for (int64_t k = 0; k < r.world_size; ++k) map.rows.push_back("rank " + std::to_string(k));
  map.values.assign(map.rows.size(), {});
  for (size_t i = 0; i < r.rank_grad_norm.size() && i < r.steps.size(); ++i) {
    map.steps.push_back(r.steps[i].step);
    for (size_t k = 0; k < map.rows.size(); ++k)
      map.values[k].push_back(k < r.rank_grad_norm[i].size() ? r.rank_grad_norm[i][k] : NAN);
  }
  if (map.steps.empty()) return "";
  const bool binned = map.steps.size() > report_plot::kHeatColumns;
  return part("rank-heatmap", heading, "Each rank's gradient norm",
              "Each rank's own gradient (its share of the global batch, before the reduction) at each step" +
                  std::string(binned ? ", the largest of each column's steps" : "") +
                  ": a rank whose data, replica or device went wrong is a stripe of its own.",
              report_plot::svg_heatmap(map));
}

std::string tensor_norms(const Record& r, const char* heading) {
  if (r.telemetry.empty() || r.params.empty()) return "";
  const std::vector<size_t> top = largest_tensors(r, kTelemetryTensors);
  LineChart c;
  c.title = "run " + r.run_id + ": tensor gradient norms";
  c.y_label = "gradient norm";
  c.log_y = true;
  for (size_t p : top)
    c.series.push_back(row_series(r, r.params[p].name, [&](size_t i) {
      const auto& n = r.telemetry[i].tensor_grad_norm;
      return p < n.size() ? n[p] : NAN;
    }));
  return part("tensor-norms", heading,
              "Gradient norms of the " + std::to_string(top.size()) + " largest tensors (of " +
                  std::to_string(r.params.size()) + ")",
              "At each of the " + plural(r.telemetry.size(), "telemetry row") +
                  "; the tensors whose norm was largest at some row (a non-finite norm counts as the largest).",
              figure(c));
}

std::string expert_load(const Record& r, const char* heading) {
  if (!has_routing(r)) return "";
  LineChart load, entropy;
  load.title = "run " + r.run_id + ": expert load max/mean per MoE layer";
  load.y_label = "busiest expert / mean";
  load.lines.push_back({1, "even"});
  entropy.title = "run " + r.run_id + ": routing entropy per MoE layer";
  entropy.y_label = "entropy / ln(experts)";
  for (int64_t l = 0; l < r.moe_layers; ++l) {
    const std::string name = "layer " + std::to_string(l);
    load.series.push_back(row_series(r, name, [&](size_t i) { return expert_load_at(r, i, l).max_over_mean; }));
    entropy.series.push_back(row_series(r, name, [&](size_t i) { return expert_load_at(r, i, l).entropy; }));
  }
  const std::string shape =
      plural(size_t(r.moe_layers), "MoE layer") + " of " + std::to_string(r.moe_experts) + " experts";
  return part("expert-load", heading, "Expert load per MoE layer",
              shape + ": the busiest expert's tokens over an even split at each telemetry row (1 is even, " +
                  std::to_string(r.moe_experts) + " is every token to one expert).",
              figure(load)) +
         part("routing-entropy", heading, "Routing entropy per MoE layer",
              "The entropy of each layer's load over its largest, ln(experts): 1 is even, 0 is one expert.",
              figure(entropy));
}

std::string run_summary(const Record& r) {
  std::string s = "run " + r.run_id + ": " + plural(size_t(r.world_size), "rank") + ", " +
                  plural(r.telemetry.size(), "telemetry row");
  if (has_routing(r))
    s += ", " + plural(size_t(r.moe_layers), "MoE layer") + " of " + std::to_string(r.moe_experts) + " experts";
  return s;
}

}  // namespace

std::string telemetry_html(const Record& r, const char* heading) {
  if (!has_telemetry(r)) return "";
  return rank_heatmap(r, heading) + tensor_norms(r, heading) + expert_load(r, heading);
}

std::vector<size_t> telemetry_runs(const SweepRecords& sweep, const ReportModel& m) {
  std::vector<size_t> out;
  for (size_t i : m.html_runs)
    if (has_telemetry(sweep.runs[i])) out.push_back(i);
  std::stable_partition(out.begin(), out.end(), [&](size_t i) { return !m.runs[i].health.empty(); });
  if (out.size() > kTelemetryRuns) out.resize(kTelemetryRuns);
  return out;
}

std::string telemetry_section_html(const SweepRecords& sweep, const ReportModel& m) {
  const std::vector<size_t> runs = telemetry_runs(sweep, m);
  if (runs.empty()) return "";
  size_t with = 0;
  for (size_t i : m.html_runs) with += has_telemetry(sweep.runs[i]) ? 1 : 0;
  std::string h = "<h2>Gradient telemetry</h2>\n<p>What the runs recorded of their gradients (train.telemetry_every): ";
  h += with > runs.size() ? std::to_string(runs.size()) + " of the " + std::to_string(with) +
                                " runs that recorded some, those with a health flag first; each run's page in "
                                "<code>sweep serve</code> and <code>sweep show --telemetry</code> have the rest.</p>\n"
                          : "each run that recorded some.</p>\n";
  for (size_t i : runs) {
    const Record& r = sweep.runs[i];
    h += "<details class=\"telemetry\" data-run=\"" + html_escape(r.run_id) + "\" open>\n<summary>" +
         html_escape(run_summary(r)) + "</summary>\n" + telemetry_html(r, "h4") + "</details>\n";
  }
  return h;
}

std::vector<TextTable> telemetry_tables(const Record& r) {
  std::vector<TextTable> out;
  if (r.world_size >= 1 && !r.rank_grad_norm.empty()) {
    TextTable t;
    const size_t n = std::min(r.rank_grad_norm.size(), r.steps.size());
    t.title = "each rank's gradient norm";
    t.head = {"rank", "median"};
    const std::vector<size_t> at = report_fmt::curve_samples(n);
    for (size_t i : at) t.head.push_back("step " + std::to_string(r.steps[i].step));
    for (int64_t k = 0; k < r.world_size; ++k) {
      std::vector<double> col;
      for (size_t i = 0; i < n; ++i)
        if (size_t(k) < r.rank_grad_norm[i].size() && std::isfinite(r.rank_grad_norm[i][size_t(k)]))
          col.push_back(r.rank_grad_norm[i][size_t(k)]);
      std::vector<std::string> row = {std::to_string(k), g6(lower_median(col, NAN))};
      for (size_t i : at)
        row.push_back(size_t(k) < r.rank_grad_norm[i].size() ? g6(r.rank_grad_norm[i][size_t(k)]) : "-");
      t.rows.push_back(std::move(row));
    }
    out.push_back(std::move(t));
  }
  if (r.telemetry.empty()) return out;
  const std::vector<size_t> at = report_fmt::curve_samples(r.telemetry.size());
  std::vector<std::string> steps;
  steps.reserve(at.size());
  for (size_t i : at) steps.push_back("step " + std::to_string(r.telemetry[i].step));
  if (!r.params.empty()) {
    TextTable t;
    const std::vector<size_t> top = largest_tensors(r, kTelemetryTensors);
    t.title = "gradient norms of the " + std::to_string(top.size()) + " largest tensors (of " +
              std::to_string(r.params.size()) + ")";
    t.head = {"tensor"};
    t.head.insert(t.head.end(), steps.begin(), steps.end());
    for (size_t p : top) {
      std::vector<std::string> row = {r.params[p].name};
      for (size_t i : at)
        row.push_back(p < r.telemetry[i].tensor_grad_norm.size() ? g6(r.telemetry[i].tensor_grad_norm[p]) : "-");
      t.rows.push_back(std::move(row));
    }
    out.push_back(std::move(t));
  }
  if (has_routing(r)) {
    TextTable t;
    t.title = "expert load (busiest over mean) and routing entropy (over ln " + std::to_string(r.moe_experts) +
              ") per MoE layer";
    t.head = {"layer", "figure"};
    t.head.insert(t.head.end(), steps.begin(), steps.end());
    for (int64_t l = 0; l < r.moe_layers; ++l) {
      std::vector<std::string> load = {std::to_string(l), "load max/mean"}, entropy = {"", "entropy"};
      for (size_t i : at) {
        const ExpertLoad e = expert_load_at(r, i, l);
        load.push_back(g6(e.max_over_mean)), entropy.push_back(g6(e.entropy));
      }
      t.rows.push_back(std::move(load)), t.rows.push_back(std::move(entropy));
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace sweep
