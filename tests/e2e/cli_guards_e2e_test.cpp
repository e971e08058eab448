// The real `sweep` binary against bad input and mistaken output paths: `report -o` never
// replaces a record or anyone else's file, `report` and `run --out` write only into sweep
// directories, `run --out` hands every launcher an absolute path, `status` escapes what it
// reads from disk, and `reproduce` refuses a layout of 0 or less. Each refusal is one
// stderr line, exit 2, and nothing written. Needs only `sweep` (no trainer runs).
#include <gtest/gtest.h>
#include <sys/stat.h>  // mkfifo

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "e2e_util.h"    // E2eTest, run_cli_split, expect_one_error_line, listing, tiny_model
#include "small_disk.h"  // SmallDisk: a tmpfs to fill

namespace fs = std::filesystem;

namespace {

using sweep_test::CliResult;
using sweep_test::listing;
using sweep_test::read_file;
using sweep_test::write_file;

class CliGuards : public sweep_test::E2eTest {
 protected:
  CliGuards() : E2eTest("cli_guards_e2e") {}
  void SetUp() override {
    E2eTest::SetUp();
    fs::create_directories(dir_ / "logs");
    fs::create_directories(dir_ / "work");
    work_ = dir_ / "work";
  }

  /// `sweep ARGS` in `work_`, stdout and stderr kept apart.
  CliResult sweep(const std::vector<std::string>& args) {
    return sweep_test::run_cli_split(sweep_argv(args), work_, dir_ / "logs");
  }

  /// The refusal contract: exit 2, nothing on stdout, one stderr line naming `names`.
  void expect_refusal(const CliResult& o, const std::string& names, const std::string& message) {
    sweep_test::expect_one_error_line(o, 2);
    EXPECT_CONTAINS(o.err, names);
    EXPECT_CONTAINS(o.err, message);
  }

  /// A sweep directory with one run directory and its (stand-in) record.
  fs::path make_sweep_dir(const std::string& name) {
    const fs::path d = work_ / name;
    fs::create_directories(d / "runs" / "0123456789abcdef");
    write_file(d / "runs" / "0123456789abcdef" / "record.h5", kRecordBytes);
    return d;
  }

  std::string grid(const std::string& launch = "") {
    return write_file(work_ / "g.yaml",
                      "name: guards\n"
                      "base:\n" +
                          sweep_test::tiny_model("  ") + "  train: {steps: 3, micro_batch: 2}\n" + launch);
  }

  /// A training program that offers the built-in decoder and trains nothing (exit 0).
  std::string fake_trainer() {
    const fs::path p = dir_ / "fake-train";
    write_file(p, "#!/bin/sh\n[ \"$1\" = --describe-models ] && printf 'offers: [decoder]\\nmodels: []\\n'\nexit 0\n");
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }

  const std::string kRecordBytes = std::string("\x89HDF\r\n\x1a\n", 8) + "a completed record";
  fs::path work_;
};

TEST_F(CliGuards, ReportOutputNeverReplacesARecord) {
  const fs::path sweep_dir = make_sweep_dir("s");
  const fs::path rec = sweep_dir / "runs" / "0123456789abcdef" / "record.h5";
  const auto before = listing(work_);
  for (const std::string& target : {rec.string(), rec.string() + ".partial", (work_ / "new.h5").string()}) {
    SCOPED_TRACE(target);
    expect_refusal(sweep({"report", sweep_dir.string(), "-o", target}), "-o " + target,
                   "refusing to write a report to a record's name (.h5, .h5.partial)");
  }
  EXPECT_EQ(read_file(rec), kRecordBytes);
  EXPECT_EQ(listing(work_), before);
}

TEST_F(CliGuards, ReportOutputReplacesOnlyAReportOfTheSameFormat) {
  const fs::path sweep_dir = make_sweep_dir("s");
  write_file(work_ / "notes.html", "<!DOCTYPE html>\n<p>my notes</p>\n");
  write_file(work_ / "notes.md", "# notes\n\nkeep me\n");
  const auto before = listing(work_);
  expect_refusal(sweep({"report", sweep_dir.string(), "-o", "notes.html"}), "-o notes.html",
                 "exists and is not a sweep report (HTML); refusing to replace it");
  expect_refusal(sweep({"report", sweep_dir.string(), "--format", "md", "-o", "notes.md"}), "-o notes.md",
                 "exists and is not a sweep report (Markdown)");
  EXPECT_EQ(read_file(work_ / "notes.html"), "<!DOCTYPE html>\n<p>my notes</p>\n");
  EXPECT_EQ(read_file(work_ / "notes.md"), "# notes\n\nkeep me\n");
  expect_refusal(sweep({"report", sweep_dir.string(), "-o", sweep_dir.string()}), "-o " + sweep_dir.string(),
                 "is a directory");
  EXPECT_EQ(listing(work_), before);

  // Its own reports are replaced, each format by itself only; stdout and /dev/null work.
  for (const char* fmt : {"html", "md", "csv", "json"}) {
    SCOPED_TRACE(fmt);
    const std::string out = std::string("r.") + fmt;
    EXPECT_EQ(sweep({"report", sweep_dir.string(), "--format", fmt, "-o", out}).code, 0);
    const CliResult again = sweep({"report", sweep_dir.string(), "--format", fmt, "-o", out});
    EXPECT_EQ(again.code, 0) << again.err;
    EXPECT_EQ(
        sweep({"report", sweep_dir.string(), "--format", std::string(fmt) == "json" ? "csv" : "json", "-o", out}).code,
        2);
  }
  EXPECT_CONTAINS(read_file(work_ / "r.html"), "<meta name=\"generator\" content=\"sweep report\">");
  EXPECT_CONTAINS(read_file(work_ / "r.json"), "\"generator\":\"sweep report\"");
  const CliResult to_stdout = sweep({"report", sweep_dir.string(), "-o", "-"});
  EXPECT_EQ(to_stdout.code, 0);
  EXPECT_EQ(to_stdout.out.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(sweep({"report", sweep_dir.string(), "-o", "/dev/null"}).code, 0);
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

// --baseline KEY=VALUE must name a key that varies and a value some run has.
TEST_F(CliGuards, ABadBaselineIsNamedAndNothingIsWritten) {
  const fs::path d = work_ / "s";
  ASSERT_EQ(sweep_test::run_cli({sweep_test::bin("make_records"), "--out", d.string(), "--runs", "4", "--steps", "3"},
                                dir_ / "logs" / "make_records.log")
                .code,
            0);
  const auto before = listing(work_);
  expect_refusal(sweep({"report", d.string(), "--baseline", "train.lr"}), "--baseline 'train.lr'",
                 "expected KEY=VALUE, e.g. train.precision=fp32");
  expect_refusal(sweep({"report", d.string(), "--baseline", "train.lrr=1"}), "--baseline 'train.lrr=1'",
                 "no run has the config key train.lrr (did you mean 'train.lr'?)");
  expect_refusal(sweep({"report", d.string(), "--baseline", "train.lr=0.5"}), "--baseline 'train.lr=0.5'",
                 "no run has train.lr = 0.5 (its values: ");
  expect_refusal(sweep({"report", d.string(), "--baseline", "train.clip_norm=0"}), "--baseline 'train.clip_norm=0'",
                 "train.clip_norm is 0 in every run, so there is nothing to compare against it");
  EXPECT_EQ(listing(work_), before);
  const CliResult ok = sweep({"report", d.string(), "--baseline", "dist.world_size=1", "-o", "-"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_CONTAINS(ok.out, "<h2>Differences against dist.world_size=1</h2>");
}

// An export that the disk cannot hold (it writes a temporary file, then renames it over
// the old export) fails with the reason, leaves no temporary file and leaves the earlier
// export as it was; freed space, the same export completes.
TEST_F(CliGuards, AnExportOntoAFullDiskFailsAndLeavesTheEarlierExportWhole) {
  const fs::path disk_dir = dir_ / "disk";
  const sweep_test::SmallDisk disk(disk_dir, "2m");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a 2 MB tmpfs here (" << disk.error() << "); needs root";
  const std::string make = sweep_test::bin("make_records");
  for (const auto& [name, runs] : {std::pair<std::string, int>{"small", 5}, {"big", 80}})
    ASSERT_EQ(
        sweep_test::run_cli({make, "--out", (work_ / name).string(), "--runs", std::to_string(runs), "--steps", "30"},
                            dir_ / "logs" / "make.log")
            .code,
        0);
  ASSERT_EQ(sweep({"export", (work_ / "big").string(), "-o", (work_ / "big.csv").string()}).code, 0);
  const std::string big = read_file(work_ / "big.csv");
  ASSERT_GT(big.size(), 1100000u);  // more than the disk has left below
  std::ofstream(disk_dir / "filler", std::ios::binary) << std::string(1000000, '\0');
  const std::string out = (disk_dir / "e.csv").string();
  ASSERT_EQ(sweep({"export", (work_ / "small").string(), "-o", out}).code, 0);  // 80 KB
  const std::string before = read_file(out);
  ASSERT_EQ(before.rfind("run_id,status,", 0), 0u) << before.substr(0, 100);
  const CliResult o = sweep({"export", (work_ / "big").string(), "-o", out});
  EXPECT_EQ(o.code, 1) << o.out << o.err;
  EXPECT_CONTAINS(o.err, out);
  EXPECT_CONTAINS(o.err, "No space left on device");
  EXPECT_TRUE(read_file(out) == before) << "the earlier export changed";
  EXPECT_EQ(listing(disk_dir), (std::set<std::string>{"e.csv", "filler"}));  // no temporary file left
  fs::remove(disk_dir / "filler");  // space again: the same export replaces the old one
  const CliResult again = sweep({"export", (work_ / "big").string(), "-o", out});
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_TRUE(read_file(out) == big) << "not the export written on the roomy disk";
}

TEST_F(CliGuards, ReportIntoADirectoryThatIsNotASweepIsRefused) {
  fs::create_directories(work_ / "home");
  write_file(work_ / "home" / "thesis.tex", "keep me");
  const auto before = listing(work_);
  expect_refusal(sweep({"report", "home"}), "home: not a sweep directory", "no points.tsv, runs/ or sweep.lock in it");
  EXPECT_EQ(listing(work_), before);
}

TEST_F(CliGuards, RunOutMustBeASweepDirectory) {
  const std::string g = grid();
  fs::create_directories(work_ / "home");
  write_file(work_ / "home" / "thesis.tex", "keep me");
  write_file(work_ / "a-file", "keep me");
  const auto before = listing(work_);
  expect_refusal(sweep({"run", g, "--out", "home", "--trainer", fake_trainer()}), "--out home: not a sweep directory",
                 "expected a new or empty directory, or one an earlier sweep wrote");
  expect_refusal(sweep({"run", g, "--out", "a-file", "--trainer", fake_trainer()}),
                 "--out a-file: exists and is not a directory", "expected a sweep directory");
  EXPECT_EQ(listing(work_), before);
}

TEST_F(CliGuards, ASweepDirectoryWhoseFlockDoesNotExcludeIsRefused) {
  // Under a file system whose flock is a no-op, two drivers (or a driver and a run's
  // writer) would work on one directory unseen: `sweep run` checks before any run starts.
  const std::string g = grid();
  const CliResult o =
      sweep_test::run_cli_split({"/usr/bin/env", std::string("LD_PRELOAD=") + SWEEP_FLOCK_NOOP,
                                 sweep_test::bin("sweep"), "run", g, "--out", "out", "--trainer", fake_trainer()},
                                work_, dir_ / "logs");
  EXPECT_EQ(o.code, 2) << o.out << o.err;
  EXPECT_CONTAINS(o.err, (work_ / "out").string() + ": flock does not exclude here: a second open of " +
                             (work_ / "out").string() + "/sweep.lock took the lock this driver holds");
  EXPECT_CONTAINS(o.err, "sweep needs a file system whose flock works");
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_FALSE(fs::exists(work_ / "out" / "points.tsv")) << "refused before the sweep directory is written";
  // Without the stand-in the same grid runs.
  const CliResult ok = sweep({"run", g, "--out", "out", "--trainer", fake_trainer(), "--quiet"});
  EXPECT_NE(ok.code, 2) << ok.err;
}

TEST_F(CliGuards, RunOutIsAbsoluteForEveryLauncher) {
  // A stand-in container runtime that records its argv and runs nothing.
  const fs::path standin = dir_ / "fake-runtime", argv_log = dir_ / "runtime-argv";
  write_file(standin, "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + argv_log.string() + "'\n");
  fs::permissions(standin, fs::perms::owner_all);
  const std::string g = grid("launch:\n  retries: 0\n  container: {runtime: docker, command: '" + standin.string() +
                             "', image: test-image}\n");
  const CliResult o = sweep({"run", g, "--out", "./x/../rel/out/", "--trainer", fake_trainer(), "--quiet"});
  ASSERT_NE(o.code, 2) << o.err;
  const std::string want = (work_ / "rel" / "out").string();
  const std::string argv = read_file(argv_log);
  EXPECT_CONTAINS(argv, " -w " + want + " -v " + want + ":" + want + " ");
  EXPECT_EQ(argv.find(" rel/"), std::string::npos) << argv;
  EXPECT_EQ(argv.find("x/.."), std::string::npos) << argv;
  EXPECT_CONTAINS(o.out, "-> " + want + " ");
}

TEST_F(CliGuards, AContainerImageOrBindThatLooksLikeAnOptionIsRefused) {
  // "--privileged" as the image would land in `docker run`'s argv as an option.
  const fs::path standin = dir_ / "fake-runtime", argv_log = dir_ / "runtime-argv";
  write_file(standin, "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + argv_log.string() + "'\n");
  fs::permissions(standin, fs::perms::owner_all);
  const auto before = listing(work_);
  for (const std::string runtime : {"docker", "apptainer", "charliecloud"}) {
    SCOPED_TRACE(runtime);
    const std::string g = grid("launch:\n  container: {runtime: " + runtime + ", command: '" + standin.string() +
                               "', image: --privileged}\n");
    expect_refusal(sweep({"plan", g, "--trainer", fake_trainer()}), "g.yaml:6:",
                   "key 'launch.container.image': '--privileged' starts with '-', which " + runtime +
                       " would read as an option of its own");
    expect_refusal(sweep({"run", g, "--out", "out", "--trainer", fake_trainer()}),
                   "g.yaml:6:", "'--privileged' starts with '-'");
  }
  const std::string g = grid("launch:\n  container: {runtime: docker, command: '" + standin.string() +
                             "', image: img, binds: ['--privileged']}\n");
  expect_refusal(sweep({"plan", g, "--trainer", fake_trainer()}), "key 'launch.container.binds'",
                 "with a host path, got '--privileged'");
  EXPECT_FALSE(fs::exists(argv_log));  // the runtime never ran
  fs::remove(work_ / "g.yaml");
  EXPECT_EQ(listing(work_), before);
}

TEST_F(CliGuards, AHostfileThatIsMissingOrNotAFileIsRefusedBeforeAnythingStarts) {
  // A FIFO would hang mpirun before any rank starts; a missing file would fail every run
  // as "crashed" with no cause. Both are bad input: exit 2, nothing written.
  ASSERT_EQ(::mkfifo((work_ / "fifo").c_str(), 0600), 0);
  fs::create_directories(work_ / "adir");
  const auto before = listing(work_);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"missing-hosts", "no such file; expected an Open MPI hostfile"},
      {"fifo", "not a regular file (a directory, FIFO or device)"},
      {"adir", "not a regular file (a directory, FIFO or device)"}};
  for (const auto& [file, message] : cases) {
    SCOPED_TRACE(file);
    const std::string g = grid("launch:\n  launcher: mpirun\n  hostfile: " + file + "\n");
    const std::string named = "g.yaml:7:13: key 'launch.hostfile': '" + (work_ / file).string() + "': ";
    for (const std::string verb : {"plan", "run"}) {
      std::vector<std::string> args = {verb, g, "--trainer", fake_trainer()};
      if (verb == "run") args.insert(args.end(), {"--out", "out"});
      expect_refusal(sweep(args), named, message);
    }
  }
  fs::remove(work_ / "g.yaml");
  EXPECT_EQ(listing(work_), before);
}

// A grid of 19 million points under a 1.5 GB address-space limit: a bad grid (exit 2,
// naming the file and the count), not a driver crash (it said "out of memory", exit 1).
TEST_F(CliGuards, AGridTooBigForMemoryIsABadGridNotACrash) {
  const std::string g = write_file(work_ / "huge.yaml",
                                   "name: huge\n"
                                   "base:\n" +
                                       sweep_test::tiny_model("  ") +
                                       "  train: {steps: 3, micro_batch: 2}\n"
                                       "grid:\n"
                                       "  train.seed: {range: [0, 4360]}\n"
                                       "  data.seed: {range: [0, 4360]}\n");
  const auto before = listing(work_);
  // 400 MB of address space: `sweep plan` streams the points, so the table of the 19 million
  // it keeps is what runs out (at 1.5 GB this test took a minute and a half of CI).
  std::vector<std::string> argv = {"/usr/bin/prlimit", "--as=400000000", "--"};
  for (const auto& a : sweep_argv({"plan", g, "--trainer", fake_trainer()})) argv.push_back(a);
  const auto o = sweep_test::run_cli_split(argv, work_, dir_ / "logs");
  expect_refusal(o, "huge.yaml: the grid's 19009600 points do not fit in this process's memory",
                 "narrow an axis, split the grid, or draw a random search over the same keys");
  EXPECT_EQ(listing(work_), before);
}

TEST_F(CliGuards, ATrainerThatDescribesItselfWithoutEndIsBoundedAndRefused) {
  // 16 MiB of "models" on --describe-models: the driver keeps at most 4 MiB of it and
  // says so, exit 2, instead of reading all of it.
  const fs::path chatty = dir_ / "chatty-train";
  write_file(chatty, "#!/bin/sh\nhead -c 16777216 /dev/zero | tr '\\0' x\nexit 0\n");
  fs::permissions(chatty, fs::perms::owner_all);
  const std::string g = grid();
  const auto before = listing(work_);
  expect_refusal(sweep({"plan", g, "--trainer", chatty.string()}), "--trainer '" + chatty.string() + "'",
                 "--describe-models printed more than 4 MiB (a description of model kinds is a few KB)");
  EXPECT_EQ(listing(work_), before);
}

TEST_F(CliGuards, StatusEscapesWhatItReadsFromDisk) {
  const fs::path d = work_ / "s";
  const std::string id = "ab\x1b]0;pwned\x07\x1b[2Jc\nd";
  fs::create_directories(d / "runs" / id);
  fs::create_directories(d / "runs" / "0123456789abcdef");
  write_file(d / "points.tsv", "sweep-points 1\n0123456789abcdef\ttrain.lr=\x1b[31mred\xe2\x80\xae\n");
  const CliResult o = sweep({"status", d.string()});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out.find('\x1b'), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find('\x07'), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("\xe2\x80\xae"), std::string::npos) << o.out;
  EXPECT_CONTAINS(o.out, "ab\\x1b]0;pwned\\x07\\x1b[2Jc\\x0ad");
  EXPECT_CONTAINS(o.out, "train.lr=\\x1b[31mred\\u{202e}");
}

TEST_F(CliGuards, ReproduceRefusesALayoutOfZeroOrLess) {
  const fs::path run = make_sweep_dir("s") / "runs" / "0123456789abcdef";
  const auto before = listing(work_);
  expect_refusal(sweep({"reproduce", run.string(), "--world-size", "0"}), "--world-size 0",
                 "expected a positive number of ranks");
  expect_refusal(sweep({"reproduce", run.string(), "--accum", "0"}), "--accum 0",
                 "expected a positive number of accumulation steps");
  expect_refusal(sweep({"reproduce", run.string(), "--world-size=-2"}), "--world-size -2", "expected a positive");
  expect_refusal(sweep({"reproduce", run.string(), "--accum=-1"}), "--accum -1", "expected a positive");
  EXPECT_EQ(listing(work_), before);
}

// CLI11 alone clamps an integer past int64 to INT64_MAX without a word and prints its
// number ranges as doubles ("not in range 0.000000 to 1.797e308").
TEST_F(CliGuards, ReproduceNumbersAreWholeAndInRangeOrRefusedPlainly) {
  const fs::path run = make_sweep_dir("s") / "runs" / "0123456789abcdef";
  const auto before = listing(work_);
  for (const char* flag : {"--micro-batch", "--world-size", "--accum"}) {
    const CliResult o = sweep({"reproduce", run.string(), flag, "99999999999999999999"});
    EXPECT_EQ(o.code, 2) << flag << ": " << o.err;
    EXPECT_EQ(o.out, "");
    EXPECT_CONTAINS(o.err, flag);
    EXPECT_CONTAINS(o.err, "got '99999999999999999999': expected a whole number that fits in 64 bits");
  }
  const CliResult zero = sweep({"reproduce", run.string(), "--from-step", "0"});
  EXPECT_EQ(zero.code, 2) << zero.err;
  EXPECT_CONTAINS(zero.err, "--from-step");
  EXPECT_CONTAINS(zero.err, "got '0': expected a whole number from 1 to 9223372036854775807");
  EXPECT_EQ(zero.err.find("1.797"), std::string::npos) << zero.err;
  const CliResult frac = sweep({"reproduce", run.string(), "--from-step", "2.5"});
  EXPECT_EQ(frac.code, 2) << frac.err;
  EXPECT_CONTAINS(frac.err, "got '2.5': expected a whole number from 1");
  EXPECT_EQ(listing(work_), before);
}

TEST_F(CliGuards, ATitleThatIsNotUtf8IsRefusedNotCut) {
  const fs::path d = make_sweep_dir("s");
  const auto before = listing(work_);
  expect_refusal(sweep({"report", d.string(), "--title", "caf\xe9 \xff", "-o", (work_ / "r.html").string()}),
                 "--title caf\\xe9 \\xff", "not valid UTF-8");
  EXPECT_EQ(listing(work_), before);
}

TEST_F(CliGuards, AnInfiniteOrNegativeToleranceIsRefused) {
  const fs::path a = make_sweep_dir("a"), b = make_sweep_dir("b");
  for (const char* rtol : {"inf", "-1", "nan"})
    expect_refusal(sweep({"compare", a.string(), b.string(), "--rtol", rtol}), "--rtol",
                   "expected a finite relative tolerance >= 0");
}

}  // namespace
