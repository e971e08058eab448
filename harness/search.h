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
//     metric: objective     # objective | final_loss | train_loss_end | final_eval_loss | best_eval_loss | tokens_per_s
//     mode: min             # min | max
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

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

/// What a search that learns from its runs (kind tpe) ranks them by: `metric` of each run
/// (the mean over a trial's seeds), lower is better under mode min. A run that failed or
/// diverged counts as the worst.
inline const std::vector<std::string>& search_metrics() {
  static const std::vector<std::string> m = {"objective",       "final_loss",     "train_loss_end",
                                             "final_eval_loss", "best_eval_loss", "tokens_per_s"};
  return m;
}

/// A parsed `search:` section.
struct SearchSpec {
  std::string kind = "grid";  ///< grid | random | tpe
  std::string where;          ///< file:line:col of the section
  int64_t samples = 0;        ///< random: points drawn; tpe: trials in all
  uint64_t seed = 0;          ///< the search's seed
  std::vector<SearchDim> space;
  /// tpe: trials proposed together from the results of every earlier batch (so the
  /// decisions never depend on which run of a batch finished first), and the random
  /// draws it starts with (the first `startup` draws of kind random with the same seed).
  int64_t parallel = 1, startup = 10;
  std::string metric = "objective", mode = "min";
};

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
