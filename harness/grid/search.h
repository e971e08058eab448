// The `search:` section of a grid: points drawn from a space instead of listed.
//
//   search:
//     kind: random          # grid (the default: today's product of the grid's axes) | random | tpe
//     samples: 24           # points drawn
//     seed: 7               # the search's own seed (not train.seed)
//     space:
//       train.lr:        {loguniform: [1e-4, 1e-2]}
//       train.warmup:    {int: [0, 100], step: 10}
//       train.clip_norm: {uniform: [0.5, 2.0]}
//       model.act:       {choice: [gelu, relu]}
//
// Draw i of key k is a pure function of (seed, i, k): the same file gives the same
// points on any machine, more samples keep the first ones, and adding a key to the space
// leaves the other keys' draws as they were. Drawn points are one zip group of the grid
// (point i takes draw i of every key), so seeds, exclude, constraints, validation and
// run ids are the grid's own.
//
// kind tpe (tpe.h) starts with the first `startup` draws of kind random, then proposes
// `parallel` trials at a time from the objectives of every earlier trial:
//     kind: tpe
//     samples: 24
//     parallel: 2           # trials per batch (part of the search, not of the launch)
//     startup: 8            # random draws first (default min(10, samples))
//     metric: objective     # objective | final_loss | train_loss_end | final_eval_loss | best_eval_loss
//     mode: min             # min | max
//
// kind halving (halving_search.h) trains trials rung by rung, each rung `eta` times the
// steps of the one before, and promotes the best 1/eta of every rung (the budget is
// train.steps; a stopped run resumes from its checkpoint):
//     kind: halving
//     min_steps: 20         # the first rung's steps
//     eta: 3                # default 3, >= 2
//     brackets: 1           # Hyperband brackets, default 1 (plain successive halving)
//     metric: train_loss_end  # (the default here: the mean of the last losses a rung trained)
// With a space (and samples) the trials are random draws; without one they are the grid's
// points (one trial per point, its seeds together).
//
// kind asha (asha_search.h): the same rungs, one bracket, promoted as results come rather
// than a rung at a time (asynchronous successive halving), each decision taken on the
// results that come before it in a fixed order, so it replays at any launch.parallel:
//     kind: asha
//     min_steps: 20
//     eta: 3
//
// kind pbt (pbt_search.h): population-based training (Jaderberg et al. 2017). `population`
// members are drawn from the space; every `interval` steps the bottom `quantile` of them
// fork from a top member's checkpoint with perturbed or resampled keys:
//     kind: pbt
//     population: 8
//     interval: 10          # steps between decisions; divides train.steps
//     quantile: 0.25        # the bottom (and top) fraction, in (0, 0.5]
//     perturb: [0.8, 1.2]   # factors of a continuous key (a choice key moves to a neighbour)
//     resample: 0.25        # probability of a fresh draw instead of a perturbation
//     generations: 3        # decisions, at interval, 2 x interval, ...; default every interval before the end
//
// Kinds random and tpe take several objectives and constraints (pareto.h): the report
// draws their Pareto front, and tpe proposes by it (motpe.h):
//     metric: [train_loss_end, memory_per_rank_mib]
//     mode: [min, min]      # one per metric (a single mode applies to every metric)
//     constraints: ["memory_per_rank_mib <= 512"]
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "pareto.h"      // MetricConstraint
#include "run_config.h"  // ConfigValue

namespace sweep {

/// One key of search.space.
struct SearchDim {
  std::string key;                   ///< dotted run-config key
  std::string where;                 ///< file:line:col of the key
  std::string kind;                  ///< choice | uniform | loguniform | int
  std::vector<ConfigValue> choices;  ///< choice: the values, as written
  double lo = 0, hi = 0;             ///< uniform, loguniform, int: both bounds included
  int64_t step = 1;                  ///< int: draws are lo, lo + step, ... <= hi
};

/// What a search that learns from its runs (kinds tpe and halving) ranks them by: `metric`
/// of each run (the mean over a trial's seeds), lower is better under mode min. A run that
/// failed or diverged counts as the worst. Only values that replay: a metric measured in
/// time (tokens_per_s) differs from one run of the same bits to the next, so a search
/// deciding on it could not be replayed, and it is refused (timing_metrics()).
/// Besides these, `memory_per_rank_mib` and a program's own `metrics.NAME` (search_metric.h).
inline const std::vector<std::string>& search_metrics() {
  static const std::vector<std::string> m = {"objective", "final_loss", "train_loss_end", "final_eval_loss",
                                             "best_eval_loss"};
  return m;
}

/// Record values that depend on how fast the machine was: never a search's metric.
inline const std::vector<std::string>& timing_metrics() {
  static const std::vector<std::string> m = {"tokens_per_s", "step_time_s"};
  return m;
}

/// A parsed `search:` section.
struct SearchSpec {
  std::string kind = "grid";  ///< grid | random | tpe | halving | asha | pbt
  /// halving and asha: trials train rung by rung and are promoted by `metric`.
  bool halves() const { return kind == "halving" || kind == "asha"; }
  std::string where;    ///< file:line:col of the section
  int64_t samples = 0;  ///< random: points drawn; tpe: trials in all
  uint64_t seed = 0;    ///< the search's seed
  std::vector<SearchDim> space;
  /// tpe: trials proposed together from the results of every earlier batch (so the
  /// decisions never depend on which run of a batch finished first), and the random
  /// draws it starts with (the first `startup` draws of kind random with the same seed).
  int64_t parallel = 1, startup = 10;
  std::string metric = "objective", mode = "min";
  /// Several objectives (kinds random and tpe): every metric and its mode, in order
  /// (metric and mode are the first). One entry each for a single objective.
  std::vector<std::string> metrics = {"objective"}, modes = {"min"};
  /// search.constraints: what a trial must meet to count as feasible (Deb's
  /// constraint-domination: any feasible trial is better than every infeasible one).
  std::vector<MetricConstraint> constraints;
  std::string metric_where;  ///< file:line:col of search.metric (or of the section)
  /// A search judged on a Pareto front (several metrics, or constraints) rather than one
  /// metric: its log and report say so, and tpe proposes with motpe.h.
  bool pareto() const { return metrics.size() > 1 || !constraints.empty(); }
  /// halving (halving_search.h): the steps of the first rung, the factor between rungs
  /// (1/eta of a rung's trials go on to the next, eta times as many steps), and how many
  /// Hyperband brackets (1 = plain successive halving from min_steps).
  int64_t min_steps = 0, eta = 3, brackets = 1;
  std::string min_steps_where, brackets_where;  ///< file:line:col of those keys (or of the section)
  /// pbt (pbt_search.h): members (the space's first `population` draws), the steps between
  /// two decisions, and how many decisions (0: one at every interval before train.steps).
  int64_t population = 0, interval = 0, generations = 0;
  double quantile = 0.25;                         ///< the bottom fraction that exploits the top one
  double perturb_down = 0.8, perturb_up = 1.2;    ///< factors of a continuous key, either with p 1/2
  double resample = 0.25;                         ///< probability that a key is drawn afresh instead
  std::string interval_where, generations_where;  ///< file:line:col of those keys (or of the section)
};

/// One rung of a halving bracket: its trials train to `steps` (of train.steps).
struct HalvingRung {
  int64_t steps = 0;
  int64_t trials = 0;  ///< how many trials reach it
};

/// One Hyperband bracket: trials [first, first + count) of the search's trial order,
/// started at rungs[0].steps; the last rung is the full budget.
struct HalvingBracket {
  int64_t s = 0;  ///< eta^s times the first rung's steps is the budget
  int64_t first = 0, count = 0;
  std::vector<HalvingRung> rungs;
};

/// The schedule of a halving search over `trials` trials with `budget` = train.steps.
/// s_max is the largest s with min_steps x eta^s <= budget; bracket b (0-based) has
/// s = s_max - b, rung i trains budget / eta^(s - i) steps (integer division), and
/// floor(n / eta) of a rung's n trials (at least 1) reach the next. Trials are split over
/// the brackets in proportion to Hyperband's ceil((s_max + 1) eta^s / (s + 1)), largest
/// remainders first, at least one each. Throws ConfigError naming the key when min_steps
/// exceeds the budget, there are more brackets than s_max + 1, or fewer trials than brackets.
std::vector<HalvingBracket> halving_schedule(const SearchSpec& s, int64_t budget, int64_t trials);

/// The words a search.log header names its objectives with: " metric=M mode=min" for one
/// metric, " metric=A,B mode=min,max constraints=C1,C2" for a Pareto search (a constraint
/// as MetricConstraint::text, without spaces).
std::string search_objective_words(const SearchSpec& s);

/// Most points one search may draw.
inline constexpr int64_t kMaxSearchSamples = 100000;

/// Parses `search:`; throws ConfigError naming file:line:col and the key for an unknown
/// kind or key, an empty space, samples outside [1, 100000], a bound that is not a
/// number, lo >= hi, a non-positive loguniform bound, or a step < 1.
SearchSpec parse_search(const YAML::Node& node, const std::string& source);

/// Draw `i` (0-based) of `dim` under `seed`, as the text the run config gets: a choice
/// as written; int as an integer; uniform and loguniform with 6 significant digits, so
/// the value a run records is the value it trained with.
ConfigValue draw(const SearchDim& dim, uint64_t seed, int64_t i);

/// The uniform number in [0, 1) behind draw(): a pure function of (seed, i, key).
double draw_unit(uint64_t seed, int64_t i, const std::string& key);

}  // namespace sweep
