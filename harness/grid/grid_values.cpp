#include "grid_values.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>

#include "text.h"       // significant
#include "yaml_read.h"  // yaml_where

namespace sweep {
namespace {

struct Arg {
  double x = 0;
  bool integral = false;
};

Arg parse_arg(const std::optional<std::string>& text, const std::string& at) {
  if (!text) throw ConfigError(at + "expected numbers");
  const std::string& s = *text;
  Arg a;
  long long i = 0;
  auto ri = std::from_chars(s.data(), s.data() + s.size(), i);
  if (!s.empty() && ri.ec == std::errc() && ri.ptr == s.data() + s.size()) {
    a.x = double(i);
    a.integral = true;
    return a;
  }
  auto rd = std::from_chars(s.data(), s.data() + s.size(), a.x);
  if (s.empty() || rd.ec != std::errc() || rd.ptr != s.data() + s.size() || !std::isfinite(a.x))
    throw ConfigError(at + "expected a number, got '" + printable(s) + "'");
  return a;
}

/// The values of generator `gen` over `args` as written; nullopt for an argument that is
/// a map or a list. `where` is where the generator is written, `context` its key.
std::vector<ConfigValue> generate(const std::string& gen, const std::vector<std::optional<std::string>>& args,
                                  const std::string& where, const std::string& context) {
  std::vector<ConfigValue> out;
  const std::string gat = where + ": key '" + context + "." + printable(gen) + "': ";
  if (gen != "range" && gen != "linspace" && gen != "logspace") {
    throw ConfigError(where + ": key '" + context + "': unknown generator '" + printable(gen) + "'" +
                      did_you_mean(gen, {"range", "linspace", "logspace"}) + "; expected range, linspace or logspace");
  }
  size_t want = gen == "range" ? 2 : 3;
  if (args.size() < want || args.size() > 3)
    throw ConfigError(
        gat + (gen == "range" ? "expected [start, stop] or [start, stop, step]" : "expected [start, stop, count]"));
  Arg a = parse_arg(args[0], gat), b = parse_arg(args[1], gat);
  auto push = [&](double x) {
    if (out.size() >= kMaxAxisValues)
      throw ConfigError(gat + "generates more than " + std::to_string(kMaxAxisValues) + " values");
    out.push_back({format_generated(x), where, true});
  };
  if (gen == "range") {
    Arg step = args.size() == 3 ? parse_arg(args[2], gat) : Arg{1, true};
    if (step.x == 0) throw ConfigError(gat + "step must not be 0");
    // Bounded so that neither the casts to long long nor x += s below can overflow (UB).
    const double lim = 4611686018427387904.0;  // 2^62
    if (std::fabs(a.x) > lim || std::fabs(b.x) > lim || std::fabs(step.x) > lim)
      throw ConfigError(gat + "start, stop and step must lie within +-2^62");
    if (a.integral && b.integral && step.integral) {
      long long s = (long long)step.x;
      for (long long x = (long long)a.x; s > 0 ? x < (long long)b.x : x > (long long)b.x; x += s) push(double(x));
    } else {
      // Count first, so accumulated rounding cannot add or drop the last value.
      double n = std::ceil((b.x - a.x) / step.x - 1e-9);
      if (n > double(kMaxAxisValues))
        throw ConfigError(gat + "generates more than " + std::to_string(kMaxAxisValues) + " values");
      for (long long i = 0; i < (long long)std::max(n, 0.0); ++i) push(a.x + double(i) * step.x);
    }
    if (out.empty()) throw ConfigError(gat + "generates no values");
    return out;
  }
  Arg count = parse_arg(args[2], gat);
  if (!count.integral || count.x < 1 || count.x > double(kMaxAxisValues))
    throw ConfigError(gat + "count must be an integer in [1, " + std::to_string(kMaxAxisValues) + "]");
  long long n = (long long)count.x;
  if (gen == "logspace" && (a.x <= 0 || b.x <= 0)) throw ConfigError(gat + "start and stop must be > 0");
  for (long long i = 0; i < n; ++i) {
    double t = n == 1 ? 0.0 : double(i) / double(n - 1);
    bool last = n > 1 && i == n - 1;  // exactly `stop`, whatever the rounding on the way
    if (gen == "linspace")
      push(last ? b.x : a.x + (b.x - a.x) * t);
    else
      push(last ? b.x : std::pow(10.0, std::log10(a.x) + (std::log10(b.x) - std::log10(a.x)) * t));
  }
  return out;
}

}  // namespace

std::string format_generated(double x) {
  if (x == 0) return "0";
  if (std::fabs(x) < 9007199254740992.0 && x == std::floor(x)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(x));
    return buf;
  }
  return significant(x, 12);
}

std::vector<ConfigValue> axis_values(const YAML::Node& node, const std::string& source, const std::string& context) {
  const std::string where = yaml_where(source, node);
  const std::string at = where + ": key '" + context + "': ";
  std::vector<ConfigValue> out;
  if (node.IsSequence()) {
    if (node.size() == 0) throw ConfigError(at + "expected a non-empty list of values");
    for (const auto& item : node) {
      if (!item.IsScalar())
        throw ConfigError(yaml_where(source, item) + ": key '" + context +
                          "': expected a scalar value, not a map or list");
      out.push_back({item.Scalar(), yaml_where(source, item), true});
    }
    return out;
  }
  if (!node.IsMap() || node.size() != 1)
    throw ConfigError(at +
                      "expected a non-empty list of values, or one of {range: [start, stop, step]}, "
                      "{linspace: [start, stop, count]}, {logspace: [start, stop, count]}");
  const std::string gen = node.begin()->first.Scalar();
  const YAML::Node args = node.begin()->second;
  std::vector<std::optional<std::string>> texts;  // nullopt: a map or list where a number goes
  if (args.IsSequence())
    for (const auto& item : args) texts.push_back(item.IsScalar() ? std::optional(item.Scalar()) : std::nullopt);
  else
    texts.resize(4);  // not a list: refused below with the generator's form
  return generate(gen, texts, where, context);
}

std::vector<ConfigValue> generated_values(const std::string& gen, const std::vector<std::string>& args,
                                          const std::string& where, const std::string& context) {
  return generate(gen, std::vector<std::optional<std::string>>(args.begin(), args.end()), where, context);
}

}  // namespace sweep
