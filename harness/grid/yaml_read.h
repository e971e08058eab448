// Reading typed values out of a YAML mapping with messages that name file:line:col and
// the dotted key. Shared by the grid and launch parsers.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace sweep {

/// "file:line:col" of `node` (1-based).
std::string yaml_where(const std::string& source, const YAML::Node& node);

/// `path` as named in grid file `grid`: a relative path is next to the grid file,
/// wherever sweep was started.
std::string next_to_grid(const std::string& grid, const std::string& path);

/// Reads one mapping; `context` is its dotted name ("launch", "launch.slurm").
class YamlMap {
 public:
  /// Throws ConfigError unless `node` is a mapping whose keys are all in `known`.
  YamlMap(const YAML::Node& node, const std::string& source, const std::string& context,
          const std::vector<std::string>& known);

  bool has(const std::string& key) const { return bool(node_[key]); }
  YAML::Node node(const std::string& key) const { return node_[key]; }
  std::string where(const std::string& key) const;
  /// "file:line:col: key 'context.key': " for messages.
  std::string at(const std::string& key) const;

  std::string text(const std::string& key, const std::string& def) const;
  /// Integer in [min, max].
  long long integer(const std::string& key, long long def, long long min, long long max) const;
  /// Finite number in [min, max].
  double number(const std::string& key, double def, double min, double max) const;
  bool boolean(const std::string& key, bool def) const;
  /// A list of scalars (a single scalar is a list of one).
  std::vector<std::string> texts(const std::string& key) const;
  /// Value must be one of `choices`.
  std::string choice(const std::string& key, const std::string& def, const std::vector<std::string>& choices) const;

 private:
  YAML::Node node_;
  std::string source_, context_;
};

}  // namespace sweep
