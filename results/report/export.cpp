#include "export.h"

#include <algorithm>  // min, max
#include <cmath>      // isnan
#include <map>
#include <utility>
#include <vector>

#include "parallel_for.h"   // runs rendered on every core
#include "report_format.h"  // csv_field
#include "text.h"           // append_exact_double

namespace sweep {
namespace {

// The metric cells of the recorded columns (plain names: no CSV quoting).
const std::string kLoss = "loss", kLr = "lr", kGradNorm = "grad_norm", kClipCoef = "clip_coef",
                  kLossScale = "loss_scale", kSkipped = "skipped", kTokens = "tokens", kStepTime = "step_time_s",
                  kTokensPerS = "tokens_per_s", kEvalLoss = "eval_loss";

/// The header row over the varying config keys.
std::string header_row(const std::vector<std::string>& keys) {
  std::string head = kExportCsvStart;
  for (const auto& k : keys) head += report_fmt::csv_field(k) + ",";
  return head + "step,metric,value\r\n";
}

/// Every row of one run.
std::string run_rows(const Record& r, const std::vector<std::string>& keys) {
  using report_fmt::csv_field;
  std::string out, at;
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
    cells.reserve(extra.size());
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
  return out;
}

/// The rows of `runs`, in order, each run's handed to `sink`: rendered on every core a
/// block at a time (a block's text is what memory holds beyond the records).
void put_runs(const std::vector<Record>& runs, const std::vector<std::string>& keys,
              const std::function<void(const std::string&)>& sink) {
  constexpr size_t kBlock = 256;
  std::vector<std::string> text;
  for (size_t from = 0; from < runs.size(); from += kBlock) {
    const size_t n = std::min(kBlock, runs.size() - from);
    text.assign(n, std::string());
    // (A run is ~1,400 rows at 150 steps: eight make a thread's worth.)
    parallel_for(
        n, [&](size_t i) { text[i] = run_rows(runs[from + i], keys); }, /*min_per_thread=*/8);
    for (const std::string& t : text) sink(t);
  }
}

}  // namespace

std::string render_export_csv(const SweepRecords& sweep) {
  std::string out;
  render_export_csv(sweep, [&out](const std::string& chunk) { out += chunk; });
  return out;
}

void render_export_csv(const SweepRecords& sweep, const std::function<void(const std::string&)>& sink) {
  const std::vector<std::string> keys = varying_keys(sweep.runs);
  sink(header_row(keys));
  put_runs(sweep.runs, keys, sink);
}

SweepRecords export_sweep_csv(const std::string& dir, const std::function<void(const std::string&)>& sink,
                              size_t chunk) {
  const LoadOptions lean{false};  // (no per-rank rows: the export has none)
  SweepLoader loader(dir, lean);
  SweepRecords kept;
  if (!loader.named_by_run_id()) {  // (a record's id need not be its directory's name: read whole)
    loader.load(0, loader.ids().size(), &kept);
    loader.finish(&kept);
    render_export_csv(kept, sink);
    return kept;
  }
  // Twice through the sweep, a chunk of run directories at a time: the config keys that
  // vary first (the header names them), then the rows. A run directory's name is its
  // record's run id, so the chunks come in run-id order.
  chunk = std::max<size_t>(chunk, 1);
  const size_t n = loader.ids().size();
  VaryingKeys varying;
  for (size_t from = 0; from < n; from += chunk) {
    SweepRecords part;
    loader.load(from, std::min(n, from + chunk), &part);
    for (const Record& r : part.runs) varying.add(r.config);
  }
  const std::vector<std::string> keys = varying.keys();
  sink(header_row(keys));
  for (size_t from = 0; from < n; from += chunk) {
    SweepRecords part;
    loader.load(from, std::min(n, from + chunk), &part);
    put_runs(part.runs, keys, sink);
    keep_stubs(&part, &kept);
  }
  loader.finish(&kept);
  return kept;
}

}  // namespace sweep
