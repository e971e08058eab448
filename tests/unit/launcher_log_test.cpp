// What the driver reads out of a launcher's output when a job was torn down.
#include "launcher_log.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "temp_dir.h"  // TempDir

namespace sweep {
namespace {

TEST(LauncherFinding, OpenMpiSignalNamesTheRankAndSignal) {
  const std::string text =
      "--------------------------------------------------------------------------\n"
      "mpirun noticed that process rank 3 with PID 0 on node gpu-07 exited on signal 9 (Killed).\n"
      "--------------------------------------------------------------------------\n";
  EXPECT_EQ(launcher_finding(text), "rank 3 exited on signal 9 (Killed)");
}

TEST(LauncherFinding, OpenMpiFirstNonZeroExit) {
  const std::string text =
      "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
      "the job to be terminated. The first process to do so was:\n\n"
      "  Process name: [[2762,1],1]\n"
      "  Exit code:    4\n";
  EXPECT_EQ(launcher_finding(text), "rank 1 exited with code 4 first");
}

TEST(LauncherFinding, Srun) {
  EXPECT_EQ(launcher_finding("srun: error: node1: task 2: Killed\n"), "rank 2: Killed");
  EXPECT_EQ(launcher_finding("srun: error: node1: task 0: Exited with exit code 4\n"),
            "rank 0: Exited with exit code 4");
}

TEST(LauncherFinding, NothingNamedGivesEmpty) {
  EXPECT_EQ(launcher_finding(""), "");
  EXPECT_EQ(launcher_finding("step 3 loss 4.1\nPrimary job terminated normally\n"), "");
}

TEST(LatestAttemptOutput, OnlyTheLastAttemptCounts) {
  const sweep_test::TempDir tmp("launcher_log_");
  const std::filesystem::path& dir = tmp.path();
  const auto log = dir / "launcher.log";
  std::ofstream(log) << "=== sweep: attempt 1 of run x ===\n"
                        "mpirun noticed that process rank 1 with PID 0 on node a exited on signal 9 (Killed).\n"
                        "=== sweep: attempt 2 of run x (--resume) ===\n"
                        "all fine so far\n";
  const std::string last = latest_attempt_output(log.string());
  EXPECT_EQ(last, "=== sweep: attempt 2 of run x (--resume) ===\nall fine so far\n");
  EXPECT_EQ(launcher_finding(last), "");
  EXPECT_EQ(latest_attempt_output((dir / "absent.log").string()), "");
}

}  // namespace
}  // namespace sweep
