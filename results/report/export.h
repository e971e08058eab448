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

}  // namespace sweep
