// `sweep export`: a sweep's per-step figures in long format, for pandas and other tools
// that want every number rather than the report's summaries.
#pragma once

#include <functional>
#include <string>

#include "report.h"  // SweepRecords

namespace sweep {

/// First line of every export: what `sweep export -o FILE` recognises as its own file
/// (and may replace).
inline constexpr const char* kExportCsvStart = "run_id,status,";

/// CSV (RFC 4180), one row per (run, step, metric): run_id, status, each config key that
/// varies across the sweep's readable runs, step, metric, value. Metrics are the /metrics
/// columns loss, lr, grad_norm, clip_coef, loss_scale, skipped, tokens, step_time_s and
/// tokens_per_s, and eval_loss at each held-out evaluation's step; values are written
/// with 17 significant digits, so they read back as the recorded doubles ("nan", "inf"
/// where not finite). Runs are in run-id order, steps in order.
std::string render_export_csv(const SweepRecords& sweep);

/// The same text, handed to `sink` in chunks (the header, then one chunk per run), so that
/// an export of 100,000 runs is never held whole in memory.
void render_export_csv(const SweepRecords& sweep, const std::function<void(const std::string&)>& sink);

/// render_export_csv of the sweep directory `dir`, which is read `chunk` run directories
/// at a time, twice (the config keys that vary, then the rows), so that memory holds a
/// chunk's records rather than the sweep's (0.5 GB instead of 5 GB at 100,000 runs of 150
/// steps). Returns what was read for the notes on what was left out: the failed runs and
/// problems, and of each exported record its run id, status and verified flag (the whole
/// records where the run directories are not named by run id: then the sweep is read
/// whole, as load_sweep reads it). A run that completes between the two passes is
/// exported under the keys the first pass found to vary.
SweepRecords export_sweep_csv(const std::string& dir, const std::function<void(const std::string&)>& sink,
                              size_t chunk = 2048);

/// First line of every telemetry export (`sweep export --format telemetry`).
inline constexpr const char* kTelemetryCsvStart = "run_id,status,step,why,kind,";

/// CSV (RFC 4180) of every run's gradient telemetry (export_telemetry.cpp), one row per
/// figure: run_id, status, step, why, kind, name, rank, layer, expert, value, with a cell
/// empty where its column does not apply. Kinds, each at the steps the record has it:
///  - rank_grad_norm (rank): each rank's own gradient norm, every step of /ranks/grad_norm;
///  - tensor_grad_norm (name: the tensor), at each /telemetry row;
///  - routed_tokens (layer, expert): the tokens the layer's router sent to the expert;
///  - expert_load (layer, expert: the busiest): its tokens over an even split;
///  - routing_entropy (layer): the entropy of the layer's load over ln(experts).
/// `why` is the /telemetry row's reasons (every, last, spike, nonfinite; comma-separated,
/// so quoted), empty for rank_grad_norm. Values as render_export_csv writes them. Runs in
/// run-id order, each run's steps in order, rank norms before the row of the same step.
void render_telemetry_csv(const SweepRecords& sweep, const std::function<void(const std::string&)>& sink);

/// render_telemetry_csv of the sweep directory `dir`, read `chunk` run directories at a
/// time (as export_sweep_csv, in one pass: the columns do not depend on the runs). Returns
/// what export_sweep_csv returns.
SweepRecords export_sweep_telemetry_csv(const std::string& dir, const std::function<void(const std::string&)>& sink,
                                        size_t chunk = 2048);

}  // namespace sweep
