// The report as CSV (RFC 4180), for spreadsheets: one row per run with every per-run and
// per-group figure, and one row per run directory without a readable record.
#include "report.h"
#include "report_format.h"
#include "run_status.h"  // status_is

namespace sweep {
namespace {

using namespace report_fmt;

std::string csv_num(double v) { return std::isfinite(v) ? g17(v) : ""; }

std::string csv_row(const std::vector<std::string>& cells) {
  std::string s;
  for (size_t i = 0; i < cells.size(); ++i) s += (i ? "," : "") + csv_field(cells[i]);
  return s + "\r\n";
}

// The run's objective minus its baseline partner's (same seed); NaN without one.
double baseline_difference(const ReportModel& m, size_t group, const Record& r) {
  for (const auto& d : m.baseline_diffs) {
    if (d.group != group) continue;
    const std::string seed = report_value(r, "train.seed");
    for (size_t k = 0; k < d.seeds.size(); ++k)
      if (d.seeds[k] == seed) return d.objective_diffs[k];
  }
  return NAN;
}

}  // namespace

std::string render_csv(const SweepRecords& sweep, const ReportModel& m) {
  const RunIndex x = index_runs(sweep, m);
  std::vector<std::string> head = {"run_id", "status", "verified"};
  for (const auto& k : m.varying) head.push_back(k);
  for (const char* h : {"steps",
                        "final_loss",
                        "best_loss",
                        "train_loss_end",
                        "final_eval_loss",
                        "best_eval_loss",
                        "best_eval_step",
                        "objective",
                        "objective_name",
                        "tokens_per_s",
                        "tokens_per_s_median",
                        "train_time_s",
                        "memory_bytes_per_rank_max",
                        "health",
                        "health_detail",
                        "final_params_checksum",
                        "class",
                        "class_size",
                        "group",
                        "group_runs",
                        "group_objective_mean",
                        "group_objective_std",
                        "pareto",
                        "clipped_share",
                        "skipped_steps",
                        "slowest_rank",
                        "slowest_rank_ratio",
                        "baseline_objective_difference",
                        "layout_set",
                        "layout_set_identical",
                        "cause",
                        "log_tail"})
    head.push_back(h);
  std::string s = csv_row(head);  // looks_like_report() knows it by its first and last columns
  auto tail_of = [&](const std::string& id) {
    for (const auto& f : sweep.failed)
      if (f.run_id == id) return f.log_tail;
    return std::string();
  };
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    const Record& r = sweep.runs[i];
    const ReportRun& f = m.runs[i];
    const RunGroup& g = m.groups[x.group[i]];
    const EquivalenceClass& c = m.classes[f.equivalence];
    std::vector<std::string> row = {r.run_id, r.status, r.verified ? "yes" : "no"};
    for (const auto& k : m.varying) row.push_back(report_value(r, k));
    const bool in_set = x.layout_set[i] != SIZE_MAX;
    std::string detail;  // one cell: "flag: sentence" per flag
    for (const auto& h : f.health) detail += (detail.empty() ? "" : "\n") + h.name + ": " + h.detail;
    for (const std::string& v : {std::to_string(r.steps.size()),
                                 csv_num(f.final_loss),
                                 csv_num(f.best_loss),
                                 csv_num(f.train_loss_end),
                                 csv_num(f.final_eval_loss),
                                 csv_num(f.best_eval_loss),
                                 f.best_eval_step < 0 ? std::string() : std::to_string(f.best_eval_step),
                                 csv_num(f.objective),
                                 f.objective_name,
                                 csv_num(f.tokens_per_s),
                                 csv_num(f.tokens_per_s_median),
                                 csv_num(f.train_time_s),
                                 f.memory_bytes < 0 ? std::string() : std::to_string(f.memory_bytes),
                                 run_health_names(f),
                                 detail,
                                 final_checksum(r),
                                 c.name,
                                 std::to_string(c.runs.size()),
                                 std::to_string(x.group[i]),
                                 std::to_string(g.runs.size()),
                                 csv_num(g.objective_mean),
                                 csv_num(g.objective_std),
                                 std::string(f.pareto ? "yes" : "no"),
                                 csv_num(f.clipped_share),
                                 std::to_string(f.skipped_steps),
                                 f.slowest_rank < 0 ? std::string() : std::to_string(f.slowest_rank),
                                 csv_num(f.slowest_rank_ratio),
                                 csv_num(baseline_difference(m, x.group[i], r)),
                                 in_set ? std::to_string(x.layout_set[i]) : std::string(),
                                 std::string(in_set ? (m.layout_sets[x.layout_set[i]].identical ? "yes" : "no") : ""),
                                 r.failure,
                                 status_is(r.status, RunStatus::completed) ? std::string() : tail_of(r.run_id)})
      row.push_back(v);
    s += csv_row(row);
  }
  // Runs without a readable record still get a row, so the CSV counts every run dir.
  for (const auto& fr : sweep.failed) {
    if (fr.problem.empty()) continue;  // its record was readable: already a row above
    std::vector<std::string> row(head.size());
    row[0] = fr.run_id, row[1] = fr.status, row[head.size() - 2] = fr.cause, row[head.size() - 1] = fr.log_tail;
    s += csv_row(row);
  }
  return s;
}

}  // namespace sweep
