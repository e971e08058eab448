// trainer/comm/watchdog.h: the thread that ends a rank which stops making progress (exit
// 4, with its cause on stderr, in the stop hook and in its note) or which the launcher
// stops (exit 128 + signal), and leaves a rank that beats alone. Under ThreadSanitizer
// (scripts/check-sanitize-fuzz) these are the watchdog's race tests. Each death runs in a
// forked child (gtest's "fast" death tests: the parent has no thread then, and the child
// sees the parent's test directory).
#include "watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "collective_ring.h"  // read_collective_ring: the ring a stopped rank leaves
#include "heartbeat.h"        // HeartbeatWriter
#include "temp_dir.h"         // TempDirTest
#include "test_util.h"        // read_file

namespace {

using namespace std::chrono_literals;

class WatchdogTest : public sweep_test::TempDirTest {
 protected:
  WatchdogTest() : TempDirTest("sweep_watchdog") {}
};

TEST_F(WatchdogTest, ARankThatBeatsIsLeftAlone) {
  sweep::Watchdog dog(0.3, 1, dir_.string());
  std::string seen;
  dog.on_stop([&](const std::string& why) { seen = why; });
  dog.arm();
  for (int step = 1; step <= 20; ++step) {  // 1 s, more than three timeouts
    dog.beat(step);
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(seen, "");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "rank1.failure"));
}

TEST_F(WatchdogTest, ARankStuckComputingExitsFourNamingItselfInTheHookAndItsNote) {
  const std::string dir = dir_.string();
  EXPECT_EXIT(
      {
        sweep::Watchdog dog(0.2, 1, dir);
        dog.on_stop([&](const std::string& why) { std::ofstream(dir + "/hook") << why; });
        dog.arm();
        dog.beat(7);
        std::this_thread::sleep_for(10s);  // stuck: no beat
      },
      ::testing::ExitedWithCode(4), "rank 1: no progress for 0 s \\(dist.timeout_s\\) at step 7 while computing");
  EXPECT_CONTAINS(sweep_test::read_file(dir_ / "hook"), "at step 7 while computing, outside any collective");
  EXPECT_CONTAINS(sweep_test::read_file(dir_ / "rank1.failure"), "rank 1: no progress");
}

TEST_F(WatchdogTest, ARankWaitingOnItsPeersSaysSoAndRankZeroFoldsInThePeersNote) {
  const std::string dir = dir_.string();
  std::ofstream(dir + "/rank1.failure") << "rank 1: no progress for 1 s (dist.timeout_s) at step 3 while computing\n";
  EXPECT_EXIT(
      {
        sweep::Watchdog dog(0.2, 0, dir);
        dog.arm();
        sweep::Watchdog::Waiting waiting(dog, "allreduce");
        std::this_thread::sleep_for(10s);
      },
      ::testing::ExitedWithCode(4),
      "rank 1: no progress .* at step 3 while computing; rank 0: .*waiting for the other "
      "ranks in allreduce");
}

// Hang evidence: collectives are numbered; a rank stuck computing names the last one it
// finished, a rank waiting names the one it waits in, and the cause carries the top of the
// stuck thread's stack (taken by a signal) while the log gets the ring and every frame.
TEST_F(WatchdogTest, ATimeoutNamesTheCollectiveByNumberAndTheStackOfTheStuckThread) {
  const std::string dir = dir_.string();
  {
    sweep::Watchdog dog(0, 0, dir);
    const int n = int(sweep::Watchdog::kCollectiveRing) + 3;  // the ring's size, and 3 more
    for (int i = 0; i < n; ++i) sweep::Watchdog::Waiting w(dog, i % 2 ? "allgather" : "allreduce", -1, size_t(8 * i));
    const auto ring = dog.last_collectives();
    ASSERT_EQ(ring.size(), sweep::Watchdog::kCollectiveRing);
    EXPECT_EQ(ring.front().seq, 4);
    EXPECT_EQ(ring.back().seq, n);
    EXPECT_STREQ(ring.back().op, n % 2 ? "allreduce" : "allgather");
    EXPECT_EQ(ring.back().bytes, size_t(8 * (n - 1)));
    EXPECT_GE(ring.back().end_s, ring.back().start_s);
  }
  EXPECT_EXIT(
      {
        sweep::Watchdog dog(0.2, 1, dir);
        dog.arm();
        dog.beat(5);
        for (int i = 0; i < 3; ++i) sweep::Watchdog::Waiting w(dog, "allreduce", -1, 8);
        std::this_thread::sleep_for(10s);  // stuck computing after collective #3
      },
      ::testing::ExitedWithCode(4),
      "its last collectives, oldest first:\n  #1 allreduce, 8 bytes, took .*stack of its main thread:\n  #0 .*"
      "rank 1: no progress for 0 s \\(dist.timeout_s\\) at step 5 while computing, outside any collective \\(its "
      "last, #3 allreduce, ended .* ago\\) \\(this rank is stuck\\); stack: .*sleep");
  EXPECT_EXIT(
      {
        sweep::Watchdog dog(0.2, 0, dir);
        dog.arm();
        for (int i = 0; i < 4; ++i) sweep::Watchdog::Waiting w(dog, "allreduce", -1, 8);
        sweep::Watchdog::Waiting waiting(dog, "allgather", -1, 16);
        std::this_thread::sleep_for(10s);
      },
      ::testing::ExitedWithCode(4), "waiting for the other ranks in allgather \\(collective #5, 16 bytes, for ");
}

// Each rank of several publishes its place among the collectives; rank 0's cause of a hang
// names the rank that never entered the one it waits in, from that rank's heartbeat alone
// (a rank stopped or wedged leaves no note).
TEST_F(WatchdogTest, RankZerosHangNamesTheRankThatNeverEnteredTheCollectiveItWaitsIn) {
  const std::string dir = dir_.string();
  {
    sweep::HeartbeatWriter rank1(dir, 1);
    rank1.publish(3, 3, 7, false, -1, "allreduce");  // finished #3, then no more
  }
  EXPECT_EXIT(
      {
        sweep::Watchdog dog(0.2, 0, dir, 2);
        dog.arm();
        dog.beat(7);
        for (int i = 0; i < 3; ++i) sweep::Watchdog::Waiting w(dog, "allreduce", -1, 8);
        sweep::Watchdog::Waiting waiting(dog, "allgather", -1, 16);
        std::this_thread::sleep_for(10s);
      },
      ::testing::ExitedWithCode(4),
      "rank 0: no progress .* in allgather \\(collective #4, .*; rank 1 never entered collective #4 \\(allgather at "
      "step 7\\); rank 0 waits in it");
  // One rank publishes nothing: it has no peers.
  std::filesystem::create_directory(dir_ / "alone");
  { sweep::Watchdog alone(0, 0, dir + "/alone"); }
  EXPECT_TRUE(std::filesystem::is_empty(dir_ / "alone"));
}

// A rank of several that times out writes its ring, the last kCollectiveRing (64)
// collectives oldest first, numbered as the heartbeat numbers them, for the driver to
// merge (collective_ring.h); a rank alone writes none, and a new attempt's watchdog
// removes an earlier attempt's.
TEST_F(WatchdogTest, ARankOfSeveralThatTimesOutWritesItsRingOfTheLast64Collectives) {
  static_assert(sweep::Watchdog::kCollectiveRing >= 64);
  const std::string dir = dir_.string();
  EXPECT_EXIT(
      {
        sweep::Watchdog dog(0.2, 1, dir, 3);
        dog.arm();
        for (int step = 1; step <= 50; ++step) {
          dog.beat(step);
          { sweep::Watchdog::Waiting w(dog, "allgather", -1, 16); }
          { sweep::Watchdog::Waiting w(dog, "the gradient exchange (sendrecv)", 2, 64); }
        }
        sweep::Watchdog::Waiting waiting(dog, "allreduce", -1, 4096);  // #101
        std::this_thread::sleep_for(10s);
      },
      ::testing::ExitedWithCode(4), "rank 1: no progress");
  const auto ring = sweep::read_collective_ring(sweep::collective_ring_path(dir, 1), 1);
  ASSERT_TRUE(ring);
  ASSERT_EQ(ring->size(), sweep::Watchdog::kCollectiveRing);
  const sweep::RingEntry& last = ring->back();
  EXPECT_EQ(last.seq, 101);
  EXPECT_EQ(last.group, 51);  // the 50 allgathers, then this
  EXPECT_EQ(last.op, "allreduce");
  EXPECT_EQ(last.bytes, 4096);
  EXPECT_EQ(last.step, 50);
  EXPECT_TRUE(last.inside());
  const sweep::RingEntry& before = (*ring)[ring->size() - 2];
  EXPECT_EQ(before.seq, 100);
  EXPECT_EQ(before.group, 50);  // a point-to-point exchange counts in seq only
  EXPECT_EQ(before.peer, 2);
  EXPECT_FALSE(before.inside());
  EXPECT_LE(before.start_s, before.end_s);
  EXPECT_EQ(ring->front().seq, 101 - long(sweep::Watchdog::kCollectiveRing) + 1);
  // The next attempt's watchdog removes the stale ring at once.
  { sweep::Watchdog again(0, 1, dir, 3); }
  EXPECT_FALSE(std::filesystem::exists(sweep::collective_ring_path(dir, 1)));
  // One rank has no peers to compare with: no ring.
  std::filesystem::create_directory(dir_ / "alone");
  EXPECT_EXIT(
      {
        sweep::Watchdog dog(0.2, 0, dir + "/alone");
        dog.arm();
        sweep::Watchdog::Waiting waiting(dog, "allreduce", -1, 8);
        std::this_thread::sleep_for(10s);
      },
      ::testing::ExitedWithCode(4), "rank 0: no progress");
  EXPECT_FALSE(std::filesystem::exists(sweep::collective_ring_path(dir + "/alone", 0)));
}

TEST_F(WatchdogTest, AWaitOnOnePeerNamesItsRankAndHost) {
  const std::string dir = dir_.string();
  EXPECT_EXIT(
      {
        sweep::Watchdog dog(0.2, 0, dir);
        dog.set_hosts({"node-a", "node-b"});
        dog.arm();
        sweep::Watchdog::Waiting waiting(dog, "the gradient exchange (sendrecv)", 1);
        std::this_thread::sleep_for(10s);
      },
      ::testing::ExitedWithCode(4), "in the gradient exchange \\(sendrecv\\) with rank 1 on node-b");
}

TEST_F(WatchdogTest, MpiStartUpThatDoesNotFinishExitsFourAndOneThatDoesIsLeftAlone) {
  EXPECT_EXIT(
      {
        ::setenv("OMPI_COMM_WORLD_RANK", "3", 1);
        sweep::StartupGuard guard(0.2);
        std::this_thread::sleep_for(10s);  // MPI_Init that never returns
      },
      ::testing::ExitedWithCode(4),
      "rank 3: no progress for 0 s \\(dist.timeout_s, at least 60 s for start-up\\) while the ranks connect");
  EXPECT_EQ(sweep::startup_timeout_s(3), sweep::kMinStartupTimeoutS);  // a step's budget is too short
  EXPECT_EQ(sweep::startup_timeout_s(600), 600);
  EXPECT_EQ(sweep::startup_timeout_s(0), 0);  // no timeout: no guard
  sweep::StartupGuard guard(0.3);
  std::this_thread::sleep_for(50ms);
  guard.done();
  std::this_thread::sleep_for(500ms);  // past the timeout: still here
  sweep::StartupGuard off(0);          // 0: no guard at all
  SUCCEED();
}

TEST_F(WatchdogTest, SigtermEndsTheRankWith143AfterTheHook) {
  const std::string dir = dir_.string();
  EXPECT_EXIT(
      {
        sweep::Watchdog dog(0, 0, dir);
        dog.on_stop([&](const std::string& why) { std::ofstream(dir + "/hook") << why; });
        std::raise(SIGTERM);
        std::this_thread::sleep_for(10s);
      },
      ::testing::ExitedWithCode(128 + SIGTERM), "stopped by SIGTERM");
  // Stopped, not stuck: a Ctrl-C or the launcher's SIGTERM is no fault of this rank's.
  const std::string said = sweep_test::read_file(dir_ / "hook");
  EXPECT_CONTAINS(said, "rank 0: stopped by SIGTERM at step 0 while computing, outside any collective");
  EXPECT_EQ(said.find("stuck"), std::string::npos) << said;
}

}  // namespace
