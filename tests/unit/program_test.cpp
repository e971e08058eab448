// A grid's `program:` section: parsing and path resolution, the declared keys, the
// command and environment of each run (local and a Slurm batch script), and the JSON the
// record names the program with.
#include "program.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "data_file.h"  // identify_data_file
#include "grid.h"
#include "launch.h"
#include "process.h"  // capture
#include "slurm.h"
#include "sweep/record_writer.h"  // kNumericsEnv
#include "temp_dir.h"             // TempDirTest
#include "test_util.h"            // EXPECT_CONTAINS, thrown_message

namespace sweep {
namespace {

namespace fs = std::filesystem;
using V = std::vector<std::string>;

class Program : public sweep_test::TempDirTest {
 protected:
  Program() : TempDirTest("program") {}
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir_ / "proj" / "bin");
    script_ = (dir_ / "proj" / "train.py").string();
    std::ofstream(script_) << "print('hi')\n";
    tool_ = (dir_ / "proj" / "bin" / "tool").string();
    std::ofstream(tool_) << "#!/bin/sh\n";
    fs::permissions(tool_, fs::perms::owner_all);
    grid_ = (dir_ / "proj" / "g.yaml").string();
  }
  SweepSpec parse(const std::string& body) { return parse_grid("name: p\n" + body, grid_); }
  std::string error(const std::string& body) {
    return sweep_test::thrown_message<ConfigError>([&] { expand_grid(parse(body)); });
  }
  std::string script_, tool_, grid_;
};

TEST_F(Program, ResolvesTheCommandNextToTheGridAndOnPath) {
  SweepSpec s = parse(
      "program:\n  argv: [sh, -u, train.py, --flag=a/b, bin/tool]\n  kind: p-one\n"
      "  keys:\n    width: {type: int, default: 4, min: 1, max: 64}\n");
  ASSERT_EQ(s.program.argv.size(), 5u);
  EXPECT_EQ(s.program.argv[0], resolve_program("sh"));  // on PATH, made absolute
  EXPECT_EQ(s.program.argv[1], "-u");                   // no '/': as written
  EXPECT_EQ(s.program.argv[2], "train.py");             // no '/': as written (the run's cwd is not the grid's)
  EXPECT_EQ(s.program.argv[3], "--flag=a/b");           // an option: as written
  EXPECT_EQ(s.program.argv[4], tool_);                  // a path: next to the grid file
  EXPECT_EQ(s.base.at("model.kind").text, "p-one");     // the program's kind is the grid's
  auto points = expand_grid(s).points;
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].config.model.values, (std::vector<std::pair<std::string, std::string>>{{"width", "4"}}));
  EXPECT_EQ(s.program.json, json_string_array(s.program.argv));
  EXPECT_EQ(s.program.digest, program_digest(s.program.argv, {}, s.program.cwd));
  EXPECT_CONTAINS(s.program.keys, "kind: p-one");
}

TEST_F(Program, DigestFollowsTheFilesTheCommandNames) {
  const V argv = {tool_, script_, "--x"};
  const std::string before = program_digest(argv);
  EXPECT_EQ(before.size(), 21u);  // xxh3: and 16 hex digits
  EXPECT_EQ(program_digest(argv), before);
  std::ofstream(script_, std::ios::app) << "# one more line\n";
  EXPECT_NE(program_digest(argv), before);
}

// `python3 train.py`: the run starts in program.cwd, where the bare name is that script, so
// it is one of the program's files (hashed, named in program.files) and an edit of it
// changes the digest, while the argument stays as written. An option, a name that is no
// file there, and the same name in another cwd are not.
TEST_F(Program, ABareScriptNameInTheRunsDirectoryIsAProgramFile) {
  const SweepSpec s = parse("program:\n  argv: [sh, train.py, -u, absent.py]\n  kind: p-bare\n");
  EXPECT_EQ(s.program.argv[1], "train.py");
  EXPECT_EQ(program_files(s.program.argv, s.program.cwd), (V{s.program.argv[0], script_}));
  EXPECT_CONTAINS(s.program.file_hashes, " " + script_ + "\"]");
  EXPECT_EQ(s.program.digest, program_digest(s.program.argv, {}, s.program.cwd));
  EXPECT_NE(s.program.digest, program_digest(s.program.argv));  // without the script
  // The record's program re-made (reproduce): the same files, the script not twice.
  const ProgramSpec again = recorded_program(s.program.json, s.program.keys, recorded_writes(s.program), "again",
                                             s.program.file_hashes, "", s.program.cwd);
  EXPECT_EQ(again.digest, s.program.digest);
  EXPECT_EQ(again.file_hashes, s.program.file_hashes);
  std::ofstream(script_, std::ios::app) << "x = 1\n";
  EXPECT_EQ(changed_files(s.program.file_hashes).size(), 1u);
  EXPECT_NE(parse("program:\n  argv: [sh, train.py]\n  kind: p-bare2\n").program.digest, s.program.digest);
  // Started in bin/, `train.py` names no file there: nothing but the interpreter.
  const SweepSpec elsewhere = parse("program:\n  argv: [sh, train.py, tool]\n  kind: p-bare3\n  cwd: bin\n");
  EXPECT_EQ(program_files(elsewhere.program.argv, elsewhere.program.cwd), (V{elsewhere.program.argv[0], tool_}));
}

// `sweep accept` took a file's change: its recorded hash counts as the accepted one, a
// chain of acceptances is followed, and a change after the acceptance is one again,
// said with what was accepted.
TEST_F(Program, AnAcceptedHashCountsAsTheRecordedOne) {
  const std::string was = identify_data_file(script_, "").hash;
  const std::string recorded = json_string_array({was + " " + script_});
  std::ofstream(script_, std::ios::app) << "# a comment\n";
  const std::string mid = identify_data_file(script_, "").hash;
  ASSERT_EQ(changed_files(recorded).size(), 1u);
  EXPECT_EQ(changed_files(recorded)[0].text(), script_ + " (was " + was + ", now " + mid + ")");
  AcceptedHashes accepted;
  accepted.to[{script_, was}] = mid;
  EXPECT_TRUE(changed_files(recorded, accepted).empty());
  accepted.to[{"/elsewhere/train.py", was}] = "xxh3:0";  // another file's acceptance is not this one's
  EXPECT_TRUE(changed_files(recorded, accepted).empty());
  std::ofstream(script_, std::ios::app) << "x = 2\n";
  const std::string now = identify_data_file(script_, "").hash;
  const auto changed = changed_files(recorded, accepted);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].text(), script_ + " (was " + was + ", accepted as " + mid + ", now " + now + ")");
  accepted.to[{script_, mid}] = now;  // accepted again: the chain leads to now
  EXPECT_EQ(accepted.current(script_, was), now);
  EXPECT_TRUE(changed_files(recorded, accepted).empty());
  accepted.to[{script_, now}] = was;  // a cycle (hand-made) ends
  EXPECT_NE(accepted.current(script_, was), "");
}

TEST_F(Program, BadSectionsNameTheGridFileAndKey) {
  EXPECT_CONTAINS(error("program:\n  argv: [no-such-program-q]\n  kind: k\n"),
                  grid_ + ":3:10: key 'program.argv[0]': 'no-such-program-q': not found on PATH");
  EXPECT_CONTAINS(error("program:\n  argv: [./train.py]\n  kind: k\n"), "not found or not executable");
  EXPECT_CONTAINS(
      error("program:\n  argv: [sh, gone/x.py]\n  kind: k\n"),
      "key 'program.argv[1]': 'gone/x.py' (" + (dir_ / "proj" / "gone" / "x.py").string() + "): no such file");
  EXPECT_CONTAINS(error("program:\n  argv: []\n  kind: k\n"), "key 'program.argv': required");
  EXPECT_CONTAINS(error("program:\n  argv: [sh]\n"), "key 'program.kind': required");
  EXPECT_CONTAINS(error("program:\n  argv: [sh]\n  kind: decoder\n"), "the built-in decoder has this kind");
  EXPECT_CONTAINS(error("program:\n  argv: [sh]\n  kind: k\n  argz: 1\n"), "unknown key 'program.argz'");
  EXPECT_CONTAINS(error("program:\n  argv: [sh]\n  kind: k\n  keys:\n    w: {type: integer, default: 1}\n"),
                  "key 'program.keys.w.type'");
  EXPECT_CONTAINS(error("program:\n  argv: [sh]\n  kind: k\n  keys:\n    w: {type: int, default: 1}\n"),
                  "key 'program.keys.w.min': required for type int");
  EXPECT_CONTAINS(error("program:\n  argv: [sh]\n  kind: k\n  keys:\n    w: {type: int, default: 9, min: 1, max: 4}\n"),
                  "program.keys.w.default");
  EXPECT_CONTAINS(
      error("program:\n  argv: [sh]\n  kind: k\n  keys:\n    vocab: {type: int, default: 1, min: 1, max: 4}\n"),
      "collides with the built-in key model.vocab");
  EXPECT_CONTAINS(
      error("program:\n  argv: [sh]\n  kind: k5\n  keys:\n    width: {type: int, default: 1, min: 1, max: 4}\n"
            "base:\n  model: {widht: 2}\n"),
      "did you mean 'model.width'");
  EXPECT_CONTAINS(
      error("program:\n  argv: [sh]\n  kind: k6\n  keys:\n    act: {type: choice, default: a, choices: [a, b]}\n"
            "grid:\n  model.act: [a, c]\n"),
      "model.act");
  EXPECT_CONTAINS(error("program:\n  argv: [sh]\n  kind: k7\nbase:\n  model: {kind: other}\n"),
                  "unknown model kind 'other'");
  EXPECT_CONTAINS(error("program:\n  argv: [sh]\n  kind: k8\nlaunch: {trainer: bin/tool}\n"),
                  "launch.trainer names a training program too");
  EXPECT_CONTAINS(error("program:\n  argv: [sh]\n  kind: k10\n  writes: [train.py]\n"),
                  "key 'program.writes': 'train.py' (" + script_ + "): not a directory");
  EXPECT_CONTAINS(error("program:\n  argv: [sh]\n  kind: k11\n  confine: false\n  writes: [bin]\n"),
                  "confine is false");
  EXPECT_CONTAINS(sweep_test::thrown_message<ConfigError>(
                      [&] { parse_grid("name: p\nprogram:\n  argv: [sh]\n  kind: k9\n", grid_, tool_); }),
                  "--trainer cannot replace it");
  // Timing metrics are the program's own: never the record's math, always a metric's name.
  EXPECT_CONTAINS(error("program:\n  argv: [sh]\n  kind: k12\n  timing_metrics: [mfu, loss]\n"),
                  "key 'program.timing_metrics': 'loss': one of the record's own columns");
  EXPECT_CONTAINS(error("program:\n  argv: [sh]\n  kind: k13\n  timing_metrics: ['my mfu']\n"),
                  "key 'program.timing_metrics': 'my mfu': not a metric's name");
}

TEST(ProgramJson, RoundTripsAnyArgument) {
  const V argv = {"/usr/bin/python3", "a \"quoted\" \\ path", "tab\there", "new\nline", "caf\xc3\xa9", ""};
  const std::string j = json_string_array(argv);
  EXPECT_EQ(j.find('\n'), std::string::npos) << j;
  EXPECT_EQ(parse_json_string_array(j), argv);
  EXPECT_EQ(parse_json_string_array("[]"), V{});
  EXPECT_EQ(parse_json_string_array(" [ \"a\" , \"b\\/c\" ] "), (V{"a", "b/c"}));
  // JSON as any writer spells it (Python's json.dumps escapes past ASCII): read as UTF-8.
  EXPECT_EQ(parse_json_string_array("[\"caf\\u00e9\", \"\\u20ac\\t\"]"), (V{"caf\xc3\xa9", "\xe2\x82\xac\t"}));
  // A byte that is no UTF-8 is written as U+FFFD (JSON text is UTF-8) and read back so.
  EXPECT_EQ(json_string_array({"a\xff"
                               "b"}),
            "[\"a\\ufffdb\"]");
  EXPECT_EQ(parse_json_string_array(json_string_array({"a\xff"
                                                       "b"})),
            V{"a\xef\xbf\xbd"
              "b"});
  for (const char* bad :
       {"", "[", "[\"a\"", "[\"a\",]", "[1]", "[\"a\"] x", "{\"a\"}", "[\"\\ud800\"]", "[\"\\q\"]", "[\"\\u12\"]"})
    EXPECT_THROW(parse_json_string_array(bad), ConfigError) << bad;
}

TEST_F(Program, ItsConfigHoldsWhatTheGridSetsAndNoDefaultOfSweeps) {
  SweepSpec s = parse(
      "program:\n  argv: [bin/tool]\n  kind: p-own\n"
      "  keys:\n    width: {type: int, default: 4, min: 1, max: 64}\n"
      "base:\n  train: {lr: 0.003, min_lr_ratio: 0.1}\n"
      "grid:\n  train.warmup: [2, 3]\n"
      "include:\n  - {train.clip_norm: 0.5}\n");
  const auto points = expand_grid(s).points;
  ASSERT_EQ(points.size(), 3u);
  const std::string text = to_yaml(points[0].config);
  // model.kind, its own keys, what sweep applies itself, and the grid's keys; min_lr_ratio
  // is handed over as the min_lr it derives.
  EXPECT_EQ(text,
            "model:\n  kind: p-own\n  width: 4\ntrain:\n  lr: 0.003\n  warmup: 2\n  min_lr: 3e-04\n  threads: 1\n"
            "  checksum_every: 1\n  telemetry_every: 10\ndist:\n  world_size: 1\n");
  EXPECT_EQ(points[0].id, run_id(points[0].config));
  for (const char* absent : {"steps", "clip_norm", "micro_batch", "accum", "seed", "weight_decay", "data:"})
    EXPECT_EQ(text.find(absent), std::string::npos) << absent;
  // An include's own key is its point's alone.
  EXPECT_NE(to_yaml(points[2].config).find("clip_norm: 0.5"), std::string::npos);
  EXPECT_EQ(to_yaml(points[1].config).find("clip_norm"), std::string::npos);
  // sweep-train's configs hold every key, as before.
  SweepSpec t = parse_grid("name: t\nbase:\n  train: {lr: 0.003}\n", grid_);
  EXPECT_NE(to_yaml(expand_grid(t).points[0].config).find("clip_norm"), std::string::npos);
}

TEST_F(Program, MinLrRatioIsHonouredWithMinLr) {
  const std::string body =
      "program:\n  argv: [bin/tool]\n  kind: p-ratio\n  honours: [train.lr, train.min_lr_ratio]\n"
      "base:\n  train: {lr: 0.01, min_lr_ratio: 0.1}\n";
  const SweepSpec s = parse(body);
  EXPECT_EQ(s.program.honours, (V{"train.lr", "train.min_lr"}));
  const Expansion e = expand_grid(s);
  EXPECT_TRUE(e.warnings.empty()) << e.warnings.front();
  EXPECT_NE(to_yaml(e.points.at(0).config).find("min_lr: 0.001"), std::string::npos);
}

TEST_F(Program, ConventionsAreDeclaredAndChecked) {
  SweepSpec s = parse("program:\n  argv: [bin/tool]\n  kind: p-c\n  accum: global\n  steps: plus_one\n");
  EXPECT_EQ(s.program.conventions(), "accum=global steps=plus_one rank_env=ranks");
  EXPECT_CONTAINS(error("program:\n  argv: [bin/tool]\n  kind: k\n  accum: world\n"),
                  "key 'program.accum': 'world': expected per_rank or global");
  EXPECT_CONTAINS(error("program:\n  argv: [bin/tool]\n  kind: k\n  steps: 1\n"),
                  "key 'program.steps': '1': expected count or plus_one");
  EXPECT_CONTAINS(error("program:\n  argv: [bin/tool]\n  kind: k\n  single_rank_env: maybe\n"),
                  "program.single_rank_env");
}

TEST_F(Program, EachRunGetsItsFilesAndNumericsEnvironment) {
  SweepSpec s = parse("program:\n  argv: [bin/tool, --x]\n  kind: p-env\n  timing_metrics: [mfu, tflops]\n");
  LocalLaunch local;
  local.train_binary = "/b/sweep-train";
  EXPECT_EQ(program_head(local, "/b/sweep-train", "/s/runs/abc"), V{"/b/sweep-train"});  // no program
  local.env = {"OPENBLAS_CORETYPE=Haswell"};  // launch.blas: every run's command sets it
  EXPECT_EQ(program_head(local, "/b/sweep-train", "/s/runs/abc"),
            (V{"env", "OPENBLAS_CORETYPE=Haswell", "/b/sweep-train"}));
  local.env.clear();
  local.program = s.program;
  local.threads = 3;
  RunCommand c = local_run_command(s.launch, local, 1, "/s", "/s/runs/abc", "sw", true);
  // It starts in the grid file's directory (program.cwd), with its files' hashes; a run of
  // one rank gets none of torch.distributed's variables (a script that detects DDP from
  // RANK trains plain).
  const V want = {"env",
                  "--chdir=" + s.program.cwd,
                  "SWEEP_CONFIG=/s/runs/abc/config.yaml",
                  "SWEEP_RUN_DIR=/s/runs/abc",
                  "SWEEP_RUN_ID=abc",
                  "SWEEP_PROGRAM=" + s.program.json,
                  "SWEEP_PROGRAM_DIGEST=" + s.program.digest,
                  "SWEEP_PROGRAM_KEYS=" + s.program.keys,
                  "SWEEP_PROGRAM_WRITES=[]",
                  "SWEEP_PROGRAM_FILES=[\"" + s.program.digest + " " + tool_ + "\"]",
                  "SWEEP_PROGRAM_TREES=",
                  "SWEEP_PROGRAM_CWD=" + s.program.cwd,
                  "SWEEP_PROGRAM_PASS_ARGS=true",
                  "SWEEP_PROGRAM_TIMING_METRICS=mfu tflops",
                  "SWEEP_DATA_FILES=",
                  "SWEEP_DATA_FILE=",
                  "SWEEP_DATA_HASH=",
                  "PYTHONHASHSEED=0",
                  "PYTHONUNBUFFERED=1",
                  "OMP_NUM_THREADS=3",
                  "OPENBLAS_NUM_THREADS=3",
                  "MKL_NUM_THREADS=3",
                  "CUBLAS_WORKSPACE_CONFIG=:4096:8",
                  "SWEEP_PROGRAM_CONVENTIONS=accum=per_rank steps=count rank_env=ranks",
                  tool_,
                  "--x",
                  "--config",
                  "/s/runs/abc/config.yaml",
                  "--out",
                  "/s/runs/abc",
                  "--sweep-id",
                  "sw",
                  "--resume"};
  EXPECT_EQ(c.argv, want);
  // A program that asks for them (program.single_rank_env) gets them for a world of one.
  local.program.single_rank_env = true;
  c = local_run_command(s.launch, local, 1, "/s", "/s/runs/abc", "sw", true);
  const auto vars = std::find(c.argv.begin(), c.argv.end(), "MASTER_ADDR=127.0.0.1");
  ASSERT_NE(vars, c.argv.end());
  EXPECT_EQ(V(vars + 1, vars + 5), (V{"RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1"}));
  EXPECT_NE(
      std::find(c.argv.begin(), c.argv.end(), "SWEEP_PROGRAM_CONVENTIONS=accum=per_rank steps=count rank_env=always"),
      c.argv.end());
  local.program.single_rank_env = false;
  // Confined: sweep-confine first, with the places the program may write.
  local.confine = "/b/sweep-confine";
  c = local_run_command(s.launch, local, 1, "/s", "/s/runs/abc", "sw", false);
  const V confined = {"/b/sweep-confine", "--run",    "/s/runs/abc", "--scratch", "/tmp",
                      "--scratch",        "/var/tmp", "--devices",   "--",        "env"};
  EXPECT_EQ(V(c.argv.begin(), c.argv.begin() + long(confined.size())), confined);
  EXPECT_EQ(c.argv.at(confined.size() + 7), "SWEEP_PROGRAM_WRITES=[]");
  // What a scratch place that holds the run directory means is sweep-confine's to decide,
  // on the node (tests/python/test_confine.py): the arguments are the same for any place.
  EXPECT_EQ(confine_args(s.program, "/tmp/s/runs/abc"),
            (V{"--run", "/tmp/s/runs/abc", "--scratch", "/tmp", "--scratch", "/var/tmp", "--devices"}));
  local.confine.clear();
  // Under mpiexec each rank runs the same command behind sweep-rank.
  local.rank_wrapper = "/b/sweep-rank";
  c = local_run_command(s.launch, local, 2, "/s", "/s/runs/abc", "sw", false);
  const auto at = std::find(c.argv.begin(), c.argv.end(), "env");
  ASSERT_NE(at, c.argv.end());
  EXPECT_EQ(*(at - 1), "--");
  EXPECT_EQ(*(at + 4), "SWEEP_RUN_ID=abc");
  // The ranks take RANK and WORLD_SIZE from sweep-rank: the command does not set them.
  local.rendezvous.world = 2;
  c = local_run_command(s.launch, local, 2, "/s", "/s/runs/abc", "sw", false);
  EXPECT_EQ(std::find(c.argv.begin(), c.argv.end(), "RANK=0"), c.argv.end());
}

// What sweep sets for a program beyond its own SWEEP_* variables and torch.distributed's
// changes numerics (threads, hash seeds, cuBLAS workspaces): each is one of the variables
// every record keeps (kNumericsEnv, which python's NUMERICS_ENV is checked against), so a
// record says what its run ran under.
TEST(ProgramEnvironment, EveryNumericsSettingIsRecorded) {
  ProgramSpec p;
  p.single_rank_env = true;
  const std::set<std::string> recorded(std::begin(kNumericsEnv), std::end(kNumericsEnv));
  // Not numerics: a Python program's log line by line, torch.distributed's rendezvous.
  const std::set<std::string> not_numerics = {"PYTHONUNBUFFERED", "MASTER_ADDR", "MASTER_PORT",     "RANK",
                                              "WORLD_SIZE",       "LOCAL_RANK",  "LOCAL_WORLD_SIZE"};
  size_t numerics = 0;
  for (const std::string& var : program_environment(p, "/r", "abc", 3, Rendezvous{"127.0.0.1", "29500", 1})) {
    const std::string name = var.substr(0, var.find('='));
    if (name.rfind("SWEEP_", 0) == 0 || not_numerics.count(name)) continue;
    EXPECT_TRUE(recorded.count(name)) << var << ": not in kNumericsEnv (include/sweep/record_writer.h)";
    ++numerics;
  }
  EXPECT_EQ(numerics, 5u);  // PYTHONHASHSEED, three thread counts, CUBLAS_WORKSPACE_CONFIG
}

TEST_F(Program, ASlurmTaskGetsItsOwnRunDirectoryAndId) {
  SweepSpec s = parse("program:\n  argv: [bin/tool]\n  kind: p-slurm\n");
  const std::string sweep_dir = (dir_ / "sw $x").string();
  SlurmArray a;
  a.sweep_name = "n";
  a.sweep_dir = sweep_dir;
  a.world = 1;
  a.threads = 2;
  a.dirs = {sweep_dir + "/runs/0123456789abcdef", sweep_dir + "/runs/fedcba9876543210"};
  a.resume = {false, false};
  s.launch.launcher = "slurm";
  LocalLaunch local;
  local.rank_wrapper = "/b/sweep-rank";
  local.program = s.program;
  const std::string bin = (dir_ / "bin").string();
  fs::create_directories(bin);
  std::ofstream(bin + "/srun") << "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n";
  fs::permissions(bin + "/srun", fs::perms::owner_all);
  std::ofstream(dir_ / "batch.sh") << sbatch_script(a, s.launch, local);
  for (const auto& d : a.dirs) fs::create_directories(d + "/logs");
  for (int task : {0, 1}) {
    Captured c = capture({"/usr/bin/env", "PATH=" + bin + ":/usr/bin:/bin",
                          "SLURM_ARRAY_TASK_ID=" + std::to_string(task), "/bin/bash", (dir_ / "batch.sh").string()});
    EXPECT_EQ(c.status.code, 0) << c.output;
    const std::string log = sweep_test::read_file(a.dirs[task] + "/logs/launcher.log");
    const std::string id = fs::path(a.dirs[task]).filename().string();
    EXPECT_CONTAINS(log, "[SWEEP_CONFIG=" + a.dirs[task] + "/config.yaml]\n[SWEEP_RUN_DIR=" + a.dirs[task] +
                             "]\n[SWEEP_RUN_ID=" + id + "]\n");
    EXPECT_CONTAINS(log, "[OMP_NUM_THREADS=2]\n");
    EXPECT_CONTAINS(log, "[" + tool_ + "]\n[--config]\n[" + a.dirs[task] + "/config.yaml]\n");
  }
}

}  // namespace
}  // namespace sweep
