// Timing metrics: a record's figures that come from the clock (step time, tokens/s, a
// program's MFU), which no two runs share bit for bit. One rule says which they are, so
// that every bitwise verdict (compare, reproduce, the report's layout sets) leaves the
// same ones out and shows them apart.
#pragma once

#include <cmath>  // NAN
#include <string>
#include <vector>

#include "record.h"  // Record

namespace sweep {

/// The built-in timing metrics, named as readers name a record's figures (a /metrics
/// column or a program's own step figure by its name, an evaluation's as eval_<name>):
/// /metrics step_time_s, tokens_per_s and record_time_s, and /eval time_s.
inline constexpr const char* kBuiltinTimingMetrics[] = {"step_time_s", "tokens_per_s", "record_time_s", "eval_time_s"};

/// The record's own columns that are the run's math (results/SCHEMA.md /metrics, /eval):
/// never timing, whatever a record declares.
inline constexpr const char* kMathColumns[] = {"loss",    "lr",     "grad_norm",     "clip_coef", "loss_scale",
                                               "skipped", "tokens", "unused_params", "eval_loss", "eval_tokens"};

/// The names of a program's own metrics that `r` declares timing: its summary
/// `timing_metrics` (the program's own declaration: python's run.declare_timing, C++'s
/// RecordWriter::declare_timing_metric) and its environment `program.timing_metrics` (its
/// grid's `program.timing_metrics`, as sweep passed it), each a space-separated list.
/// Empty for a record that declares none (every record before declarations existed).
std::vector<std::string> declared_timing_metrics(const Record& r);

/// The one rule: whether the figure `metric` of `r` (named as kBuiltinTimingMetrics says)
/// is a timing metric. Built-in ones are; a name `r` declares is, and so is eval_<name>
/// (the same figure of an evaluation); the record's own math (kMathColumns) never is.
bool is_timing_metric(const Record& r, const std::string& metric);

/// "" when a program may declare `name` a timing metric (a grid's program.timing_metrics),
/// else why not: it is no metric's name (valid_metric_name), or it is one of the record's
/// own columns (kMathColumns), which are compared whatever a record declares.
std::string timing_declaration_problem(const std::string& name);

/// A timing metric of two records side by side: the mean of its finite values in each
/// (NaN where a record has none).
struct TimingFigure {
  std::string metric;
  double mean_a = NAN, mean_b = NAN;
};

/// Every figure of `a` or `b` that is_timing_metric calls timing in either record (a
/// declaration by one is the program saying what the figure is), in name order, with its
/// means; a figure neither record measured (no value other than 0 or NaN: a writer's
/// default) is left out.
std::vector<TimingFigure> timing_figures(const Record& a, const Record& b);

}  // namespace sweep
