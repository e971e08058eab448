// A container image's identity in the record (its digest, cached), the charliecloud
// image checks, and the warning reproduce gives when the re-run's image is not the record's.
#include "container_image.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "config_error.h"  // ConfigError
#include "temp_dir.h"      // TempDirTest
#include "test_util.h"     // EXPECT_CONTAINS, thrown_message

namespace sweep {
namespace {

namespace fs = std::filesystem;

class ContainerImage : public sweep_test::TempDirTest {
 protected:
  ContainerImage() : TempDirTest("container_image_test") {}

  // A small directory image: files, a subdirectory, a link.
  fs::path make_image(const std::string& name) {
    const fs::path root = dir_ / name;
    fs::create_directories(root / "opt/sweep/bin");
    fs::create_directories(root / "usr/lib");
    std::ofstream(root / "opt/sweep/bin/sweep-train") << "trainer bytes";
    fs::permissions(root / "opt/sweep/bin/sweep-train", fs::perms::owner_all);
    std::ofstream(root / "usr/lib/libblas.so.3") << "blas bytes";
    fs::create_symlink("libblas.so.3", root / "usr/lib/libblas.so");
    return root;
  }

  ContainerSpec charliecloud(const fs::path& image) {
    ContainerSpec c;
    c.runtime = "charliecloud";
    c.command = "ch-run";
    c.image = image.string();
    c.trainer = "/opt/sweep/bin/sweep-train";
    return c;
  }
};

TEST_F(ContainerImage, DirectoryDigestIsTheContentsNotWhereOrWhen) {
  const fs::path a = make_image("a");
  const std::string d = directory_image_digest(a.string());
  EXPECT_EQ(d.rfind("xxh3:", 0), 0u) << d;
  EXPECT_EQ(d.size(), 21u);
  // A copy elsewhere, made later, is the same image.
  fs::copy(a, dir_ / "b", fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  EXPECT_EQ(directory_image_digest((dir_ / "b").string()), d);

  // One byte, one mode bit, one link target, one new empty directory: each another image.
  std::ofstream(dir_ / "b/usr/lib/libblas.so.3") << "blas bytez";
  EXPECT_NE(directory_image_digest((dir_ / "b").string()), d);
  std::ofstream(dir_ / "b/usr/lib/libblas.so.3") << "blas bytes";
  EXPECT_EQ(directory_image_digest((dir_ / "b").string()), d);
  fs::permissions(dir_ / "b/usr/lib/libblas.so.3", fs::perms::others_write, fs::perm_options::add);
  EXPECT_NE(directory_image_digest((dir_ / "b").string()), d);
  fs::permissions(dir_ / "b/usr/lib/libblas.so.3", fs::perms::others_write, fs::perm_options::remove);
  fs::remove(dir_ / "b/usr/lib/libblas.so");
  fs::create_symlink("libblas.so.0", dir_ / "b/usr/lib/libblas.so");
  EXPECT_NE(directory_image_digest((dir_ / "b").string()), d);
  fs::remove(dir_ / "b/usr/lib/libblas.so");
  fs::create_symlink("libblas.so.3", dir_ / "b/usr/lib/libblas.so");
  EXPECT_EQ(directory_image_digest((dir_ / "b").string()), d);
  fs::create_directory(dir_ / "b/mnt");
  EXPECT_NE(directory_image_digest((dir_ / "b").string()), d);
}

TEST_F(ContainerImage, DigestOfTheSpecIsCachedAndFollowsChanges) {
  const fs::path a = make_image("a");
  const std::string cache = (dir_ / "cache").string();
  const ContainerSpec c = charliecloud(a);
  const std::string d = container_image_digest(c, cache);
  EXPECT_EQ(d, directory_image_digest(a.string()));
  ASSERT_EQ(std::distance(fs::directory_iterator(cache), fs::directory_iterator()), 1);
  // The cached digest is what a second call returns; a rewritten file is seen (its times change).
  EXPECT_EQ(container_image_digest(c, cache), d);
  std::ofstream(a / "usr/lib/libblas.so.3") << "other blas";
  EXPECT_NE(container_image_digest(c, cache), d);
  EXPECT_EQ(container_image_digest(c, cache), directory_image_digest(a.string()));
  // An entry rewritten by someone without the user's key (another digest, the tag kept) is
  // not taken: the image is read again. Before one writer (cache_entry.h), image entries
  // had no tag and a planted digest came back as the image's.
  const fs::path entry = fs::directory_iterator(cache)->path();
  std::ifstream in(entry);
  std::vector<std::string> l;
  for (std::string line; std::getline(in, line);) l.push_back(line);
  in.close();
  ASSERT_EQ(l.size(), 5u);
  std::ofstream(entry, std::ios::trunc) << l[0] << '\n'
                                        << l[1] << '\n'
                                        << l[2] << "\nxxh3:00000000000000aa\n"
                                        << l[4] << '\n';
  EXPECT_EQ(container_image_digest(c, cache), directory_image_digest(a.string()));

  // An image file (.sif): its bytes. A named or absent image, or no container: "".
  ContainerSpec sif;
  sif.runtime = "apptainer";
  sif.image = (dir_ / "s.sif").string();
  std::ofstream(sif.image) << "sif bytes";
  EXPECT_EQ(container_image_digest(sif, "").rfind("xxh3:", 0), 0u);
  sif.image = (dir_ / "absent.sif").string();
  EXPECT_EQ(container_image_digest(sif, ""), "");
  ContainerSpec named;
  named.runtime = "docker";
  named.image = "sweep:cpu";
  EXPECT_EQ(container_image_digest(named, ""), "");
  EXPECT_EQ(container_image_digest(ContainerSpec{}, ""), "");

  EXPECT_EQ(container_run_env(c, d),
            (std::vector<std::string>{"SWEEP_CONTAINER_RUNTIME=charliecloud", "SWEEP_CONTAINER_IMAGE=" + a.string(),
                                      "SWEEP_CONTAINER_DIGEST=" + d}));
  EXPECT_TRUE(container_run_env(ContainerSpec{}, "").empty());
}

TEST_F(ContainerImage, CharliecloudImageMustHoldEveryBindDestination) {
  const fs::path a = make_image("a");
  ContainerSpec c = charliecloud(a);
  // Under /tmp: ch-run binds the host's /tmp itself.
  EXPECT_NO_THROW(check_charliecloud_image(c, "/tmp/some/sweep", "g.yaml"));
  const std::string refused =
      sweep_test::thrown_message<ConfigError>([&] { check_charliecloud_image(c, "/work/sweeps/s1", "g.yaml"); });
  EXPECT_CONTAINS(refused, "g.yaml: key 'launch.container.image': ch-run binds /work/sweeps/s1 into the image");
  EXPECT_CONTAINS(refused, "mkdir -p " + (a / "work/sweeps/s1").string());
  fs::create_directories(a / "work/sweeps/s1");
  EXPECT_NO_THROW(check_charliecloud_image(c, "/work/sweeps/s1", "g.yaml"));
  c.binds = {"/data:/mnt/data"};
  EXPECT_CONTAINS(
      sweep_test::thrown_message<ConfigError>([&] { check_charliecloud_image(c, "/work/sweeps/s1", "g.yaml"); }),
      "ch-run binds /mnt/data into the image");
  c.binds.clear();
  c.trainer = "/usr/bin/sweep-train";
  EXPECT_CONTAINS(sweep_test::thrown_message<ConfigError>([&] { check_charliecloud_image(c, "/tmp/s", "g.yaml"); }),
                  "key 'launch.container.trainer': /usr/bin/sweep-train is not in the image");
  // Not on this machine (the compute nodes' own path): nothing to check here.
  EXPECT_NO_THROW(check_charliecloud_image(charliecloud(dir_ / "absent"), "/work/s", "g.yaml"));
}

TEST(ContainerDifference, WarnsWhenTheReRunRunsElsewhereThanTheRecord) {
  ContainerSpec now;
  EXPECT_EQ(container_difference({}, now, ""), "") << "host and host";
  const RecordedContainer was{"charliecloud", "/img/a", "xxh3:00000000000000aa"};
  EXPECT_EQ(container_difference(was, now, ""),
            "warning: container: the record ran in the charliecloud image /img/a (xxh3:00000000000000aa); this "
            "re-run runs on the host, whose libraries may give other bits (--container charliecloud --image /img/a "
            "runs it there)");
  now.runtime = "charliecloud";
  now.image = "/img/b";
  EXPECT_EQ(container_difference(was, now, "xxh3:00000000000000aa"), "") << "the same bytes under another path";
  EXPECT_EQ(container_difference(was, now, "xxh3:00000000000000bb"),
            "warning: container: the record ran in the charliecloud image /img/a (xxh3:00000000000000aa); this "
            "re-run uses the charliecloud image /img/b (xxh3:00000000000000bb): another image, whose libraries may "
            "give other bits");
  EXPECT_CONTAINS(container_difference({}, now, "xxh3:00000000000000bb"),
                  "warning: container: the record ran on the host; this re-run runs in the charliecloud image /img/b");
}

}  // namespace
}  // namespace sweep
