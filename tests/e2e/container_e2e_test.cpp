// Ranks in a real container (charliecloud's unprivileged ch-run, label `container`): a grid
// run inside the image built by containers/build-charliecloud-image.sh (the ctest fixture
// charliecloud_image builds it into <build>/charliecloud-image) gives, on 1 and 2 ranks, the
// bits the same grid gives on the host; its records name the image; and `sweep reproduce`
// in another image, or on the host, says so. Skipped when ch-run or the image is missing.
//
// The boxed sweep lives in <build>/container-e2e/sweep, outside /tmp, so that it reaches
// the ranks only through the driver's bind (ch-run binds the host's /tmp itself): the
// image holds that directory as a mount point (SWEEP_IMAGE_MOUNTS).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "container_image.h"  // directory_image_digest
#include "e2e_util.h"

namespace fs = std::filesystem;
using sweep_test::bin;
using sweep_test::read_file;

namespace {

const fs::path kImage = fs::path(SWEEP_BINARY_DIR) / "charliecloud-image";
const fs::path kBoxedDir = fs::path(SWEEP_BINARY_DIR) / "container-e2e" / "sweep";
const char* kTrainer = "/opt/sweep/bin/sweep-train";

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    if (end > start && ::access((dirs.substr(start, end - start) + "/" + program).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

class ContainerE2E : public sweep_test::E2eTest {
 protected:
  ContainerE2E() : E2eTest("container_e2e") {}
  void SetUp() override {
    E2eTest::SetUp();
    if (!on_path("ch-run")) GTEST_SKIP() << "ch-run not found: apt install charliecloud (containers/install-deps.sh)";
    if (!fs::exists(kImage / "opt/sweep/bin/sweep-train"))
      GTEST_SKIP() << "no charliecloud image at " << kImage.string()
                   << ": `ctest -L container` builds it first (fixture charliecloud_image), or run "
                      "SWEEP_IMAGE_MOUNTS="
                   << kBoxedDir.string() << " containers/build-charliecloud-image.sh " << kImage.string();
    // The image's trainer is not on the host: a run that completes ran in the image.
    ASSERT_FALSE(fs::exists(kTrainer)) << "this test needs a host without " << kTrainer;
    ASSERT_TRUE(fs::is_directory(kImage / kBoxedDir.relative_path()))
        << "the image has no mount point for " << kBoxedDir.string() << " (SWEEP_IMAGE_MOUNTS)";
    std::error_code ec;
    fs::remove_all(kBoxedDir, ec);
  }

  /// A grid of the tiny model on 1 and 2 ranks; `container` is launch.container's flow map, or "".
  std::string grid(const std::string& name, const std::string& container) {
    return write(name + ".yaml", "name: " + name +
                                     "\n"
                                     "base:\n" +
                                     sweep_test::tiny_model("  ") +
                                     "  train: {steps: 6, micro_batch: 2, accum: 2, checksum_every: 2}\n"
                                     "grid:\n"
                                     "  dist.world_size: [1, 2]\n"
                                     "launch:\n"
                                     "  slots: 2\n" +
                                     (container.empty() ? "" : "  container: " + container + "\n"));
  }
  std::string boxed() const {
    return "{runtime: charliecloud, image: '" + kImage.string() + "', trainer: " + kTrainer + "}";
  }
};

TEST_F(ContainerE2E, RanksInTheImageGiveTheHostsBitsOnOneAndTwoRanks) {
  const fs::path bare = dir_ / "bare";
  auto st = sweep_cli({"run", grid("g", ""), "--out", bare.string(), "--quiet"}, "bare.log");
  ASSERT_TRUE(st.ok()) << read("bare.log");
  st = sweep_cli({"run", grid("g", boxed()), "--out", kBoxedDir.string(), "--quiet"}, "boxed.log");
  ASSERT_TRUE(st.ok()) << read("boxed.log");

  const auto host = sweep_test::completed_records(bare), image = sweep_test::completed_records(kBoxedDir);
  ASSERT_EQ(host.size(), 2u);
  ASSERT_EQ(image.size(), 2u);
  EXPECT_EQ(sweep_test::sweep_bit_difference(host, image), "");
  EXPECT_EQ(sweep_test::sweep_bit_difference(image, host), "");
  const std::string digest = sweep::directory_image_digest(kImage.string());
  for (const auto& [id, r] : image) {
    EXPECT_EQ(r.status, "completed") << id;
    EXPECT_EQ(r.env("container.runtime"), "charliecloud") << id;
    EXPECT_EQ(r.env("container.image"), kImage.string()) << id;
    EXPECT_EQ(r.env("container.digest"), digest) << id;
    EXPECT_TRUE(fs::exists(kBoxedDir / "runs" / id / "logs" / "rank0.log")) << id;
    if (r.world_size == 2) {
      EXPECT_TRUE(fs::exists(kBoxedDir / "runs" / id / "logs" / "rank1.log")) << id;
    }
  }
  for (const auto& [id, r] : host) {
    EXPECT_EQ(r.env("container.runtime"), "") << id;
    EXPECT_EQ(r.env("container.digest"), "") << id;
  }
}

// A pbt search in the image: every fork starts from its parent's checkpoint on the sweep
// directory, which the container binds at the same path, and the search decides and
// trains as on the host (the same search.log and bits).
TEST_F(ContainerE2E, APbtSearchInTheImageForksAsOnTheHost) {
  const std::string host = write("pbt.yaml", sweep_test::pbt_search_grid(0, "launch: {parallel: 2, slots: 2}\n"));
  const std::string in_image =
      write("pbt-boxed.yaml",
            sweep_test::pbt_search_grid(0, "launch: {parallel: 2, slots: 2, container: " + boxed() + "}\n"));
  const fs::path bare = dir_ / "bare";
  ASSERT_TRUE(sweep_cli({"run", host, "--out", bare.string(), "--quiet"}, "host.log").ok())
      << read_file(dir_ / "host.log");
  ASSERT_TRUE(sweep_cli({"run", in_image, "--out", kBoxedDir.string(), "--quiet"}, "boxed.log").ok())
      << read_file(dir_ / "boxed.log");
  const std::string log = read_file(bare / "search.log");
  EXPECT_CONTAINS(log, " exploits member ");
  EXPECT_EQ(read_file(kBoxedDir / "search.log"), log);
  const auto a = sweep_test::completed_records(bare), b = sweep_test::completed_records(kBoxedDir);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_EQ(sweep_test::sweep_bit_difference(a, b), "");
  size_t forks = 0;
  for (const auto& [id, r] : b) {
    forks += r.lineage.kind == "forked";
    EXPECT_EQ(r.env("container.image"), kImage.string()) << id;
  }
  EXPECT_GE(forks, 1u);
}

TEST_F(ContainerE2E, ReproduceSaysWhenItsImageIsNotTheRecords) {
  const std::string g = write("one.yaml", "name: one\nbase:\n" + sweep_test::tiny_model("  ") +
                                              "  train: {steps: 4, micro_batch: 2}\n"
                                              "launch:\n  container: " +
                                              boxed() + "\n");
  auto st = sweep_cli({"run", g, "--out", kBoxedDir.string(), "--quiet"}, "run.log");
  ASSERT_TRUE(st.ok()) << read("run.log");
  const auto runs = sweep_test::completed_records(kBoxedDir);
  ASSERT_EQ(runs.size(), 1u);
  const std::string run = (kBoxedDir / "runs" / runs.begin()->first).string();

  // The same image: reproduced, no warning.
  st = sweep_cli(
      {"reproduce", run, "--container", "charliecloud", "--image", kImage.string(), "--container-trainer", kTrainer},
      "same.log");
  EXPECT_EQ(st.code, 0) << read("same.log");
  EXPECT_CONTAINS(read("same.log"), "reproduced bit-for-bit");
  EXPECT_EQ(read("same.log").find("warning: container"), std::string::npos) << read("same.log");

  // Another image (the same files, linked, and one more): it still runs, with a warning.
  const fs::path other = fs::path(SWEEP_BINARY_DIR) / "container-e2e" / "other-image";
  std::error_code ec;
  fs::remove_all(other, ec);
  ASSERT_TRUE(sweep_test::run_cli({"/bin/cp", "-al", kImage.string(), other.string()}, dir_ / "cp.log").ok())
      << read("cp.log");
  sweep_test::write_file(other / "opt/sweep/another-image", "not the recorded image\n");
  st = sweep_cli(
      {"reproduce", run, "--container", "charliecloud", "--image", other.string(), "--container-trainer", kTrainer},
      "other.log");
  EXPECT_EQ(st.code, 0) << read("other.log");
  EXPECT_CONTAINS(read("other.log"), "warning: container: the record ran in the charliecloud image " + kImage.string() +
                                         " (" + runs.begin()->second.env("container.digest") +
                                         "); this re-run uses the charliecloud image " + other.string());
  fs::remove_all(other, ec);

  // On the host: a warning too.
  st = sweep_cli({"reproduce", run}, "host.log");
  EXPECT_EQ(st.code, 0) << read("host.log");
  EXPECT_CONTAINS(read("host.log"), "this re-run runs on the host");
}

}  // namespace
