// A run's gradient telemetry (/ranks/grad_norm and /telemetry, results/SCHEMA.md) where
// people look: each rank's gradient norm over the steps as a heat map, the gradient-norm
// curves of the largest tensors, and each MoE layer's expert load (max over mean) and
// routing entropy over the steps. Drawn as HTML sections (the sweep report and the run
// page) and said as tables (the Markdown report); the figures are telemetry_series.h's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "report.h"  // SweepRecords, ReportModel

namespace sweep {

/// The tensors whose gradient-norm curves are drawn: the largest at some row (largest_tensors).
inline constexpr size_t kTelemetryTensors = 8;
/// The sweep report shows the telemetry of this many runs at most; each run's own page
/// (sweep serve) shows its own.
inline constexpr size_t kTelemetryRuns = 12;

/// `r`'s telemetry as HTML, "" when it has none. Each part is a <section
/// class="telemetry-part" data-part="P"> headed by `heading` (h3, h4): P is
///  - rank-heatmap: each rank's own gradient norm at each step (world size 2 or more);
///  - tensor-norms: a curve per tensor of the kTelemetryTensors largest, over the rows;
///  - expert-load and routing-entropy: a curve per MoE layer, over the rows.
std::string telemetry_html(const Record& r, const char* heading = "h3");

/// The runs whose telemetry the sweep report shows: of ReportModel::html_runs those with
/// telemetry, the ones with a health flag first, then in their order; kTelemetryRuns at most.
std::vector<size_t> telemetry_runs(const SweepRecords& sweep, const ReportModel& m);

/// The sweep report's "Gradient telemetry" section: telemetry_html of each of
/// telemetry_runs in a <details class="telemetry" data-run="ID">; "" when no run has any.
std::string telemetry_section_html(const SweepRecords& sweep, const ReportModel& m);

/// A table of plain-text cells, for a writer to escape and lay out.
struct TextTable {
  std::string title;
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
};

/// `r`'s telemetry as tables (empty when it has none), sampled at the first, quartile and
/// last steps (curve_samples): each rank's gradient norm and its median over the steps; the
/// kTelemetryTensors largest tensors' norms at the rows sampled so; and each MoE layer's load
/// max/mean and routing entropy at those rows.
std::vector<TextTable> telemetry_tables(const Record& r);

}  // namespace sweep
