// identify_data_file: the content hash of a data file and its per-machine cache, which
// must never hide a change of the contents (same size, mtime set back: ctime changes).
#include "data_file.h"

#include <fcntl.h>  // AT_FDCWD
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "record_cache.h"  // user_key, siphash24
#include "temp_dir.h"      // TempDirTest

namespace sweep {
namespace {

namespace fs = std::filesystem;

class DataFile : public sweep_test::TempDirTest {
 protected:
  DataFile() : TempDirTest("data_file") {}
  std::string write(const std::string& text) {
    const std::string path = (dir_ / "data.txt").string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    return path;
  }
  static std::string xxh3(const std::string& text) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "xxh3:%016llx",
                  static_cast<unsigned long long>(XXH3_64bits(text.data(), text.size())));
    return buf;
  }
};

TEST_F(DataFile, HashesTheContentsAndCachesTheResult) {
  const std::string path = write("hello, tokens\n");
  const std::string cache = (dir_ / "cache").string();
  const DataFileId id = identify_data_file(path, cache);
  EXPECT_EQ(id.path, fs::canonical(path).string());
  EXPECT_EQ(id.size, 14);
  EXPECT_EQ(id.hash, xxh3("hello, tokens\n"));
  // The cache is what answers next time: a hash planted with a tag under the user's key
  // comes back unchanged.
  ASSERT_EQ(std::distance(fs::directory_iterator(cache), fs::directory_iterator()), 1);
  const fs::path entry = fs::directory_iterator(cache)->path();
  std::ifstream in(entry);
  std::string magic, p, key, hash, tag;
  std::getline(in, magic), std::getline(in, p), std::getline(in, key), std::getline(in, hash), std::getline(in, tag);
  in.close();
  EXPECT_EQ(hash, id.hash);
  std::string why;
  const std::string user = user_key(&why);
  ASSERT_EQ(user.size(), 16u) << why;
  const std::string planted = "xxh3:00000000000000aa";
  const std::string msg = magic + '\n' + p + '\n' + key + '\n' + planted + '\n';
  char keyed[24];
  std::snprintf(keyed, sizeof keyed, "%016llx",
                static_cast<unsigned long long>(
                    siphash24(reinterpret_cast<const unsigned char*>(user.data()), msg.data(), msg.size())));
  std::ofstream(entry, std::ios::trunc) << magic << '\n'
                                        << p << '\n'
                                        << key << '\n'
                                        << planted << '\n'
                                        << keyed << '\n';
  EXPECT_EQ(identify_data_file(path, cache).hash, planted);
  EXPECT_EQ(identify_data_file(path, "").hash, id.hash);  // no cache: read again
  // Rewritten by someone without the key (the stat key and an old tag kept, another
  // hash): not taken; the file is hashed again and the entry made anew.
  std::ofstream(entry, std::ios::trunc) << magic << '\n' << p << '\n' << key << '\n' << planted << '\n' << tag << '\n';
  EXPECT_EQ(identify_data_file(path, cache).hash, id.hash);
  // Nor is an entry of the earlier form, with no tag at all, nor a FIFO in its place.
  std::ofstream(entry, std::ios::trunc) << "sweep-data-hash 1\n" << p << '\n' << key << '\n' << planted << '\n';
  EXPECT_EQ(identify_data_file(path, cache).hash, id.hash);
  fs::remove(entry);
  ASSERT_EQ(::mkfifo(entry.c_str(), 0600), 0);
  EXPECT_EQ(identify_data_file(path, cache).hash, id.hash);  // returns: the FIFO is not waited on
}

TEST_F(DataFile, ARewriteWithTheMtimeSetBackIsSeen) {
  const std::string path = write("aaaa bbbb\n");
  const std::string cache = (dir_ / "cache").string();
  const DataFileId before = identify_data_file(path, cache);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  write("aaaa bbbc\n");  // same size
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);  // the mtime set back
  const DataFileId after = identify_data_file(path, cache);
  EXPECT_EQ(after.size, before.size);
  EXPECT_EQ(after.mtime_ns, before.mtime_ns);
  EXPECT_NE(after.hash, before.hash);
  EXPECT_EQ(after.hash, xxh3("aaaa bbbc\n"));
}

TEST_F(DataFile, ACorruptCacheEntryIsIgnored) {
  const std::string path = write("some data\n");
  const std::string cache = (dir_ / "cache").string();
  const std::string good = identify_data_file(path, cache).hash;
  const fs::path entry = fs::directory_iterator(cache)->path();
  std::ofstream(entry, std::ios::trunc) << "garbage\n";
  EXPECT_EQ(identify_data_file(path, cache).hash, good);
  EXPECT_THROW(identify_data_file((dir_ / "missing").string(), cache), std::runtime_error);
  EXPECT_THROW(identify_data_file(dir_.string(), cache), std::runtime_error);  // a directory
}

}  // namespace
}  // namespace sweep
