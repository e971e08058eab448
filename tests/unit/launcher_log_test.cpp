// What the driver reads out of a launcher's output when a job was torn down.
#include "launcher_log.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "temp_dir.h"   // TempDir
#include "test_util.h"  // EXPECT_CONTAINS

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

// What Open MPI 4.1 printed here when every process of node sweep-node2 was killed in the
// middle of a run (tests/cluster): its daemon's link to mpirun broke, and the surviving rank
// saw its peer disconnect.
const char* const kNodeKilled =
    "--------------------------------------------------------------------------\n"
    "ORTE was unable to reliably start one or more daemons.\n"
    "This usually is caused by:\n"
    "--------------------------------------------------------------------------\n"
    "An MPI communication peer process has unexpectedly disconnected.  This\n"
    "usually indicates a failure in the peer process (e.g., a crash or\n"
    "otherwise exiting without calling MPI_FINALIZE first).\n\n"
    "  Local host: sweep-node1\n"
    "  Local PID:  30836\n"
    "  Peer host:  sweep-node2\n"
    "--------------------------------------------------------------------------\n";

TEST(LauncherLostHost, ADaemonGoneNamesItsHost) {
  EXPECT_EQ(launcher_lost_host(kNodeKilled), "sweep-node2");
  EXPECT_EQ(launcher_lost_host("ORTE has lost communication with a remote daemon.\n\n"
                               "  HNP daemon   : [[21542,0],0] on node head\n"
                               "  Remote daemon: [[21542,0],2] on node gpu-07\n"),
            "gpu-07");
  EXPECT_EQ(launcher_finding(kNodeKilled), "") << "no rank's exit is reported: its daemon went with it";
}

TEST(LauncherLostHost, ARankThatCrashedAloneIsNoLostNode) {
  // The rank's daemon lives on and reports it; the peer's disconnect is the rank's.
  const std::string text =
      "An MPI communication peer process has unexpectedly disconnected.\n  Peer host:  sweep-node2\n"
      "mpirun noticed that process rank 1 with PID 0 on node sweep-node2 exited on signal 11 (Segmentation fault).\n";
  EXPECT_EQ(launcher_lost_host(text), "");
  EXPECT_EQ(launcher_lost_host(""), "");
}

TEST(LauncherFinding, AHostMpirunCouldNotStartOnIsSaidPlainly) {
  EXPECT_EQ(launcher_finding("ssh: Could not resolve hostname gpu-7: Name or service not known\n"),
            "host gpu-7 does not resolve (a name in launch.hosts or the hostfile)");
  EXPECT_CONTAINS(launcher_finding("ORTE was unable to reliably start one or more daemons.\n"),
                  "mpirun could not start on every host");
}

TEST(LauncherFinding, ATransportThatDoesNotConnectTheHostsComesFirst) {
  // Seen here with btl_tcp_if_include lo across two test nodes: each reached itself.
  const std::string stranger =
      "WARNING: Open MPI accepted a TCP connection from what appears to be a\n"
      "another Open MPI process but cannot find a corresponding process\n"
      "entry for that peer.\n\n  Local host: sweep-node2\n  PID:        29927\n"
      "  Process name: [[2762,1],0]\n  Exit code:    4\n";
  EXPECT_CONTAINS(launcher_finding(stranger), "the ranks cannot reach each other: on sweep-node2");
  const std::string refused =
      "WARNING: Open MPI failed to TCP connect to a peer MPI process.  This\nshould not happen.\n\n"
      "  Local host: sweep-node2\n  PID:        22678\n  Message:    connect() to 127.0.0.1:1025 failed\n";
  EXPECT_EQ(launcher_finding(refused),
            "the ranks cannot reach each other: on sweep-node2, connect() to 127.0.0.1:1025 failed (check the network "
            "between the hosts and Open MPI's btl_tcp_if_include)");
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
