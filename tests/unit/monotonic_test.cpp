// The one monotonic clock (text/monotonic.h): it is CLOCK_MONOTONIC, and no other file of
// the product reads that clock itself (the harness, the record reader and the trainer's
// watchdog each had their own).
#include "monotonic.h"

#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace sweep {
namespace {

double clock_monotonic_s() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Read between two reads of CLOCK_MONOTONIC, it lies between them: the same clock (a wall
// clock would be decades away), whatever the machine's speed.
TEST(MonotonicClock, IsClockMonotonic) {
  const double before = clock_monotonic_s();
  const double now = monotonic_s();
  const double after = clock_monotonic_s();
  EXPECT_LE(before, now + 1e-6);
  EXPECT_LE(now, after + 1e-6);
}

TEST(MonotonicClock, IsReadInOnePlace) {
  namespace fs = std::filesystem;
  const fs::path root = SWEEP_SOURCE_DIR;
  const std::vector<std::string> reads = {"CLOCK_MONOTONIC", "steady_clock::now().time_since_epoch()"};
  std::vector<std::string> found;
  size_t files = 0;
  for (const char* folder : {"text", "config", "results", "trainer", "harness", "include"})
    for (const auto& e : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh")) continue;
      if (e.path() == root / "text" / "monotonic.h") continue;
      ++files;
      std::ifstream in(e.path());
      const std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (const std::string& r : reads)
        if (body.find(r) != std::string::npos) found.push_back(fs::relative(e.path(), root).string() + ": " + r);
    }
  EXPECT_GT(files, 100u);
  EXPECT_TRUE(found.empty()) << "read the clock with monotonic_s (text/monotonic.h) instead: " << found.front();
}

}  // namespace
}  // namespace sweep
