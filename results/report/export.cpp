#include "export.h"

#include <cmath>  // isnan
#include <map>
#include <utility>
#include <vector>

#include "report_format.h"  // csv_field
#include "text.h"           // append_exact_double

namespace sweep {
namespace {

// The metric cells of the recorded columns (plain names: no CSV quoting).
const std::string kLoss = "loss", kLr = "lr", kGradNorm = "grad_norm", kClipCoef = "clip_coef",
                  kLossScale = "loss_scale", kSkipped = "skipped", kTokens = "tokens", kStepTime = "step_time_s",
                  kTokensPerS = "tokens_per_s", kEvalLoss = "eval_loss";

}  // namespace

std::string render_export_csv(const SweepRecords& sweep) {
  std::string out;
  render_export_csv(sweep, [&out](const std::string& chunk) { out += chunk; });
  return out;
}

void render_export_csv(const SweepRecords& sweep, const std::function<void(const std::string&)>& sink) {
  using report_fmt::csv_field;
  const std::vector<std::string> keys = varying_keys(sweep.runs);
  std::string head = kExportCsvStart;
  for (const auto& k : keys) head += csv_field(k) + ",";
  sink(head + "step,metric,value\r\n");
  std::string out, at;
  for (const Record& r : sweep.runs) {
    out.clear();
    // The cells every row of this run starts with.
    std::string lead = csv_field(r.run_id) + "," + csv_field(r.status) + ",";
    for (const auto& k : keys) lead += csv_field(report_value(r, k)) + ",";
    // One row: `at` (the lead cells and the step), the metric's cell, the value.
    const auto row = [&](const std::string& metric, double v) {
      out += at, out += metric, out += ',';
      append_exact_double(out, v);
      out += "\r\n";
    };
    const auto count_row = [&](const std::string& metric, int64_t n) {
      out += at, out += metric, out += ',', out += std::to_string(n), out += "\r\n";
    };
    const auto step_cell = [&](int64_t step) { at = lead, at += std::to_string(step), at += ','; };
    // A program's own figures, by name (the cell spelled once a run); a step without one
    // has no row for it.
    const auto extra_cells = [](const std::map<std::string, std::vector<double>>& extra, const std::string& prefix) {
      std::vector<std::pair<std::string, const std::vector<double>*>> cells;
      for (const auto& [name, values] : extra) cells.emplace_back(csv_field(prefix + name), &values);
      return cells;
    };
    const auto step_extra = extra_cells(r.step_extra, ""), eval_extra = extra_cells(r.eval_extra, "eval_");
    for (size_t i = 0; i < r.steps.size(); ++i) {
      const StepMetrics& s = r.steps[i];
      step_cell(s.step);
      row(kLoss, s.loss);
      row(kLr, s.lr);
      row(kGradNorm, s.grad_norm);
      row(kClipCoef, s.clip_coef);
      row(kLossScale, s.loss_scale);
      count_row(kSkipped, s.skipped);
      count_row(kTokens, s.tokens);
      row(kStepTime, s.step_time_s);
      row(kTokensPerS, s.tokens_per_s);
      for (const auto& [cell, values] : step_extra)
        if (!std::isnan((*values)[i])) row(cell, (*values)[i]);
    }
    for (size_t i = 0; i < r.evals.size(); ++i) {
      step_cell(r.evals[i].step);
      row(kEvalLoss, r.evals[i].loss);
      for (const auto& [cell, values] : eval_extra)
        if (!std::isnan((*values)[i])) row(cell, (*values)[i]);
    }
    sink(out);
  }
}

}  // namespace sweep
