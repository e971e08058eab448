// The summary figures of one run, from its record alone.
#include "run_figures.h"

#include <algorithm>  // max, nth_element, min
#include <cctype>     // isdigit
#include <cstdio>     // snprintf
#include <cstdlib>    // strtoll
#include <vector>

#include "run_status.h"  // status_is
#include "text.h"        // significant

namespace sweep {

std::string g4(double v) { return significant(v, 4); }

double mean_finite_loss(const Record& r, const std::vector<size_t>& rows, size_t from, size_t to) {
  double sum = 0;
  size_t n = 0;
  for (size_t i = from; i < to && i < rows.size(); ++i)
    if (std::isfinite(r.steps[rows[i]].loss)) sum += r.steps[rows[i]].loss, ++n;
  if (n == 0) return NAN;
  if (std::isfinite(sum)) return sum / double(n);
  // Finite losses whose sum overflows (near DBL_MAX): a running mean, each term divided
  // before it is added, cannot.
  double mean = 0;
  double k = 0;
  for (size_t i = from; i < to && i < rows.size(); ++i)
    if (std::isfinite(r.steps[rows[i]].loss)) ++k, mean += r.steps[rows[i]].loss / k - mean / k;
  return mean;
}

std::vector<std::pair<int64_t, int64_t>> skipped_step_ranges(const Record& r) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const auto it = r.summary.find("spike_skipped_steps");
  if (it == r.summary.end()) return out;
  const char* p = it->second.c_str();
  while (*p) {
    char* end = nullptr;
    const long long a = std::strtoll(p, &end, 10);
    if (end == p) break;
    long long b = a;
    p = end;
    if (*p == '-') {
      if (!std::isdigit(static_cast<unsigned char>(p[1]))) break;  // "5-" or "5- 9": no end
      b = std::strtoll(p + 1, &end, 10);
      p = end;
    }
    out.emplace_back(a, b);
    while (*p == ' ') ++p;
  }
  return out;
}

std::vector<size_t> kept_rows(const Record& r) {
  std::vector<size_t> rows;
  rows.reserve(r.steps.size());
  const std::vector<std::pair<int64_t, int64_t>> out = skipped_step_ranges(r);
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const int64_t step = r.steps[i].step;
    const bool left_out = std::any_of(out.begin(), out.end(),
                                      [&](const auto& range) { return step >= range.first && step <= range.second; });
    if (!left_out) rows.push_back(i);
  }
  return rows;
}

RunFigures run_figures(const Record& r) {
  RunFigures f;
  const size_t n = r.steps.size();
  if (n) f.final_loss = r.steps.back().loss;
  const std::vector<size_t> kept = kept_rows(r);
  f.left_out_steps = n - kept.size();
  f.train_loss_end_steps = std::min(kept.size(), kLossWindow);
  f.train_loss_end = mean_finite_loss(r, kept, kept.size() - f.train_loss_end_steps, kept.size());
  double tokens = 0, step_time = 0;
  std::vector<double> rates;
  rates.reserve(n);
  for (size_t i : kept)
    if (std::isfinite(r.steps[i].loss) && !(r.steps[i].loss >= f.best_loss)) f.best_loss = r.steps[i].loss;
  for (const auto& s : r.steps) {
    tokens += double(s.tokens), step_time += s.step_time_s;
    f.train_time_s += s.step_time_s + s.record_time_s;
    if (s.step_time_s > 0) rates.push_back(double(s.tokens) / s.step_time_s);  // = tokens_per_s, as the writer has it
  }
  if (step_time > 0) f.tokens_per_s = tokens / step_time;
  if (!rates.empty()) {  // the upper median: a run of two steps is not judged by its slow first one
    auto mid = rates.begin() + std::ptrdiff_t(rates.size() / 2);
    std::nth_element(rates.begin(), mid, rates.end());
    f.tokens_per_s_median = *mid;
  }
  const RankMemory& m = r.memory;
  for (size_t i = 0; i < m.params.size(); ++i) {
    int64_t b = m.params[i] + (i < m.grads.size() ? m.grads[i] : 0) + (i < m.optimizer.size() ? m.optimizer[i] : 0);
    f.memory_bytes = std::max(f.memory_bytes, b);
  }
  for (const auto& e : r.evals)
    if (std::isfinite(e.loss) && !(e.loss >= f.best_eval_loss)) f.best_eval_loss = e.loss, f.best_eval_step = e.step;
  if (n) f.last_step = r.steps.back().step;
  if (!r.evals.empty()) f.final_eval_loss = r.evals.back().loss, f.final_eval_step = r.evals.back().step;
  const bool eval_is_final = !r.evals.empty() && f.final_eval_step >= f.last_step;
  if (!has_objective(r.status)) {
    f.objective_name = "none (" + r.status + ")";
  } else if (!r.evals.empty() && (eval_is_final || !status_is(r.status, RunStatus::stopped))) {
    f.objective = f.final_eval_loss;
    f.objective_name =
        eval_is_final ? "final eval loss" : "last eval loss (step " + std::to_string(f.final_eval_step) + ")";
  } else {
    f.objective = f.train_loss_end;
    f.objective_name = "final train loss";
  }
  return f;
}

bool has_objective(const std::string& status) {
  return status_is(status, RunStatus::completed) || status_is(status, RunStatus::stopped) || status.empty();
}

std::string figures_text(const RunFigures& f) {
  std::string s;
  if (!std::isnan(f.final_eval_loss) || f.best_eval_step >= 0) {
    s = f.final_eval_step >= f.last_step
            ? "final eval loss " + g4(f.final_eval_loss)
            : "last eval loss " + g4(f.final_eval_loss) + " at step " + std::to_string(f.final_eval_step);
    if (f.best_eval_step >= 0)
      s += " (best " + g4(f.best_eval_loss) + " at step " + std::to_string(f.best_eval_step) + ")";
    s += ", ";
  }
  s += "train loss " + g4(f.train_loss_end) + " (mean of last " + std::to_string(f.train_loss_end_steps) + " steps" +
       (f.left_out_steps ? "; " + std::to_string(f.left_out_steps) + " left out by the spike policy" : std::string()) +
       ")";
  if (!std::isnan(f.tokens_per_s_median)) s += ", " + g4(f.tokens_per_s_median) + " tokens/s";
  return s;
}

}  // namespace sweep
