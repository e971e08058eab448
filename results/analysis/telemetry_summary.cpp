#include "telemetry_summary.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "run_figures.h"  // g4
#include "run_health.h"   // lower_median
#include "text.h"         // split

namespace sweep {
namespace {

/// The lower median of the finite values; NaN when there is none.
double finite_lower_median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  return lower_median(std::move(v), NAN);
}

std::string rank_norms(const Record& r) {
  if (r.rank_grad_norm.empty()) return "";
  const size_t w = r.rank_grad_norm.front().size();
  std::vector<double> med(w);
  std::string list;
  for (size_t k = 0; k < w; ++k) {
    std::vector<double> col;
    for (const auto& row : r.rank_grad_norm) col.push_back(row[k]);
    med[k] = finite_lower_median(col);
    list += (k ? ", " : "") + g4(med[k]);
  }
  std::string out = "rank gradient norms: median " + list;
  if (w > 1) {
    const double typical = finite_lower_median(med);
    const auto top = std::max_element(med.begin(), med.end());
    if (typical > 0 && std::isfinite(*top))
      out += " (largest over the lower median of the ranks: " + g4(*top / typical) + "x, rank " +
             std::to_string(top - med.begin()) + ")";
  }
  return out;
}

std::string rows(const Record& r, size_t most) {
  if (r.telemetry.empty()) return "";
  std::map<std::string, size_t> why;
  for (const auto& t : r.telemetry)
    for (const auto& w : split(t.why, ',')) ++why[w];
  std::string out = "rows: " + std::to_string(r.telemetry.size()) + " (";
  bool first = true;
  for (const auto& [w, n] : why) out += (first ? "" : ", ") + std::to_string(n) + " " + w, first = false;
  out += ")";
  const TelemetryRow& last = r.telemetry.back();
  if (last.tensor_grad_norm.size() == r.params.size() && !r.params.empty()) {
    std::vector<size_t> order(r.params.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto key = [&last](size_t i) {
      return std::isfinite(last.tensor_grad_norm[i]) ? last.tensor_grad_norm[i] : INFINITY;
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) > key(b); });
    out += "; largest tensor gradient norms at step " + std::to_string(last.step) + ": ";
    for (size_t k = 0; k < order.size() && k < most; ++k)
      out += (k ? ", " : "") + r.params[order[k]].name + " " + g4(last.tensor_grad_norm[order[k]]);
  }
  return out;
}

void routing(const Record& r, std::vector<std::string>& out) {
  const int64_t L = r.moe_layers, E = r.moe_experts;
  if (L < 1 || E < 1 || r.telemetry.empty()) return;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<double> load(size_t(E), 0);
    for (const auto& t : r.telemetry)
      for (int64_t e = 0; e < E; ++e) load[size_t(e)] += double(t.routed_tokens[size_t(l * E + e)]);
    double total = 0;
    for (double x : load) total += x;
    if (!(total > 0)) continue;
    double entropy = 0;
    for (double x : load)
      if (x > 0) entropy -= x / total * std::log(x / total);
    const auto busiest = std::max_element(load.begin(), load.end());
    out.push_back("routing layer " + std::to_string(l) + ": " + g4(total) + " tokens, load max/mean " +
                  g4(*busiest / (total / double(E))) + " (expert " + std::to_string(busiest - load.begin()) +
                  "), entropy " + (E > 1 ? g4(entropy / std::log(double(E))) : std::string("1")) + " of the most");
  }
}

}  // namespace

std::vector<std::string> telemetry_summary(const Record& r, size_t most) {
  std::vector<std::string> out;
  if (std::string s = rank_norms(r); !s.empty()) out.push_back(std::move(s));
  if (std::string s = rows(r, most); !s.empty()) out.push_back(std::move(s));
  routing(r, out);
  return out;
}

}  // namespace sweep
