// A run's figure by the name a search ranks it by (search.metric, search.constraints): one
// function for the search that decides on it and the report that shows it.
#pragma once

#include <string>
#include <vector>

#include "record.h"  // Record

namespace sweep {

/// A program's own metric is named `metrics.NAME` (its record's /eval/extra or
/// /metrics/extra column NAME).
inline constexpr const char* kProgramMetricPrefix = "metrics.";

/// The figures of run_figures.h a search may name, besides `metrics.NAME`: objective,
/// final_loss, train_loss_end, final_eval_loss, best_eval_loss, memory_per_rank_mib
/// (the largest per-rank params + grads + optimizer bytes, in MiB) and tokens_per_s.
const std::vector<std::string>& record_metric_names();

/// The value of `metric` in `r`, or NaN when it is not finite or the record lacks it. A
/// program's `metrics.NAME` is its value at the last evaluation that has one, else at the
/// last step that has one. An unknown name reads as `objective`.
double record_metric(const Record& r, const std::string& metric);

}  // namespace sweep
