// Parsing `search:` and drawing its points.
#include "search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "grid_values.h"    // axis_values: choice lists and generators
#include "search_metric.h"  // kProgramMetricPrefix
#include "text.h"           // join
#include "yaml_read.h"      // YamlMap, yaml_where

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

/// A metric a search names (in search.metric or a constraint) at `at` ("file:line:col:
/// key '...': "): one of search_metrics(), memory_per_rank_mib or a program's
/// `metrics.NAME`; a timing metric only where the search does not decide on it (kind
/// random: it draws every point first, and only the report ranks by it).
std::string checked_metric(const std::string& v, const std::string& at, bool decides) {
  if (decides)
    for (const auto& t : timing_metrics())
      if (v == t)
        throw ConfigError(at + "'" + v + "' is measured in time: it differs between two runs of the " +
                          "same bits, so a search deciding on it would not replay (another directory would draw " +
                          "other trials). Rank by a loss (" + join(search_metrics(), ", ") +
                          "); the report compares throughput after the search");
  const std::string prefix = kProgramMetricPrefix;
  if (v.rfind(prefix, 0) == 0 && v.size() > prefix.size()) return v;
  std::vector<std::string> known = search_metrics();
  known.push_back("memory_per_rank_mib");
  if (!decides) known.push_back("tokens_per_s");
  if (std::find(known.begin(), known.end(), v) != known.end()) return v;
  throw ConfigError(at + "expected one of " + join(known) + " or metrics.NAME (a program's own metric), got '" +
                    printable(v) + "'" + did_you_mean(v, known));
}

/// search.metric and search.mode: a name and a mode, or lists of them (several objectives),
/// and search.constraints. `decides`: the search decides on them (tpe, halving).
void parse_objectives(const YamlMap& m, const std::string& source, bool decides, const std::string& fallback,
                      SearchSpec& s) {
  s.metric_where = m.has("metric") ? yaml_where(source, m.node("metric")) : s.where;
  const YAML::Node metric = m.node("metric"), mode = m.node("mode");
  s.metrics = {fallback};
  if (metric && metric.IsSequence()) {
    s.metrics.clear();
    for (const auto& n : metric) {
      const std::string at = yaml_where(source, n) + ": key 'search.metric': ";
      if (!n.IsScalar()) throw ConfigError(at + "expected a list of metric names");
      for (const auto& other : s.metrics)
        if (other == n.Scalar()) throw ConfigError(at + "'" + printable(other) + "' is named twice");
      s.metrics.push_back(checked_metric(n.Scalar(), at, decides));
    }
    if (s.metrics.empty()) throw ConfigError(m.at("metric") + "expected a metric name or a list of them, got []");
  } else if (metric) {
    s.metrics = {checked_metric(metric.IsScalar() ? metric.Scalar() : "", m.at("metric"), decides)};
  }
  // A mode per metric, in order; a single mode is every metric's.
  s.modes.assign(s.metrics.size(), "min");
  if (mode && mode.IsSequence()) {
    if (mode.size() != s.metrics.size())
      throw ConfigError(m.at("mode") + std::to_string(mode.size()) + (mode.size() == 1 ? " mode for " : " modes for ") +
                        std::to_string(s.metrics.size()) + (s.metrics.size() == 1 ? " metric" : " metrics") +
                        " (search.metric at " + s.metric_where + "); expected one mode per metric, in the same order");
    for (size_t i = 0; i < s.metrics.size(); ++i) {
      const std::string v = mode[i].IsScalar() ? mode[i].Scalar() : "";
      if (v != "min" && v != "max")
        throw ConfigError(yaml_where(source, mode[i]) + ": key 'search.mode': expected one of min, max, got '" +
                          printable(v) + "'" + did_you_mean(v, {"min", "max"}));
      s.modes[i] = v;
    }
  } else if (mode) {
    s.modes.assign(s.metrics.size(), m.choice("mode", "min", {"min", "max"}));
  }
  s.metric = s.metrics.front(), s.mode = s.modes.front();
  if (const YAML::Node c = m.node("constraints")) {
    if (!c.IsSequence() || c.size() == 0)
      throw ConfigError(m.at("constraints") + "expected a list of constraints, e.g. [\"memory_per_rank_mib <= 512\"]");
    for (const auto& n : c) {
      const std::string at = yaml_where(source, n) + ": key 'search.constraints': ";
      if (!n.IsScalar())
        throw ConfigError(at + "expected a constraint as a string, e.g. \"memory_per_rank_mib <= 512\"");
      MetricConstraint mc;
      if (const std::string why = parse_metric_constraint(n.Scalar(), &mc); !why.empty())
        throw ConfigError(at + "'" + printable(n.Scalar()) + "': " + why);
      checked_metric(mc.metric, at, decides);
      s.constraints.push_back(mc);
    }
  }
}

/// The keys of a pbt search (kind pbt), but its space.
void parse_pbt(const YamlMap& m, const std::string& source, SearchSpec& s) {
  for (const char* k : {"samples", "parallel", "startup"})
    if (m.has(k))
      throw ConfigError(m.at(k) + "a pbt search trains its population (search.population) together, " +
                        "launch.parallel at a time; it has no " + k);
  for (const char* k : {"metric", "mode"})
    if (m.has(k) && m.node(k).IsSequence() && m.node(k).size() != 1)
      throw ConfigError(m.at(k) + "a pbt search ranks its members by one metric; several objectives (a Pareto " +
                        "front) are for search.kind random or tpe");
  if (m.has("constraints"))
    throw ConfigError(m.at("constraints") + "a pbt search ranks by one metric and has no constraints; they are " +
                      "for search.kind random or tpe");
  for (const char* k : {"population", "interval", "space"})
    if (!m.has(k))
      throw ConfigError(s.where + ": key 'search." + k + "': required (" +
                        (std::string(k) == "population" ? "how many members train together"
                         : std::string(k) == "interval" ? "the steps between two decisions"
                                                        : "the keys the members are drawn from and perturb") +
                        ")");
  s.population = m.integer("population", 0, 2, 10000);
  s.interval = m.integer("interval", 0, 1, 1LL << 40);
  s.interval_where = yaml_where(source, m.node("interval"));
  s.generations = m.integer("generations", 0, 1, 1LL << 40);
  s.generations_where = m.has("generations") ? yaml_where(source, m.node("generations")) : s.where;
  s.quantile = m.number("quantile", 0.25, -1e300, 1e300);
  if (!(s.quantile > 0 && s.quantile <= 0.5))
    throw ConfigError(m.at("quantile") + "expected a fraction in (0, 0.5], got " + m.node("quantile").Scalar() +
                      " (the bottom quantile forks from the top one, so at most half can)");
  s.resample = m.number("resample", 0.25, 0, 1);
  if (const YAML::Node p = m.node("perturb")) {
    if (!p.IsSequence() || p.size() != 2)
      throw ConfigError(m.at("perturb") + "expected two factors [down, up], e.g. [0.8, 1.2]");
    s.perturb_down = bound(p[0], source, "search.perturb", false);
    s.perturb_up = bound(p[1], source, "search.perturb", false);
    if (!(s.perturb_down > 0 && s.perturb_down < 1 && s.perturb_up > 1))
      throw ConfigError(m.at("perturb") + "expected 0 < down < 1 < up, got [" + p[0].Scalar() + ", " + p[1].Scalar() +
                        "]");
  }
  parse_objectives(m, source, /*decides=*/true, "train_loss_end", s);
  s.seed = uint64_t(m.integer("seed", 0, 0, (1LL << 62)));
}

}  // namespace

SearchSpec parse_search(const YAML::Node& node, const std::string& source) {
  YamlMap m(node, source, "search",
            {"kind", "samples", "seed", "space", "parallel", "startup", "metric", "mode", "constraints", "min_steps",
             "eta", "brackets", "population", "interval", "quantile", "perturb", "resample", "generations"});
  SearchSpec s;
  s.where = yaml_where(source, node);
  s.kind = m.choice("kind", "grid", {"grid", "random", "tpe", "halving", "asha", "pbt"});
  const bool halving = s.kind == "halving" || s.kind == "asha";
  if (!halving)
    for (const char* k : {"min_steps", "eta", "brackets"})
      if (m.has(k)) throw ConfigError(m.at(k) + "only a halving search has one (search.kind: halving or asha)");
  if (s.kind == "asha" && m.has("brackets"))
    throw ConfigError(m.at("brackets") + "an asha search has one bracket: it promotes as results come, so there " +
                      "is nothing to hedge with brackets (Hyperband's brackets are for search.kind: halving)");
  if (s.kind != "pbt")
    for (const char* k : {"population", "interval", "quantile", "perturb", "resample", "generations"})
      if (m.has(k)) throw ConfigError(m.at(k) + "only a population-based search has one (search.kind: pbt)");
  if (s.kind == "pbt") parse_pbt(m, source, s);
  if (s.kind == "grid") {
    for (const char* k : {"samples", "seed", "space", "parallel", "startup", "metric", "mode", "constraints"})
      if (m.has(k))
        throw ConfigError(m.at(k) + "only a search that draws its points has one (set search.kind: random); a grid " +
                          "lists its values under grid:");
    return s;
  }
  if (s.kind == "random") {
    // Several metrics or constraints: a Pareto front the report draws, not decisions.
    const bool pareto = (m.has("metric") && m.node("metric").IsSequence()) || m.has("constraints");
    for (const char* k : {"parallel", "startup", "metric", "mode"})
      if (m.has(k) && !(pareto && (std::string(k) == "metric" || std::string(k) == "mode")))
        throw ConfigError(m.at(k) + "only a search that learns from its runs has one (search.kind: tpe); random " +
                          "draws every point before anything runs (a list of metrics, or constraints, names the " +
                          "Pareto front its report draws)");
    if (pareto) parse_objectives(m, source, /*decides=*/false, "objective", s);
  }
  if (halving) {
    for (const char* k : {"parallel", "startup"})
      if (m.has(k))
        throw ConfigError(m.at(k) +
                          (s.kind == "asha"
                               ? "an asha search starts a trial whenever a worker is free (launch.parallel "
                                 "says how many at a time); it has no "
                               : "a halving search runs every trial of a rung at once (launch.parallel "
                                 "says how many at a time); it has no ") +
                          k);
    if (!m.has("min_steps"))
      throw ConfigError(s.where + ": key 'search.min_steps': required (the steps of the first rung)");
    s.min_steps = m.integer("min_steps", 0, 1, 1LL << 40);
    s.eta = m.integer("eta", 3, 2, 1000);
    s.brackets = m.integer("brackets", 1, 1, 64);
    s.min_steps_where = yaml_where(source, m.node("min_steps"));
    s.brackets_where = m.has("brackets") ? yaml_where(source, m.node("brackets")) : s.where;
    for (const char* k : {"metric", "mode"})
      if (m.has(k) && m.node(k).IsSequence() && m.node(k).size() != 1)
        throw ConfigError(m.at(k) + "a halving search promotes by one metric; several objectives (a Pareto front) " +
                          "are for search.kind random or tpe");
    if (m.has("constraints"))
      throw ConfigError(m.at("constraints") + "a halving search promotes by one metric and has no constraints; " +
                        "they are for search.kind random or tpe");
    parse_objectives(m, source, /*decides=*/true, "train_loss_end", s);
    s.seed = uint64_t(m.integer("seed", 0, 0, (1LL << 62)));
    // Without a space the grid's own points are the candidates.
    if (!m.has("space")) {
      if (m.has("samples"))
        throw ConfigError(m.at("samples") + "a halving search without search.space runs the grid's points; samples " +
                          "is the number of points to draw from a space");
      return s;
    }
  }
  if (s.kind == "pbt") {
    s.samples = s.population;  // the members are the space's first draws
  } else {
    if (!m.has("samples")) throw ConfigError(s.where + ": key 'search.samples': required (how many points to draw)");
    s.samples = m.integer("samples", 0, 1, kMaxSearchSamples);
  }
  s.seed = uint64_t(m.integer("seed", 0, 0, (1LL << 62)));
  if (s.kind == "tpe") {
    s.parallel = m.integer("parallel", 1, 1, s.samples);
    s.startup = m.integer("startup", std::min<int64_t>(10, s.samples), 1, s.samples);
    parse_objectives(m, source, /*decides=*/true, "objective", s);
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

std::string search_objective_words(const SearchSpec& s) {
  if (!s.pareto()) return " metric=" + s.metric + " mode=" + s.mode;
  std::string w = " metric=" + join(s.metrics, ",") + " mode=" + join(s.modes, ",");
  if (!s.constraints.empty()) {
    w += " constraints=";
    for (size_t i = 0; i < s.constraints.size(); ++i) w += (i ? "," : "") + s.constraints[i].text();
  }
  return w;
}

std::vector<HalvingBracket> halving_schedule(const SearchSpec& s, int64_t budget, int64_t trials) {
  if (s.min_steps > budget)
    throw ConfigError(s.min_steps_where + ": key 'search.min_steps': " + std::to_string(s.min_steps) +
                      " is above train.steps " + std::to_string(budget) +
                      " (the budget of a full run); expected <= " + std::to_string(budget));
  int64_t s_max = 0;
  for (int64_t r = s.min_steps; r <= budget / s.eta;) r *= s.eta, ++s_max;
  if (s.brackets > s_max + 1)
    throw ConfigError(s.brackets_where + ": key 'search.brackets': " + std::to_string(s.brackets) +
                      " brackets, but min_steps " + std::to_string(s.min_steps) + " x eta " + std::to_string(s.eta) +
                      "^s fits train.steps " + std::to_string(budget) + " only for s <= " + std::to_string(s_max) +
                      "; expected <= " + std::to_string(s_max + 1));
  if (trials < s.brackets)
    throw ConfigError(s.brackets_where + ": key 'search.brackets': " + std::to_string(s.brackets) + " brackets need " +
                      "a trial each, and the search has " + std::to_string(trials));
  const auto power = [&](int64_t e) {
    int64_t p = 1;
    for (int64_t i = 0; i < e; ++i) p *= s.eta;
    return p;
  };
  // Hyperband's share of each bracket, then largest remainders (ties: the earlier bracket).
  std::vector<HalvingBracket> out(size_t(s.brackets));
  std::vector<double> weight(out.size());
  double total = 0;
  for (size_t b = 0; b < out.size(); ++b) {
    out[b].s = s_max - int64_t(b);
    weight[b] = std::ceil(double(s_max + 1) * double(power(out[b].s)) / double(out[b].s + 1));
    total += weight[b];
  }
  int64_t given = 0;
  std::vector<std::pair<double, size_t>> rest;
  for (size_t b = 0; b < out.size(); ++b) {
    const double share = double(trials - s.brackets) * weight[b] / total;
    out[b].count = 1 + int64_t(std::floor(share));
    given += out[b].count;
    rest.emplace_back(-(share - std::floor(share)), b);
  }
  std::sort(rest.begin(), rest.end());
  for (size_t k = 0; given < trials; ++k, ++given) ++out[rest[k % rest.size()].second].count;
  int64_t first = 0;
  for (HalvingBracket& br : out) {
    br.first = first, first += br.count;
    int64_t n = br.count;
    for (int64_t i = 0; i <= br.s; ++i) {
      br.rungs.push_back({budget / power(br.s - i), n});
      n = std::max<int64_t>(1, n / s.eta);
    }
  }
  return out;
}

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
    v.text = significant(d.lo + u * (d.hi - d.lo), 6);
  } else {  // loguniform
    v.text = significant(std::exp(std::log(d.lo) + u * (std::log(d.hi) - std::log(d.lo))), 6);
  }
  return v;
}

}  // namespace sweep
