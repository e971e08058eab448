// cache_entry.h: the one writer and reader of sweep's per-machine cache entries (a data
// file's hash, an image's digest). An entry comes back only to its own kind, subject and
// key, and only when its tag is the user's: one written by anyone else is not taken.
#include "cache_entry.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "temp_dir.h"  // TempDirTest

namespace sweep {
namespace {

namespace fs = std::filesystem;

class CacheEntryTest : public sweep_test::TempDirTest {
 protected:
  CacheEntryTest() : TempDirTest("cache_entry") {}
  std::string cache() const { return (dir_ / "cache").string(); }
  /// The entry's one file in the cache directory, and its five lines.
  std::vector<std::string> lines(fs::path* file) const {
    EXPECT_EQ(std::distance(fs::directory_iterator(cache()), fs::directory_iterator()), 1);
    *file = fs::directory_iterator(cache())->path();
    std::ifstream in(*file);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
};

TEST_F(CacheEntryTest, AValueComesBackOnlyForItsOwnKindSubjectAndKey) {
  const CacheEntry e(cache(), "sweep-test 1", "test", "/data/a.bin");
  EXPECT_FALSE(e.read("k1"));
  e.write("k1", "xxh3:00000000000000aa");
  EXPECT_EQ(e.read("k1").value_or("none"), "xxh3:00000000000000aa");
  EXPECT_FALSE(e.read("k2"));  // the file changed since: another key
  EXPECT_FALSE(CacheEntry(cache(), "sweep-test 2", "test", "/data/a.bin").read("k1"));  // another kind
  EXPECT_FALSE(CacheEntry(cache(), "sweep-test 1", "test", "/data/b.bin").read("k1"));  // another subject
  fs::path file;
  EXPECT_EQ(lines(&file).size(), 5u);
  // No cache directory: nothing is written or read.
  const CacheEntry none("", "sweep-test 1", "test", "/data/a.bin");
  none.write("k1", "v");
  EXPECT_FALSE(none.read("k1"));
}

TEST_F(CacheEntryTest, AnEntryRewrittenWithoutTheUsersKeyOrAFifoInItsPlaceIsNotTaken) {
  const CacheEntry e(cache(), "sweep-test 1", "test", "/data/a.bin");
  e.write("k1", "xxh3:00000000000000aa");
  fs::path file;
  std::vector<std::string> l = lines(&file);
  ASSERT_EQ(l.size(), 5u);
  // Another value with the old tag kept: forged.
  std::ofstream(file, std::ios::trunc) << l[0] << '\n'
                                       << l[1] << '\n'
                                       << l[2] << "\nxxh3:00000000000000bb\n"
                                       << l[4] << '\n';
  EXPECT_FALSE(e.read("k1"));
  // No tag at all (the image cache's first form).
  std::ofstream(file, std::ios::trunc) << l[0] << '\n' << l[1] << '\n' << l[2] << '\n' << l[3] << '\n';
  EXPECT_FALSE(e.read("k1"));
  // The entry as written reads back; then a FIFO at its name is no entry, and not waited on.
  std::ofstream(file, std::ios::trunc) << l[0] << '\n' << l[1] << '\n' << l[2] << '\n' << l[3] << '\n' << l[4] << '\n';
  EXPECT_TRUE(e.read("k1"));
  fs::remove(file);
  ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
  EXPECT_FALSE(e.read("k1"));
}

}  // namespace
}  // namespace sweep
