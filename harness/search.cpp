// Parsing `search:` and drawing its points.
#include "search.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "grid_values.h"  // axis_values: choice lists and generators
#include "yaml_read.h"    // YamlMap, yaml_where

namespace sweep {
namespace {

const std::vector<std::string> kKinds = {"choice", "uniform", "loguniform", "int"};
const char* kDimForms = "{choice: [a, b]}, {uniform: [lo, hi]}, {loguniform: [lo, hi]} or {int: [lo, hi], step: s}";

/// SplitMix64's output function: a bijection of 64-bit words whose outputs pass BigCrush.
uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// FNV-1a of the key: which stream a key draws from.
uint64_t key_hash(const std::string& key) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

/// A uniform number in [0, 1) with 53 random bits, from (seed, i, key) alone.
double unit(uint64_t seed, int64_t i, const std::string& key) {
  const uint64_t x = mix64(mix64(mix64(seed) ^ key_hash(key)) ^ uint64_t(i));
  return double(x >> 11) * 0x1.0p-53;
}

/// A finite number from a bound of `dim`.
double bound(const YAML::Node& n, const std::string& source, const std::string& context, bool integral) {
  const std::string at = yaml_where(source, n) + ": key '" + context + "': ";
  if (!n.IsScalar()) throw ConfigError(at + "expected a number, got a " + (n.IsMap() ? "mapping" : "list"));
  const std::string& s = n.Scalar();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v))
    throw ConfigError(at + "expected a finite number, got '" + printable(s) + "'");
  if (integral && (v != std::floor(v) || std::fabs(v) > 9e15))
    throw ConfigError(at + "expected an integer, got '" + printable(s) + "'");
  return v;
}

SearchDim parse_dim(const std::string& key, const YAML::Node& key_node, const YAML::Node& node,
                    const std::string& source) {
  SearchDim d;
  d.key = key;
  d.where = yaml_where(source, key_node);
  const std::string context = "search.space." + printable(key);
  if (!node.IsMap() || node.size() == 0)
    throw ConfigError(yaml_where(source, node) + ": key '" + context + "': expected one of " + kDimForms);
  for (const auto& kv : node) {
    const std::string k = kv.first.Scalar();
    const bool known = k == "step" || std::find(kKinds.begin(), kKinds.end(), k) != kKinds.end();
    if (!known)
      throw ConfigError(yaml_where(source, kv.first) + ": key '" + context + "." + printable(k) + "': unknown" +
                        did_you_mean(k, {"choice", "uniform", "loguniform", "int", "step"}) + "; expected one of " +
                        kDimForms);
    if (k == "step") continue;
    if (!d.kind.empty())
      throw ConfigError(yaml_where(source, kv.first) + ": key '" + context + "': gives both " + d.kind + " and " + k +
                        "; expected one of " + kDimForms);
    d.kind = k;
  }
  if (d.kind.empty())
    throw ConfigError(yaml_where(source, node) + ": key '" + context + "': expected one of " + kDimForms);
  const YAML::Node spec = node[d.kind];
  const std::string ctx = context + "." + d.kind;
  if (const YAML::Node step = node["step"]; step && d.kind != "int")
    throw ConfigError(yaml_where(source, step) + ": key '" + context + ".step': only an int dimension has a step");
  if (d.kind == "choice") {
    d.choices = axis_values(spec, source, ctx);  // a list or a generator; never empty
    return d;
  }
  if (!spec.IsSequence() || spec.size() != 2)
    throw ConfigError(yaml_where(source, spec) + ": key '" + ctx + "': expected two bounds [lo, hi]");
  const bool integral = d.kind == "int";
  d.lo = bound(spec[0], source, ctx, integral);
  d.hi = bound(spec[1], source, ctx, integral);
  if (!(d.lo < d.hi))
    throw ConfigError(yaml_where(source, spec) + ": key '" + ctx + "': expected lo < hi, got [" + spec[0].Scalar() +
                      ", " + spec[1].Scalar() + "] (a fixed value belongs in base)");
  if (d.kind == "loguniform" && !(d.lo > 0))
    throw ConfigError(yaml_where(source, spec[0]) + ": key '" + ctx +
                      "': the bounds of a loguniform must be > 0, got " + spec[0].Scalar());
  if (const YAML::Node step = node["step"]) {
    const double s = bound(step, source, context + ".step", true);
    if (s < 1)
      throw ConfigError(yaml_where(source, step) + ": key '" + context + ".step': expected >= 1, got " + step.Scalar());
    d.step = int64_t(s);
  }
  return d;
}

/// x with 6 significant digits, integral values without a decimal point.
std::string six_digits(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

}  // namespace

SearchSpec parse_search(const YAML::Node& node, const std::string& source) {
  YamlMap m(node, source, "search", {"kind", "samples", "seed", "space", "parallel", "startup", "metric", "mode"});
  SearchSpec s;
  s.where = yaml_where(source, node);
  s.kind = m.choice("kind", "grid", {"grid", "random", "tpe"});
  if (s.kind == "grid") {
    for (const char* k : {"samples", "seed", "space", "parallel", "startup", "metric", "mode"})
      if (m.has(k))
        throw ConfigError(m.at(k) + "only a search that draws its points has one (set search.kind: random); a grid " +
                          "lists its values under grid:");
    return s;
  }
  if (s.kind == "random")
    for (const char* k : {"parallel", "startup", "metric", "mode"})
      if (m.has(k))
        throw ConfigError(m.at(k) + "only a search that learns from its runs has one (search.kind: tpe); random " +
                          "draws every point before anything runs");
  if (!m.has("samples")) throw ConfigError(s.where + ": key 'search.samples': required (how many points to draw)");
  s.samples = m.integer("samples", 0, 1, kMaxSearchSamples);
  s.seed = uint64_t(m.integer("seed", 0, 0, (1LL << 62)));
  if (s.kind == "tpe") {
    s.parallel = m.integer("parallel", 1, 1, s.samples);
    s.startup = m.integer("startup", std::min<int64_t>(10, s.samples), 1, s.samples);
    s.metric = m.choice("metric", "objective", search_metrics());
    s.mode = m.choice("mode", "min", {"min", "max"});
  }
  const YAML::Node space = m.node("space");
  if (!space) throw ConfigError(s.where + ": key 'search.space': required (the keys to draw and how)");
  if (!space.IsMap() || space.size() == 0)
    throw ConfigError(yaml_where(source, space) + ": key 'search.space': expected a mapping of dotted keys to " +
                      kDimForms + ", got " + (space.IsMap() ? "an empty one" : "no mapping"));
  for (const auto& kv : space) {
    const std::string key = kv.first.Scalar();
    for (const auto& d : s.space)
      if (d.key == key)
        throw ConfigError(yaml_where(source, kv.first) + ": key 'search.space." + printable(key) + "' is given twice");
    s.space.push_back(parse_dim(key, kv.first, kv.second, source));
  }
  return s;
}

double draw_unit(uint64_t seed, int64_t i, const std::string& key) { return unit(seed, i, key); }

ConfigValue draw(const SearchDim& d, uint64_t seed, int64_t i) {
  const double u = unit(seed, i, d.key);
  ConfigValue v;
  v.where = d.where;
  if (d.kind == "choice") {
    const size_t n = d.choices.size();
    v = d.choices[std::min(n - 1, size_t(u * double(n)))];
  } else if (d.kind == "int") {
    const int64_t count = (int64_t(d.hi) - int64_t(d.lo)) / d.step + 1;
    const int64_t k = std::min(count - 1, int64_t(u * double(count)));
    v.text = std::to_string(int64_t(d.lo) + k * d.step);
  } else if (d.kind == "uniform") {
    v.text = six_digits(d.lo + u * (d.hi - d.lo));
  } else {  // loguniform
    v.text = six_digits(std::exp(std::log(d.lo) + u * (std::log(d.hi) - std::log(d.lo))));
  }
  return v;
}

}  // namespace sweep
