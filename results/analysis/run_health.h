// Health flags: what a run that completed may still have gone wrong with (steps skipped,
// a non-finite loss, a loss that rose, a loss spike, clipping on every step, held-out loss
// rising while the training loss falls, a straggler rank, a throughput far below its
// sweep's), and whether a run shared its cores with other processes. The thresholds are
// documented in results/SCHEMA.md ("Health flags").
#pragma once

#include <cmath>  // NAN
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "record.h"       // Record
#include "run_figures.h"  // RunFigures

namespace sweep {

/// One flag: its name (the word in the `health` attribute) and one sentence with the numbers.
struct HealthFlag {
  std::string name;
  std::string detail;
};

/// Flag names, in the order flags are listed.
inline constexpr const char* kFlagSkippedSteps = "skipped_steps";
inline constexpr const char* kFlagNonfiniteLoss = "nonfinite_loss";
inline constexpr const char* kFlagNonfiniteGradient = "nonfinite_gradient";
inline constexpr const char* kFlagFp16Overflow = "fp16_overflow";
inline constexpr const char* kFlagLossRose = "loss_rose";
inline constexpr const char* kFlagLossSpike = "loss_spike";
inline constexpr const char* kFlagClipping = "clipping";
inline constexpr const char* kFlagEvalRising = "eval_rising";
inline constexpr const char* kFlagStraggler = "straggler";
inline constexpr const char* kFlagThroughputOutlier = "throughput_outlier";  ///< sweep-level, never stored

/// fp16_overflow: steps the fp16 loss scaler skipped (finite loss, non-finite gradient)
/// after it calibrated (the skips before the run's first applied update are its search for
/// a scale) that are more than kOverflowShare of the run's steps, or two in a row. A
/// dynamic scaler overflows now and then after it grows the scale (once per
/// train.loss_scale_interval clean steps at most: 0.05% of steps at the default 2000);
/// more is a gradient that keeps blowing up, or a fault.
inline constexpr double kOverflowShare = 0.01;
/// Thresholds (results/SCHEMA.md). Shares of steps are judged over at least kMinSteps.
inline constexpr size_t kHealthMinSteps = 10;
inline constexpr double kSkippedShare = 0.5;  ///< skipped_steps: at least this share of steps skipped
inline constexpr double kClippedShare = 0.9;  ///< clipping: at least this share of applied steps clipped
/// loss_rose: the mean of the last k finite losses above the run's start, the lower of its
/// first finite loss and the mean of its first k, where k = min(kLossWindow, steps / 2),
/// so the two windows never overlap.
/// eval_rising: at least this many evaluations, and the final one above the best by this
/// share of the best, while the training loss at the end (mean of the kLossWindow steps up
/// to the last step) is below the one at the best evaluation's step (same window).
/// loss_spike: a step whose finite loss is above the median of the kSpikeWindow finite
/// losses before it (at least kSpikeMinHistory of them) by more than kSpikeSigmas robust
/// standard deviations of those losses (1.4826 x their median absolute deviation) and by
/// more than kSpikeRise of that median: a jump, not the noise of small batches.
inline constexpr size_t kSpikeWindow = 20;
inline constexpr size_t kSpikeMinHistory = 10;
inline constexpr double kSpikeSigmas = 6;
inline constexpr double kSpikeRise = 0.2;
/// The loss_spike rule for one value against the values before it (their last
/// kSpikeWindow finite ones). The trainer applies it to each step's loss and gradient norm
/// as the step ends, to take that step's gradient telemetry.
struct SpikeTest {
  bool spike = false;
  double median = 0;  ///< of the window
  double rise = 0;    ///< value - median
  double sigmas = 0;  ///< rise in robust standard deviations (infinite when they are 0)
};
SpikeTest spike_test(const std::vector<double>& before, double value);

/// The last kSpikeWindow finite values of `field` in `rows` (the steps before the one
/// judged), newest first: what spike_test reads for the trainer's telemetry rows and its
/// spike policy (the median and spread do not depend on the order).
std::vector<double> spike_window(const std::vector<StepMetrics>& rows, double StepMetrics::*field);

/// The lower median of `v`: of two values the smaller (of two ranks the typical one is the
/// faster, or no rank of two could ever exceed it); `empty` when `v` is empty. How ranks
/// are compared with their peers (stragglers, waits for a CPU, gradient norms).
double lower_median(std::vector<double> v, double empty = 0);

/// The `most` parameter tensors whose gradient norm rose most at `step` against their
/// median over the record's telemetry rows before it, in words ("against their median
/// over the 4 telemetry rows before it: layer1.attn_wo (12.1x), ..."; the largest norms
/// when no row comes before), or "" when the record has no telemetry row at that step.
/// The loss_spike flag names them.
std::string spike_leading_tensors(const Record& r, int64_t step, size_t most = 3);

/// What train.spike_policy did, one sentence per decision in order, from the record's
/// /summary attributes spike_decision.1 .. spike_decision.<spike_decisions>; empty when it
/// took none (or the run had no policy).
std::vector<std::string> spike_decisions(const Record& r);

/// One spike decision where a loss curve can show it: the spiking step, the first step
/// whose global batch the decision left out (a rewind's first undone step; the spiking
/// step itself when only its update was skipped) and the decision's sentence.
struct SpikeMark {
  int64_t step = 0;
  int64_t left_out_from = 0;
  std::string text;
};

/// The record's spike decisions as marks, in order: each sentence's "step S:" and the
/// range of spike_skipped_steps that ends at S. A decision whose sentence does not start
/// with its step (a record written otherwise) is left out.
std::vector<SpikeMark> spike_marks(const Record& r);
inline constexpr size_t kEvalRisingMinEvals = 3;
inline constexpr double kEvalRisingMargin = 0.01;
/// throughput_outlier: tokens/s median below this share of the median over the sweep's runs
/// that should run as fast (throughput_peer: the same work per step, precision, device,
/// layout, determinism and kernels), when there are at least kThroughputMinRuns of them
/// (the run itself included); a run measured on shared cores is neither judged nor a peer.
inline constexpr double kThroughputShare = 0.5;
/// Shared cores: a run some rank of which waited for a CPU (run-queue wait, summary
/// `rank_runqueue_share`) at least this share of its step time had its throughput measured
/// under contention (not a health flag: it says how busy the machine was, not what went
/// wrong with the run). A straggler whose share is this much above the typical rank's is
/// said to have shared its cores.
inline constexpr double kContendedShare = 0.1;
inline constexpr size_t kThroughputMinRuns = 3;

/// straggler (judged by the trainer, which stores the ranks in the summary `stragglers`):
/// in each step, each rank's compute time (forward and backward, before the first
/// collective) over the step's typical rank's (the lower median over the ranks); a rank
/// whose median ratio over the steps exceeds the run's dist.straggler_ratio
/// (kStragglerRatio by default), and whose median excess over the typical exceeds
/// kStragglerMinS (below that, scheduling noise on a small model), is a straggler.
inline constexpr double kStragglerRatio = 1.2;
inline constexpr double kStragglerMinS = 0.01;

/// Each rank's median, over the steps, of its compute time over its peers' typical in the
/// same step, and the ranks that straggled by `ratio` (see kStragglerRatio). Judged step by
/// step, a slowdown that every rank shared (a loaded machine, a slow phase of the run) is no
/// rank's, and a rank slow in a minority of the steps is not a straggler. `compute` is
/// [step][rank]; steps with a non-finite time are left out.
struct StragglerJudgement {
  std::vector<double> ratio;  ///< per rank; empty when no step could be judged
  std::vector<int> ranks;     ///< the stragglers, ascending
};
StragglerJudgement judge_stragglers(const std::vector<std::vector<double>>& compute, double ratio = kStragglerRatio);

/// The ranks the straggler flag names (the trainer's judgement, summary `stragglers`),
/// ascending; empty when it named none. A rank's step-time figure is flagged only when
/// this names it, whatever its ratio.
std::vector<int> straggler_ranks(const Record& r);

/// A summary attribute of comma-separated numbers, one per rank (`rank_runqueue_share`,
/// `rank_compute_ratio`), read back; empty when the record lacks it or any does not read.
std::vector<double> summary_numbers(const Record& r, const std::string& key);

/// The largest share of its step time any rank of `r` spent waiting for a CPU (summary
/// `rank_runqueue_share`); NaN when the record does not say. At kContendedShare or more,
/// the run's throughput was measured while other processes shared its cores.
double runqueue_share(const Record& r);

/// The per-run flags, computed from the record's rows, config and summary (what the
/// trainer stores when it finishes a record).
std::vector<HealthFlag> compute_health(const Record& r);

/// Whether `r` stores its flags (the /summary attribute `health`, schema version 3 from
/// the trainer); records of versions 1-2 and of other writers do not.
bool health_stored(const Record& r);

/// The per-run flags of `r`: the stored ones when present, else compute_health(r).
std::vector<HealthFlag> run_health(const Record& r);

/// The /summary attributes that store `flags`: `health` (names, space-separated, "" when
/// none) then `health.<name>` (its sentence) for each flag.
std::vector<std::pair<std::string, std::string>> health_attributes(const std::vector<HealthFlag>& flags);

/// "loss_rose eval_rising", or "" for none.
std::string health_names(const std::vector<HealthFlag>& flags);

/// The sweep-level flag of each run (parallel to `runs`; `figs` are their run_figures):
/// throughput_outlier, or nothing.
std::vector<std::vector<HealthFlag>> throughput_outliers(const std::vector<Record>& runs,
                                                         const std::vector<RunFigures>& figs);

/// What throughput_outliers needs of one run: its peers are the runs of the same `group`,
/// the things that decide a run's speed by design, in words: "1.2e+05 parameters, 512
/// tokens per step, world size 2, accum 2, micro_batch 4, ZeRO 0, precision fp32, device
/// cpu, deterministic canonical, kernels Cooperlake/avx2".
struct ThroughputPeer {
  std::string group;
  double tokens_per_s_median = NAN;  ///< RunFigures::tokens_per_s_median; NaN leaves the run out
  bool shared_cores = false;         ///< measured while its cores were shared (kContendedShare): left out
};
ThroughputPeer throughput_peer(const Record& r, const RunFigures& f);

/// throughput_outliers of runs known only by their ThroughputPeer (a sweep's index).
std::vector<std::vector<HealthFlag>> throughput_outliers(const std::vector<ThroughputPeer>& runs);

/// Every flag of each run of a sweep: run_health, then the sweep-level ones.
std::vector<std::vector<HealthFlag>> sweep_health(const std::vector<Record>& runs, const std::vector<RunFigures>& figs);

}  // namespace sweep
