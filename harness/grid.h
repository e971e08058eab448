// The grid language: a base run config plus axes whose cartesian product gives the
// points of a sweep. Everything is validated before anything runs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "run_config.h"

namespace sweep {

/// One swept key and its values, in the order written.
struct GridAxis {
  std::string key;                  ///< dotted run-config key, e.g. "train.lr"
  std::vector<ConfigValue> values;  ///< scalars, each with its file:line:col
};

/// A parsed grid file.
struct SweepSpec {
  std::string name;             ///< sweep name; safe as a directory name
  std::string source;           ///< the grid file, for messages
  FlatConfig base;              ///< `base:` flattened to dotted keys
  std::vector<GridAxis> axes;   ///< `grid:` in file order
};

/// One point of the expanded grid.
struct GridPoint {
  RunConfig config;                                          ///< fully resolved
  std::string id;                                            ///< run_id(config)
  std::vector<std::pair<std::string, std::string>> values;   ///< the axis values of this point
};

/// Parses and validates `text` (read from `source`); throws ConfigError naming the
/// file, line and key.
SweepSpec parse_grid(const std::string& text, const std::string& source);

/// Reads and parses a grid file.
SweepSpec load_grid(const std::string& path);

/// Cartesian product of the axes (last axis varies fastest), each point resolved and
/// validated. Points that resolve to the same run config appear once.
std::vector<GridPoint> expand(const SweepSpec& spec);

}  // namespace sweep
