// Comparing run records step by step: are two runs the same bits, and if not, at which
// step, in which parameter, and with what else different (config, environment)?
#pragma once

#include <cmath>  // NAN
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "record.h"
#include "sweep_records.h"   // SweepRecords
#include "timing_metrics.h"  // TimingFigure

namespace sweep {

/// How closely two records must agree to match.
struct CompareOptions {
  double rtol = 0;  ///< 0: bit-identical losses and checksums; > 0: |a-b| <= rtol*max(|a|,|b|) per loss
};

/// One key whose value differs between record A and record B ("" where a side lacks it).
struct ValueDiff {
  std::string key, a, b;
};

/// The keys whose values differ between `a` and `b`, in key order ("" where a side lacks
/// one). `missing_is_empty`: a key one side lacks equals an empty value (environment keys
/// that later versions added, results/SCHEMA.md).
std::vector<ValueDiff> diff_maps(const std::map<std::string, std::string>& a,
                                 const std::map<std::string, std::string>& b, bool missing_is_empty = false);

/// What a run started from a parent's checkpoint changed: the config keys whose values
/// differ, less what `sweep fork` writes to say where it started (train.fork_parent,
/// train.fork_step, and the learning-rate switch at the fork's step that a new train.lr
/// is). "train.lr: 0.003 -> 0.001", not five keys.
std::vector<ValueDiff> lineage_changes(const std::map<std::string, std::string>& parent,
                                       const std::map<std::string, std::string>& child);

/// "No such step" for the step fields of RecordComparison (0 is a real checksum step).
inline constexpr int64_t kNoStep = -1;

/// What comparing record A with record B found.
struct RecordComparison {
  size_t steps_compared = 0;                  ///< steps present in both records
  size_t checksums_compared = 0;              ///< checksum rows taken at the same step in both
  int64_t loss_step = kNoStep;                ///< first common step whose loss bits differ
  double loss_a = 0, loss_b = 0;              ///< the losses at loss_step
  int64_t checksum_step = kNoStep;            ///< first common checksum row that differs
  std::string first_param;                    ///< first tensor (in /params order) whose hash differs there
  int64_t missing_step = kNoStep;             ///< first step only one of the records has
  bool missing_in_b = false;                  ///< true when missing_step is absent from B
  double step_loss_a = 0, step_loss_b = 0;    ///< losses at divergent_step()
  bool step_in_a = false, step_in_b = false;  ///< whether each record has divergent_step() (step 0 never)
  double max_abs = 0, max_rel = 0;            ///< largest loss differences over the common steps
  int64_t max_abs_step = kNoStep, max_rel_step = kNoStep;
  bool losses_within_rtol = true;  ///< every common loss within CompareOptions::rtol
  /// Held-out evaluations (/eval): how many rows both records have at the same step, and
  /// the first step where they part (a loss with other bits, or an evaluation one side
  /// lacks); the training can be identical while they differ (other held-out data).
  size_t evals_compared = 0;
  int64_t eval_step = kNoStep;
  double eval_a = NAN, eval_b = NAN;  ///< the held-out losses at eval_step (NaN where a side has none)
  bool evals_within_rtol = true;
  /// A program's own figures (/metrics/extra, /eval/extra), compared at the same steps and
  /// evaluations, bit for bit: the first one that differs, or that one record lacks
  /// ("eval_accuracy" for an evaluation's), and the step. Timing metrics are not compared.
  std::string extra_metric;
  int64_t extra_step = kNoStep;
  /// The timing metrics of either record (timing_metrics.h: the built-in ones and what a
  /// record declares), never compared bit for bit: each one's means, side by side.
  std::vector<TimingFigure> timing;
  /// Gradient telemetry (/telemetry), compared at the steps both records took a row, bit
  /// for bit: the first step whose tensor norms or MoE routing differ, and what differs
  /// ("the gradient norm of layer0.attn_wq"). Each rank's own norm is not compared: it
  /// depends on the layout.
  std::string telemetry_what;
  int64_t telemetry_step = kNoStep;
  size_t telemetry_compared = 0;  ///< rows at steps both records have
  /// The last step both records have (kNoStep when they share none), and the last step at
  /// which both hold a checksum row: "bit-for-bit" needs the parameters compared after
  /// the last step, not only the losses.
  int64_t last_step = kNoStep;
  int64_t last_checksum_step = kNoStep;
  std::string status_a, status_b;      ///< each record's status (completed, diverged, ...)
  double rtol = 0;                     ///< the tolerance this comparison used
  std::vector<ValueDiff> config;       ///< differing /config values
  std::vector<ValueDiff> environment;  ///< differing /environment attributes
  /// "" or one line naming the data file when the two runs read different contents
  /// (environment data.hash): the first cause to suspect.
  std::string data_change;
  /// "" or one line when the two runs' bits differ and they ran on other instruction sets
  /// (environment cpu.isa, aten.isa): oneDNN's bf16 kernels and LibTorch's vectorised ones
  /// are chosen by it, so their bits are not promised across it.
  std::string isa_change;
  /// Each run's objective (run_figures.h: final eval loss, else the mean training loss of
  /// its last steps) and what it is ("final eval loss / final train loss" when they differ).
  double objective_a = NAN, objective_b = NAN;
  std::string objective_name;

  /// The same steps with bit-identical losses and identical checksum rows.
  bool same_training() const { return loss_step == kNoStep && checksum_step == kNoStep && missing_step == kNoStep; }
  /// Both records hold a checksum row at their last step (or, with no steps, at step 0):
  /// the final parameters were compared.
  bool final_params_compared() const {
    return last_checksum_step != kNoStep && (last_step == kNoStep || last_checksum_step >= last_step);
  }
  /// same_training(), the final parameters compared equal, the same held-out losses, the
  /// same figures of the program's own (timing metrics aside), the same gradient telemetry
  /// and the same status. Equal losses say nothing of parameters never compared, so without
  /// a common checksum row at the last step it is not called bit-for-bit.
  bool bitwise() const {
    return same_training() && final_params_compared() && eval_step == kNoStep && extra_step == kNoStep &&
           telemetry_step == kNoStep && status_a == status_b;
  }
  /// bitwise(), or with rtol > 0: same steps, the same status, and every loss (held-out
  /// ones too) within the tolerance.
  bool match() const {
    return bitwise() ||
           (rtol > 0 && missing_step == kNoStep && losses_within_rtol && evals_within_rtol && status_a == status_b);
  }
  /// First step at which the records part (loss, parameters or a missing step); kNoStep if none.
  int64_t divergent_step() const;
};

/// Compares A with B by step number. Never throws for differing shapes: a step or
/// checksum row only one side has is a difference, not an error.
RecordComparison compare_records(const Record& a, const Record& b, const CompareOptions& opt = {});

/// `r` as it stood after step `steps`: its steps, checksums and evaluations up to it (status
/// `stopped` when rows were cut), to compare with a run stopped there.
Record truncate_record(const Record& r, int64_t steps);

/// One line: "identical bit-for-bit: N steps, K checksums", "losses identical; parameters
/// not compared after step C (...)", "within tolerance (rtol R): ...", or "diverged at step
/// S: loss A vs B" (17 significant digits); a differing status is always named
/// ("...; status completed vs diverged").
std::string verdict_line(const RecordComparison& c);

/// The lines that explain a difference: first differing parameter, largest loss
/// differences, the timing metrics apart (timing_line), then config and environment keys
/// that differ (`key: old -> new`).
std::vector<std::string> detail_lines(const RecordComparison& c);

/// "timing metrics (not compared bit for bit), means: mfu 0.41 vs 0.39, step_time_s 0.012
/// vs 0.013" (A's mean vs B's, 6 significant digits; "(none)" where a record has none).
std::string timing_line(const std::vector<TimingFigure>& timing);

/// Two sweeps' runs paired by run id (a hash of the resolved config).
struct SweepComparison {
  struct Pair {
    std::string run_id;
    RecordComparison result;
    bool a_verified = true, b_verified = true;  ///< false: a record of schema version 1 (no digest)
  };
  /// A run one side has without a readable record (failed, interrupted, damaged, ...): its
  /// word on each side, as `sweep status` says it ("completed" when that side's record
  /// reads; "absent" when that side has no such run), and why it was not compared.
  struct Uncompared {
    std::string run_id, a, b, cause;
  };
  std::vector<Pair> pairs;                  ///< runs with a readable record in both, by run id
  std::vector<Uncompared> uncompared;       ///< runs without a readable record on one side or both
  std::vector<std::string> only_a, only_b;  ///< run ids with a readable record on one side only, absent on the other
  std::vector<std::string> problems;        ///< listing errors of either side, prefixed "A: " / "B: "
  /// Every pair matches, and every run was compared (none missing or unreadable on a side).
  bool match() const;
};

/// Pairs the completed runs of two sweeps by run id and compares each pair. `done`: pairs
/// compared already, by run id (their records in `a` and `b` may be stubs holding only
/// run id, status and verified).
SweepComparison compare_sweeps(const SweepRecords& a, const SweepRecords& b, const CompareOptions& opt = {},
                               const std::map<std::string, RecordComparison>* done = nullptr);

/// compare_sweeps(load_sweep(a), load_sweep(b)) without holding either sweep's records at
/// once: runs are read a few thousand at a time from both directories, compared and let
/// go (what 100,000 runs would otherwise take: ~9 GB, much of the time spent having the
/// kernel hand out and clear the pages). The same result; where a directory holds a run
/// directory not named by a run id, both sweeps are read whole.
/// `chunk`: run ids of A read at a time (tests use small ones to cross chunk boundaries).
SweepComparison compare_sweep_dirs(const std::string& a, const std::string& b, const CompareOptions& opt = {},
                                   size_t chunk = 2048);

/// Loss printed so that reading it back gives the same double (17 significant digits).
std::string exact_number(double v);

}  // namespace sweep
