// results/record/collective_ring.h: a rank's ring of collectives, written whole or not at
// all, read back as written, and refused when damaged, foreign or another attempt's.
#include "collective_ring.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "temp_dir.h"   // TempDirTest
#include "test_util.h"  // read_file

namespace sweep {
namespace {

namespace fs = std::filesystem;

class CollectiveRingTest : public sweep_test::TempDirTest {
 protected:
  CollectiveRingTest() : TempDirTest("sweep_collective_ring") {}
};

std::vector<RingEntry> two_entries() {
  return {RingEntry{811, 204, 40, -1, 4096, "allreduce", 1765432098.1, 1765432098.1003},
          RingEntry{812, 204, 40, 2, 65536, "the gradient exchange (sendrecv)", 1765432098.1004, -1}};
}

TEST_F(CollectiveRingTest, ARingReadsBackAsWrittenOldestFirst) {
  const std::string dir = dir_.string();
  ASSERT_TRUE(write_collective_ring(dir, 1, two_entries(), 1765432101.25));
  double stopped = 0;
  const auto ring = read_collective_ring(collective_ring_path(dir, 1), 1, &stopped);
  ASSERT_TRUE(ring);
  EXPECT_NEAR(stopped, 1765432101.25, 1e-6);
  ASSERT_EQ(ring->size(), 2u);
  const RingEntry& a = (*ring)[0];
  const RingEntry& b = (*ring)[1];
  EXPECT_EQ(a.seq, 811);
  EXPECT_EQ(a.group, 204);
  EXPECT_EQ(a.step, 40);
  EXPECT_EQ(a.peer, -1);
  EXPECT_EQ(a.bytes, 4096);
  EXPECT_EQ(a.op, "allreduce");
  EXPECT_NEAR(a.start_s, 1765432098.1, 1e-6);
  EXPECT_NEAR(a.end_s, 1765432098.1003, 1e-6);
  EXPECT_FALSE(a.inside());
  EXPECT_EQ(b.op, "the gradient exchange (sendrecv)");  // an operation's name has spaces
  EXPECT_EQ(b.peer, 2);
  EXPECT_TRUE(b.inside());
  // Its own text: a version first, a checksum last, nothing left of the temporary file.
  const std::string text = sweep_test::read_file(collective_ring_path(dir, 1));
  EXPECT_EQ(text.rfind("sweep-collectives 2 rank 1 entries 2 stopped 1765432101.250000\nseq 811 group 204 step 40 "
                       "peer -1 bytes 4096 ",
                       0),
            0u)
      << text;
  EXPECT_FALSE(fs::exists(collective_ring_path(dir, 1) + ".tmp"));
  // An empty ring (a rank stopped before its first collective) is a ring.
  ASSERT_TRUE(write_collective_ring(dir, 0, {}));
  ASSERT_TRUE(read_collective_ring(collective_ring_path(dir, 0), 0));
  EXPECT_TRUE(read_collective_ring(collective_ring_path(dir, 0), 0)->empty());
}

TEST_F(CollectiveRingTest, ADamagedForeignOrMisnamedRingIsNone) {
  const std::string dir = dir_.string(), path = collective_ring_path(dir, 1);
  ASSERT_TRUE(write_collective_ring(dir, 1, two_entries()));
  const std::string good = sweep_test::read_file(path);
  auto plant = [&](const std::string& text) {
    fs::remove(path);
    std::ofstream(path) << text;
    return read_collective_ring(path, 1);
  };
  ASSERT_TRUE(plant(good));
  EXPECT_FALSE(read_collective_ring(path, 2)) << "rank 1's ring read as rank 2's";
  std::string flipped = good;
  flipped[flipped.find("4096")] = '5';
  EXPECT_FALSE(plant(flipped)) << "a changed figure fails the checksum";
  EXPECT_FALSE(plant(good.substr(0, good.size() / 2))) << "a cut file";
  EXPECT_FALSE(plant("")) << "an empty file";
  std::string other = good;
  other.replace(0, std::string("sweep-collectives 2").size(), "sweep-collectives 9");
  EXPECT_FALSE(plant(other)) << "another version";
  // A version 1 ring (before stop times) still reads, its stop time unknown.
  std::string v1 = "sweep-collectives 1 rank 1 entries 0\n";
  char sum[32];
  std::snprintf(sum, sizeof sum, "sum %08x\n", unsigned(XXH32(v1.data(), v1.size(), 0)));
  double stopped = -1;
  fs::remove(path);
  std::ofstream(path) << v1 + sum;
  EXPECT_TRUE(read_collective_ring(path, 1, &stopped));
  EXPECT_EQ(stopped, 0.0);
  EXPECT_FALSE(read_collective_ring(dir + "/rank7.collectives", 7)) << "no file";
  fs::remove(path);
  fs::create_directory(path);
  EXPECT_FALSE(read_collective_ring(path, 1)) << "a directory";
}

TEST_F(CollectiveRingTest, NoRingIsWrittenThroughAPlantedLink) {
  const std::string dir = dir_.string();
  const fs::path victim = dir_ / "victim";
  std::ofstream(victim) << "keep";
  fs::create_symlink(victim, collective_ring_path(dir, 1) + ".tmp");
  fs::create_symlink(victim, collective_ring_path(dir, 1));
  ASSERT_TRUE(write_collective_ring(dir, 1, two_entries()));
  EXPECT_EQ(sweep_test::read_file(victim), "keep");
  EXPECT_FALSE(fs::is_symlink(collective_ring_path(dir, 1)));  // the link itself was replaced
  EXPECT_TRUE(read_collective_ring(collective_ring_path(dir, 1), 1));
  // A directory it cannot write: no ring, no exception.
  EXPECT_FALSE(write_collective_ring(dir + "/absent", 1, two_entries()));
}

TEST_F(CollectiveRingTest, TheRanksOfADirectoryAndAnEarlierAttemptsRingsAreTold) {
  const std::string dir = dir_.string();
  EXPECT_EQ(collective_ring_ranks(dir), 0);
  ASSERT_TRUE(write_collective_ring(dir, 0, two_entries()));
  ASSERT_TRUE(write_collective_ring(dir, 2, two_entries()));
  std::ofstream(dir + "/rank9.collectives.tmp") << "";  // not a ring's name
  EXPECT_EQ(collective_ring_ranks(dir), 3);
  // Rank 2's file is from before the attempt began: an earlier attempt's.
  struct timeval old[2] = {{1000, 0}, {1000, 0}};
  ASSERT_EQ(::utimes(collective_ring_path(dir, 2).c_str(), old), 0);
  const auto rings = read_collective_rings(dir, 3, 2000);
  ASSERT_EQ(rings.size(), 3u);
  EXPECT_TRUE(rings[0]);
  EXPECT_FALSE(rings[1]);  // none written
  EXPECT_FALSE(rings[2]);
  EXPECT_TRUE(read_collective_rings(dir, 3)[2]) << "since 0 takes any";
}

}  // namespace
}  // namespace sweep
