// Figures by the name a search gives them (search_metric.h).
#include "search_metric.h"

#include <cmath>

#include "run_figures.h"  // run_figures

namespace sweep {
namespace {

/// The last finite value of a column, or NaN.
double last_finite(const std::map<std::string, std::vector<double>>& columns, const std::string& name) {
  const auto it = columns.find(name);
  if (it == columns.end()) return NAN;
  for (auto v = it->second.rbegin(); v != it->second.rend(); ++v)
    if (std::isfinite(*v)) return *v;
  return NAN;
}

}  // namespace

const std::vector<std::string>& record_metric_names() {
  static const std::vector<std::string> names = {"objective",       "final_loss",     "train_loss_end",
                                                 "final_eval_loss", "best_eval_loss", "memory_per_rank_mib",
                                                 "tokens_per_s"};
  return names;
}

double record_metric(const Record& r, const std::string& metric) {
  const std::string prefix = kProgramMetricPrefix;
  if (metric.rfind(prefix, 0) == 0) {
    const std::string name = metric.substr(prefix.size());
    const double at_eval = last_finite(r.eval_extra, name);
    return std::isfinite(at_eval) ? at_eval : last_finite(r.step_extra, name);
  }
  const RunFigures f = run_figures(r);
  const double v = metric == "final_loss"            ? f.final_loss
                   : metric == "train_loss_end"      ? f.train_loss_end
                   : metric == "final_eval_loss"     ? f.final_eval_loss
                   : metric == "best_eval_loss"      ? f.best_eval_loss
                   : metric == "tokens_per_s"        ? f.tokens_per_s
                   : metric == "memory_per_rank_mib" ? (f.memory_bytes < 0 ? NAN : double(f.memory_bytes) / 1048576.0)
                                                     : f.objective;
  return std::isfinite(v) ? v : NAN;
}

}  // namespace sweep
