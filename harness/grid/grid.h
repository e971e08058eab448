// The grid language: a base run config plus axes, zipped groups, seeds, filters and
// constraints whose expansion gives the points of a sweep; and a `launch:` section that
// says how to run them (not part of any run's config or id). Everything is validated
// before anything runs. docs/grid.md documents the language with examples.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "launch_config.h"  // LaunchSpec
#include "program.h"        // ProgramSpec
#include "run_config.h"
#include "search.h"          // SearchSpec
#include "trainer_models.h"  // load_trainer_models

namespace sweep {

/// One swept key and its values, in the order written (generators already expanded).
struct GridAxis {
  std::string key;                  ///< dotted run-config key, e.g. "train.lr"
  std::vector<ConfigValue> values;  ///< scalars, each with its file:line:col
  std::string where;                ///< file:line:col of the key
};

/// Keys advanced together: point i takes value i of every axis (all the same length).
struct ZipGroup {
  std::vector<GridAxis> axes;
  std::string where;
  std::string section = "zip";  ///< "search.space" for the points a search drew
};

/// A partial point: each key with the values it matches (exclude) or takes (include).
struct PointPattern {
  std::vector<GridAxis> keys;
  std::string where;
};

/// Checks and derivations applied to every point.
struct Constraints {
  int64_t global_batch = 0;    ///< micro_batch x accum x world_size must equal this; 0 = unchecked
  std::string derive;          ///< "", "train.micro_batch" or "train.accum": computed so the product holds
  bool skip_mismatch = false;  ///< drop points whose product differs instead of failing
  std::string where;           ///< file:line:col of `global_batch`
};

/// Longest sweep name, in characters (it names the default sweep directory).
inline constexpr size_t kMaxSweepName = 128;

/// A parsed grid file.
struct SweepSpec {
  std::string name;                    ///< sweep name; safe as a directory name
  std::string source;                  ///< the grid file, for messages
  FlatConfig base;                     ///< `base:` flattened to dotted keys
  std::vector<GridAxis> axes;          ///< `grid:` in file order (cartesian product)
  std::vector<ZipGroup> zips;          ///< `zip:` groups, each one more dimension; a search's draws are one more
  std::vector<PointPattern> excludes;  ///< `exclude:` points matching every key are dropped
  std::vector<PointPattern> includes;  ///< `include:` extra points (base + these values)
  GridAxis seeds;                      ///< `seeds:` replicate every point over train.seed (empty = no)
  Constraints constraints;             ///< `constraints:`
  LaunchSpec launch;                   ///< `launch:`; never part of a run id
  ProgramSpec program;                 ///< `program:` (empty: sweep-train or launch.trainer); not in run ids
  SearchSpec search;                   ///< `search:`; kind random adds its draws as the last zip group
  /// The grid as it runs, command-line overrides applied, as YAML (grid_overrides.h,
  /// resolved_grid): what `sweep run` keeps in the sweep directory as grid.yaml; "" for a
  /// grid not read by load_overridden_grid.
  std::string resolved;
};

/// One point of the expanded grid.
struct GridPoint {
  RunConfig config;                                         ///< fully resolved
  std::string id;                                           ///< run_id(config)
  std::vector<std::pair<std::string, std::string>> values;  ///< the swept values of this point, as written
  /// Cores the run occupies on one machine: world_size x train.threads.
  int64_t cores() const { return config.dist.world_size * config.train.threads; }
};

/// What expanding a grid gave.
struct Expansion {
  std::vector<GridPoint> points;      ///< in expansion order, duplicates removed
  size_t excluded = 0;                ///< points dropped by `exclude:`
  size_t mismatched = 0;              ///< points dropped by constraints.on_mismatch: skip
  size_t duplicates = 0;              ///< points equal to an earlier one
  std::vector<std::string> warnings;  ///< "file:line:col: warning: ..." once each
};

/// Parses and validates `text` (read from `source`); throws ConfigError naming the
/// file, line, column and key, or the line where a second YAML document starts.
/// `trainer`, when given, is the training program instead of launch.trainer (which is
/// relative to the directory of `source`); the grid's model keys are checked against the
/// kinds that program offers (trainer_models.h). spec.launch.trainer holds the program.
/// `describe` asks a program for its kinds (load_trainer_models; the fuzz target passes one
/// that runs nothing). `adjust`, when given, changes the parsed grid before its name, keys
/// and values are checked (the command line's overrides, grid_overrides.h), so what it puts
/// in is refused as a bad grid value is, under the `where` it gives.
using DescribeModels = std::vector<std::string> (*)(const std::string& trainer, const std::string& what);
using GridAdjust = std::function<void(SweepSpec&)>;
SweepSpec parse_grid(const std::string& text, const std::string& source, const std::string& trainer = "",
                     DescribeModels describe = load_trainer_models, const GridAdjust& adjust = {});

/// Whether `name` may name a sweep (and so its default directory sweep-out/<name>).
bool valid_sweep_name(const std::string& name);

/// The text of grid file `path`. Throws ConfigError for a missing file, a directory or a
/// special file (a FIFO is refused without waiting for a writer).
std::string read_grid_file(const std::string& path);

/// Reads and parses a grid file (`trainer` and `adjust` as for parse_grid); `*text`, when
/// given, gets the file's text.
SweepSpec load_grid(const std::string& path, const std::string& trainer = "", const GridAdjust& adjust = {},
                    std::string* text = nullptr);

/// All points: the product of the grid axes, zip groups and seeds (file order, last
/// dimension fastest, seeds last), minus excluded points, then the included points; each
/// resolved, checked against the constraints and validated. Throws ConfigError naming
/// the line of the offending key and the point's values.
Expansion expand_grid(const SweepSpec& spec);

/// expand_grid, handing each point to `sink` as it is formed (in the same order, with the
/// same checks) instead of keeping it: the returned Expansion has the counts and warnings
/// and no points, so a caller that keeps a few bytes a point (`sweep plan`) holds a
/// million-point grid in a fraction of the memory. A halving search still forms every
/// point first: its checks look at all of them.
Expansion expand_grid_each(const SweepSpec& spec, const std::function<void(GridPoint&&)>& sink);

/// expand_grid(spec).points.
std::vector<GridPoint> expand(const SweepSpec& spec);

}  // namespace sweep
