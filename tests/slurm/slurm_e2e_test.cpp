// The Slurm launcher against a real cluster (label slurm; start it with
// tests/slurm/start-cluster.sh, which scripts/test does; ctest sets SLURM_CONF to that
// cluster's private config, which sinfo, the driver and the jobs' srun read). On the
// one-node partition debug: one job array of six runs, five finish with valid records
// although four data.path values are shell syntax (which must arrive literally), and one
// that hangs past its one-minute time limit is classified TIMEOUT; then two-rank runs
// under srun --mpi=pmix. On the partition nodes (two test nodes, each a network namespace
// with its own slurmd, tests/cluster/start-nodes.sh): runs of 2 and 4 ranks spread over
// both nodes by launch.slurm.nodes, talking over TCP, with the bits of one local rank; and
// a node killed in the middle of a run: NODE_FAIL, named, retried once it is back. A
// halving and a tpe search through job arrays decide as they do locally.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>  // each search grid made for a launch
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e_util.h"       // E2eTest, tiny_model, run_cli
#include "process.h"        // capture
#include "sweep_dir.h"      // read_run_state
#include "sweep_records.h"  // read_points_file

namespace fs = std::filesystem;

namespace {

using sweep_test::read_file;

class SlurmE2E : public sweep_test::E2eTest {
 protected:
  // A directory name full of shell syntax: the batch script must pass it as text.
  SlurmE2E() : E2eTest("slurm e2e $(touch pwned) '") {}
  void SetUp() override {
    sweep::Captured c = sweep::capture({"/bin/sh", "-c", "sinfo -h -o %T"}, 30);
    ASSERT_TRUE(c.status.ok() &&
                (c.output.find("idle") != std::string::npos || c.output.find("mix") != std::string::npos))
        << "no idle Slurm node; start one with tests/slurm/start-cluster.sh (as root). sinfo (SLURM_CONF="
        << (std::getenv("SLURM_CONF") ? std::getenv("SLURM_CONF") : "unset") << ") said: " << c.output;
    E2eTest::SetUp();
    fs::create_directories(dir_ / "x");  // what `'; rm -rf x` would remove
  }
};

TEST_F(SlurmE2E, ArrayOfSixFiveCompleteLiterallyOneTimesOut) {
  // The base point, then the includes; the hang early, so it holds one CPU while the
  // others go through the other one. The points differ in data.path, a key that takes
  // effect with text data: each names a real file whose name a shell would act on.
  const std::vector<std::string> names = {
      "base.txt", "hang", "$(touch pwned)", "'; rm -rf x", "`touch pwned2` \"$HOME\" \\ ; exit 7", "plain"};
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  for (const auto& n : names) write(n, text);
  std::string grid = write("slurm.yaml",
                           "name: slurm-e2e\n"
                           "base:\n"
                           "  model: {layers: 1, d_model: 32, heads: 2, vocab: 256, seq_len: 16}\n"
                           "  data: {kind: text, path: base.txt}\n"  // next to the grid file
                           "  train: {steps: 5, micro_batch: 2}\n"
                           "  dist: {timeout_s: 0}\n"  // no watchdog: let Slurm's limit end the hang
                           "include:\n"
                           "  - {fault.hang_step: 2, data.path: hang}\n"
                           "  - {data.path: '$(touch pwned)'}\n"
                           "  - {data.path: \"'; rm -rf x\"}\n"
                           "  - {data.path: '`touch pwned2` \"$HOME\" \\ ; exit 7'}\n"
                           "  - {data.path: plain}\n"
                           "launch:\n"
                           "  launcher: slurm\n"
                           "  parallel: 2\n"
                           "  slurm: {time: '1', mpi: pmix, poll_s: 1}\n");
  const fs::path out = dir_ / "out";
  // cwd = the test dir, so a relative `rm -rf x` or `touch pwned` would land here.
  const auto st = sweep_test::run_cli({"/bin/sh", "-c", "cd \"$1\" && exec \"$2\" run \"$3\" --out \"$4\"", "sh",
                                       dir_.string(), sweep_test::bin("sweep"), grid, out.string()},
                                      dir_ / "run.log");
  const std::string log = st.out;
  EXPECT_EQ(st.code, 1) << log;
  EXPECT_CONTAINS(log, "submitted job array ");
  EXPECT_CONTAINS(log, "sweep slurm-e2e: 5 completed, 0 already done, 1 failed");

  int completed = 0, timeouts = 0;
  std::set<std::string> paths;
  for (const auto& [id, values] : sweep::read_points_file(out.string())) {
    const std::string rd = (out / "runs" / id).string();
    sweep::RunState s = sweep::read_run_state(rd);
    if (s.state == sweep::RunStatus::completed) {
      ++completed;
      sweep::Record r = sweep::read_record(rd + "/record.h5");
      EXPECT_EQ(r.status, "completed");
      EXPECT_EQ(r.run_id, id);
      EXPECT_EQ(r.steps.size(), 5u);
      paths.insert(r.config.at("data.path"));
      EXPECT_TRUE(fs::exists(rd + "/logs/rank0.log")) << rd;
    } else {
      ++timeouts;
      EXPECT_EQ(s.failure, sweep::FailureClass::timeout) << s.detail;
      EXPECT_CONTAINS(s.detail, "Slurm TIMEOUT");
    }
  }
  EXPECT_EQ(completed, 5);
  EXPECT_EQ(timeouts, 1);
  std::set<std::string> expected;  // every point but the hang, each path as given, next to the grid file
  for (const auto& n : names)
    if (n != "hang") expected.insert((dir_ / n).string());
  EXPECT_EQ(paths, expected);
  EXPECT_TRUE(fs::is_directory(dir_ / "x"));
  for (const char* f : {"pwned", "pwned2"}) {
    EXPECT_FALSE(fs::exists(dir_ / f));
    EXPECT_FALSE(fs::exists(out / f));
    EXPECT_FALSE(fs::exists(fs::path("/tmp") / f));
  }

  // `sweep status` reads the same states back.
  ASSERT_TRUE(sweep_cli({"status", out.string()}, "status.log").ok());
  // A throughput_outlier flag depends on the machine's load at the moment, not on Slurm:
  // "(1 with health flags)" may stand after the count.
  const std::string status = read_file(dir_ / "status.log");
  EXPECT_TRUE(std::regex_search(status, std::regex("6 runs: 5 completed( \\(\\d with health flags\\))?, 1 failed")))
      << status;
  EXPECT_CONTAINS(read_file(dir_ / "status.log"), "timeout");
}

TEST_F(SlurmE2E, TwoRanksUnderSrunPmix) {
  std::string grid = write("mpi.yaml",
                           "name: slurm-mpi\n"
                           "base:\n" +
                               sweep_test::tiny_model("  ") +
                               "  train: {steps: 4, micro_batch: 2}\n"
                               "  dist: {world_size: 2}\n"
                               "launch: {launcher: slurm, slurm: {mpi: pmix, poll_s: 1}}\n");
  const fs::path out = dir_ / "out";
  sweep::ExitStatus st = sweep_cli({"run", grid, "--out", out.string()}, "run.log");
  ASSERT_TRUE(st.ok()) << read_file(dir_ / "run.log");
  auto points = sweep::read_points_file(out.string());
  ASSERT_EQ(points.size(), 1u);
  const fs::path rd = out / "runs" / points[0].first;
  sweep::Record r = sweep::read_record((rd / "record.h5").string());
  EXPECT_EQ(r.status, "completed");
  EXPECT_EQ(r.world_size, 2);
  // Where Slurm ran it: the job, its array task, the partition and the nodes.
  EXPECT_FALSE(r.env("slurm.job_id").empty());
  EXPECT_EQ(r.env("slurm.job_id").find_first_not_of("0123456789"), std::string::npos) << r.env("slurm.job_id");
  EXPECT_FALSE(r.env("slurm.array_task_id").empty());
  EXPECT_EQ(r.env("slurm.partition"), "debug");
  EXPECT_FALSE(r.env("slurm.nodelist").empty());
  EXPECT_TRUE(fs::exists(rd / "logs" / "rank0.log"));
  EXPECT_TRUE(fs::exists(rd / "logs" / "rank1.log"));
}

TEST_F(SlurmE2E, AModelOfOnesOwnUnderSrunPmix) {
  // gpt2-train: examples/own-model built against the installed package (the own_model
  // fixture); launch.trainer names it, and every rank under srun runs it.
  const std::string program = std::string(SWEEP_BINARY_DIR) + "/own-model/gpt2-train";
  ASSERT_TRUE(fs::exists(program)) << program;
  std::string grid = write("own.yaml",
                           "name: slurm-own\n"
                           "base:\n"
                           "  model: {kind: gpt2, vocab: 64, seq_len: 16, n_layer: 1, n_embd: 16, n_head: 2}\n"
                           "  train: {steps: 4, micro_batch: 2}\n"
                           "  dist: {world_size: 2}\n"
                           "launch: {launcher: slurm, trainer: " +
                               program + ", slurm: {mpi: pmix, poll_s: 1}}\n");
  const fs::path out = dir_ / "out";
  sweep::ExitStatus st = sweep_cli({"run", grid, "--out", out.string()}, "run.log");
  ASSERT_TRUE(st.ok()) << read_file(dir_ / "run.log");
  auto points = sweep::read_points_file(out.string());
  ASSERT_EQ(points.size(), 1u);
  sweep::Record r = sweep::read_record((out / "runs" / points[0].first / "record.h5").string());
  EXPECT_EQ(r.status, "completed");
  EXPECT_EQ(r.world_size, 2);
  EXPECT_EQ(r.config.at("model.kind"), "gpt2");
  EXPECT_EQ(r.environment.at("trainer"), fs::canonical(program).string());
}

TEST_F(SlurmE2E, AGridsProgramOnTwoRanksUnderSrun) {
  // A program: section (tests/python/rank_program.py): each task's command names its own
  // run directory and id, srun starts both ranks, rank 0 writes the record.
  const std::string script = std::string(SWEEP_SOURCE_DIR) + "/tests/python/rank_program.py";
  std::string grid = write("program.yaml",
                           "name: slurm-program\n"
                           "program: {argv: [/usr/bin/python3, " +
                               script +
                               "], kind: ranks}\n"
                               "base:\n"
                               "  train: {steps: 2}\n"
                               "  dist: {world_size: 2}\n"
                               "seeds: 2\n"
                               "launch: {launcher: slurm, slurm: {mpi: pmix, poll_s: 1}}\n");
  const fs::path out = dir_ / "out";
  sweep::ExitStatus st = sweep_cli({"run", grid, "--out", out.string()}, "run.log");
  ASSERT_TRUE(st.ok()) << read_file(dir_ / "run.log");
  auto points = sweep::read_points_file(out.string());
  ASSERT_EQ(points.size(), 2u);
  for (const auto& [id, _] : points) {
    const fs::path rd = out / "runs" / id;
    sweep::Record r = sweep::read_record((rd / "record.h5").string());
    EXPECT_EQ(r.status, "completed");
    EXPECT_EQ(r.world_size, 2);
    EXPECT_CONTAINS(r.environment.at("program"), script);
    EXPECT_FALSE(r.env("slurm.job_id").empty()) << "the Python writer records the job too";
    EXPECT_EQ(r.env("slurm.partition"), "debug");
    for (int rank : {0, 1}) {
      const std::string seen = read_file(rd / ("seen-rank" + std::to_string(rank) + ".json"));
      EXPECT_CONTAINS(seen, "\"SWEEP_RUN_ID\": \"" + id + "\"");
      EXPECT_CONTAINS(seen, "\"SWEEP_RUN_DIR\": \"" + rd.string() + "\"");
      EXPECT_CONTAINS(seen, "\"rank\": " + std::to_string(rank) + ", \"size\": 2");
    }
  }
}

// A halving search, a tpe search, a multi-objective tpe search and a pbt search through
// Slurm arrays decide as they do locally: the same search.log, line for line, and the same
// runs with the same bits. Halving stops runs at their rungs and promotes them from their
// checkpoints in later arrays; asha does so run by run as places free up; tpe proposes each batch from the results of
// the earlier ones; a pbt member that exploits forks from another's checkpoint (--fork-from in the array's script).
TEST_F(SlurmE2E, HalvingAshaTpeAndPbtSearchesThroughArraysDecideAsTheyDoLocally) {
  // The driver's search grids (tests/support/e2e_util.h), each under both launches.
  const std::map<std::string, std::function<std::string(const std::string&)>> searches = {
      {"halving",
       [](const std::string& launch) {
         return sweep_test::halving_search_grid(sweep_test::kHalvingSearch, 0, launch);
       }},
      // Asynchronous halving: each run is fed to its own array as a place frees up.
      {"asha",
       [](const std::string& launch) {
         return sweep_test::halving_search_grid("search:\n  kind: asha\n  min_steps: 2\n  eta: 3\n", 0, launch);
       }},
      {"tpe", [](const std::string& launch) { return sweep_test::tpe_search_grid(5, launch); }},
      // A pbt search: its exploits fork from other members' checkpoints inside the arrays.
      {"pbt", [](const std::string& launch) { return sweep_test::pbt_search_grid(0, launch); }},
      // Multi-objective tpe with a constraint: its front is decided from the same results.
      {"pareto", [](const std::string& launch) {
         return std::regex_replace(sweep_test::tpe_search_grid(5, launch), std::regex("  kind: tpe\n"),
                                   "  kind: tpe\n  metric: [train_loss_end, final_loss]\n  mode: [min, min]\n"
                                   "  constraints: [\"memory_per_rank_mib <= 512\"]\n");
       }}};
  const std::map<std::string, std::string> launches = {
      {"local", sweep_test::kLocalLaunch},
      {"slurm", "launch: {launcher: slurm, parallel: 2, slurm: {mpi: none, poll_s: 1}}\n"}};
  for (const auto& [search, grid_for] : searches) {
    std::map<std::string, std::map<std::string, sweep::Record>> runs;
    std::map<std::string, std::string> logs;
    for (const auto& [launcher, launch] : launches) {
      const std::string name = search + "-" + launcher;
      const std::string grid = write(name + ".yaml", grid_for(launch));
      const fs::path out = dir_ / name;
      ASSERT_TRUE(sweep_cli({"run", grid, "--out", out.string(), "--quiet"}, name + ".log").ok())
          << read_file(dir_ / (name + ".log"));
      runs[launcher] = sweep_test::completed_records(out);
      logs[launcher] = read_file(out / "search.log");
    }
    EXPECT_EQ(logs["slurm"], logs["local"]) << search;
    EXPECT_EQ(logs["local"].find("(not finished)"), std::string::npos) << logs["local"];
    if (search == "pareto") {  // judged on both metrics and the constraint's
      EXPECT_NE(logs["local"].find(" memory_per_rank_mib="), std::string::npos) << logs["local"];
    }
    EXPECT_GE(runs["local"].size(), search == "halving" || search == "asha" ? 9u : 5u) << search;
    if (search == "asha") {  // promoted runs resumed from their rung checkpoints in later arrays
      EXPECT_NE(logs["local"].find("rung 1 steps 6: promoted trial "), std::string::npos) << logs["local"];
    }
    if (search == "pbt") {  // some member forked from another's checkpoint
      EXPECT_NE(logs["local"].find(" exploits member "), std::string::npos) << logs["local"];
    }
    EXPECT_EQ(runs["slurm"].size(), runs["local"].size()) << search;
    EXPECT_EQ(sweep_test::sweep_bit_difference(runs["local"], runs["slurm"]), "") << search;
  }
}

// An asha search through Slurm whose driver is SIGKILLed while runs it fed are queued or
// running: the next driver re-attaches to them at the rung their stop_at file names (the
// feed counts them handed out, so none starts twice) and ends with the log and bits of
// the same search run locally.
TEST_F(SlurmE2E, AnAshaDriverKilledWhileItsRunsAreInSlurmReattachesAndDecidesAsLocally) {
  const std::string search = "search:\n  kind: asha\n  min_steps: 2\n  eta: 3\n";
  const int slow_ms = 300;  // each step: a run stays in Slurm long enough to be found there
  const std::string local = write("asha-local.yaml", sweep_test::halving_search_grid(search, slow_ms));
  const std::string slurm =
      write("asha-slurm.yaml",
            sweep_test::halving_search_grid(search, slow_ms,
                                            "launch: {launcher: slurm, parallel: 2, slurm: {mpi: none, poll_s: 1}}\n"));
  ASSERT_TRUE(sweep_cli({"run", local, "--out", (dir_ / "local").string(), "--quiet"}, "local.log").ok())
      << read_file(dir_ / "local.log");
  const fs::path out = dir_ / "slurm";
  sweep::SpawnRunner runner;
  const int first = runner.start(sweep_argv({"run", slurm, "--out", out.string()}), (dir_ / "first.log").string());
  const auto t0 = std::chrono::steady_clock::now();
  bool reached = false, ended = false;
  while (!reached && !ended && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(240)) {
    reached = read_file(out / "search.log").find("rung 0 steps 2: result 2 ") != std::string::npos;
    ended = !runner.wait_some(0.05).empty();
  }
  ASSERT_TRUE(reached) << "the driver ended before its second result: " << read_file(dir_ / "first.log");
  // Killed as soon as a run it fed is in Slurm (its state says running).
  const auto in_slurm = [&] {
    std::error_code ec;
    for (const auto& run : fs::directory_iterator(out / "runs", ec))
      if (sweep::read_run_state(run.path().string()).state == sweep::RunStatus::running) return true;
    return false;
  };
  while (!in_slurm() && runner.wait_some(0.05).empty()) {
  }
  runner.signal_group(first, SIGKILL);
  EXPECT_EQ(sweep_test::wait_for(runner, first).signal, SIGKILL);
  const auto again = sweep_cli({"run", slurm, "--out", out.string()}, "again.log");
  ASSERT_TRUE(again.ok()) << read_file(dir_ / "again.log");
  EXPECT_CONTAINS(read_file(dir_ / "again.log"), "slurm: re-attached to ");
  EXPECT_EQ(read_file(out / "search.log"), read_file(dir_ / "local" / "search.log"));
  const auto a = sweep_test::completed_records(dir_ / "local"), b = sweep_test::completed_records(out);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_EQ(sweep_test::sweep_bit_difference(a, b), "");
}

// ---- Job arrays in operation: MaxArraySize, refusals, jobs that can never start, and a
// driver killed mid-array. start-cluster.sh sets MaxArraySize=20 and a partition `short`
// (MaxTime 1 minute).

/// One value of `scontrol show config` ("" when absent).
std::string slurm_config(const std::string& key) {
  const sweep::Captured c = sweep::capture({"scontrol", "show", "config"}, 30);
  std::istringstream in(c.output);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + " ", 0) == 0) {
      std::string v = line.substr(line.find('=') + 1);
      v.erase(0, v.find_first_not_of(' '));
      return v;
    }
  return "";
}

class SlurmArraysE2E : public SlurmE2E {
 protected:
  void SetUp() override {
    SlurmE2E::SetUp();
    // sbatch and squeue as the driver runs them, each call logged: the tests count them.
    fs::create_directories(dir_ / "wrap");
    for (const char* cmd : {"sbatch", "squeue"}) {
      write("wrap/" + std::string(cmd), "#!/bin/sh\nprintf '%s\\n' \"" + std::string(cmd) +
                                            " $*\" >>\"$SWEEP_TEST_CALLS\"\nexec /usr/bin/" + cmd + " \"$@\"\n");
      fs::permissions(dir_ / "wrap" / cmd, fs::perms::owner_all);
    }
  }
  /// `sweep ARGS` with the wrappers first on PATH.
  std::vector<std::string> wrapped(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {"/usr/bin/env", "PATH=" + (dir_ / "wrap").string() + ":" + std::getenv("PATH"),
                                     "SWEEP_TEST_CALLS=" + (dir_ / "calls.log").string(), sweep_test::bin("sweep")};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  /// Calls of `cmd` the wrappers logged.
  int calls(const std::string& cmd) const {
    std::istringstream in(read_file(dir_ / "calls.log"));
    int n = 0;
    for (std::string line; std::getline(in, line);) n += line.rfind(cmd + " ", 0) == 0;
    return n;
  }
  /// Run directories of the sweep `out` holding `file`.
  static int runs_with(const fs::path& out, const std::string& file) {
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out / "runs", ec)) n += fs::exists(e.path() / file);
    return n;
  }
  /// runs_with() once `n` run directories hold `file` (polled every `poll_ms`) or after
  /// `limit_s`, whichever comes first.
  static int wait_runs_with(const fs::path& out, const std::string& file, int n, int limit_s, int poll_ms) {
    const auto t0 = std::chrono::steady_clock::now();
    while (runs_with(out, file) < n && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(limit_s))
      std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
    return runs_with(out, file);
  }
  /// A grid of `runs` one-rank runs of tests/slurm/array_program.py.
  std::string grid(const std::string& name, int runs, const std::string& slurm, bool hold = false, int parallel = 3) {
    return write(name + ".yaml",
                 "name: " + name + "\nprogram: {argv: [/usr/bin/python3, " + std::string(SWEEP_SOURCE_DIR) +
                     "/tests/slurm/array_program.py" + (hold ? ", --hold" : "") +
                     "], kind: tiny}\n"
                     "base: {train: {steps: 1}}\n"
                     "grid: {train.seed: {range: [0, " +
                     std::to_string(runs) + "]}}\nlaunch: {launcher: slurm, parallel: " + std::to_string(parallel) +
                     ", slurm: {mpi: none, poll_s: 1, " + slurm + "}}\n");
  }
};

TEST_F(SlurmArraysE2E, AnSbatchRefusalStopsTheSweepWithSlurmsReasonOnce) {
  const fs::path out = dir_ / "out";
  const auto st = sweep_test::run_cli(
      wrapped({"run", grid("slurm-refused", 6, "partition: no-such-partition"), "--out", out.string()}),
      dir_ / "run.log");
  EXPECT_EQ(st.code, 1) << st.out;
  EXPECT_CONTAINS(st.out, "sweep slurm-refused: 0 completed, 0 already done, 0 failed, 6 not started");
  // Slurm's own words, whole (22.05 says "invalid partition specified: NAME" first).
  EXPECT_CONTAINS(st.out, "sweep slurm-refused: stopped: sbatch refused a job array: sbatch failed (exit code 1): ");
  EXPECT_CONTAINS(st.out, "sbatch: error: Batch job submission failed: Invalid partition name specified");
  EXPECT_EQ(calls("sbatch"), 1);
  size_t said = 0;
  for (size_t at = 0; (at = st.out.find("Invalid partition name", at)) != std::string::npos; ++at) ++said;
  EXPECT_EQ(said, 2u) << "once when it happened, once in the summary: " << st.out;
  EXPECT_EQ(st.out.find("crashed"), std::string::npos) << st.out;
  for (const auto& [id, values] : sweep::read_points_file(out.string()))
    EXPECT_EQ(sweep::read_run_state((out / "runs" / id).string()).state, sweep::RunStatus::pending) << id;
}

TEST_F(SlurmArraysE2E, AJobThatCanNeverStartIsCancelledAndItsRunsFailWithSlurmsReason) {
  // Partition short has MaxTime 1 minute; these runs ask for 5: Slurm holds them for ever
  // (EnforcePartLimits=NO), and the driver cancels them.
  const fs::path out = dir_ / "out";
  const auto st = sweep_test::run_cli(
      wrapped({"run", grid("slurm-never", 2, "partition: short, time: '5'"), "--out", out.string()}), dir_ / "run.log");
  EXPECT_EQ(st.code, 1) << st.out;
  // Slurm 22.05 holds it PartitionConfig or PartitionTimeLimit, as its scheduler first
  // looks: either can never clear.
  const std::regex never("can never start \\(Slurm: (Partition(TimeLimit|Config))\\)");
  std::smatch why;
  ASSERT_TRUE(std::regex_search(st.out, why, never)) << st.out;
  EXPECT_CONTAINS(st.out, "sweep slurm-never: 0 completed, 0 already done, 2 failed");
  for (const auto& [id, values] : sweep::read_points_file(out.string())) {
    const sweep::RunState s = sweep::read_run_state((out / "runs" / id).string());
    EXPECT_EQ(s.failure, sweep::FailureClass::config) << s.detail;
    EXPECT_CONTAINS(s.detail, "Slurm cannot start it: " + why[1].str());
  }
  // Cancelled in Slurm, not left queued.
  const std::string q =
      sweep::capture({"squeue", "--noheader", "--name=sweep-slurm-never", "--format=%i %T"}, 30).output;
  EXPECT_EQ(q.find("PENDING"), std::string::npos) << q;
}

TEST_F(SlurmArraysE2E, ADriverKilledMidArrayIsFoundAgainAndNothingIsSubmittedTwice) {
  // Four runs, two at once, each holding until <out>/release exists. The driver is
  // SIGKILLed with two running and two queued; `sweep status` says so (not orphaned); a
  // new driver waits for the same array, and every record is verified.
  const fs::path out = dir_ / "out";
  const std::string g = grid("slurm-reattach", 4, "partition: debug", /*hold=*/true, /*parallel=*/2);
  sweep::SpawnRunner runner;
  const int first = runner.start(wrapped({"run", g, "--out", out.string()}), (dir_ / "first.log").string());
  ASSERT_EQ(wait_runs_with(out, "started", 2, 120, 200), 2) << log("first");
  runner.signal_group(first, SIGKILL);
  const sweep::ExitStatus killed = sweep_test::wait_for(runner, first);
  EXPECT_EQ(killed.signal, SIGKILL);

  ASSERT_TRUE(sweep_cli({"status", out.string()}, "status.log").ok());
  const std::string status = log("status");
  EXPECT_CONTAINS(status, "no driver running");
  EXPECT_CONTAINS(status, "4 runs: 2 running, 2 queued");
  EXPECT_CONTAINS(status, "running in Slurm (job ");
  EXPECT_CONTAINS(status, "queued in Slurm (job ");
  EXPECT_EQ(status.find("orphaned"), std::string::npos) << status;

  const int second = runner.start(wrapped({"run", g, "--out", out.string()}), (dir_ / "second.log").string());
  const auto t1 = std::chrono::steady_clock::now();
  while (log("second").find("re-attached") == std::string::npos &&
         std::chrono::steady_clock::now() - t1 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_CONTAINS(log("second"),
                  "slurm: re-attached to 1 job arrays of an earlier driver: 4 runs still queued or "
                  "running in Slurm");
  write("out/release", "");
  const sweep::ExitStatus st = sweep_test::wait_for(runner, second);
  EXPECT_TRUE(st.ok()) << log("second");
  EXPECT_CONTAINS(log("second"), "sweep slurm-reattach: 4 completed, 0 already done, 0 failed");
  EXPECT_EQ(calls("sbatch"), 1) << "no run was submitted twice";
  for (const auto& [id, values] : sweep::read_points_file(out.string())) {
    const fs::path rd = out / "runs" / id;
    const sweep::RunState s = sweep::read_run_state(rd.string());
    EXPECT_EQ(s.state, sweep::RunStatus::completed) << id;
    EXPECT_EQ(s.attempts, 1) << id << ": the first driver's attempt, waited for";
    EXPECT_EQ(sweep::read_record((rd / "record.h5").string()).status, "completed");
  }
}

TEST_F(SlurmArraysE2E, FiveHundredRunsInArraysStoppedWithCtrlCAndResumedEndVerified) {
  // 500 runs of tests/programs/linreg (C++, a few milliseconds each) in arrays of at most
  // MaxArraySize (20 here), launch.parallel over all of them: before, one
  // --array=0-(N-1), which sbatch refuses past MaxArraySize, and every run was classed
  // crashed. Ctrl-C (SIGINT to the driver's process group, as a terminal sends it) once
  // 100 records are complete: one scancel for every live array, nothing of the sweep left
  // in Slurm, and a run whose record completed before the scancel reached it is completed,
  // not "interrupted". `sweep run` again submits only the runs without a completed record,
  // and the sweep ends with 500 verified records. Both drivers ran one squeue per poll for
  // all of their arrays, and never more than launch.parallel runs ran at once.
  const int max_array = std::atoi(slurm_config("MaxArraySize").c_str());
  ASSERT_GT(max_array, 0);
  ASSERT_LE(max_array, 20) << "the test cluster's MaxArraySize is 20: run tests/slurm/start-cluster.sh again";
  const int runs = 500, parallel = 6;
  const fs::path out = dir_ / "out";
  const std::string g =
      write("slurm-500.yaml",
            "name: slurm-500\n"
            "program:\n  argv: [" +
                sweep_test::bin("linreg") +
                ", --span]\n  kind: linreg\n"
                "  keys:\n"
                "    features: {type: int, default: 16, min: 1, max: 4096}\n"
                "    noise: {type: real, default: 0.1, min: 0, max: 10}\n"
                "base: {train: {steps: 5, micro_batch: 4, accum: 1, lr: 0.05, checksum_every: 5}}\n"
                "grid: {train.seed: {range: [0, " +
                std::to_string(runs) + "]}}\nlaunch: {launcher: slurm, parallel: " + std::to_string(parallel) +
                ", slurm: {mpi: none, poll_s: 0.5, partition: 'debug,nodes'}}\n");
  // The arrays each driver submitted: (first task, last task, throttle) of each --array.
  auto arrays = [&](size_t from) {
    std::vector<std::array<int, 3>> found;
    std::istringstream in(read_file(dir_ / "calls.log"));
    size_t line_no = 0;
    static const std::regex spec("--array=(\\d+)-(\\d+)%(\\d+)");
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (line.rfind("sbatch ", 0) == 0 && line_no++ >= from && std::regex_search(line, m, spec))
        found.push_back({std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3])});
    }
    return found;
  };
  static const std::regex counted("slurm: (\\d+) sbatch, (\\d+) polls \\((\\d+) squeue, (\\d+) sacct\\)");
  static const std::regex summary("sweep slurm-500: (\\d+) completed, (\\d+) already done, (\\d+) failed");

  sweep::SpawnRunner runner;
  const int first = runner.start(wrapped({"run", g, "--out", out.string()}), (dir_ / "first.log").string());
  ASSERT_GE(wait_runs_with(out, "record.h5", 100, 240, 100), 100) << log("first");
  runner.signal_group(first, SIGINT);
  const sweep::ExitStatus stopped = sweep_test::wait_for(runner, first);
  const std::string first_log = log("first");
  EXPECT_EQ(stopped.code, 128 + SIGINT) << first_log;
  EXPECT_CONTAINS(first_log, "sweep: stopping: scancel ");
  std::smatch m1;
  ASSERT_TRUE(std::regex_search(first_log, m1, summary)) << first_log;
  const int done_first = std::stoi(m1[1]);
  EXPECT_GE(done_first, 100);
  EXPECT_LT(done_first, runs) << "stopped mid-way";
  EXPECT_EQ(done_first, runs_with(out, "record.h5"));
  std::smatch c1;
  ASSERT_TRUE(std::regex_search(first_log, c1, counted)) << first_log;
  // Every poll is one squeue for all arrays; the stop adds at most one a second while it
  // waits for Slurm to end the cancelled tasks (grace_s 10 + 60).
  EXPECT_GE(std::stoi(c1[3]), std::stoi(c1[2]));
  EXPECT_LE(std::stoi(c1[3]), std::stoi(c1[2]) + 71);
  EXPECT_LE(std::stoi(c1[4]), std::stoi(c1[2]));
  const size_t sbatch_first = size_t(calls("sbatch"));
  EXPECT_EQ(sbatch_first, size_t(std::stoi(c1[1])));
  const std::string left =
      sweep::capture({"squeue", "--noheader", "--name=sweep-slurm-500", "--format=%i %T"}, 30).output;
  EXPECT_EQ(left, "") << "the stopped sweep left jobs in Slurm";

  const auto again = sweep_test::run_cli(wrapped({"run", g, "--out", out.string()}), dir_ / "again.log");
  ASSERT_EQ(again.code, 0) << again.out;
  std::smatch m2;
  ASSERT_TRUE(std::regex_search(again.out, m2, summary)) << again.out;
  EXPECT_EQ(std::stoi(m2[2]), done_first) << again.out;
  EXPECT_EQ(std::stoi(m2[1]) + done_first, runs) << again.out;
  EXPECT_EQ(std::stoi(m2[3]), 0) << again.out;
  // Raising an array's throttle as earlier arrays drain is not refused: scontrol's exit 1
  // for an array with finished tasks is not a refusal (the throttle stayed at 1 or 2 and
  // the sweep crawled).
  for (const std::string* text : {&first_log, &again.out})
    EXPECT_EQ(text->find("refused to change the throttle"), std::string::npos) << *text;
  std::smatch c2;
  ASSERT_TRUE(std::regex_search(again.out, c2, counted)) << again.out;
  EXPECT_EQ(std::stoi(c2[3]), std::stoi(c2[2])) << "one squeue per poll for every array";
  EXPECT_LE(std::stoi(c2[4]), std::stoi(c2[2]));
  EXPECT_EQ(calls("squeue"), std::stoi(c1[3]) + std::stoi(c2[3])) << "the drivers' counts are every squeue run";

  // Chunks: every array at most MaxArraySize tasks, each throttled to launch.parallel, and
  // the second driver submitted exactly the runs without a record, once each.
  int tasks_first = 0, tasks_again = 0;
  for (const auto& a : arrays(0)) {
    EXPECT_LE(a[1] - a[0] + 1, max_array);
    EXPECT_GE(a[2], 1);
    EXPECT_LE(a[2], parallel) << "each array's throttle within launch.parallel";
  }
  for (const auto& a : arrays(0)) tasks_first += a[1] - a[0] + 1;
  for (const auto& a : arrays(sbatch_first)) tasks_again += a[1] - a[0] + 1;
  EXPECT_GE(arrays(0).size(), size_t((runs - done_first) / max_array + 1));
  EXPECT_EQ(tasks_again, runs - done_first);
  EXPECT_GE(tasks_first, done_first);

  // Never more than launch.parallel at once, over all arrays: the program's own start and
  // end, inside its task's.
  std::vector<std::pair<long long, int>> events;
  for (const auto& [id, values] : sweep::read_points_file(out.string())) {
    std::istringstream span(read_file(out / "runs" / id / "span"));
    long long a = 0, b = 0;
    ASSERT_TRUE(span >> a >> b) << id;
    events.emplace_back(a, +1), events.emplace_back(b, -1);
  }
  std::sort(events.begin(), events.end(),
            [](auto x, auto y) { return x.first != y.first ? x.first < y.first : x.second < y.second; });
  int now = 0, most = 0;
  for (const auto& e : events) most = std::max(most, now += e.second);
  EXPECT_LE(most, parallel);
  EXPECT_GE(most, 2) << "the runs ran side by side";

  ASSERT_TRUE(sweep_cli({"verify", out.string()}, "verify.log").ok()) << log("verify");
  EXPECT_CONTAINS(log("verify"), std::to_string(runs) + " records read and verified, 0 damaged or stale");
  int completed = 0;
  for (const auto& [id, values] : sweep::read_points_file(out.string()))
    completed += sweep::read_run_state((out / "runs" / id).string()).state == sweep::RunStatus::completed;
  EXPECT_EQ(completed, runs);
  std::cout << "first driver: " << done_first << " completed, " << sbatch_first << " arrays, " << c1[2] << " polls ("
            << c1[3] << " squeue); second: " << m2[1] << " completed, " << arrays(sbatch_first).size() << " arrays, "
            << c2[2] << " polls (" << c2[3] << " squeue); at most " << most << " ran at once\n";
}

// ---- The partition `nodes`: sweep-node1 and sweep-node2.

const char* kNodesPartition = "nodes";
const char* kNodes[] = {"sweep-node1", "sweep-node2"};

/// Cross-node MPI traffic goes over TCP on the test nodes' bridge network, as a site's
/// cluster config or a user's grid would say for its own interconnect.
const char* kExportTcp = "'--export=ALL,OMPI_MCA_btl_tcp_if_include=198.51.100.0/24'";

/// True when both nodes of the partition answer (idle, mixed or allocated).
bool nodes_up() {
  sweep::Captured c = sweep::capture({"sinfo", "-h", "-N", "-p", kNodesPartition, "-o", "%N %T"}, 30);
  int up = 0;
  std::istringstream in(c.output);
  for (std::string node, state; in >> node >> state;) up += state == "idle" || state == "mixed" || state == "allocated";
  return c.status.ok() && up == 2;
}

/// tests/slurm/start-cluster.sh: idempotent; brings back a node's slurmd that a test (or
/// the cluster tests, which kill every process of sweep-node2 but its holder) took down.
sweep::Captured start_cluster() {
  return sweep::capture({std::string(SWEEP_SOURCE_DIR) + "/tests/slurm/start-cluster.sh"}, 180);
}

class SlurmNodesE2E : public sweep_test::E2eTest {
 protected:
  SlurmNodesE2E() : E2eTest("slurm nodes e2e") {}
  void SetUp() override {
    // As root, always (a second when all is up): a slurmd killed a moment ago still
    // looks idle to Slurm for up to SlurmdTimeout.
    if (::geteuid() == 0) {
      sweep::Captured c = start_cluster();
      ASSERT_TRUE(c.status.ok()) << "tests/slurm/start-cluster.sh: " << c.output;
    }
    ASSERT_TRUE(nodes_up()) << "the partition nodes is not up; start it with tests/slurm/start-cluster.sh as root";
    E2eTest::SetUp();
  }
  /// The launch section of a run across both nodes.
  static std::string nodes_launch(const std::string& more = "") {
    return std::string("launch:\n  launcher: slurm\n  parallel: 2\n  blas: native\n") + more +
           "  slurm: {partition: " + kNodesPartition + ", nodes: 2, mpi: pmix, poll_s: 0.5, extra_args: [" +
           kExportTcp + "]}\n";
  }
};

TEST_F(SlurmNodesE2E, RanksOnTwoNodesGiveTheBitsOfOneLocalRank) {
  // W = 2 and 4 over both nodes (1 and 2 ranks per node), fp32 and bf16, ZeRO 0 and 3:
  // each record equals the same global batch on one local rank (accum x W). bf16 keeps
  // oneDNN's default: the nodes share this machine's CPU, as the mpi label's runs do.
  const std::string common =
      sweep_test::tiny_model("  ") + "  train: {steps: 4, micro_batch: 2, lr: 3.0e-3, clip_norm: 0.3, log_every: 1}\n";
  const std::string nodes = write("nodes.yaml", "name: slurm-nodes\nbase:\n" + common +
                                                    "grid:\n"
                                                    "  dist.world_size: [2, 4]\n"
                                                    "  train.precision: [fp32, bf16]\n"
                                                    "  dist.zero_stage: [0, 3]\n"
                                                    "constraints: {global_batch: 8, derive: train.accum}\n" +
                                                    nodes_launch());
  const std::string local = write("local.yaml", "name: slurm-nodes-ref\nbase:\n" + common +
                                                    "grid: {train.precision: [fp32, bf16]}\n"
                                                    "constraints: {global_batch: 8, derive: train.accum}\n"
                                                    "launch: {launcher: local, parallel: 2, blas: native}\n");
  const auto t0 = std::chrono::steady_clock::now();
  sweep_test::CliResult st = sweep_cli({"run", nodes, "--out", (dir_ / "nodes").string()}, "nodes.log");
  const double nodes_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(st.ok()) << st.out;
  EXPECT_CONTAINS(st.out, "sweep slurm-nodes: 8 completed, 0 already done, 0 failed");
  ASSERT_TRUE(sweep_cli({"run", local, "--out", (dir_ / "local").string()}, "local.log").ok()) << log("local");
  std::cout << "8 runs on the partition nodes in " << nodes_s << " s\n";

  std::map<std::string, sweep::Record> ref;  // precision -> the one-rank run
  for (const auto& [id, r] : sweep_test::completed_records(dir_ / "local")) {
    ASSERT_EQ(r.world_size, 1);
    ASSERT_EQ(r.config.at("train.accum"), "4");
    ref[r.config.at("train.precision")] = r;
  }
  ASSERT_EQ(ref.size(), 2u);
  const auto runs = sweep_test::completed_records(dir_ / "nodes");
  ASSERT_EQ(runs.size(), 8u);
  std::set<std::string> shapes;
  for (const auto& [id, r] : runs) {
    const std::string what = "W=" + std::to_string(r.world_size) + " " + r.config.at("train.precision") + " ZeRO " +
                             r.config.at("dist.zero_stage");
    shapes.insert(what);
    EXPECT_EQ(r.status, "completed") << what;
    EXPECT_EQ(r.steps.size(), 4u) << what;
    EXPECT_EQ(sweep_test::bit_difference(ref.at(r.config.at("train.precision")), r), "") << what << " vs W=1";
    // Every rank ran where Slurm put it: rank r's log is under logs/<its host>/, and the
    // ranks split evenly, rank 0 first (block distribution, --ntasks-per-node).
    const fs::path rd = dir_ / "nodes" / "runs" / id;
    for (int rank = 0; rank < r.world_size; ++rank) {
      const char* host = kNodes[rank / (r.world_size / 2)];
      EXPECT_TRUE(fs::is_regular_file(rd / "logs" / host / ("rank" + std::to_string(rank) + ".log")))
          << what << ": rank " << rank << " not on " << host;
    }
    EXPECT_CONTAINS(read_file(rd / "logs" / "launcher.log"), "on sweep-node1 (nodes sweep-node[1-2])");
  }
  EXPECT_EQ(shapes.size(), 8u);
}

TEST_F(SlurmNodesE2E, ANodeThatDiesIsNodeFailNamedAndRetriedWhenBack) {
  // A W=2 run across both nodes; every process of sweep-node2 (its slurmd, slurmstepd and
  // rank 1) is killed with SIGKILL, as a node that loses power, only its namespace holder
  // (the machine itself) kept. Slurm marks the node DOWN after SlurmdTimeout (10 s in
  // the test cluster) and ends the task NODE_FAIL (not requeued: --no-requeue); the driver
  // classifies it node_fail naming the node, launch.retries resubmits it, and the retry
  // runs once the node is back, resuming from the checkpoint.
  const std::string g = write("kill.yaml", "name: slurm-kill\nbase:\n" + sweep_test::tiny_model("  ") +
                                               "  train: {steps: 1500, micro_batch: 2, accum: 1, lr: 3.0e-3, "
                                               "checkpoint_every: 50, log_every: 50}\n"
                                               "  dist: {world_size: 2}\n" +
                                               nodes_launch("  retries: {node_fail: 1}\n"));
  const fs::path out = dir_ / "kill";
  // However the test ends, the node comes back for the tests after it.
  struct Restore {
    ~Restore() {
      if (!nodes_up()) start_cluster();
    }
  } restore;
  sweep::SpawnRunner runner;
  const int id = runner.start(sweep_argv({"run", g, "--out", out.string()}), (dir_ / "kill.log").string());
  // Wait for rank 1 on sweep-node2 and a first checkpoint, then pull the plug.
  fs::path run_dir;
  const auto t0 = std::chrono::steady_clock::now();
  while (run_dir.empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out / "runs", ec))
      if (fs::exists(e.path() / "logs/sweep-node2/rank1.log") && !fs::is_empty(e.path() / "checkpoints", ec) && !ec)
        run_dir = e.path();
  }
  ASSERT_FALSE(run_dir.empty()) << "the run did not start on both nodes: " << log("kill");
  const int holder = std::atoi(read_file("/run/sweep-nodes/sweep-node2.pid").c_str());
  ASSERT_GT(holder, 0);
  std::error_code ec;
  const fs::path node_net = fs::read_symlink("/proc/" + std::to_string(holder) + "/ns/net", ec);
  ASSERT_FALSE(ec);
  // Every process of the node first, then the kills: a process can die of its parent's
  // death (slurmstepd's children) between two kills, and is then killed all the same.
  std::vector<std::pair<int, std::string>> node_processes;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos || std::atoi(pid.c_str()) == holder) continue;
    std::error_code ec2;
    if (fs::read_symlink(e.path() / "ns/net", ec2) != node_net || ec2) continue;
    const std::string comm = read_file(e.path() / "comm");
    node_processes.emplace_back(std::atoi(pid.c_str()), comm.substr(0, comm.find('\n')));
  }
  std::vector<std::string> killed;
  for (const auto& [pid, comm] : node_processes)
    if (::kill(pid, SIGKILL) == 0 || errno == ESRCH) killed.push_back(comm);
  const auto killed_at = std::chrono::steady_clock::now();
  std::string names;
  for (const auto& k : killed) names += k + " ";
  ASSERT_NE(std::find(killed.begin(), killed.end(), "slurmd"), killed.end()) << names;
  ASSERT_NE(std::find(killed.begin(), killed.end(), "sweep-train"), killed.end()) << names;

  // The driver sees NODE_FAIL and resubmits; the node is DOWN meanwhile.
  std::string text;
  while (text.find("retrying") == std::string::npos &&
         std::chrono::steady_clock::now() - killed_at < std::chrono::seconds(90)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    text = log("kill");
  }
  const double failed_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  std::cout << "node killed -> NODE_FAIL seen by the driver: " << failed_after << " s\n";
  ASSERT_NE(text.find("retrying"), std::string::npos) << text;
  // (Bounded by the 90 s wait above; SlurmdTimeout is 10 s in the test cluster, and the
  // time it took is printed, not judged: it depends on the machine's load.)
  EXPECT_TRUE(
      std::regex_search(text, std::regex("retrying  [0-9a-f]+ \\(base\\): node_fail \\(Slurm NODE_FAIL on "
                                         "sweep-node\\[1-2\\], down: sweep-node2 \\(down\\*: Not responding\\)")))
      << text;
  EXPECT_CONTAINS(sweep::capture({"sinfo", "-h", "-N", "-n", "sweep-node2", "-o", "%T"}, 30).output, "down");

  // The node comes back: its slurmd again, and Slurm returns it to service.
  sweep::Captured c = start_cluster();
  ASSERT_TRUE(c.status.ok()) << c.output;
  const sweep::ExitStatus st = sweep_test::wait_for(runner, id);
  EXPECT_TRUE(st.ok()) << log("kill");
  const std::string end = log("kill");
  EXPECT_CONTAINS(end, "1 completed, 0 already done, 0 failed (1 retries)");
  sweep::RunState s = sweep::read_run_state(run_dir.string());
  EXPECT_EQ(s.state, sweep::RunStatus::completed);
  EXPECT_EQ(s.attempts, 2);
  const std::string launcher = read_file(run_dir / "logs" / "launcher.log");
  EXPECT_CONTAINS(launcher, "DUE TO NODE FAILURE");
  EXPECT_CONTAINS(launcher, "attempt 2 of run");
  EXPECT_CONTAINS(launcher, "(--resume)");
  sweep::Record r = sweep::read_record((run_dir / "record.h5").string());
  EXPECT_EQ(r.status, "completed");
  std::cout << "whole test: " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
}

// Ranks in the charliecloud image of the `container` tests (fixture charliecloud_image),
// started by srun on both nodes: each rank's ch-run inside its node.
class SlurmContainerE2E : public SlurmNodesE2E {};

TEST_F(SlurmContainerE2E, RanksInTheImageOnTwoNodesGiveTheBitsOfOneRankOnTheHost) {
  const fs::path image = fs::path(SWEEP_BINARY_DIR) / "charliecloud-image";
  if (!fs::exists(image / "opt/sweep/bin/sweep-train"))
    GTEST_SKIP() << "no charliecloud image at " << image.string() << " (ctest -L container builds it)";
  const std::string common =
      sweep_test::tiny_model("  ") + "  train: {steps: 4, micro_batch: 2, accum: 2, lr: 3.0e-3}\n";
  const std::string boxed =
      write("boxed.yaml", "name: slurm-boxed\nbase:\n" + common + "  dist: {world_size: 2}\n" +
                              nodes_launch("  container: {runtime: charliecloud, image: '" + image.string() +
                                           "', trainer: /opt/sweep/bin/sweep-train}\n"));
  const std::string host = write("host.yaml", "name: slurm-boxed-ref\nbase:\n" + sweep_test::tiny_model("  ") +
                                                  "  train: {steps: 4, micro_batch: 2, accum: 4, lr: 3.0e-3}\n"
                                                  "launch: {launcher: local, blas: native}\n");
  sweep_test::CliResult st = sweep_cli({"run", boxed, "--out", (dir_ / "boxed").string()}, "boxed.log");
  ASSERT_TRUE(st.ok()) << st.out;
  ASSERT_TRUE(sweep_cli({"run", host, "--out", (dir_ / "host").string()}, "host.log").ok()) << log("host");
  const auto in_image = sweep_test::completed_records(dir_ / "boxed"),
             ref = sweep_test::completed_records(dir_ / "host");
  ASSERT_EQ(in_image.size(), 1u);
  ASSERT_EQ(ref.size(), 1u);
  const sweep::Record& r = in_image.begin()->second;
  EXPECT_EQ(sweep_test::bit_difference(ref.begin()->second, r), "")
      << "W=2 in the image on two nodes vs W=1 on the host";
  EXPECT_EQ(r.env("container.runtime"), "charliecloud");
  EXPECT_EQ(r.env("rank_hosts"), "sweep-node1,sweep-node2");
  EXPECT_EQ(r.env("trainer"), "/opt/sweep/bin/sweep-train") << "the image's trainer ran";
}

}  // namespace
