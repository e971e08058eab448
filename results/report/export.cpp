#include "export.h"

#include <cmath>  // isnan

#include "report_format.h"  // csv_field, g17

namespace sweep {

std::string render_export_csv(const SweepRecords& sweep) {
  std::string out;
  render_export_csv(sweep, [&out](const std::string& chunk) { out += chunk; });
  return out;
}

void render_export_csv(const SweepRecords& sweep, const std::function<void(const std::string&)>& sink) {
  using report_fmt::csv_field;
  using report_fmt::g17;
  const std::vector<std::string> keys = varying_keys(sweep.runs);
  std::string head = kExportCsvStart;
  for (const auto& k : keys) head += csv_field(k) + ",";
  sink(head + "step,metric,value\r\n");
  std::string out;
  for (const Record& r : sweep.runs) {
    out.clear();
    // The cells every row of this run starts with.
    std::string lead = csv_field(r.run_id) + "," + csv_field(r.status) + ",";
    for (const auto& k : keys) lead += csv_field(report_value(r, k)) + ",";
    auto row = [&](int64_t step, const std::string& metric, const std::string& value) {
      out += lead + std::to_string(step) + "," + csv_field(metric) + "," + value + "\r\n";
    };
    for (size_t i = 0; i < r.steps.size(); ++i) {
      const StepMetrics& s = r.steps[i];
      row(s.step, "loss", g17(s.loss));
      row(s.step, "lr", g17(s.lr));
      row(s.step, "grad_norm", g17(s.grad_norm));
      row(s.step, "clip_coef", g17(s.clip_coef));
      row(s.step, "loss_scale", g17(s.loss_scale));
      row(s.step, "skipped", std::to_string(s.skipped));
      row(s.step, "tokens", std::to_string(s.tokens));
      row(s.step, "step_time_s", g17(s.step_time_s));
      row(s.step, "tokens_per_s", g17(s.tokens_per_s));
      // A program's own figures, by name; a step without one has no row for it.
      for (const auto& [name, values] : r.step_extra)
        if (!std::isnan(values[i])) row(s.step, name, g17(values[i]));
    }
    for (size_t i = 0; i < r.evals.size(); ++i) {
      row(r.evals[i].step, "eval_loss", g17(r.evals[i].loss));
      for (const auto& [name, values] : r.eval_extra)
        if (!std::isnan(values[i])) row(r.evals[i].step, "eval_" + name, g17(values[i]));
    }
    sink(out);
  }
}

}  // namespace sweep
