// Command-line overrides of a grid, in Hydra's spelling where it fits:
//   sweep run GRID train.steps=50                  a base value
//   sweep run GRID train.lr=1e-3,3e-3              an axis (also choice(1e-3,3e-3))
//   sweep run GRID train.warmup=range(0,40,10)     an axis from a generator (linspace, logspace)
// They are applied to the parsed grid before its keys and values are checked, so a bad
// one is refused exactly as a bad grid value is, naming the override. docs/grid.md,
// "Command-line overrides".
#pragma once

#include <string>
#include <vector>

#include "grid.h"        // SweepSpec, load_grid
#include "run_config.h"  // ConfigValue

namespace sweep {

/// One `key=value` of the command line.
struct GridOverride {
  std::string key;                  ///< dotted run-config key, e.g. "train.lr"
  std::vector<ConfigValue> values;  ///< the base value (one), or the axis's values in order
  bool axis = false;                ///< key=v1,v2, choice(...) or a generator: an axis, not a base value
  std::string text;                 ///< the argument as given
  std::string where;                ///< "override 'train.lr=1e-3,3e-3'": what messages name
};

/// What the command line changes of a grid.
struct GridOverrides {
  std::string name;                ///< --name: the sweep's name instead of the grid's ("" = the grid's)
  std::vector<GridOverride> keys;  ///< in command-line order
  bool empty() const { return name.empty() && keys.empty(); }
};

/// Parses `args`, each one `key=value` as argv holds it (nothing passes through a shell);
/// `name` is --name. Throws ConfigError naming the argument for a malformed one (`key=`,
/// `=v`, `range(1,x)`, an unbalanced quote, a list or mapping as a value) and for a key
/// given twice. Whether a key exists and a value suits it is checked by parse_grid.
/// A relative data.path or data.eval_path is relative to the current directory, as any
/// path on a command line is, and is made absolute here.
GridOverrides parse_overrides(const std::vector<std::string>& args, const std::string& name = "");

/// load_grid with `o` applied (apply_overrides) and spec.resolved set (resolved_grid): the
/// grid `sweep run` and `sweep plan` run.
SweepSpec load_overridden_grid(const std::string& path, const std::string& trainer, const GridOverrides& o);

/// Applies `o` to a parsed grid before its values are checked (parse_grid's adjust): --name
/// (refused unless a valid sweep name) replaces the grid's name; a base value replaces the
/// base's; an axis replaces the `grid:` axis of its key where it stands, or is added after
/// the grid's axes. Throws ConfigError naming the override and
/// the grid's line for one that conflicts with how the grid sweeps its key: a base value
/// for a `grid:` axis (the axis would win), any value for a key a `zip:` group, `seeds:`,
/// `search.space` or `constraints.derive` sets, and an axis where a search draws every point.
void apply_overrides(SweepSpec& spec, const GridOverrides& o);

/// The grid file `text` (from `spec.source`) with `o` applied, as YAML that `sweep run` and
/// `sweep plan` read as the same points, with a comment saying where it came from. Relative
/// paths in it (data files, a program and its files, launch.trainer and launch.hostfile) are
/// made absolute, so it means the same wherever it lies: `sweep run` writes it to the sweep
/// directory as grid.yaml. Called on a grid parse_grid accepted.
std::string resolved_grid(const std::string& text, const SweepSpec& spec, const GridOverrides& o);

}  // namespace sweep
