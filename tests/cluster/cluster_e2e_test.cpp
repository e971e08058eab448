// Runs across real "nodes": the test nodes of tests/cluster/start-nodes.sh, each a network
// and UTS namespace of its own (own hostname, own address in 198.51.100.0/24), so Open MPI
// between them goes over TCP as between machines. `sweep run` with launcher mpirun and
// `hosts` starts the ranks through tests/cluster/node-rsh (Open MPI's rsh agent; users keep
// ssh). The promise under test: the transport is layout, not math.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "e2e_util.h"   // E2eTest, bin, run_cli, completed_records, bit_difference
#include "run_files.h"  // RunLock::holder

namespace fs = std::filesystem;

namespace {

using sweep_test::bit_difference;
using sweep_test::read_file;

const char* const kNodes[] = {"sweep-node1", "sweep-node2"};

/// Whether test node `node` is up: its namespaces are bound under /run.
bool node_up(const std::string& node) {
  return fs::exists("/run/sweep-nodes/" + node + ".uts") && fs::exists("/run/netns/" + node);
}

/// Sends `sig` to every process in test node `node`'s network namespace whose command line
/// mentions one of `needles` (Open MPI's daemon and the ranks of a run: the node's slurmd
/// is left alone). Returns how many.
int signal_node(const std::string& node, int sig, const std::vector<std::string>& needles) {
  struct stat ns;
  if (::stat(("/run/netns/" + node).c_str(), &ns) != 0) return 0;
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    struct stat st;
    if (pid.find_first_not_of("0123456789") != std::string::npos || ::stat((e.path() / "ns/net").c_str(), &st) != 0 ||
        st.st_ino != ns.st_ino || st.st_dev != ns.st_dev)
      continue;
    std::string cmd = sweep_test::read_file(e.path() / "cmdline");
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    for (const auto& needle : needles)
      if (cmd.find(needle) != std::string::npos) {
        n += ::kill(std::atoi(pid.c_str()), sig) == 0;
        break;
      }
  }
  return n;
}

class ClusterE2E : public sweep_test::E2eTest {
 protected:
  ClusterE2E() : E2eTest("sweep_cluster") {}

  void SetUp() override {
    E2eTest::SetUp();
    for (const char* n : kNodes)
      if (!node_up(n)) GTEST_SKIP() << "test node " << n << " is not up (run tests/cluster/start-nodes.sh as root)";
  }

  /// The launch section: `hosts` for mpirun across the test nodes, else the local launcher.
  static std::string launch(const std::string& hosts, const std::string& extra = "") {
    const std::string blas = "  blas: native\n";  // one kernel for every layout (auto is native on remote hosts)
    if (hosts.empty()) return "launch:\n  launcher: local\n" + blas + extra;
    return "launch:\n  launcher: mpirun\n" + blas + "  hosts: [" + hosts +
           "]\n"
           "  mpi_args: [--mca, plm_rsh_agent, " +
           std::string(SWEEP_SOURCE_DIR) +
           "/tests/cluster/node-rsh, --mca, oob_tcp_if_include, 198.51.100.0/24, --mca, btl_tcp_if_include, "
           "198.51.100.0/24, --mca, btl, 'self,tcp,vader']\n" +
           extra;
  }

  /// A grid of fp32 and bf16 at ZeRO 0 and 3 (W=1: 0 alone) with a global batch of 8
  /// micro-batches of 2.
  std::string grid(const std::string& name, int world, const std::string& launch_section, int steps = 6,
                   const std::string& more_train = "") const {
    return write(name + ".yaml", "name: " + name + "\nbase:\n" + sweep_test::tiny_model("  ") +
                                     "  data: {eval_fraction: 0.01}\n"
                                     "  train: {steps: " +
                                     std::to_string(steps) + ", micro_batch: 2, accum: " + std::to_string(8 / world) +
                                     ", lr: 3.0e-3, clip_norm: 0.3, eval_every: 3, eval_batches: 2" + more_train +
                                     "}\n"
                                     "  dist: {world_size: " +
                                     std::to_string(world) +
                                     ", timeout_s: 20}\n"
                                     "grid:\n  train.precision: [fp32, bf16]\n  dist.zero_stage: [" +
                                     (world > 1 ? "0, 3" : "0") + "]\n" + launch_section);
  }

  /// The run directory of the one run of sweep `sweep` once rank 0 holds its lock and its
  /// rank 1 has logged in sweep-node2, a second after; "" after 60 s.
  static fs::path wait_until_training(const fs::path& sweep) {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
      std::error_code ec;
      for (fs::directory_iterator it(sweep / "runs", ec), end; !ec && it != end; it.increment(ec))
        if (!sweep::RunLock::holder(it->path().string()).empty() && fs::exists(it->path() / "record.h5.partial") &&
            fs::exists(it->path() / "logs/sweep-node2/rank1.log")) {
          std::this_thread::sleep_for(std::chrono::seconds(1));
          return it->path();
        }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return {};
  }

  /// How often `needle` occurs in `text`.
  static size_t count(const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  }

  /// Runs `sweep run` on grid `name` into <dir>/<name>; returns its records by
  /// "precision zero" (W=1 has ZeRO 0 only: the stage is idle there).
  std::map<std::string, sweep::Record> run(const std::string& name, const std::string& grid_path) {
    auto r = sweep_cli({"run", grid_path, "--out", (dir_ / name).string()}, name + ".log");
    EXPECT_TRUE(r.ok()) << log(name);
    std::map<std::string, sweep::Record> out;
    for (auto& [id, rec] : sweep_test::completed_records(dir_ / name)) {
      rec.path = (dir_ / name / "runs" / id).string();
      out[rec.config["train.precision"] + " zero" + rec.config["dist.zero_stage"]] = rec;
    }
    return out;
  }
};

TEST_F(ClusterE2E, TwoNodesOverTcpEqualOneNodeAndOneRank) {
  // W=2 across two nodes (TCP) = W=2 on one node (shared memory) = W=1 with accum doubled,
  // and W=4 across the nodes (two ranks each), fp32 and bf16, ZeRO 0 and 3.
  auto one = run("w1", grid("w1", 1, launch("")));
  auto local2 = run("w2_local", grid("w2_local", 2, launch("")));
  auto nodes2 = run("w2_nodes", grid("w2_nodes", 2, launch("sweep-node1:1, sweep-node2:1")));
  auto nodes4 = run("w4_nodes", grid("w4_nodes", 4, launch("sweep-node1:2, sweep-node2:2")));
  ASSERT_EQ(local2.size(), 4u);
  ASSERT_EQ(nodes2.size(), 4u);
  ASSERT_EQ(nodes4.size(), 4u);
  for (const auto& [key, rec] : nodes2) {
    SCOPED_TRACE(key);
    const std::string p = key.substr(0, key.find(' '));
    ASSERT_TRUE(one.count(p + " zero0")) << "W=1 has no " << p << " run";
    EXPECT_EQ(bit_difference(one.at(p + " zero0"), rec), "") << "W=1 vs W=2 across nodes";
    EXPECT_EQ(bit_difference(local2.at(key), rec), "") << "W=2 on one node vs across nodes";
    EXPECT_EQ(bit_difference(rec, nodes4.at(key)), "") << "W=2 vs W=4 across nodes";
    // The record names every host and where each rank ran, and the self-test timed the
    // link between the nodes.
    EXPECT_EQ(rec.env("hosts"), "sweep-node1,sweep-node2");
    EXPECT_EQ(rec.env("rank_hosts"), "sweep-node1,sweep-node2");
    EXPECT_EQ(nodes4.at(key).env("rank_hosts"), "sweep-node1,sweep-node1,sweep-node2,sweep-node2");
    EXPECT_EQ(rec.summary.at("comm.internode.pair"), "0@sweep-node1<->1@sweep-node2");
    EXPECT_GT(std::atof(rec.summary.at("comm.internode.GBps").c_str()), 0.0);
    EXPECT_EQ(local2.at(key).summary.count("comm.internode.GBps"), 0u) << "one host: no link between hosts";
    // Per-node logs: logs/<host>/rank<r>.log.
    EXPECT_TRUE(fs::is_regular_file(fs::path(rec.path) / "logs/sweep-node1/rank0.log"));
    EXPECT_TRUE(fs::is_regular_file(fs::path(rec.path) / "logs/sweep-node2/rank1.log"));
    EXPECT_FALSE(fs::exists(fs::path(rec.path) / "logs/rank0.log"));
    EXPECT_TRUE(fs::is_regular_file(fs::path(nodes4.at(key).path) / "logs/sweep-node2/rank3.log"));
  }
  // The plain runs keep their flat logs.
  EXPECT_TRUE(fs::is_regular_file(fs::path(local2.begin()->second.path) / "logs/rank1.log"));
}

TEST_F(ClusterE2E, ANodeWhoseProcessesAreKilledFailsTheRunNamingItAndIsRetried) {
  // A W=2 run across the nodes, long enough to be killed in the middle: every process of
  // the run in sweep-node2 (its Open MPI daemon and rank 1) gets SIGKILL. The attempt
  // fails at once (the peer's TCP connection is reset), classified node_fail, its cause
  // naming the node and the rank, in the record too. The same run under a grid with
  // launch.retries node_fail: 1 (launch settings are not the run's identity), killed
  // again, is retried to completion.
  const std::string base = "base:\n" + sweep_test::tiny_model("  ") +
                           "  train: {steps: 300, micro_batch: 2, accum: 2, lr: 3.0e-3}\n"
                           "  dist: {world_size: 2, timeout_s: 20}\n";
  const std::string once = write("once.yaml", "name: kill\n" + base + launch("sweep-node1:1, sweep-node2:1"));
  const std::string again = write(
      "again.yaml", "name: kill\n" + base + launch("sweep-node1:1, sweep-node2:1", "  retries: {node_fail: 1}\n"));
  sweep::SpawnRunner runner;
  // Starts `sweep run GRID`, kills the node's part of the run once it trains, waits for the
  // driver to end (`st`); returns the run directory and how long after the kill the driver
  // saw the attempt end (a new attempt in the log, or its own end).
  auto run_and_kill = [&](const std::string& grid, const std::string& log_name, sweep::ExitStatus* st) {
    // The earlier attempt's rank log would say "training" before this attempt's daemon on
    // sweep-node2 is up (a kill then hits the daemon's start, on a slow machine): only a
    // log this attempt writes counts.
    std::error_code ec;
    for (fs::directory_iterator it(dir_ / "kill" / "runs", ec), end; !ec && it != end; it.increment(ec))
      fs::remove(it->path() / "logs/sweep-node2/rank1.log", ec);
    const int id =
        runner.start(sweep_argv({"run", grid, "--out", (dir_ / "kill").string()}), (dir_ / log_name).string());
    const fs::path run_dir = wait_until_training(dir_ / "kill");
    EXPECT_FALSE(run_dir.empty()) << "the run did not start on both nodes: " << read(log_name);
    const size_t attempts = count(read_file(run_dir / "logs/launcher.log"), "=== sweep: attempt");
    const auto killed_at = std::chrono::steady_clock::now();
    EXPECT_GE(signal_node("sweep-node2", SIGKILL, {"orted", dir_.string()}), 1) << "nothing of the run in sweep-node2";
    double ended_after = 1e9;
    while (std::chrono::steady_clock::now() - killed_at < std::chrono::seconds(300)) {
      bool done = false;
      for (auto& [pid, status] : runner.wait_some(0.1))
        if (pid == id) *st = status, done = true;
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
      if (ended_after > 1e8 &&
          (done || count(read_file(run_dir / "logs/launcher.log"), "=== sweep: attempt") > attempts))
        ended_after = t;
      if (done) break;
    }
    return std::make_pair(run_dir, ended_after);
  };
  sweep::ExitStatus st;
  auto [run_dir, ended_after] = run_and_kill(once, "once.log", &st);
  ASSERT_FALSE(run_dir.empty());
  EXPECT_EQ(st.code, 1) << log("once");
  // The cause is the lost node (checked below), not a timeout; the bound only catches a
  // driver that waited for something else, far from any machine's speed.
  EXPECT_LT(ended_after, 90.0) << "the attempt should fail by the node's loss";
  EXPECT_CONTAINS(log("once"), "node_fail");
  EXPECT_CONTAINS(log("once"), "node sweep-node2 (rank 1) was lost");
  EXPECT_CONTAINS(sweep::read_record_status((run_dir / "record.h5").string()).failure,
                  "node sweep-node2 (rank 1) was lost");
  std::tie(run_dir, ended_after) = run_and_kill(again, "again.log", &st);
  ASSERT_FALSE(run_dir.empty());
  EXPECT_LT(ended_after, 90.0) << "the attempt should fail by the node's loss";  // as above: 33 s under load
  EXPECT_TRUE(st.ok()) << log("again");
  EXPECT_CONTAINS(log("again"), "retrying");
  EXPECT_CONTAINS(log("again"), "node sweep-node2 (rank 1) was lost");
  EXPECT_CONTAINS(read_file(run_dir / "state"), "state: completed");
}

TEST_F(ClusterE2E, ANodeThatFreezesEndsTheRunWithinTheTimeoutNamingTheStuckRank) {
  // A node that stops answering without closing anything (its link down, its processes
  // stopped: a hung machine or a cut cable): rank 0 waits in a collective until
  // dist.timeout_s, records why and exits; mpirun would wait for the frozen node's daemon
  // forever, so the driver ends it once rank 0 has finished its record. The whole failure
  // takes dist.timeout_s plus a few seconds.
  const std::string g = write("freeze.yaml", "name: freeze\nbase:\n" + sweep_test::tiny_model("  ") +
                                                 "  train: {steps: 300, micro_batch: 2, accum: 2, lr: 3.0e-3}\n"
                                                 "  dist: {world_size: 2, timeout_s: 6}\n" +
                                                 launch("sweep-node1:1, sweep-node2:1"));
  sweep::SpawnRunner runner;
  const int id =
      runner.start(sweep_argv({"run", g, "--out", (dir_ / "freeze").string()}), (dir_ / "freeze.log").string());
  const fs::path run_dir = wait_until_training(dir_ / "freeze");
  ASSERT_FALSE(run_dir.empty()) << "the run did not start on both nodes: " << log("freeze");
  const auto frozen_at = std::chrono::steady_clock::now();
  ASSERT_EQ(sweep_test::run_cli({"/usr/sbin/ip", "link", "set", "v-sweep-node2", "down"}, dir_ / "ip.log").code, 0);
  const int stopped = signal_node("sweep-node2", SIGSTOP, {"orted", dir_.string()});
  // Bounded: without the driver's end of a lingering launcher, mpirun would wait forever.
  std::optional<sweep::ExitStatus> ended;
  while (!ended && std::chrono::steady_clock::now() - frozen_at < std::chrono::seconds(60))
    for (auto& [pid, status] : runner.wait_some(0.5))
      if (pid == id) ended = status;
  if (!ended) runner.signal_group(id, SIGKILL);
  signal_node("sweep-node2", SIGCONT, {"orted", dir_.string()});
  sweep_test::run_cli({"/usr/sbin/ip", "link", "set", "v-sweep-node2", "up"}, dir_ / "ip.log");
  ASSERT_GE(stopped, 1) << "nothing of the run in sweep-node2";
  ASSERT_TRUE(ended) << "the sweep was still running 60 s after the node froze: " << log("freeze");
  EXPECT_FALSE(ended->ok());
  // The 60 s wait above bounds it; the cause is the watchdog (its line is checked below).
  const std::string out = log("freeze");
  EXPECT_CONTAINS(out, "hang");
  EXPECT_CONTAINS(out, "rank 0: no progress for 6 s (dist.timeout_s)");
  EXPECT_CONTAINS(out, "rank 0 finished its record");
  EXPECT_CONTAINS(sweep::read_record_status((run_dir / "record.h5").string()).failure, "no progress for 6 s");
}

// A bad node, not a bad rank: every rank on sweep-node2 flips a bit of its first share
// from step 3 (fault.corrupt_host), and the run puts rank 0 there (hosts in that order).
// `sweep diagnose --hosts` replays on the run's own nodes and names rank 0 and its host;
// the same diagnosis with every replay on this host, where no bad node computes, finds
// every replay differing from the original alike: transient.
TEST_F(ClusterE2E, ABadNodeIsNamedByDiagnoseReplayingOnTheRunsOwnNodes) {
  const std::string hosts = "sweep-node2:1, sweep-node1:1";
  const std::string grid = write("bad.yaml", "name: bad\nbase:\n" + sweep_test::tiny_model("  ") +
                                                 "  data: {samples: 24}\n"
                                                 "  train: {steps: 6, micro_batch: 2, accum: 2, lr: 3.0e-3, "
                                                 "checkpoint_every: 2, keep_checkpoints: 10}\n"
                                                 "  dist: {world_size: 2, timeout_s: 20}\n"
                                                 "  fault: {corrupt_from: 3, corrupt_host: sweep-node2}\n" +
                                                 launch(hosts));
  ASSERT_TRUE(sweep_cli({"run", grid, "--out", (dir_ / "bad").string()}, "bad.log").ok()) << log("bad");
  const auto records = sweep_test::completed_records(dir_ / "bad");
  ASSERT_EQ(records.size(), 1u);
  const std::string run = (dir_ / "bad" / "runs" / records.begin()->first).string();
  EXPECT_EQ(records.begin()->second.env("rank_hosts"), "sweep-node2,sweep-node1");
  // The grid's mpiexec arguments, one --mpi-arg each (rsh agent and interfaces).
  std::vector<std::string> argv = {"diagnose",  run,           "--step",  "5",
                                   "--mpiexec", SWEEP_MPIEXEC, "--hosts", "sweep-node2:1,sweep-node1:1"};
  for (const char* a :
       {"--mca", "plm_rsh_agent", SWEEP_SOURCE_DIR "/tests/cluster/node-rsh", "--mca", "oob_tcp_if_include",
        "198.51.100.0/24", "--mca", "btl_tcp_if_include", "198.51.100.0/24", "--mca", "btl", "self,tcp,vader"})
    argv.push_back(std::string("--mpi-arg=") + a);
  const auto on_nodes = sweep_cli(argv, "diagnose-nodes.log");
  EXPECT_EQ(on_nodes.code, 0) << on_nodes.out;
  EXPECT_CONTAINS(on_nodes.out,
                  "diagnose step 5: rank 0 (host sweep-node2): shares differ from the one-rank replay exactly "
                  "where rank 0 computes them");
  const auto here = sweep_cli({"diagnose", run, "--step", "5", "--mpiexec", SWEEP_MPIEXEC}, "diagnose-here.log");
  EXPECT_CONTAINS(here.out, "diagnose step 5: transient: every replay differs from the original");
}

TEST_F(ClusterE2E, AWrongHostOrATransportThatDoesNotConnectTheNodesIsSaidPlainly) {
  // A host that is not there: mpirun cannot start its daemon; the run fails at once.
  const std::string bad_host = write(
      "badhost.yaml", "name: badhost\nbase:\n" + sweep_test::tiny_model("  ") +
                          "  train: {steps: 4, micro_batch: 2, accum: 2}\n  dist: {world_size: 2, timeout_s: 6}\n" +
                          launch("sweep-node1:1, sweep-node9:1"));
  auto r = sweep_cli({"run", bad_host, "--out", (dir_ / "badhost").string()}, "badhost.log");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_CONTAINS(r.out, "mpirun could not start on every host");
  // Open MPI told to use the loopback interface between two hosts: each rank reaches
  // itself, the run hangs, rank 0's watchdog ends it, and the cause names the transport.
  std::string bad_net = launch("sweep-node1:1, sweep-node2:1", "  timeout_s: 120\n");  // a bound, never reached
  bad_net.replace(bad_net.find("btl_tcp_if_include, 198.51.100.0/24"), 35, "btl_tcp_if_include, lo");
  const std::string bad_net_grid =
      write("badnet.yaml",
            "name: badnet\nbase:\n" + sweep_test::tiny_model("  ") +
                "  train: {steps: 4, micro_batch: 2, accum: 2}\n  dist: {world_size: 2, timeout_s: 6}\n" + bad_net);
  r = sweep_cli({"run", bad_net_grid, "--out", (dir_ / "badnet").string()}, "badnet.log");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_CONTAINS(r.out, "the ranks cannot reach each other");
}

// Ranks in a container on every node: the charliecloud image of the `container` tests
// (ctest fixture charliecloud_image), ch-run started by each rank inside its node, the
// launcher and Open MPI's daemons on the nodes outside it (the hybrid model).
class ClusterContainerE2E : public ClusterE2E {
 protected:
  const fs::path image_ = fs::path(SWEEP_BINARY_DIR) / "charliecloud-image";
  void SetUp() override {
    ClusterE2E::SetUp();
    if (IsSkipped()) return;
    if (!fs::exists(image_ / "opt/sweep/bin/sweep-train"))
      GTEST_SKIP() << "no charliecloud image at " << image_.string() << " (ctest -L container builds it)";
  }
};

TEST_F(ClusterContainerE2E, RanksInTheImageOnTwoNodesGiveTheBitsOfOneRankOnTheHost) {
  const std::string model = sweep_test::tiny_model("  ");
  auto grid_of = [&](const std::string& name, int world, const std::string& launch_section) {
    return write(name + ".yaml", "name: " + name + "\nbase:\n" + model +
                                     "  train: {steps: 6, micro_batch: 2, accum: " + std::to_string(4 / world) +
                                     ", lr: 3.0e-3}\n  dist: {world_size: " + std::to_string(world) +
                                     ", timeout_s: 30}\n" + launch_section);
  };
  auto one = sweep_cli({"run", grid_of("host", 1, launch("")), "--out", (dir_ / "host").string()}, "host.log");
  ASSERT_TRUE(one.ok()) << one.out;
  const std::string boxed =
      "  container: {runtime: charliecloud, image: '" + image_.string() + "', trainer: /opt/sweep/bin/sweep-train}\n";
  auto two = sweep_cli(
      {"run", grid_of("boxed", 2, launch("sweep-node1:1, sweep-node2:1", boxed)), "--out", (dir_ / "boxed").string()},
      "boxed.log");
  ASSERT_TRUE(two.ok()) << two.out;
  const auto host = sweep_test::completed_records(dir_ / "host"),
             in_image = sweep_test::completed_records(dir_ / "boxed");
  ASSERT_EQ(host.size(), 1u);
  ASSERT_EQ(in_image.size(), 1u);
  const sweep::Record& r = in_image.begin()->second;
  EXPECT_EQ(bit_difference(host.begin()->second, r), "") << "W=1 on the host vs W=2 in the image across the nodes";
  EXPECT_EQ(r.env("container.runtime"), "charliecloud");
  EXPECT_EQ(r.env("container.digest").rfind("xxh3:", 0), 0u) << r.env("container.digest");
  EXPECT_EQ(r.env("rank_hosts"), "sweep-node1,sweep-node2");
  EXPECT_EQ(r.env("trainer"), "/opt/sweep/bin/sweep-train") << "the image's trainer ran";
}

}  // namespace
