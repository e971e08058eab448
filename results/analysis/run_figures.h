// The summary figures of one run (final and best held-out loss, the training loss at its
// end, throughput, the objective a sweep ranks runs by), computed once from its record so
// that the report, compare, status and the driver all print the same numbers.
#pragma once

#include <cmath>  // NAN
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "record.h"  // Record

namespace sweep {

/// Steps averaged for "the training loss" at a run's end (and its start): 20, or every
/// step of a shorter run. One step's loss is one batch's, noisy; 20 steps smooth that and
/// still describe the end of a run of a few hundred steps.
inline constexpr size_t kLossWindow = 20;

/// The step ranges a spike decision left out (the record's summary `spike_skipped_steps`,
/// "13-15 20": a rewind's undone steps and the spiking step, or a skipped step), first to
/// last inclusive, as written; a malformed tail is ignored.
std::vector<std::pair<int64_t, int64_t>> skipped_step_ranges(const Record& r);

/// The positions in `r.steps` of the rows whose step the model kept: all but the steps a
/// spike decision left out (the record's summary `spike_skipped_steps`, "13-15 20": a
/// rewind's undone steps and the spiking step, or a skipped step). Their rows stay in the
/// record, as they happened; no figure or flag is judged on them.
std::vector<size_t> kept_rows(const Record& r);

/// The figures of one run, over its kept rows (kept_rows). Non-finite losses are left out
/// of every mean and minimum.
struct RunFigures {
  double final_loss = NAN;          ///< loss of the last step as recorded (may be non-finite); NaN without steps
  double best_loss = NAN;           ///< smallest finite loss of any step
  double train_loss_end = NAN;      ///< mean of the finite losses of the last kLossWindow kept steps
  size_t train_loss_end_steps = 0;  ///< steps in that window (fewer than kLossWindow in a short run)
  size_t left_out_steps = 0;        ///< rows a spike decision left out (kept_rows), in none of these
  double final_eval_loss = NAN;     ///< loss of the last held-out evaluation; NaN without evaluations
  /// The step of that evaluation; -1 without one. Older than last_step (a program that
  /// evaluates at the top of its next iteration, stopped at a rung) it is no final one.
  int64_t final_eval_step = -1;
  int64_t last_step = -1;            ///< the last recorded step; -1 without rows
  double best_eval_loss = NAN;       ///< smallest finite held-out loss
  int64_t best_eval_step = -1;       ///< the step of best_eval_loss; -1 without one
  double tokens_per_s = NAN;         ///< all tokens / all step time
  double tokens_per_s_median = NAN;  ///< median over timed steps of tokens / step_time_s (robust to a slow first step)
  double train_time_s = 0;           ///< step time plus recording time, summed
  int64_t memory_bytes = -1;         ///< largest per-rank params + grads + optimizer bytes; -1 unknown
  /// What a sweep ranks its runs by (lower is better), one rule for every reader: only a
  /// run that completed or stopped at a search's rung has one (a diverged, failed or
  /// interrupted run's figures are partial: NaN, and objective_name says why). It is
  /// final_eval_loss when the run evaluated held-out data, except for a stopped run whose
  /// last evaluation is older than its last step (its rung): then, as for a run without
  /// evaluations, train_loss_end. NaN when none of these is known.
  double objective = NAN;
  /// "final eval loss", "last eval loss (step K)" (a completed run whose last evaluation is
  /// older than its last step), "final train loss" (train_loss_end) or "none (diverged)".
  std::string objective_name;
};

/// A status whose record's figures are whole, so that it has an objective: "completed",
/// "stopped" (at a search's rung), or "" (a record built in memory without one).
bool has_objective(const std::string& status);

/// The figures of `r`.
RunFigures run_figures(const Record& r);

/// Mean of the finite losses of the rows at positions rows[from, to) of `r.steps`; NaN
/// when none is finite.
double mean_finite_loss(const Record& r, const std::vector<size_t>& rows, size_t from, size_t to);

/// One line for a console: "final eval loss 2.31 (best 2.29 at step 150), train loss
/// 2.02 (mean of last 20 steps), 1.2e+04 tokens/s".
std::string figures_text(const RunFigures& f);

/// A figure in a sentence: four significant digits ("2.346", "1.2e+04").
std::string g4(double v);

}  // namespace sweep
