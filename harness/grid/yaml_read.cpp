#include "yaml_read.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "config_error.h"  // ConfigError
#include "text.h"          // printable, join, did_you_mean, source_location

namespace sweep {

std::string next_to_grid(const std::string& grid, const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  return (grid.find('/') == std::string::npos ? "." : grid.substr(0, grid.rfind('/'))) + "/" + path;
}

std::string yaml_where(const std::string& source, const YAML::Node& node) {
  return source_location(source, node.Mark().line, node.Mark().column);
}

YamlMap::YamlMap(const YAML::Node& node, const std::string& source, const std::string& context,
                 const std::vector<std::string>& known)
    : node_(node), source_(source), context_(context) {
  if (!node.IsMap())
    throw ConfigError(yaml_where(source, node) + ": key '" + context + "': expected a mapping with keys " +
                      join(known));
  std::vector<std::string> seen;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      throw ConfigError(yaml_where(source, kv.first) + ": key '" + context + "." + printable(key) + "' is given twice");
    seen.push_back(key);
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    throw ConfigError(yaml_where(source, kv.first) + ": unknown key '" + context + "." + printable(key) + "'" +
                      did_you_mean(key, known, context + ".") + "; expected one of " + join(known));
  }
}

std::string YamlMap::where(const std::string& key) const {
  YAML::Node n = node_[key];
  return n ? yaml_where(source_, n) : source_;
}

std::string YamlMap::at(const std::string& key) const { return where(key) + ": key '" + context_ + "." + key + "': "; }

std::string YamlMap::text(const std::string& key, const std::string& def) const {
  YAML::Node n = node_[key];
  if (!n || n.IsNull()) return def;
  if (!n.IsScalar()) throw ConfigError(at(key) + "expected a single value, not a map or list");
  return n.Scalar();
}

long long YamlMap::integer(const std::string& key, long long def, long long min, long long max) const {
  if (!has(key)) return def;
  std::string s = text(key, "");
  long long x = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || x < min || x > max)
    throw ConfigError(at(key) + "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                      "], got '" + printable(s) + "'");
  return x;
}

double YamlMap::number(const std::string& key, double def, double min, double max) const {
  if (!has(key)) return def;
  std::string s = text(key, "");
  double x = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || !std::isfinite(x) || x < min || x > max) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "expected a number in [%g, %g], got '", min, max);
    throw ConfigError(at(key) + buf + printable(s) + "'");
  }
  return x;
}

bool YamlMap::boolean(const std::string& key, bool def) const {
  if (!has(key)) return def;
  std::string s = text(key, "");
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  throw ConfigError(at(key) + "expected true or false, got '" + printable(s) + "'");
}

std::vector<std::string> YamlMap::texts(const std::string& key) const {
  YAML::Node n = node_[key];
  std::vector<std::string> out;
  if (!n || n.IsNull()) return out;
  if (n.IsScalar()) return {n.Scalar()};
  if (!n.IsSequence()) throw ConfigError(at(key) + "expected a list of values");
  for (const auto& item : n) {
    if (!item.IsScalar())
      throw ConfigError(yaml_where(source_, item) + ": key '" + context_ + "." + key +
                        "': expected a list of plain values");
    out.push_back(item.Scalar());
  }
  return out;
}

std::string YamlMap::choice(const std::string& key, const std::string& def,
                            const std::vector<std::string>& choices) const {
  std::string s = text(key, def);
  if (std::find(choices.begin(), choices.end(), s) == choices.end()) {
    throw ConfigError(at(key) + "expected one of " + join(choices) + ", got '" + printable(s) + "'" +
                      did_you_mean(s, choices));
  }
  return s;
}

}  // namespace sweep
