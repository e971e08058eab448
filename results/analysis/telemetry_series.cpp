#include "telemetry_series.h"

#include <algorithm>  // max_element, stable_sort

namespace sweep {

ExpertLoad expert_load(const std::vector<double>& tokens_per_expert) {
  ExpertLoad l;
  for (double x : tokens_per_expert) l.tokens += x;
  if (!(l.tokens > 0)) return l;
  const size_t e = tokens_per_expert.size();
  double entropy = 0;
  for (double x : tokens_per_expert)
    if (x > 0) entropy -= x / l.tokens * std::log(x / l.tokens);
  const auto busiest = std::max_element(tokens_per_expert.begin(), tokens_per_expert.end());
  l.busiest = busiest - tokens_per_expert.begin();
  l.max_over_mean = *busiest / (l.tokens / double(e));
  l.entropy = e > 1 ? entropy / std::log(double(e)) : 1.0;
  return l;
}

ExpertLoad expert_load_at(const Record& r, size_t row, int64_t layer) {
  const int64_t E = r.moe_experts;
  std::vector<double> tokens(size_t(std::max<int64_t>(E, 0)), 0);
  const auto& routed = r.telemetry[row].routed_tokens;
  for (int64_t e = 0; e < E; ++e)
    if (size_t(layer * E + e) < routed.size()) tokens[size_t(e)] = double(routed[size_t(layer * E + e)]);
  return expert_load(tokens);
}

ExpertLoad expert_load_pooled(const Record& r, int64_t layer) {
  const int64_t E = r.moe_experts;
  std::vector<double> tokens(size_t(std::max<int64_t>(E, 0)), 0);
  for (const auto& t : r.telemetry)
    for (int64_t e = 0; e < E; ++e)
      if (size_t(layer * E + e) < t.routed_tokens.size())
        tokens[size_t(e)] += double(t.routed_tokens[size_t(layer * E + e)]);
  return expert_load(tokens);
}

bool has_routing(const Record& r) {
  return r.moe_layers > 0 && r.moe_experts > 0 &&
         std::any_of(r.telemetry.begin(), r.telemetry.end(),
                     [](const TelemetryRow& t) { return !t.routed_tokens.empty(); });
}

bool has_telemetry(const Record& r) { return !r.rank_grad_norm.empty() || !r.telemetry.empty(); }

std::vector<size_t> tensors_by_norm(const std::vector<double>& norms, size_t most) {
  std::vector<size_t> order(norms.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // (-inf: a tensor never measured, last; NaN: one that went non-finite, first.)
  const auto key = [&norms](size_t i) { return std::isnan(norms[i]) ? INFINITY : norms[i]; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) > key(b); });
  if (order.size() > most) order.resize(most);
  return order;
}

std::vector<size_t> largest_tensors(const Record& r, size_t most) {
  std::vector<double> top(r.params.size(), -INFINITY);
  for (const auto& t : r.telemetry)
    for (size_t p = 0; p < top.size() && p < t.tensor_grad_norm.size(); ++p) {
      const double x = t.tensor_grad_norm[p];
      top[p] = std::isfinite(x) ? std::max(top[p], x) : INFINITY;
    }
  return tensors_by_norm(top, most);
}

size_t telemetry_row_of(const Record& r, int64_t step) {
  for (size_t i = 0; i < r.telemetry.size(); ++i)
    if (r.telemetry[i].step == step) return i;
  return size_t(-1);
}

size_t step_index_of(const Record& r, int64_t step) {
  for (size_t i = 0; i < r.steps.size(); ++i)
    if (r.steps[i].step == step) return i;
  return size_t(-1);
}

std::string telemetry_steps_text(const Record& r) {
  constexpr size_t kEnds = 4;  // this many at each end of a long list
  std::string s;
  const size_t n = r.telemetry.size();
  for (size_t i = 0; i < n; ++i) {
    if (n > 2 * kEnds + 1 && i == kEnds) {
      s += ", ... (" + std::to_string(n - 2 * kEnds) + " more)";
      i = n - kEnds - 1;
      continue;
    }
    s += (s.empty() ? "" : ", ") + std::to_string(r.telemetry[i].step);
  }
  return s;
}

}  // namespace sweep
