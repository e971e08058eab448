// Reports over the runs of a sweep: loading a sweep directory, the figures the report
// shows (computed once, in build_report), and rendering them as HTML, Markdown, CSV or JSON.
#pragma once

#include <cmath>  // NAN
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "record.h"
#include "run_figures.h"    // RunFigures, the objective
#include "run_health.h"     // HealthFlag
#include "sweep_records.h"  // SweepRecords, load_sweep

namespace sweep {

/// Config keys whose canonical value differs between at least two runs, in key order.
std::vector<std::string> varying_keys(const std::vector<Record>& runs);

/// varying_keys one run at a time, for a reader that never holds every run (export).
class VaryingKeys {
 public:
  /// One more run's config.
  void add(const std::map<std::string, std::string>& config);
  /// The keys that vary over the configs added so far, in key order.
  std::vector<std::string> keys() const;

 private:
  bool any_ = false;
  std::map<std::string, std::string> first_;  // the first run's config, what the others are held against
  std::vector<char> differs_;                 // per key of first_: some run lacks it or gives another value
  std::set<std::string> only_some_;           // keys the first run does not set
};

/// The natural order of config values: numbers as numbers (1e-3 before 0.01) and before
/// everything else, which compares as text.
bool value_less(const std::string& a, const std::string& b);

/// The canonical value of `key` in the run's config, or "unset".
std::string report_value(const Record& r, const std::string& key);

/// A per-step figure over several runs: at each step some run recorded finitely, the mean,
/// smallest and largest of their values.
struct Curve {
  std::vector<int64_t> steps;
  std::vector<double> mean, lo, hi;
};

/// The curve of `field` (e.g. &StepMetrics::loss) over `runs[members]`.
Curve group_curve(const std::vector<Record>& runs, const std::vector<size_t>& members, double StepMetrics::*field);

/// The curves a sweep's records hold beside the training loss, by name: "eval_loss" when a
/// run evaluated held-out data, then each of a program's own step metrics ("accuracy"),
/// then its own evaluation metrics ("eval_accuracy").
std::vector<std::string> metric_curves(const std::vector<Record>& runs);

/// The (step, value) points of curve `name` (metric_curves) of one record; NaNs left out.
std::vector<std::pair<int64_t, double>> metric_points(const Record& r, const std::string& name);

/// The curve of metric `name` over `runs[members]`: the mean at each step with its band.
Curve metric_curve(const std::vector<Record>& runs, const std::vector<size_t>& members, const std::string& name);

/// Settings of one report.
struct ReportOptions {
  std::string group_by;  ///< config key: one loss chart per value of it; "" = one chart
  /// --baseline KEY=VALUE: every group whose KEY is another value is compared with its
  /// partner at VALUE (same other values), run by run paired by seed. "" = none.
  std::string baseline_key, baseline_value;
};

/// Keys that only say how a step is laid out: runs differing only in these (with the same
/// global batch, world_size x accum x micro_batch sequences) must be bit-identical; so must
/// runs with train.leaf that also differ in train.micro_batch.
const std::vector<std::string>& layout_keys();

/// Per-run figures of the report: the run's own (run_figures.h), its health flags and
/// its reproducibility class.
struct ReportRun : RunFigures {
  std::vector<HealthFlag> health;  ///< stored or computed per-run flags, then the sweep-level ones
  size_t equivalence = 0;          ///< index into ReportModel::classes
  /// On the Pareto front of objective (lower is better) against tokens/s median (higher is
  /// better): no other run is at least as good in both and better in one.
  bool pareto = false;
  double clipped_share = NAN;  ///< share of applied steps whose gradient was clipped (clip_coef < 1)
  int64_t skipped_steps = 0;   ///< steps whose update was skipped (fp16 overflow)
  /// The rank with the largest median step time and that median over the median of all
  /// ranks' medians (1 for one rank); -1 / NaN when the record has no per-rank times.
  int slowest_rank = -1;
  double slowest_rank_ratio = NAN;
  /// runqueue_share(): the largest share of step time a rank waited for a CPU; NaN when the
  /// record does not say. At kContendedShare or more its tokens/s were measured while
  /// other processes shared the cores (marked "shared cores" beside them).
  double runqueue_share = NAN;
  bool shared_cores() const { return runqueue_share >= kContendedShare; }
};

/// Runs whose configs differ only in train.seed: one row of the report's table.
struct RunGroup {
  std::vector<std::pair<std::string, std::string>> values;  ///< varying keys other than train.seed
  std::vector<size_t> runs;                                 ///< indexes into SweepRecords::runs
  size_t finite_objectives = 0;                             ///< runs whose objective is finite (the mean's sample)
  /// Some run of it has an objective: ranked in the results; the others are listed apart.
  bool ranked() const { return finite_objectives > 0; }
  double objective_mean = NAN, objective_std = NAN;  ///< over those runs; std is the sample std (0 for one run)
  std::string objective_name;                        ///< the runs' (RunFigures::objective_name); "mixed" if they differ
  double best_loss = NAN;                            ///< best of the runs' best training losses
  double best_eval_loss = NAN;                       ///< best of the runs' best held-out losses
  double tokens_per_s = NAN;                         ///< mean over runs of their tokens/s median
  size_t flagged = 0;                                ///< runs with a health flag
  int64_t memory_bytes = -1;                         ///< largest over runs and ranks
  std::string status;                                ///< e.g. "2 completed" or "1 completed, 1 diverged"
  std::vector<int64_t> curve_steps;                  ///< steps of the mean loss curve
  std::vector<double> curve_loss;                    ///< mean over the runs with a finite loss at that step
  /// The band around it: the smallest and largest of those runs' losses at that step
  /// (equal to the mean for one run).
  std::vector<double> curve_lo, curve_hi;
};

/// "k1=v1, k2=v2" for a group's varying values.
inline std::string values_text(const RunGroup& g) {
  std::string s;
  for (const auto& [k, v] : g.values) s += (s.empty() ? "" : ", ") + k + "=" + v;
  return s;
}

/// One group against its baseline partner (ReportOptions::baseline_key): each of its runs
/// minus the partner's run of the same seed, step by step, so that "fp16 minus fp32" is
/// one curve with the seeds' spread around it.
struct BaselineDiff {
  size_t group = 0, baseline = 0;                                       ///< indexes into ReportModel::groups
  std::vector<std::string> seeds;                                       ///< train.seed of each pair, in seed order
  std::vector<double> objective_diffs;                                  ///< per pair: objective minus the partner's
  double objective_mean = NAN, objective_lo = NAN, objective_hi = NAN;  ///< over the finite ones
  std::vector<int64_t> steps;        ///< steps where every pair has a finite loss on both sides
  std::vector<double> mean, lo, hi;  ///< mean, smallest and largest difference over the pairs
};

/// Runs with identical checksum trajectories (every recorded step and hash).
struct EquivalenceClass {
  std::string name;          ///< "C1", "C2", ... in order of the first run
  std::vector<size_t> runs;  ///< indexes into SweepRecords::runs
};

/// Runs that differ only in layout keys with the same global batch.
struct LayoutSet {
  std::vector<size_t> runs;      ///< indexes into SweepRecords::runs
  bool identical = true;         ///< every run held to the bits is in its layout's class
  std::string first_difference;  ///< verdict of the first run against the first that differs
  /// Runs of the set whose layout does the same math but by design not the same bits as
  /// the set's first run (a non-power-of-two accumulation, whose ranks' leaves are not
  /// subtrees of the canonical tree, or the native all-reduce): they are held to identity
  /// only with runs of their own layout, and measured against the first run instead.
  std::vector<size_t> by_design;
  double by_design_max_rel = NAN;  ///< largest relative loss difference of those against the first run
  std::string by_design_note;      ///< which run and step that was, in one sentence
};

/// A run in benchmark mode (train.deterministic false) and its deterministic partner: the
/// same config otherwise. What determinism costs in throughput.
struct DeterminismCost {
  size_t deterministic = 0, benchmark = 0;  ///< indexes into SweepRecords::runs
  /// Each run's tokens/s median (RunFigures::tokens_per_s_median).
  double deterministic_tokens_per_s = NAN, benchmark_tokens_per_s = NAN;
  /// Step time in deterministic mode over step time in benchmark mode: benchmark tokens/s
  /// over deterministic tokens/s (1.05 = determinism costs 5%); NaN without both figures,
  /// or when refused.
  double cost = NAN;
  /// Why no cost is given for a pair whose throughput is not comparable: "measured on
  /// shared cores (RUN)" when either run's ranks waited for a CPU (ReportRun::shared_cores).
  /// "" otherwise.
  std::string refused;
};

/// Effect of one grid axis: mean objective at each of its values, or, for a key whose
/// values are continuous (a random or tpe search's parameter, where every draw differs), in
/// each of a few quantile bins of them.
struct AxisEffect {
  std::string key;
  std::vector<std::string> values;  ///< in natural order (numbers numerically); a bin is named "lo to hi"
  std::vector<size_t> counts;       ///< runs with a finite objective at each value
  std::vector<double> means;        ///< their mean objective
  double spread = 0;                ///< largest mean minus smallest mean
  /// How much this axis decides the objective, in [0, 1]; NaN with fewer than two finite
  /// objectives or no variance. Of a grid (ReportModel::rank_importance false): the share of
  /// the objective's variance over the runs that lies between the means at its values (eta
  /// squared of a one-way analysis of variance). Of a search with continuous keys (true):
  /// rank_eta_squared of the objective over its values or bins, so that every axis of the
  /// search is measured the same way whether it was drawn from a list or a range.
  double importance = NAN;
  /// The values are quantile bins of a continuous key (quantile_bins): more than
  /// kMaxLevels distinct numbers that are mostly distinct between runs.
  bool binned = false;
  /// Spearman's rank correlation of the key's values with the objective (NaN unless every
  /// value is a number): which way it pulls, when it pulls one way.
  double rank_correlation = NAN;
  /// Other varying keys whose values change exactly when this one's do (one value of each
  /// always goes with one value of the other): their effects cannot be told apart.
  std::vector<std::string> confounded_with;
  /// Every value of this axis is run with the same combinations of the other varying
  /// keys, so its means compare like with like; false in an incomplete grid, where the
  /// means also carry the other axes' effects.
  bool balanced = true;
};

/// Distinct numbers past which a key that varies between most runs is continuous and
/// its effect is shown in quantile bins.
inline constexpr size_t kMaxLevels = 8;

/// Each value's bin among `bins` quantile bins of `x` (0 = the smallest values): bin b
/// starts where the sorted values pass b/bins of them; equal values share a bin, and the
/// bins are renumbered so none is empty. Fewer bins than asked when values repeat.
std::vector<size_t> quantile_bins(const std::vector<double>& x, size_t bins);

/// Ranks of `x` from 1, ties given their mean rank.
std::vector<double> midranks(const std::vector<double>& x);

/// Spearman's rank correlation of x and y (same length): Pearson's correlation of their
/// midranks; NaN with fewer than three points or when either is constant.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

/// The share of the ranks of `y` that `group` (each point's group, 0..k-1) explains,
/// robust to outliers and to the shape of an effect: the Kruskal-Wallis H statistic (with
/// its tie correction) as an effect size, eta squared of H = (H - k + 1) / (n - k), in
/// [0, 1] (negative values, chance below what k groups explain of noise, are 0). NaN with
/// fewer than k + 1 points, one group, or all y equal.
double rank_eta_squared(const std::vector<double>& y, const std::vector<size_t>& group);

/// The effect of each of `keys` on the runs' objectives (AxisEffect). `sampled`: the runs
/// are a random or tpe search's, whose numeric keys with more than kMaxLevels values are
/// binned even when seeds repeat each draw. Sets `*rank_importance` when some axis is binned.
std::vector<AxisEffect> axis_effects(const std::vector<Record>& runs, const std::vector<ReportRun>& figs,
                                     const std::vector<std::string>& keys, bool sampled, bool* rank_importance);

/// The finite objectives among `runs` (indexes into `figs`): how many, their mean (NaN for
/// none) and their sample standard deviation (NaN for fewer than two).
struct ObjectiveSpread {
  size_t n = 0;
  double mean = NAN, std = NAN;
};
ObjectiveSpread objective_spread(const std::vector<ReportRun>& figs, const std::vector<size_t>& runs);

/// Keys past which a point's change from the base is no longer one knob (or one small
/// fixed set of knobs, such as dist.world_size with train.accum): base_deltas gives up.
inline constexpr size_t kMaxKnobsPerPoint = 4;

/// One point of a one-knob-at-a-time sweep against its base point (BaseDeltas).
struct PointDelta {
  /// The knobs this point changes, with its values there ("train.precision", "bf16"), in key order.
  std::vector<std::pair<std::string, std::string>> changes;
  std::vector<size_t> runs;        ///< its runs, every seed (indexes into SweepRecords::runs)
  std::vector<std::string> seeds;  ///< train.seed of the runs compared, in seed order: finite here and at the base
  double objective = NAN;          ///< the mean objective of its runs of those seeds
  double base_objective = NAN;     ///< the mean objective of the base's runs of the same seeds
  double delta = NAN;              ///< objective minus base_objective; NaN without a seed in common
  double relative = NAN;           ///< delta over |base_objective|; NaN where that is 0
  /// |delta| is no more than the base's seed spread (BaseDeltas::base_std, which needs two
  /// seeds): a change the seeds alone move the objective by, marked so in every format.
  bool within_spread = false;
};

/// A sweep of one knob at a time (sweeps/seven-tricks.yaml: a base point and `include`
/// entries that each change one knob, or a small fixed set, of it): each point against the
/// base. Eta squared says nothing there: each value is one point, and no two knobs cross.
struct BaseDeltas {
  std::vector<size_t> base_runs;  ///< the base point's runs, every seed; empty: not one knob at a time
  std::vector<std::pair<std::string, std::string>> base;  ///< the knobs' values at the base, in key order
  size_t base_seeds = 0;                                  ///< base runs with a finite objective
  double base_mean = NAN, base_std = NAN;                 ///< over them; std the sample std (NaN for one)
  std::vector<PointDelta> points;                         ///< largest |delta| first; NaN deltas last
  bool one_knob() const { return !base_runs.empty(); }
};

/// Each point of a one-knob-at-a-time sweep against the base point, or an empty BaseDeltas
/// (one_knob() false) for any other sweep, which keeps its axis effects. `keys`: the
/// varying keys (train.seed among them is a replicate, not a knob). Points are the runs'
/// distinct values of the other keys (the knobs), whatever their seeds. The sweep is one
/// knob at a time when:
///   - at least two knobs vary, and each knob has one value more points have than any
///     other (its mode; a crossed grid's values tie, so a grid has none);
///   - some point has every knob at its mode: the base, the run that changes no knob;
///   - every other point leaves the mode in at most kMaxKnobsPerPoint knobs (its changes);
///   - no point's changes are the union of other points' smaller changes (lr=b with
///     warmup=10 where lr=b and warmup=10 also ran alone: a crossed axis).
/// A point's delta compares means over the same seeds: those where both it and the base
/// have a finite objective (the base's other seeds give base_std, the seed noise).
BaseDeltas base_deltas(const std::vector<Record>& runs, const std::vector<ReportRun>& figs,
                       const std::vector<std::string>& keys);

/// One line of the report's lineage (lineage_lines): a run in a family of runs `sweep
/// resume` and `sweep fork` started from one another's checkpoints.
struct LineageLine {
  size_t run = 0;           ///< index into SweepRecords::runs
  size_t root = 0;          ///< the family's first run (`run` itself for the root and an orphan)
  int depth = 0;            ///< 0 for the root, 1 for its children, ...
  bool parent_here = true;  ///< false: an orphan, started from a run whose record is not among these
  std::string changes;      ///< "train.lr: 0.003 -> 0.001" against its parent (lineage_changes); "" for a root
};

/// Every family, each from its root depth-first (children in record order), then the
/// orphans; a sweep without resumed or forked runs has none.
std::vector<LineageLine> lineage_lines(const SweepRecords& sweep);

/// "f1: fork from p at step 200 (train.lr: 0.003 -> 0.001)", or the root's run id.
std::string lineage_text(const SweepRecords& sweep, const LineageLine& l);

/// One environment attribute across the runs (a key empty or unset in every run is left out).
struct EnvironmentEntry {
  std::string key;
  std::vector<std::pair<std::string, size_t>> values;  ///< value -> runs that have it; more than one = differs
};

/// One loss chart: the mean curve of each group whose `group_by` (or facet) value is `value`.
struct Chart {
  std::string title;                ///< "all runs" or "train.lr = 0.01"
  std::vector<size_t> groups;       ///< indexes into ReportModel::groups
  std::vector<std::string> labels;  ///< what the legend calls each of them (legend_labels)
};

/// A config value too long for a legend or a results cell: shown there as its alias, and
/// in full in the report's key to long values.
struct LongValue {
  std::string key, value;
  std::string alias;  ///< "#1", "#2", ... in the order of the keys and values
};

/// Curves past which one chart of all groups is split into small multiples (facet_by).
inline constexpr size_t kCurvesPerChart = 12;
/// Bytes past which a value is a LongValue.
inline constexpr size_t kLongValue = 24;

/// A search's decisions and its best result against the compute it spent, from its
/// search.log (harness: search_log, tpe_log, run_halving_search) and the records.
struct SearchProgress {
  std::string kind;                    ///< random | tpe | halving | asha | pbt; "" = no search
  std::string metric = "objective";    ///< what the search ranked by
  std::string mode = "min";            ///< min | max
  std::vector<std::string> decisions;  ///< the log's lines after its header, as written
  struct Point {
    double compute = 0;  ///< training steps spent so far (over every run)
    double best = 0;     ///< the best metric so far (halving: the rung's best, at its steps)
    std::string label;   ///< "trial 7", "bracket 0 rung 1 (50 steps)"
  };
  std::vector<Point> best_so_far;
  /// The trials in the log's order: "trial 3" (or "draw 3") and its runs.
  struct Trial {
    std::string label;
    std::string inputs;  ///< its drawn values as the log has them: "train.lr=0.003 train.warmup=10"
    std::vector<std::string> run_ids;
  };
  std::vector<Trial> trials;
  std::vector<std::string> keys;  ///< the searched keys (the header's keys=, else the first trial's)
  /// halving: each rung of each bracket as it ran.
  struct Rung {
    size_t bracket = 0, rung = 0;
    int64_t steps = 0;       ///< every trial of the rung is trained to this step
    size_t trials = 0;       ///< trials ranked at this rung
    size_t promoted = 0;     ///< of them, promoted to the next rung
    double steps_spent = 0;  ///< training steps this rung added (a promoted run resumes)
  };
  std::vector<Rung> rungs;
  /// halving: each trial's metric at every rung it reached, and how it ended there.
  struct Path {
    size_t trial = 0;  ///< index into `trials`
    size_t bracket = 0;
    std::vector<std::pair<int64_t, double>> points;  ///< (steps, metric); a NaN metric: failed or diverged
    std::string fate;                                ///< the last verdict: stopped, promoted, finished, best of bracket
    size_t last_rung = 0;
  };
  std::vector<Path> paths;
  /// A Pareto search (random or tpe with several metrics, or constraints: pareto.h): its
  /// metrics and modes and its constraints as the header names them, and each trial's
  /// figures read from its records.
  std::vector<std::string> metrics, modes, constraints;
  struct ParetoTrial {
    size_t trial = 0;                       ///< index into `trials`
    std::vector<double> values;             ///< each metric, the mean over its runs (NaN: none)
    std::vector<double> constraint_values;  ///< each constraint's metric, likewise
    bool failed = true, feasible = false;   ///< as ParetoEntry says
    bool front = false;                     ///< non-dominated among the feasible trials
    double violation = 0;                   ///< summed constraint violation
  };
  std::vector<ParetoTrial> pareto;  ///< one per trial with runs; empty for a search on one metric
  /// pbt: each member's schedule, from search.log: the values it trained with over each
  /// span of steps, and whose checkpoint each span started from.
  struct Span {
    int64_t from = 1, to = 0;  ///< steps from..to (inclusive)
    std::string inputs;        ///< "train.lr=0.0057 (x0.8) train.clip_norm=1.0 (next)", as the log says
    std::map<std::string, std::string> values;  ///< key -> value, without the annotations
    std::string run;                            ///< the run that trained it
    int64_t from_member = -1;                   ///< whose checkpoint it forked from; -1: its own
  };
  struct Member {
    std::string label;  ///< "member 3"
    std::vector<Span> spans;
    size_t rank = 0;           ///< at the final step (0: not ranked yet)
    double final_value = NAN;  ///< its metric at the final step
  };
  std::vector<Member> members;
  int64_t budget = 0;  ///< pbt: train.steps, as the header says
};

/// A pbt member's schedule in words, span by span: "steps 1-6: train.lr=0.0072
/// train.clip_norm=0.5; steps 7-12 (from member 0 at step 6): train.lr=0.0057 (x0.8) ...".
std::string pbt_schedule_text(const SearchProgress::Member& m);

/// Everything a report shows, computed once so every format carries the same figures.
struct ReportModel {
  std::string title;
  std::vector<std::string> varying;  ///< varying config keys (train.seed included)
  std::vector<std::string> columns;  ///< varying keys without train.seed: the table's columns
  /// Every run directory by the one word each reader uses for it (sweep status's): a
  /// readable record's status, else what load_sweep found (failed, interrupted, running,
  /// damaged: a record that does not read, verify or belong to its run, missing: none).
  size_t completed = 0, diverged = 0, failed = 0, running = 0, missing = 0;
  size_t interrupted = 0, damaged = 0;
  size_t pending = 0;     ///< points of points.tsv the driver has not started (no run directory)
  size_t total = 0;       ///< run directories: the sum of the counts
  size_t stopped = 0;     ///< records a halving search stopped at a rung (not problems)
  size_t flagged = 0;     ///< readable runs with a health flag: problems, though still completed
  size_t unverified = 0;  ///< records of a version without a digest (1): nothing checks their contents
  double wall_time_s = -1, train_time_s = 0;
  std::vector<ReportRun> runs;   ///< parallel to SweepRecords::runs
  std::vector<RunGroup> groups;  ///< best objective first (NaN last), then by their values
  std::vector<EquivalenceClass> classes;
  std::vector<LayoutSet> layout_sets;  ///< only sets of two or more runs
  /// Pairs of runs that differ only in train.deterministic, in the order of their
  /// deterministic run; empty when the sweep has none.
  std::vector<DeterminismCost> determinism_costs;
  /// Largest spread first; with rank_importance, the most important first.
  std::vector<AxisEffect> effects;
  /// Some axis is continuous (AxisEffect::binned): every axis's importance is then
  /// rank_eta_squared rather than eta squared.
  bool rank_importance = false;
  /// A one-knob-at-a-time sweep (a grid, not a search): each point against the base point.
  /// Then `effects` keep their means per value but no importance (NaN): the report shows
  /// these deltas in place of eta squared.
  BaseDeltas base_deltas;
  /// Short names of `columns` for headers and legends (short_key_names).
  std::vector<std::string> short_columns;
  /// Values too long for legends and the results table, with their aliases.
  std::vector<LongValue> long_values;
  /// What legends call each group when every group is on one chart (legend_labels).
  std::vector<std::string> group_labels;
  /// The key whose values split the charts into small multiples when no --group-by was
  /// given and one chart would hold more than kCurvesPerChart curves; "" = none.
  std::string facet_by;
  /// Reproducibility classes say something: some runs differ only in layout (layout_sets)
  /// or some class holds two or more runs. Otherwise every run is its own class and the
  /// report leaves the classes out.
  bool classes_matter = false;
  /// Varying keys that change throughput by design (throughput_keys): precision, layout,
  /// kernels, model size. Without one, tokens/s differs by machine noise alone and the
  /// report draws no trade-off against it.
  std::vector<std::string> throughput_varies_with;
  std::vector<EnvironmentEntry> environment;
  std::string group_by;
  std::vector<Chart> charts;
  std::string baseline_key, baseline_value;  ///< ReportOptions' baseline; "" = none
  std::vector<BaselineDiff> baseline_diffs;  ///< in the order of ReportModel::groups
  /// Groups that have no partner at the baseline value (their values, values_text style).
  std::vector<std::string> baseline_unpaired;
  SearchProgress search;  ///< kind "" without a search.log
  /// The runs the HTML page lists one by one (its runs and diagnostics tables, the
  /// parallel coordinates and the throughput scatter), in run order: every run up to
  /// kHtmlRuns; beyond that the kHtmlRuns best by objective, then every run with a health
  /// flag or on the Pareto front. A page of 100,000 runs would otherwise be ~120 MB that no
  /// browser shows; the CSV and JSON reports list every run.
  std::vector<size_t> html_runs;
};

/// How many runs the HTML page lists one by one at most, besides the flagged and Pareto
/// ones (ReportModel::html_runs).
inline constexpr size_t kHtmlRuns = 1000;
/// Run ids listed in one cell of the HTML page (a class or layout set) before "and N more".
inline constexpr size_t kHtmlIdsPerCell = 20;
/// Layout sets the HTML page lists beyond every set that is not identical; classes of
/// identical runs it lists.
inline constexpr size_t kHtmlIdenticalSets = 200;

/// Keys that change a run's throughput by design: precision, determinism, threads, the
/// layout keys, the reduction, the micro-batch and the built-in model's size keys.
bool throughput_key(const std::string& key);

/// Short names of config keys for headers and legends: each key's last dotted part ("lr"
/// of train.lr), or as many parts as tell it from the others' ("moe.experts").
std::vector<std::string> short_key_names(const std::vector<std::string>& keys);

/// A value as legends and the results table show it: its alias when it is a LongValue.
std::string shown_value(const ReportModel& m, const std::string& key, const std::string& value);

/// What the legend of a chart calls each of `groups` (indexes into m.groups): the keys
/// whose values differ between those groups, by their short names, leaving out a key that
/// changes together with one already named. When the groups are a base and a few changes
/// each (one axis per knob, as sweeps/seven-tricks.yaml), only the keys where a group
/// leaves the most common value, and "base" for the group that leaves none.
std::vector<std::string> legend_labels(const ReportModel& m, const std::vector<size_t>& groups);

/// The LongValues among the groups' values, aliased in the order of the columns and values.
std::vector<LongValue> long_values(const ReportModel& m);

/// The column whose values split a chart of every group into small multiples when it
/// would hold more than kCurvesPerChart curves: the one giving the fewest panels (2 to 8)
/// of equally many curves, at most kCurvesPerChart each; "" when none does (a base and one
/// change per knob has no such key: its chart names each curve at its end).
std::string facet_key(const ReportModel& m);

/// Reads `log` with the runs' records (for steps and, for kind random, objectives).
SearchProgress search_progress(const std::string& log, const std::vector<Record>& runs,
                               const std::vector<ReportRun>& figures);

/// Computes every figure of the report.
ReportModel build_report(const std::string& title, const SweepRecords& sweep, const ReportOptions& opt = {});

/// Output formats of `sweep report`.
enum class ReportFormat { html, markdown, csv, json };

/// What each format carries near its start so that `sweep report -o FILE` can tell a
/// report it wrote (and may replace) from anyone else's file: HTML a generator <meta>,
/// Markdown this comment as its second line (the title is the first), JSON a "generator"
/// member (and it starts with "format":"sweep-report"); CSV is recognised by its header.
inline constexpr const char* kReportGenerator = "sweep report";
inline constexpr const char* kHtmlReportStart =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<meta name=\"generator\" content=\"sweep report\">\n";
inline constexpr const char* kMarkdownReportMark = "<!-- generator: sweep report -->";
inline constexpr const char* kJsonReportStart = "{\"format\":\"sweep-report\",";

/// Whether `head` (the first bytes of a file, 64 KiB are plenty) begins like a report of
/// `format` rendered by render_report.
bool looks_like_report(const std::string& head, ReportFormat format);

/// "html", "md" (or "markdown"), "csv", "json"; false for anything else.
bool parse_report_format(const std::string& name, ReportFormat* out);

/// Renders the report. HTML is one self-contained page (inline CSS and SVG, nothing
/// fetched, every user string escaped); Markdown and JSON carry every section; CSV has
/// one row per run with every per-run and per-group figure.
std::string render_report(const SweepRecords& sweep, const ReportModel& model, ReportFormat format);

/// The HTML report with default options.
std::string render_html(const std::string& title, const SweepRecords& sweep);

/// `run_href`: when given, each run id of the runs and failed-runs tables links to
/// run_href + id (the served run page, harness/serve); a running run's step is an element
/// of class "step" with data-run its id, which a served page advances in place.
std::string render_html(const SweepRecords& sweep, const ReportModel& model, const std::string& run_href = "");
std::string render_markdown(const SweepRecords& sweep, const ReportModel& model);
std::string render_csv(const SweepRecords& sweep, const ReportModel& model);
std::string render_json(const SweepRecords& sweep, const ReportModel& model);

/// `s` as a JSON string, quotes included; a byte that starts no valid UTF-8 sequence
/// becomes U+FFFD (the JSON report's spelling).
std::string json_string(const std::string& s);

/// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string html_escape(const std::string& s);

}  // namespace sweep
