#include "grid.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

namespace sweep {
namespace {

std::string where(const std::string& source, const YAML::Node& node) {
  auto m = node.Mark();
  return source + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

const std::vector<std::string> kTopKeys = {"name", "base", "grid"};
const std::vector<std::string> kSections = {"model", "data", "train", "dist", "fault"};

bool safe_name(const std::string& s) {
  if (s.empty() || s.size() > 128 || s[0] == '.' || s[0] == '-') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

}  // namespace

SweepSpec parse_grid(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                      ": invalid YAML: " + e.msg);
  }
  if (!root.IsMap()) throw ConfigError(source + ": expected a mapping with keys name, base, grid");
  SweepSpec spec;
  spec.source = source;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    if (std::find(kTopKeys.begin(), kTopKeys.end(), key) == kTopKeys.end()) {
      std::string msg = where(source, kv.first) + ": unknown top-level key '" + key + "'";
      std::string near = closest_key(key, kTopKeys);
      throw ConfigError(msg + (near.empty() ? "" : " (did you mean '" + near + "'?)") + "; expected name, base, grid");
    }
  }
  const YAML::Node name = root["name"];
  if (!name || !name.IsScalar()) throw ConfigError(source + ": key 'name': required, a sweep name such as 'quickstart'");
  spec.name = name.Scalar();
  if (!safe_name(spec.name))
    throw ConfigError(where(source, name) + ": key 'name': expected letters, digits, '-', '_' or '.' (not leading), got '" +
                      spec.name + "'");

  if (const YAML::Node base = root["base"]) {
    if (!base.IsMap()) throw ConfigError(where(source, base) + ": key 'base': expected a mapping of sections");
    for (const auto& kv : base) {
      const std::string sec = kv.first.Scalar();
      if (std::find(kSections.begin(), kSections.end(), sec) == kSections.end()) {
        std::string near = closest_key(sec, kSections);
        throw ConfigError(where(source, kv.first) + ": unknown section 'base." + sec + "'" +
                          (near.empty() ? "" : " (did you mean 'base." + near + "'?)"));
      }
    }
    spec.base = flatten_yaml_node(base, source);
  }

  if (const YAML::Node grid = root["grid"]) {
    if (!grid.IsMap()) throw ConfigError(where(source, grid) + ": key 'grid': expected a mapping of dotted keys to lists");
    for (const auto& kv : grid) {
      GridAxis axis;
      axis.key = kv.first.Scalar();
      const YAML::Node& list = kv.second;
      if (!list.IsSequence() || list.size() == 0)
        throw ConfigError(where(source, list) + ": key 'grid." + axis.key + "': expected a non-empty list of values");
      for (const auto& item : list) {
        if (!item.IsScalar())
          throw ConfigError(where(source, item) + ": key 'grid." + axis.key + "': expected a scalar value, not a map or list");
        axis.values.push_back({item.Scalar(), where(source, item), true});
      }
      for (const auto& other : spec.axes)
        if (other.key == axis.key) throw ConfigError(where(source, kv.first) + ": key 'grid." + axis.key + "' is given twice");
      spec.axes.push_back(std::move(axis));
    }
  }
  // Validate base alone and every axis value once, so errors name the exact spot even
  // before the (possibly large) product is formed. Constraints between keys (warmup <=
  // steps, heads divide d_model) wait for expand(): an axis may fix what base alone breaks.
  RunConfig base = apply_run_values(RunConfig{}, spec.base);
  for (const auto& axis : spec.axes)
    for (const auto& v : axis.values) {
      FlatConfig one{{axis.key, v}};
      (void)apply_run_values(base, one);
    }
  return spec;
}

SweepSpec load_grid(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open the grid file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_grid(ss.str(), path);
}

std::vector<GridPoint> expand(const SweepSpec& spec) {
  std::vector<GridPoint> points;
  std::set<std::string> seen;
  std::vector<size_t> idx(spec.axes.size(), 0);
  while (true) {
    // Base and axis values in one map, so a constraint error names whichever line set the key.
    FlatConfig values = spec.base;
    GridPoint p;
    for (size_t a = 0; a < spec.axes.size(); ++a) {
      const ConfigValue& v = spec.axes[a].values[idx[a]];
      values[spec.axes[a].key] = v;
      p.values.emplace_back(spec.axes[a].key, v.text);
    }
    p.config = apply_run_config(RunConfig{}, values);
    p.id = run_id(p.config);
    if (seen.insert(p.id).second) points.push_back(std::move(p));
    // Odometer increment, last axis fastest.
    size_t a = spec.axes.size();
    while (a > 0) {
      --a;
      if (++idx[a] < spec.axes[a].values.size()) break;
      idx[a] = 0;
      if (a == 0) return points;
    }
    if (spec.axes.empty()) return points;
  }
}

}  // namespace sweep
