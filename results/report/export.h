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

}  // namespace sweep
