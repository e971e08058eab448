// results/record/heartbeat.h: each rank's place among its collectives, written in place
// and read back whole or not at all, and the sentence that names the rank(s) that never
// entered the collective the others wait in.
#include "heartbeat.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "temp_dir.h"   // TempDirTest
#include "test_util.h"  // read_file

namespace sweep {
namespace {

namespace fs = std::filesystem;

class HeartbeatTest : public sweep_test::TempDirTest {
 protected:
  HeartbeatTest() : TempDirTest("sweep_heartbeat") {}
};

CollectiveBeat beat(long long seq, long long group, long long step, bool inside, int peer, const char* op) {
  CollectiveBeat b;
  b.seq = seq, b.group = group, b.step = step, b.inside = inside, b.peer = peer, b.op = op;
  return b;
}

TEST_F(HeartbeatTest, ABeatReadsBackAsWrittenAndTheFileStaysOneLineOfFixedSize) {
  const std::string dir = dir_.string();
  HeartbeatWriter w(dir, 2);
  auto b = read_heartbeat(heartbeat_path(dir, 2));
  ASSERT_TRUE(b);  // "no collective yet" from the start
  EXPECT_EQ(b->seq, 0);
  EXPECT_FALSE(b->inside);
  w.publish(57, 12, 9, true, -1, "allgather");
  w.publish(1234567, 1234, 99, true, 3, "the gradient exchange (sendrecv)");
  b = read_heartbeat(heartbeat_path(dir, 2));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->seq, 1234567);
  EXPECT_EQ(b->group, 1234);
  EXPECT_EQ(b->step, 99);
  EXPECT_TRUE(b->inside);
  EXPECT_EQ(b->peer, 3);
  EXPECT_EQ(b->op, "the gradient exchange (sendrecv)");
  const std::string text = sweep_test::read_file(heartbeat_path(dir, 2));
  EXPECT_EQ(text.rfind("sweep-heartbeat 1 seq 1234567 group 1234 step 99 in peer 3 op the gradient", 0), 0u) << text;
  EXPECT_EQ(text.find('\n'), text.size() - 1);
  w.publish(1, 1, 1, false, -1, "allreduce");  // shorter: the same size, nothing left of the longer line
  EXPECT_EQ(sweep_test::read_file(heartbeat_path(dir, 2)).size(), text.size());
  EXPECT_EQ(read_heartbeat(heartbeat_path(dir, 2))->op, "allreduce");
}

TEST_F(HeartbeatTest, ATornChangedOrForeignLineIsNotABeat) {
  const std::string dir = dir_.string(), path = heartbeat_path(dir, 0);
  {
    HeartbeatWriter w(dir, 0);
    w.publish(5, 5, 2, true, -1, "allreduce");
  }
  const std::string good = sweep_test::read_file(path);
  auto plant = [&](const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
    return read_heartbeat(path);
  };
  EXPECT_TRUE(plant(good));
  std::string changed = good;
  changed[good.find("seq 5") + 4] = '6';  // a digit of another line: the checksum is of this one
  EXPECT_FALSE(plant(changed));
  EXPECT_FALSE(plant(good.substr(0, good.size() / 2)));  // half of it
  std::string other = good;
  other[std::string("sweep-heartbeat ").size()] = '2';  // another version
  EXPECT_FALSE(plant(other));
  EXPECT_FALSE(plant(""));
  EXPECT_FALSE(read_heartbeat(heartbeat_path(dir, 7)));  // none
}

TEST_F(HeartbeatTest, NoHeartbeatIsWrittenThroughAPlantedLinkOrFifo) {
  const std::string dir = dir_.string();
  std::ofstream(dir_ / "target") << "keep";
  fs::create_symlink(dir_ / "target", heartbeat_path(dir, 0));
  ASSERT_EQ(::mkfifo(heartbeat_path(dir, 1).c_str(), 0644), 0);
  HeartbeatWriter linked(dir, 0), fifo(dir, 1);
  linked.publish(1, 1, 1, true, -1, "allreduce");
  fifo.publish(1, 1, 1, true, -1, "allreduce");  // would block or fill a pipe if it were written
  EXPECT_EQ(sweep_test::read_file(dir_ / "target"), "keep");
  EXPECT_FALSE(read_heartbeat(heartbeat_path(dir, 0)));
  EXPECT_FALSE(read_heartbeat(heartbeat_path(dir, 1)));
}

TEST_F(HeartbeatTest, TheRanksOfADirectoryAndAnEarlierAttemptsBeatsAreTold) {
  const std::string dir = dir_.string();
  EXPECT_EQ(heartbeat_ranks(dir), 0);
  HeartbeatWriter r0(dir, 0), r3(dir, 3);
  std::ofstream(dir_ / "rank9.heartbeat.tmp") << "";
  std::ofstream(dir_ / "rank99999999.heartbeat") << "";  // no such rank: out of dist.world_size's range
  EXPECT_EQ(heartbeat_ranks(dir), 4);
  const auto beats = read_heartbeats(dir, 4);
  EXPECT_TRUE(beats[0] && beats[3]);
  EXPECT_FALSE(beats[1] || beats[2]);
  // Rank 3's file was last written an hour ago: another attempt's.
  struct timeval old[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimes(heartbeat_path(dir, 3).c_str(), old), 0);
  const auto now = read_heartbeats(dir, 4, ::time(nullptr) - 60);
  EXPECT_TRUE(now[0]);
  EXPECT_FALSE(now[3]);
}

TEST(AbsentFromCollective, TheRankWithFewerCollectivesOfAllRanksNeverEnteredTheOneTheOthersWaitIn) {
  // Rank 1 finished collective #56 and computes; the others wait in #57.
  std::vector<std::optional<CollectiveBeat>> beats = {
      beat(57, 12, 12, true, -1, "allgather"), beat(56, 11, 12, false, -1, "allreduce"),
      beat(57, 12, 12, true, -1, "allgather"), beat(57, 12, 12, true, -1, "allgather")};
  EXPECT_EQ(absent_from_collective(beats),
            "rank 1 never entered collective #57 (allgather at step 12); ranks 0, 2, 3 wait in it");
  // Rank 3 too, stuck in a sendrecv of its own (it waits, but not in #57).
  beats[3] = beat(55, 11, 12, true, 2, "the gradient exchange (sendrecv)");
  EXPECT_EQ(absent_from_collective(beats),
            "ranks 1, 3 never entered collective #57 (allgather at step 12); ranks 0, 2 "
            "wait in it");
  // A rank without a heartbeat is said to have none.
  beats[3].reset();
  EXPECT_EQ(absent_from_collective(beats),
            "rank 1 never entered collective #57 (allgather at step 12); ranks 0, 2 "
            "wait in it; no heartbeat from rank 3");
  beats[1] = beat(57, 12, 12, true, -1, "allgather");
  EXPECT_EQ(absent_from_collective(beats),
            "no heartbeat from rank 3; ranks 0, 1, 2 wait in collective #57 (allgather "
            "at step 12)");
}

TEST(AbsentFromCollective, AWaitOnOnePeerIsFollowedToTheRankThatWaitsInNothing) {
  // Rank 0 waits on rank 2, which waits on rank 1, which computes.
  const std::vector<std::optional<CollectiveBeat>> beats = {
      beat(40, 9, 3, true, 2, "the gradient exchange (sendrecv)"), beat(38, 9, 3, false, 0, "allgather"),
      beat(39, 9, 3, true, 1, "the gradient exchange (sendrecv)")};
  EXPECT_EQ(absent_from_collective(beats),
            "rank 1 never entered collective #40 (the gradient exchange (sendrecv) at step 3); ranks 0, 2 wait in it");
}

TEST(AbsentFromCollective, NothingIsSaidWhenEveryRankIsInTheCollectiveOrNoneWaits) {
  EXPECT_EQ(absent_from_collective({}), "");
  EXPECT_EQ(absent_from_collective({beat(3, 3, 1, false, -1, "allreduce")}), "");  // one rank, stuck computing
  EXPECT_EQ(absent_from_collective({beat(3, 3, 1, true, -1, "allreduce"), beat(3, 3, 1, true, -1, "allreduce")}), "");
  EXPECT_EQ(absent_from_collective({beat(3, 3, 1, false, -1, "allreduce"), beat(2, 2, 1, false, -1, "allreduce")}), "");
  // Two ranks that wait on each other: a cycle, no rank to name.
  EXPECT_EQ(absent_from_collective({beat(4, 3, 1, true, 1, "the gradient exchange (sendrecv)"),
                                    beat(4, 3, 1, true, 0, "the gradient exchange (sendrecv)")}),
            "");
}

CollectiveBeat beat_at(CollectiveBeat b, double changed_s) {
  b.changed_s = changed_s;
  return b;
}

// Every rank inside (rank 1 stopped while its exchange with rank 0 was under way, so the
// ranks wait on each other in a circle): the heartbeat that stopped changing names it.
TEST(AbsentFromCollective, ARankWhoseHeartbeatWentStaleInsideTheCollectiveIsNamedSilent) {
  const CollectiveBeat r0 = beat(31, 9, 2, true, 1, "the gradient exchange (sendrecv)");
  const CollectiveBeat r1 = beat(30, 9, 2, true, 0, "the gradient exchange (sendrecv)");
  EXPECT_EQ(absent_from_collective({beat_at(r0, 1000.0), beat_at(r1, 995.9)}),
            "rank 1 went silent inside collective #30 (the gradient exchange (sendrecv) at step 2) 4.1 s before the "
            "others' last heartbeat; rank 0 waits in collective #31 (the gradient exchange (sendrecv) at step 2)");
  // Both alive (a true deadlock, or a slow exchange): within kSilentAfterS, nothing is said.
  EXPECT_EQ(absent_from_collective({beat_at(r0, 1000.0), beat_at(r1, 1000.0 - kSilentAfterS + 0.1)}), "");
  // A collective of all ranks that every rank is in, two of four ranks stale.
  const CollectiveBeat all = beat(57, 12, 12, true, -1, "allgather");
  EXPECT_EQ(absent_from_collective({beat_at(all, 50), beat_at(all, 40), beat_at(all, 49.5), beat_at(all, 41)}),
            "ranks 1, 3 went silent inside collective #57 (allgather at step 12) 10.0 s before the others' last "
            "heartbeat; ranks 0, 2 wait in collective #57 (allgather at step 12)");
  // Every rank stale alike (the driver reads them after a run ended long ago): nobody.
  EXPECT_EQ(absent_from_collective({beat_at(all, 10), beat_at(all, 10)}), "");
}

TEST_F(HeartbeatTest, ATouchMovesTheTimeABeatChangedAndNotItsLine) {
  const std::string dir = dir_.string(), path = heartbeat_path(dir, 0);
  HeartbeatWriter w(dir, 0);
  w.publish(7, 3, 2, true, -1, "allreduce");
  struct timeval old[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimes(path.c_str(), old), 0);
  const std::string line = sweep_test::read_file(path);
  const double before = read_heartbeat(path)->changed_s;
  EXPECT_LT(before, double(::time(nullptr)) - 3000);
  w.touch();
  const auto after = read_heartbeat(path);
  ASSERT_TRUE(after);
  EXPECT_GT(after->changed_s, double(::time(nullptr)) - 60);
  EXPECT_EQ(after->seq, 7);
  EXPECT_EQ(sweep_test::read_file(path), line);
}

}  // namespace
}  // namespace sweep
