// The live report: rewrites one at a time while the driver ticks, a failing or crashing
// rewrite is one warning and the rewrites go on, a slow one pushes the next one back, and
// stopping waits for a rewrite in flight, then kills a hung one.
#include "live_report.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "temp_dir.h"   // TempDirTest
#include "test_util.h"  // EXPECT_CONTAINS, read_file

namespace sweep {
namespace {

namespace fs = std::filesystem;
using sweep_test::read_file;

size_t lines_in(const fs::path& p) {
  std::ifstream in(p);
  size_t n = 0;
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

class LiveReportTest : public sweep_test::TempDirTest {
 protected:
  LiveReportTest() : TempDirTest("live_report_test") {}

  /// An executable shell script in the test directory; $1 is the test directory.
  std::string script(const std::string& name, const std::string& body) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << "#!/bin/sh\nD=\"$1\"\n" << body;
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }

  /// Ticks `live` every 10 ms for `seconds`, collecting warnings.
  void tick_for(LiveReport& live, double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(int(seconds * 1000));
    while (std::chrono::steady_clock::now() < until) {
      live.tick([&](const std::string& w) { warnings_.push_back(w); });
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  std::vector<std::string> warnings_;
};

TEST_F(LiveReportTest, RewritesComeOneAtATimeWhileTheDriverTicks) {
  const std::string s = script("rewrite",
                               "[ -e \"$D/busy\" ] && echo overlap >> \"$D/overlap\"\n"
                               "touch \"$D/busy\"; sleep 0.2; rm \"$D/busy\"; echo x >> \"$D/count\"\n");
  LiveReport live({s, dir_.string()}, (dir_ / "report.log").string(), 0.05, /*backoff=*/0);
  tick_for(live, 1.5);
  live.stop();
  EXPECT_GE(lines_in(dir_ / "count"), 3u);
  EXPECT_EQ(size_t(live.rewrites()), lines_in(dir_ / "count"));
  EXPECT_FALSE(fs::exists(dir_ / "overlap")) << "two rewrites ran at once";
  EXPECT_TRUE(warnings_.empty());
}

// A rewrite that took 0.2 s waits 30 x 0.2 = 6 s for the next, whatever the interval.
TEST_F(LiveReportTest, ASlowRewritePushesTheNextOneBack) {
  const std::string s = script("rewrite", "sleep 0.2; echo x >> \"$D/count\"\n");
  LiveReport live({s, dir_.string()}, (dir_ / "report.log").string(), 0.05, /*backoff=*/30);
  tick_for(live, 1.5);
  live.stop();
  EXPECT_EQ(lines_in(dir_ / "count"), 1u);
}

TEST_F(LiveReportTest, AFailingOrCrashingRewriteIsOneWarningAndTheRewritesGoOn) {
  for (const char* how : {"exit 3", "kill -s SEGV $$"}) {
    SCOPED_TRACE(how);
    warnings_.clear();
    fs::remove(dir_ / "count");
    const std::string s = script("rewrite", std::string("echo x >> \"$D/count\"\n") + how + "\n");
    LiveReport live({s, dir_.string()}, (dir_ / "report.log").string(), 0.05, /*backoff=*/0);
    tick_for(live, 1.0);
    live.stop();
    EXPECT_GE(lines_in(dir_ / "count"), 2u) << "the rewrites stopped after a failure";
    EXPECT_EQ(live.rewrites(), 0);
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_CONTAINS(warnings_[0], "live report not rewritten: the rewrite ended with ");
    EXPECT_CONTAINS(warnings_[0], std::string(how) == "exit 3" ? "3" : "signal 11");
    EXPECT_CONTAINS(warnings_[0], "the sweep goes on");
  }
}

TEST_F(LiveReportTest, StoppingWaitsForARewriteThenKillsAHungOne) {
  // A rewrite that ends within the patience is waited for.
  {
    const std::string s = script("quick", "sleep 0.3; echo x >> \"$D/count\"\n");
    LiveReport live({s, dir_.string()}, (dir_ / "report.log").string(), 0.01, 0);
    tick_for(live, 0.05);
    live.stop(5);
    EXPECT_EQ(lines_in(dir_ / "count"), 1u);
    EXPECT_EQ(live.rewrites(), 1);
  }
  // A hung one is killed, with its process group.
  const std::string s = script("hung", "echo $$ > \"$D/pid\"\nsleep 100\n");
  LiveReport live({s, dir_.string()}, (dir_ / "report.log").string(), 0.01, 0);
  tick_for(live, 0.3);
  ASSERT_TRUE(fs::exists(dir_ / "pid"));
  const pid_t pid = std::stoi(read_file(dir_ / "pid"));
  const auto t0 = std::chrono::steady_clock::now();
  live.stop(0.2);
  // Killed, not waited for: its sleep has 100 s to go (a bound that no slow machine reaches).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  EXPECT_NE(::kill(pid, 0), 0) << "the hung rewrite is still alive";
  EXPECT_EQ(live.rewrites(), 0);
}

}  // namespace
}  // namespace sweep
