// What the end-to-end tests share, so that each test file includes this one header: the
// binaries of this build and a runner for them (argv, never a shell), the tiny run config
// of tests/data/, the processes a test left, and E2eTest, the fixture that gives every
// test a fresh directory to run them in. It includes test_util.h (EXPECT_CONTAINS,
// read_file, ...), temp_dir.h and record_util.h (records read back and compared).
//
// The test target defines SWEEP_BIN_DIR, SWEEP_SOURCE_DIR and SWEEP_MPIEXEC
// (tests/CMakeLists.txt) and links sweep_harness (SpawnRunner).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "process.h"      // SpawnRunner, ExitStatus
#include "record.h"       // read_record
#include "record_util.h"  // completed_records, bit_difference, same_bits
#include "temp_dir.h"     // TempDirTest
#include "test_util.h"    // EXPECT_CONTAINS, read_file, write_file, listing

extern char** environ;

namespace sweep_test {

/// A program of this build: bin("sweep"), bin("sweep-train").
inline std::string bin(const std::string& name) { return std::string(SWEEP_BIN_DIR) + "/" + name; }

/// mpiexec as the tests start it (as root, more ranks than cores), on `ranks` ranks; the
/// command follows.
inline std::vector<std::string> mpiexec(int ranks) {
  return {SWEEP_MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-n", std::to_string(ranks)};
}

/// tests/data/tiny_run.yaml: a run small enough for tests, ~30k parameters, a second or
/// two on one core.
inline std::string tiny_run_yaml() { return std::string(SWEEP_SOURCE_DIR) + "/tests/data/tiny_run.yaml"; }

/// The `model:` line of tiny_run.yaml, newline included, after `indent` (two spaces for a
/// grid's base:): the model the e2e tests train unless they need another. Read from the
/// file, so that it is the one place that says what "tiny" is.
inline std::string tiny_model(const std::string& indent = "") {
  static const std::string line = [] {
    std::istringstream in(read_file(tiny_run_yaml()));
    for (std::string l; std::getline(in, l);)
      if (l.rfind("model:", 0) == 0) return l;
    throw std::runtime_error(tiny_run_yaml() + ": no model: line");
  }();
  return indent + line + "\n";
}

/// The launch of the search grids below as the driver's own tests run them: two runs at a
/// time on two slots, locally.
inline const std::string kLocalLaunch = "launch: {parallel: 2, slots: 2}\n";

/// A pbt search of the tiny model: a population of `population` (6 unless given) over train.lr (log-uniform) and
/// train.clip_norm (a choice) with a cosine schedule, 24 steps, decisions at steps 6, 12
/// and 18 by the held-out loss; `launch` is its launch: line. Steps sleep `slow_ms` (no
/// effect on the bits) so a driver can be killed half-way; directories compared must use
/// the same. The pbt tests replay it locally; the Slurm tests run it through arrays.
inline std::string pbt_search_grid(int slow_ms, const std::string& launch = kLocalLaunch, int population = 6) {
  return "name: pbt\n"
         "base:\n" +
         tiny_model("  ") +
         "  train: {steps: 24, micro_batch: 2, schedule: cosine, warmup: 2, log_every: 50, eval_every: 6, "
         "eval_batches: 1, threads: 1, checkpoint_every: 6, keep_checkpoints: 4}\n"
         "  data: {eval_fraction: 0.1}\n"
         "  fault: {slow_ms: " +
         std::to_string(slow_ms) +
         "}\n"
         "search:\n"
         "  kind: pbt\n"
         "  population: " +
         std::to_string(population) +
         "\n"
         "  interval: 6\n"
         "  quantile: 0.25\n"
         "  perturb: [0.8, 1.2]\n"
         "  resample: 0.25\n"
         "  seed: 5\n"
         "  metric: final_eval_loss\n"
         "  space:\n"
         "    train.lr: {loguniform: [1.0e-3, 3.0e-2]}\n"
         "    train.clip_norm: {choice: [0.5, 1.0, 2.0]}\n" +
         launch;
}

/// A TPE search of the tiny model: 6 samples (2 random first), two at a time, search seed
/// `seed`, over train.lr (log-uniform) and train.clip_norm; `launch` is its launch: line.
/// The driver's tests replay it locally; the Slurm tests run it through arrays and expect
/// the local decisions and bits.
inline std::string tpe_search_grid(int seed, const std::string& launch = kLocalLaunch) {
  return "name: tpe\n"
         "base:\n" +
         tiny_model("  ") +
         "  train: {steps: 6, micro_batch: 2, schedule: cosine, log_every: 50}\n"
         "search:\n"
         "  kind: tpe\n"
         "  samples: 6\n"
         "  startup: 2\n"
         "  parallel: 2\n"
         "  seed: " +
         std::to_string(seed) +
         "\n"
         "  space:\n"
         "    train.lr: {loguniform: [1.0e-3, 3.0e-2]}\n"
         "    train.clip_norm: {uniform: [0.5, 2.0]}\n" +
         launch;
}

/// The search: section of halving_search_grid: halving from 2 steps, eta 3.
inline const std::string kHalvingSearch = "search:\n  kind: halving\n  min_steps: 2\n  eta: 3\n";

/// Successive halving (`search`: the search: section, "" for the plain grid) over a 3 x 3
/// grid of the tiny model: 18 steps, rungs 9x2 3x6 1x18, held-out evaluation every 4 steps
/// (so the checkpoints carry evaluations). `slow_ms` > 0 makes every step sleep that long
/// (fault.slow_ms: no effect on the bits) so that a stage lasts long enough to be
/// interrupted.
inline std::string halving_search_grid(const std::string& search = kHalvingSearch, int slow_ms = 0,
                                       const std::string& launch = kLocalLaunch) {
  return "name: halving\n"
         "base:\n" +
         tiny_model("  ") +
         "  train: {steps: 18, micro_batch: 2, schedule: cosine, warmup: 2, log_every: 50, eval_every: 4, "
         "eval_batches: 1}\n"
         "  data: {eval_fraction: 0.1}\n" +
         (slow_ms > 0 ? "  fault: {slow_ms: " + std::to_string(slow_ms) + "}\n" : std::string()) +
         "grid:\n"
         "  train.lr: [1.0e-3, 3.0e-3, 1.0e-2]\n"
         "  train.clip_norm: [0.5, 1.0, 2.0]\n" +
         search + launch;
}

/// How a command ended (code, signal, ok(), describe()) and what it printed.
struct CliResult : sweep::ExitStatus {
  std::string out;  ///< stdout and stderr together; from run_cli_split, stdout alone
  std::string err;  ///< run_cli_split only: stderr
};

/// Runs `argv` (no shell) to its end with sweep::SpawnRunner, as the driver starts runs:
/// its own process group, stdin from /dev/null, stdout and stderr appended to `log`.
/// `out` holds what this run appended.
inline CliResult run_cli(const std::vector<std::string>& argv, const std::filesystem::path& log) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(log, ec);
  const size_t before = ec ? 0 : size_t(size);
  CliResult r;
  static_cast<sweep::ExitStatus&>(r) = sweep::SpawnRunner().run(argv, log.string());
  const std::string text = read_file(log);
  r.out = text.substr(std::min(before, text.size()));
  return r;
}

/// Runs `argv` (no shell) to its end in `cwd`, stdin from /dev/null, stdout and stderr
/// apart (through <captures>/stdout and <captures>/stderr, a directory outside `cwd`, so
/// that the command's directory holds only what it wrote): for the bad-input contract of
/// nothing on stdout and one line on stderr. `code` stays -1 when it cannot start.
inline CliResult run_cli_split(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                               const std::filesystem::path& captures) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string out = (captures / "stdout").string(), err = (captures / "stderr").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  CliResult r;
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ) == 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&fa);
  r.out = read_file(out), r.err = read_file(err);
  return r;
}

/// The bad-input contract: exit `code`, nothing on stdout, and exactly one line on stderr.
inline void expect_one_error_line(const CliResult& r, int code) {
  EXPECT_EQ(r.code, code) << "stderr: " << r.err << "stdout: " << r.out;
  EXPECT_EQ(r.out, "") << "expected nothing on stdout";
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "expected exactly one line on stderr, got: " << r.err;
  EXPECT_FALSE(r.err.empty() || r.err.back() != '\n') << "stderr does not end its line: " << r.err;
}

/// Waits for child `id` of `runner` (started with start()) to end.
inline sweep::ExitStatus wait_for(sweep::ProcessRunner& runner, int id) {
  while (true)
    for (auto& [pid, st] : runner.wait_some(1.0))
      if (pid == id) return st;
}

/// Pids of the live processes (zombies left out) whose command line mentions `needle`,
/// this one excepted.
inline std::vector<int> processes_mentioning(const std::string& needle) {
  std::vector<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int pid = std::atoi(name.c_str());
    if (pid == ::getpid()) continue;
    std::string cmd = read_file(e.path() / "cmdline"), stat = read_file(e.path() / "stat");
    const auto paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') continue;
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(needle) != std::string::npos) out.push_back(pid);
  }
  return out;
}

/// Base of the e2e fixtures: a fresh directory per test, kept when the test fails (its
/// path is printed), and the binaries run in it with their output in <dir>/<log>.
class E2eTest : public TempDirTest {
 protected:
  explicit E2eTest(const std::string& prefix) : TempDirTest(prefix, Cleanup::unless_failed) {}

  /// The training program train() and train_argv() start: sweep-train unless a test of a
  /// program of its own (sweep::train_main) says otherwise.
  std::string trainer_ = bin("sweep-train");

  /// Writes `text` to <dir>/<name>; returns its path.
  std::string write(const std::string& name, const std::string& text) const { return write_file(dir_ / name, text); }
  /// The file <dir>/<name>; "" when there is none.
  std::string read(const std::string& name) const { return read_file(dir_ / name); }
  /// What train(name, ...) printed: <dir>/<name>.log.
  std::string log(const std::string& name) const { return read(name + ".log"); }

  /// `sweep ARGS` as an argv.
  static std::vector<std::string> sweep_argv(std::vector<std::string> args) {
    args.insert(args.begin(), bin("sweep"));
    return args;
  }
  /// Runs `sweep ARGS` to its end; its output is appended to <dir>/<log>.
  CliResult sweep_cli(const std::vector<std::string>& args, const std::string& log) const {
    return run_cli(sweep_argv(args), dir_ / log);
  }
  /// Writes `config` to <dir>/<name>.yaml; returns the argv that trains it into
  /// <dir>/<name>/, `<trainer_> --config ... --out ... EXTRA`: alone when `ranks` is 0,
  /// else under mpiexec on that many ranks.
  std::vector<std::string> train_argv(const std::string& name, const std::string& config, int ranks = 0,
                                      const std::vector<std::string>& extra = {}) const {
    const std::string yaml = write(name + ".yaml", config);
    std::vector<std::string> argv;
    if (ranks > 0) argv = mpiexec(ranks);
    for (const std::string& a : {trainer_, std::string("--config"), yaml, std::string("--out"), (dir_ / name).string()})
      argv.push_back(a);
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
  /// Trains `config` as train_argv() says, to its end; the output is appended to
  /// <dir>/<name>.log.
  CliResult train(const std::string& name, const std::string& config, int ranks = 0,
                  const std::vector<std::string>& extra = {}) const {
    return run_cli(train_argv(name, config, ranks, extra), dir_ / (name + ".log"));
  }
  /// The completed record of the run in <dir>/<name>/.
  sweep::Record record(const std::string& name) const {
    return sweep::read_record((dir_ / name / "record.h5").string());
  }
};

}  // namespace sweep_test
