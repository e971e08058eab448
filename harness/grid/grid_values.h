// The values of one grid axis: a YAML list of scalars, or a generator
//   {range: [start, stop, step]}     start, start+step, ... < stop (step defaults to 1)
//   {linspace: [start, stop, count]} count evenly spaced values, both ends included
//   {logspace: [start, stop, count]} count values evenly spaced in log10, both ends included
// Generated numbers are spelled with 12 significant digits ("0.001", not
// "0.0010000000000000002"), integral ones without a decimal point.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "run_config.h"  // ConfigValue

namespace sweep {

/// Most values one generator may produce.
inline constexpr size_t kMaxAxisValues = 1000000;

/// Values of `node`; `context` is the key for messages ("grid.train.lr"). Throws
/// ConfigError with file:line:col for an empty list, a nested value or a bad generator.
std::vector<ConfigValue> axis_values(const YAML::Node& node, const std::string& source, const std::string& context);

/// The values of generator `gen` ("range", "linspace" or "logspace") over `args` as
/// written ("0", "40", "10"), each with `where`; `context` is the key for messages. What
/// axis_values does for `{gen: args}`, for a generator that is not YAML (a command-line
/// override's `range(0,40,10)`).
std::vector<ConfigValue> generated_values(const std::string& gen, const std::vector<std::string>& args,
                                          const std::string& where, const std::string& context);

/// A generated number as text: 12 significant digits, integral values without ".0".
std::string format_generated(double x);

}  // namespace sweep
