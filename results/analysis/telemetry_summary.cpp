#include "telemetry_summary.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "run_figures.h"       // g4
#include "run_health.h"        // lower_median
#include "telemetry_series.h"  // expert_load_pooled, tensors_by_norm
#include "text.h"              // split

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
    out += "; largest tensor gradient norms at step " + std::to_string(last.step) + ": ";
    bool first_tensor = true;
    for (size_t p : tensors_by_norm(last.tensor_grad_norm, most))
      out += (first_tensor ? "" : ", ") + r.params[p].name + " " + g4(last.tensor_grad_norm[p]), first_tensor = false;
  }
  return out;
}

void routing(const Record& r, std::vector<std::string>& out) {
  if (r.moe_layers < 1 || r.moe_experts < 1 || r.telemetry.empty()) return;
  for (int64_t l = 0; l < r.moe_layers; ++l) {
    const ExpertLoad load = expert_load_pooled(r, l);
    if (!(load.tokens > 0)) continue;
    out.push_back("routing layer " + std::to_string(l) + ": " + g4(load.tokens) + " tokens, load max/mean " +
                  g4(load.max_over_mean) + " (expert " + std::to_string(load.busiest) + "), entropy " +
                  g4(load.entropy) + " of the most");
  }
}

/// The step telemetry_table shows for `step` 0: the last /telemetry row's, else the last step's.
int64_t default_step(const Record& r) {
  if (!r.telemetry.empty()) return r.telemetry.back().step;
  return r.steps.empty() ? 0 : r.steps.back().step;
}

/// Text lines of `cells`, each column padded to its widest cell (the last left ragged).
std::vector<std::string> aligned(const std::vector<std::vector<std::string>>& cells) {
  std::vector<size_t> width;
  for (const auto& row : cells)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::vector<std::string> out;
  for (const auto& row : cells) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c)
      line += c + 1 < row.size() ? row[c] + std::string(width[c] - row[c].size() + 2, ' ') : row[c];
    out.push_back(line);
  }
  return out;
}

void rank_rows(const Record& r, size_t at, std::vector<std::string>& out) {
  if (at >= r.rank_grad_norm.size()) return;
  const std::vector<double>& norms = r.rank_grad_norm[at];
  const double typical = finite_lower_median(norms);
  std::vector<std::vector<std::string>> cells = {{"rank", "grad_norm", "over the ranks' lower median"}};
  for (size_t k = 0; k < norms.size(); ++k)
    cells.push_back({std::to_string(k), g4(norms[k]), typical > 0 ? g4(norms[k] / typical) : "-"});
  for (auto& l : aligned(cells)) out.push_back(std::move(l));
}

void tensor_rows(const Record& r, const TelemetryRow& row, size_t most, std::vector<std::string>& out) {
  if (row.tensor_grad_norm.size() != r.params.size() || r.params.empty()) return;
  const std::vector<size_t> top = tensors_by_norm(row.tensor_grad_norm, most);
  std::vector<std::vector<std::string>> cells = {
      {"tensor (" + std::to_string(top.size()) + " largest of " + std::to_string(r.params.size()) + ")", "grad_norm"}};
  for (size_t p : top) cells.push_back({r.params[p].name, g4(row.tensor_grad_norm[p])});
  for (auto& l : aligned(cells)) out.push_back(std::move(l));
}

void routing_rows(const Record& r, size_t at, std::vector<std::string>& out) {
  if (!has_routing(r) || r.telemetry[at].routed_tokens.empty()) return;
  std::vector<std::vector<std::string>> cells = {
      {"MoE layer", "tokens", "load max/mean", "busiest expert", "entropy", "tokens per expert"}};
  const auto& routed = r.telemetry[at].routed_tokens;
  for (int64_t l = 0; l < r.moe_layers; ++l) {
    const ExpertLoad load = expert_load_at(r, at, l);
    std::string each;
    for (int64_t e = 0; e < r.moe_experts && size_t(l * r.moe_experts + e) < routed.size(); ++e)
      each += (e ? " " : "") + std::to_string(routed[size_t(l * r.moe_experts + e)]);
    cells.push_back({std::to_string(l), g4(load.tokens), g4(load.max_over_mean),
                     load.busiest < 0 ? "-" : std::to_string(load.busiest), g4(load.entropy), each});
  }
  for (auto& l : aligned(cells)) out.push_back(std::move(l));
}

}  // namespace

std::string telemetry_step_problem(const Record& r, int64_t step) {
  if (!has_telemetry(r))
    return "the record has no gradient telemetry (/ranks/grad_norm and /telemetry are written by schema version 5 "
           "writers: sweep-train, or a program that records them)";
  const std::string rows =
      r.telemetry.empty() ? "it has no /telemetry rows" : "its /telemetry rows are at steps " + telemetry_steps_text(r);
  if (step == 0) return "";
  if (step < 0) return "expected a step of 1 or more; " + rows;
  const size_t at = step_index_of(r, step);
  if (at == size_t(-1))
    return "the record has no step " + std::to_string(step) +
           (r.steps.empty() ? std::string(" (it has no steps)")
                            : " (its steps are " + std::to_string(r.steps.front().step) + " to " +
                                  std::to_string(r.steps.back().step) + ")") +
           "; " + rows;
  if (telemetry_row_of(r, step) == size_t(-1) && at >= r.rank_grad_norm.size())
    return "step " + std::to_string(step) + " has no telemetry (no /telemetry row and no rank gradient norms); " + rows;
  return "";
}

std::vector<std::string> telemetry_table(const Record& r, int64_t step, size_t most) {
  if (step == 0) step = default_step(r);
  const size_t row = telemetry_row_of(r, step), at = step_index_of(r, step);
  std::vector<std::string> out;
  out.push_back("gradient telemetry at step " + std::to_string(step) +
                (row == size_t(-1) ? std::string(": rank norms only, no /telemetry row")
                                   : " (its /telemetry row: " + r.telemetry[row].why + ")") +
                (r.telemetry.empty() ? std::string() : "; rows at steps " + telemetry_steps_text(r)));
  std::vector<std::string> parts[3];  // each after a blank line
  rank_rows(r, at, parts[0]);
  if (row != size_t(-1)) tensor_rows(r, r.telemetry[row], most, parts[1]), routing_rows(r, row, parts[2]);
  for (auto& part : parts)
    if (!part.empty()) {
      out.emplace_back();
      out.insert(out.end(), part.begin(), part.end());
    }
  return out;
}

std::vector<std::string> telemetry_summary(const Record& r, size_t most) {
  std::vector<std::string> out;
  if (std::string s = rank_norms(r); !s.empty()) out.push_back(std::move(s));
  if (std::string s = rows(r, most); !s.empty()) out.push_back(std::move(s));
  routing(r, out);
  return out;
}

}  // namespace sweep
