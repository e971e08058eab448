// libFuzzer target: any bytes as a grid file, through parse_grid and expand. The only
// acceptable failure is a ConfigError; anything else (another exception, a crash, a
// sanitizer report, a hang) is a finding. Built with -DSWEEP_FUZZ=ON and clang; run by
// scripts/check-sanitize-fuzz on the seed corpus in fuzz/corpus/grid/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "grid.h"  // parse_grid, expand

namespace {

/// Grids past this many points are parsed but not expanded, so each input stays fast;
/// the expansion of a point does not depend on how many others there are.
constexpr size_t kMaxPoints = 1000;

size_t point_count(const sweep::SweepSpec& spec) {
  size_t n = 1;
  auto times = [&](size_t k) {
    if (k > 0) n = n > kMaxPoints / k ? kMaxPoints + 1 : n * k;
  };
  for (const auto& a : spec.axes) times(a.values.size());
  for (const auto& z : spec.zips)
    if (!z.axes.empty()) times(z.axes[0].values.size());
  times(spec.seeds.values.size());
  return n + spec.includes.size();
}

/// A fuzzed launch.trainer must not start a program: every path is "not a trainer".
std::vector<std::string> describe_nothing(const std::string& trainer, const std::string& what) {
  throw sweep::ConfigError(what + ": not started while fuzzing");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const sweep::SweepSpec spec = sweep::parse_grid(text, "fuzz.yaml", "", describe_nothing);
    if (point_count(spec) <= kMaxPoints) (void)sweep::expand(spec);
  } catch (const sweep::ConfigError&) {
    // The documented way to reject a grid.
  }
  return 0;
}
