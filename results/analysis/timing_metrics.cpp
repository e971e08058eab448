#include "timing_metrics.h"

#include <algorithm>  // find, sort, unique
#include <cmath>      // isfinite
#include <iterator>   // begin, end
#include <set>

namespace sweep {
namespace {

template <size_t N>
bool listed(const char* const (&list)[N], const std::string& name) {
  return std::find_if(std::begin(list), std::end(list), [&](const char* x) { return name == x; }) != std::end(list);
}

/// The space-separated names of `text`.
void add_names(const std::string& text, std::vector<std::string>& out) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = text.find_first_not_of(" \t\n", i);
    if (start == std::string::npos) break;
    const size_t end = std::min(text.find_first_of(" \t\n", start), text.size());
    out.push_back(text.substr(start, end - start));
    i = end;
  }
}

/// Adds a value to a mean of finite values; `measured`: some value is neither 0 nor NaN.
struct FiniteMean {
  double sum = 0;
  size_t n = 0;
  void add(double v, bool& measured) {
    if (!std::isfinite(v)) return;
    sum += v, ++n;
    measured |= v != 0;
  }
  double mean() const { return n ? sum / double(n) : NAN; }
};

/// The mean of the figure `metric` of `r` (its name as readers give it: a built-in timing
/// column, a program's own step figure, eval_<name> for an evaluation's); NaN for none.
double figure_mean(const Record& r, const std::string& metric, bool& measured) {
  FiniteMean m;
  if (metric == "step_time_s" || metric == "tokens_per_s" || metric == "record_time_s") {
    const double StepMetrics::*field = metric == "step_time_s"    ? &StepMetrics::step_time_s
                                       : metric == "tokens_per_s" ? &StepMetrics::tokens_per_s
                                                                  : &StepMetrics::record_time_s;
    for (const StepMetrics& s : r.steps) m.add(s.*field, measured);
  } else if (metric == "eval_time_s") {
    for (const EvalRow& e : r.evals) m.add(e.time_s, measured);
  } else if (const auto it = r.step_extra.find(metric); it != r.step_extra.end()) {
    for (double v : it->second) m.add(v, measured);
  } else if (metric.rfind("eval_", 0) == 0) {
    if (const auto e = r.eval_extra.find(metric.substr(5)); e != r.eval_extra.end())
      for (double v : e->second) m.add(v, measured);
  }
  return m.mean();
}

/// The names of every figure of `r` a timing metric can be.
void add_figure_names(const Record& r, std::set<std::string>& names) {
  names.insert(std::begin(kBuiltinTimingMetrics), std::end(kBuiltinTimingMetrics));
  for (const auto& kv : r.step_extra) names.insert(kv.first);
  for (const auto& kv : r.eval_extra) names.insert("eval_" + kv.first);
}

}  // namespace

std::vector<std::string> declared_timing_metrics(const Record& r) {
  std::vector<std::string> out;
  if (const auto it = r.summary.find("timing_metrics"); it != r.summary.end()) add_names(it->second, out);
  add_names(r.env("program.timing_metrics"), out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool is_timing_metric(const Record& r, const std::string& metric) {
  if (listed(kBuiltinTimingMetrics, metric)) return true;
  if (listed(kMathColumns, metric)) return false;
  for (const std::string& name : declared_timing_metrics(r))
    if (metric == name || metric == "eval_" + name) return true;
  return false;
}

std::string timing_declaration_problem(const std::string& name) {
  if (!valid_metric_name(name)) return "not a metric's name (1-64 letters, digits, '_', '.' or '-')";
  if (listed(kMathColumns, name))
    return "one of the record's own columns, the run's math, compared bit for bit whatever is declared; timing "
           "metrics are a program's own (e.g. mfu)";
  return "";
}

std::vector<TimingFigure> timing_figures(const Record& a, const Record& b) {
  std::set<std::string> names;
  add_figure_names(a, names), add_figure_names(b, names);
  std::vector<TimingFigure> out;
  for (const std::string& name : names) {
    if (!is_timing_metric(a, name) && !is_timing_metric(b, name)) continue;
    bool measured = false;
    TimingFigure f{name, figure_mean(a, name, measured), figure_mean(b, name, measured)};
    if (measured) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace sweep
