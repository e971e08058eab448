// Running a sweep with a fake trainer: the exact argv, the files laid out, the summary,
// and what a second `sweep run` skips. (The real runner: process_test.cpp.)
#include "sweep_run.h"

#include <fcntl.h>  // AT_FDCWD
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>  // mkfifo, utimensat

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "fake_trainer.h"  // flag_value, write_run_record
#include "record.h"
#include "stop_signals.h"
#include "sweep_index.h"  // SweepIndex
#include "sweep_lock.h"   // SweepLock::flock_problem, locks_local_in_mountinfo
#include "temp_dir.h"     // TempDirTest
#include "test_util.h"    // EXPECT_CONTAINS, read_file

namespace sweep {
namespace {

namespace fs = std::filesystem;
using sweep_test::flag_value;
using sweep_test::read_file;

/// Stands in for sweep-train: reads --config like the real one, writes a real record
/// into --out, and fails on request.
class FakeTrainer : public ProcessRunner {
 public:
  std::vector<std::vector<std::string>> calls;
  std::vector<std::string> logs;
  std::set<std::string> fail;       ///< run ids that exit 1 without a record
  std::set<std::string> diverge;    ///< run ids that record "diverged" and exit 1
  std::set<std::string> no_record;  ///< run ids that exit 0 but write nothing
  std::set<std::string> wrong_id;   ///< run ids that complete a record of another config (another run id)

  ExitStatus run(const std::vector<std::string>& argv, const std::string& log_path) override {
    calls.push_back(argv);
    logs.push_back(log_path);
    const std::string out = flag_value(argv, "--out");
    const std::string id = fs::path(out).filename().string();
    ExitStatus st;
    st.code = 1;
    if (fail.count(id)) return st;
    st.code = 0;
    if (no_record.count(id)) return st;
    std::string config = flag_value(argv, "--config");
    if (wrong_id.count(id)) {  // a program that records a config other than the one it was given
      RunConfig other = load_run_config(config);
      other.train.steps += 1;
      config = out + "/other.yaml";
      std::ofstream(config) << to_yaml(other);
    }
    const bool diverged = diverge.count(id) > 0;
    sweep_test::write_run_record(config, out + "/record.h5", diverged ? "diverged" : "completed",
                                 diverged ? "loss is NaN" : "", 2.0 + load_run_config(config).train.lr,
                                 flag_value(argv, "--sweep-id"));
    st.code = diverged ? 1 : 0;
    return st;
  }
};

class SweepRunTest : public sweep_test::TempDirTest {
 protected:
  SweepRunTest() : TempDirTest("sweep_run_test") {}
  void SetUp() override {
    TempDirTest::SetUp();
    spec_ = parse_grid("name: lrs\nbase:\n  train:\n    steps: 3\ngrid:\n  train.lr: [0.1, 0.2, 0.3]\n", "grid.yaml");
    points_ = expand(spec_);
    ASSERT_EQ(points_.size(), 3u);
    opt_.out_dir = (dir_ / "out").string();
    opt_.train_binary = "/opt/sweep/bin/sweep-train";
    opt_.quiet = true;
  }
  std::string run_dir(size_t i) const { return opt_.out_dir + "/runs/" + points_[i].id; }

  SweepSpec spec_;
  std::vector<GridPoint> points_;
  SweepRunOptions opt_;
};

TEST_F(SweepRunTest, RecordPathIsInsideTheRunDirectory) {
  EXPECT_EQ(record_path("/s", "abc"), "/s/runs/abc/record.h5");
}

TEST_F(SweepRunTest, RunsEveryPointWithExactArgvAndConfig) {
  FakeTrainer fake;
  fake.fail = {points_[1].id};
  SweepSummary s = run_sweep(spec_, points_, opt_, fake);

  ASSERT_EQ(fake.calls.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const std::string dir = run_dir(i);
    std::vector<std::string> want = {opt_.train_binary, "--config", dir + "/config.yaml", "--out", dir,
                                     "--sweep-id",      "lrs"};
    EXPECT_EQ(fake.calls[i], want) << i;
    EXPECT_EQ(fake.logs[i], dir + "/logs/rank0.log") << i;
    EXPECT_TRUE(fs::is_directory(dir + "/logs")) << i;
    EXPECT_EQ(read_file(dir + "/config.yaml"), to_yaml(points_[i].config)) << i;
    EXPECT_FALSE(fs::exists(dir + "/config.yaml.tmp")) << i;
  }
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.skipped, 0);
  EXPECT_TRUE(fs::exists(record_path(opt_.out_dir, points_[0].id)));
  EXPECT_FALSE(fs::exists(record_path(opt_.out_dir, points_[1].id)));

  EXPECT_EQ(s.report_path, opt_.out_dir + "/report.html");
  std::string html = read_file(s.report_path);
  EXPECT_CONTAINS(html, "<html");
  EXPECT_CONTAINS(html, points_[0].id);
  EXPECT_CONTAINS(html, points_[2].id);
  EXPECT_CONTAINS(html, "lrs");

  // The record the fake wrote is the run the harness asked for.
  Record r = read_record(record_path(opt_.out_dir, points_[2].id));
  EXPECT_EQ(r.run_id, points_[2].id);
  EXPECT_EQ(r.sweep_id, "lrs");
}

TEST_F(SweepRunTest, SecondRunSkipsCompletedAndRetriesFailed) {
  FakeTrainer first;
  first.fail = {points_[1].id};
  run_sweep(spec_, points_, opt_, first);

  FakeTrainer second;
  SweepSummary s = run_sweep(spec_, points_, opt_, second);
  ASSERT_EQ(second.calls.size(), 1u);
  EXPECT_EQ(flag_value(second.calls[0], "--out"), run_dir(1));
  EXPECT_EQ(s.completed, 1);
  EXPECT_EQ(s.skipped, 2);
  EXPECT_EQ(s.failed, 0);

  FakeTrainer third;
  s = run_sweep(spec_, points_, opt_, third);
  EXPECT_TRUE(third.calls.empty());
  EXPECT_EQ(s.completed, 0);
  EXPECT_EQ(s.skipped, 3);
  EXPECT_EQ(s.failed, 0);
  EXPECT_TRUE(fs::exists(s.report_path));
}

TEST_F(SweepRunTest, DivergedRunIsAFailureNowAndLater) {
  FakeTrainer first;
  first.diverge = {points_[0].id};
  SweepSummary s = run_sweep(spec_, points_, opt_, first);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(read_record(record_path(opt_.out_dir, points_[0].id)).status, "diverged");

  // Its record can never be replaced, so it is not re-run, but the sweep still failed.
  FakeTrainer second;
  s = run_sweep(spec_, points_, opt_, second);
  EXPECT_TRUE(second.calls.empty());
  EXPECT_EQ(s.skipped, 2);
  EXPECT_EQ(s.failed, 1);
}

TEST_F(SweepRunTest, ExitZeroWithoutACompletedRecordIsAFailure) {
  FakeTrainer fake;
  fake.no_record = {points_[0].id};
  SweepSummary s = run_sweep(spec_, points_, opt_, fake);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
}

TEST_F(SweepRunTest, ARecordOfAnotherRunIdFailsThatRunAndIsMovedAsideAtOnce) {
  FakeTrainer fake;
  fake.wrong_id = {points_[0].id};
  SweepSummary s = run_sweep(spec_, points_, opt_, fake);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(fake.calls.size(), 3u) << "a wrong run id is the program's fault: never retried";
  const RunState st = read_run_state(run_dir(0));
  EXPECT_EQ(st.state, RunStatus::failed);
  EXPECT_CONTAINS(st.detail, "not this run " + points_[0].id);
  EXPECT_CONTAINS(st.detail, "; moved aside to " + run_dir(0) + "/record.h5.damaged-");
  EXPECT_FALSE(fs::exists(run_dir(0) + "/record.h5")) << "no reader may count it in the meantime";
  // The accepted runs' states name the digest of the record the driver took.
  EXPECT_EQ(read_run_state(run_dir(1)).digest, read_record_digest(run_dir(1) + "/record.h5"));
  EXPECT_FALSE(read_run_state(run_dir(1)).digest.empty());
  // The next sweep does not take it for the run's record: moved aside, the point re-run.
  FakeTrainer honest;
  s = run_sweep(spec_, points_, opt_, honest);
  EXPECT_EQ(honest.calls.size(), 1u);
  EXPECT_EQ(s.completed, 1);
  EXPECT_EQ(s.skipped, 2);
  EXPECT_TRUE(fs::exists(run_dir(0) + "/record.h5"));
  EXPECT_EQ(read_run_state(run_dir(0)).state, RunStatus::completed);
}

TEST_F(SweepRunTest, APlantedSweepLockLinkIsRefusedAndItsTargetKeptWhole) {
  const fs::path victim = dir_ / "victim.txt";
  std::ofstream(victim) << "precious";
  fs::create_directories(opt_.out_dir);
  fs::create_symlink(victim, opt_.out_dir + "/sweep.lock");
  FakeTrainer fake;
  EXPECT_THROW(run_sweep(spec_, points_, opt_, fake), ConfigError);
  EXPECT_TRUE(fake.calls.empty());
  EXPECT_EQ(read_file(victim), "precious");
}

TEST_F(SweepRunTest, TheLockChecksThatFlockExcludesOnTheSweepDirectory) {
  // Held by this driver: a second open file description must be refused.
  fs::create_directories(opt_.out_dir);
  {
    SweepLock lock(opt_.out_dir);
    EXPECT_EQ(SweepLock::flock_problem(opt_.out_dir + "/sweep.lock"), "");
  }
  // A file system whose flock is a no-op looks like a lock nobody holds: the probe takes
  // it, and says so.
  EXPECT_CONTAINS(SweepLock::flock_problem(opt_.out_dir + "/sweep.lock"),
                  "flock does not exclude here: a second open of " + opt_.out_dir + "/sweep.lock took the lock");
  EXPECT_CONTAINS(SweepLock::flock_problem(opt_.out_dir + "/missing"), "cannot open");
}

TEST(SweepLockMounts, LocksKeptToOneHostAreNamedByTheirMount) {
  const std::string info =
      "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
      "40 22 0:40 / /shared rw,relatime shared:2 - nfs4 srv:/export rw,vers=4.2,local_lock=none\n"
      "41 22 0:41 / /old rw,relatime shared:3 - nfs srv:/old rw,vers=3,nolock,proto=tcp\n"
      "42 22 0:42 / /scratch rw shared:4 - lustre 10.0.0.1@tcp:/fs rw,localflock\n"
      "43 22 0:43 / /lus rw shared:5 - lustre 10.0.0.1@tcp:/fs rw,flock,lazystatfs\n"
      "44 22 0:44 / /lus2 rw shared:6 - lustre 10.0.0.1@tcp:/fs rw,lazystatfs\n"
      "45 22 0:45 / /gpfs rw shared:7 - gpfs fs1 rw\n"
      "46 22 0:46 / /my\\040dir rw shared:8 - nfs4 srv:/x rw,local_lock=flock\n"
      "47 41 0:47 / /old/inner rw shared:9 - ext4 /dev/sdb1 rw\n";
  EXPECT_EQ(locks_local_in_mountinfo(info, "/home/me/sweep"), "");
  EXPECT_EQ(locks_local_in_mountinfo(info, "/shared/sweeps/a"), "") << "NFSv4 with locks";
  EXPECT_EQ(locks_local_in_mountinfo(info, "/old/sweeps"),
            "its NFS mount (/old) has nolock: flock locks there are seen by this host alone");
  EXPECT_EQ(locks_local_in_mountinfo(info, "/old/inner/s"), "") << "the innermost mount decides";
  EXPECT_EQ(locks_local_in_mountinfo(info, "/oldies"), "") << "a prefix of the name is not a parent";
  EXPECT_CONTAINS(locks_local_in_mountinfo(info, "/scratch/s"), "Lustre mount (/scratch) has localflock");
  EXPECT_EQ(locks_local_in_mountinfo(info, "/lus/s"), "");
  EXPECT_CONTAINS(locks_local_in_mountinfo(info, "/lus2"), "lacks the flock option");
  EXPECT_EQ(locks_local_in_mountinfo(info, "/gpfs/s"), "");
  EXPECT_CONTAINS(locks_local_in_mountinfo(info, "/my dir/s"), "(/my dir) has local_lock=flock");
}

TEST_F(SweepRunTest, APlantedLogLinkFailsOnlyThatRunAndIsNeverWrittenThrough) {
  const fs::path victim = dir_ / "victim.txt";
  std::ofstream(victim) << "precious";
  fs::create_directories(run_dir(1) + "/logs");
  fs::create_symlink(victim, run_dir(1) + "/logs/rank0.log");
  FakeTrainer fake;
  SweepSummary s = run_sweep(spec_, points_, opt_, fake);
  EXPECT_EQ(fake.calls.size(), 2u);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(read_file(victim), "precious");
  EXPECT_CONTAINS(read_run_state(run_dir(1)).detail, "rank0.log is a symbolic link");
}

void test_handler(int) {}

TEST_F(SweepRunTest, TheReportIsWrittenWithTheStopSignalsReleased) {
  // While runs go, Ctrl-C / SIGTERM / SIGHUP are caught (to stop the runs first); once
  // they have all ended, a signal during the report (3.6 s for 3,000 runs) must end the
  // driver at once, so finish() gives the handlers back before it writes.
  struct sigaction mine = {}, now = {};
  mine.sa_handler = test_handler;
  sigemptyset(&mine.sa_mask);
  struct sigaction before_int, before_term, before_hup;
  sigaction(SIGINT, &mine, &before_int), sigaction(SIGTERM, &mine, &before_term), sigaction(SIGHUP, &mine, &before_hup);
  {
    StopSignals caught;
    sigaction(SIGHUP, nullptr, &now);
    EXPECT_NE(now.sa_handler, test_handler);  // caught while runs may be going
    SweepSession session(spec_, points_, opt_);
    session.finish();
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      sigaction(sig, nullptr, &now);
      EXPECT_EQ(now.sa_handler, test_handler) << "signal " << sig << " still caught while the report is written";
    }
  }
  sigaction(SIGINT, &before_int, nullptr), sigaction(SIGTERM, &before_term, nullptr),
      sigaction(SIGHUP, &before_hup, nullptr);
}

TEST_F(SweepRunTest, ADamagedRecordIsMovedAsideNeverDeletedAndItsPointRunsAgain) {
  FakeTrainer fake;
  fs::create_directories(run_dir(0));
  { std::ofstream(record_path(opt_.out_dir, points_[0].id)) << "not HDF5"; }
  SweepSummary s = run_sweep(spec_, points_, opt_, fake);
  EXPECT_EQ(fake.calls.size(), 3u);
  EXPECT_EQ(s.completed, 3);
  EXPECT_EQ(s.failed, 0);
  // The damaged file is kept, byte for byte, beside the new record.
  std::vector<std::string> aside;
  for (const auto& e : fs::directory_iterator(run_dir(0)))
    if (e.path().filename().string().rfind("record.h5.damaged-", 0) == 0) aside.push_back(e.path().string());
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_EQ(read_file(aside[0]), "not HDF5");
}

TEST_F(SweepRunTest, ArgvElementsArePassedUnmodified) {
  // No shell: spaces, quotes and metacharacters in paths reach the trainer as they are.
  opt_.out_dir = (dir_ / "out dir;$(touch pwned)'\"`x`").string();
  opt_.train_binary = (dir_ / "bin with space" / "sweep-train --evil").string();
  spec_ = parse_grid("name: a-b_c.d\n", "grid.yaml");
  points_ = expand(spec_);
  FakeTrainer fake;
  SweepSummary s = run_sweep(spec_, points_, opt_, fake);
  ASSERT_EQ(fake.calls.size(), 1u);
  const auto& argv = fake.calls[0];
  ASSERT_EQ(argv.size(), 7u);
  EXPECT_EQ(argv[0], opt_.train_binary);
  EXPECT_EQ(argv[4], opt_.out_dir + "/runs/" + points_[0].id);
  EXPECT_EQ(argv[6], "a-b_c.d");
  EXPECT_EQ(s.completed, 1);
  EXPECT_FALSE(fs::exists("pwned"));
  EXPECT_FALSE(fs::exists(dir_ / "pwned"));
}

// ---- The sweep's index (sweep_index.h): a cache of what reading each record found.

/// The identity of `path` now.
FileIdentity identity_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return file_identity(st);
}

TEST_F(SweepRunTest, TheIndexAnswersForAnUnchangedRecordAndNeverForAChangedOne) {
  FakeTrainer fake;
  ASSERT_EQ(run_sweep(spec_, points_, opt_, fake).completed, 3);
  const std::string rec0 = record_path(opt_.out_dir, points_[0].id), rec1 = record_path(opt_.out_dir, points_[1].id);
  SweepIndex index = SweepIndex::empty(opt_.out_dir);
  ASSERT_EQ(scan_runs(opt_.out_dir, &index).at(points_[0].id).state, RunStatus::completed);
  ASSERT_NE(index.get(points_[0].id), nullptr);
  // An entry that says something the record does not: served while the file is the one
  // it describes, which shows that the record was not read again...
  IndexedRecord planted = *index.get(points_[0].id);
  planted.status = "stopped";
  planted.last_step = 7;
  index.put(points_[0].id, planted);
  RunState st = read_run_state(run_dir(0), &index);
  EXPECT_EQ(st.state, RunStatus::stopped);
  EXPECT_EQ(st.stopped_at, 7);
  // ...and never once the file changed, even with its size, inode and modification time
  // as they were (another run's record copied into it, then `touch -d` to the old time):
  // the change time moved.
  const FileIdentity before = identity_of(rec0);
  const std::string other = read_file(rec1);
  ASSERT_EQ(other.size(), size_t(before.size)) << "the two records should be the same size";
  { std::ofstream(rec0, std::ios::binary | std::ios::in | std::ios::out) << other; }
  const struct timespec times[2] = {{before.mtime_ns / 1000000000, before.mtime_ns % 1000000000},
                                    {before.mtime_ns / 1000000000, before.mtime_ns % 1000000000}};
  ASSERT_EQ(::utimensat(AT_FDCWD, rec0.c_str(), times, 0), 0);
  const FileIdentity after = identity_of(rec0);
  EXPECT_EQ(after.ino, before.ino);
  EXPECT_EQ(after.size, before.size);
  EXPECT_EQ(after.mtime_ns, before.mtime_ns);
  st = read_run_state(run_dir(0), &index);
  EXPECT_EQ(st.state, RunStatus::damaged);
  // Its bytes are not those the driver accepted (accepted/<id>): refused before any HDF5
  // code parses it, and the index forgets the entry, so the next reader checks again.
  EXPECT_CONTAINS(st.detail, "its bytes are not those the driver accepted");
  EXPECT_EQ(index.get(points_[0].id), nullptr);
  // Without the driver's note of the bytes (a sweep of an earlier version), the record is
  // parsed and its content names the other run.
  fs::remove(fs::path(opt_.out_dir) / "accepted" / points_[0].id);
  st = read_run_state(run_dir(0), &index);
  EXPECT_EQ(st.state, RunStatus::damaged);
  EXPECT_CONTAINS(st.detail, "record.h5 names run '" + points_[1].id + "', not this run " + points_[0].id);
  // The entry now describes the file as it is (the cache of a verdict, keyed by the new
  // identity), so the next reader says the same without reading it.
  ASSERT_NE(index.get(points_[0].id), nullptr);
  EXPECT_TRUE(index.get(points_[0].id)->file == after);
  EXPECT_CONTAINS(index.get(points_[0].id)->problem, "not this run");
}

TEST_F(SweepRunTest, TheIndexKeepsTheDigestTheDriverAcceptedAsARule) {
  // An entry is a cache of the record, not of its run's state: a state that accepted
  // another digest makes the run damaged though the entry is served.
  FakeTrainer fake;
  ASSERT_EQ(run_sweep(spec_, points_, opt_, fake).completed, 3);
  SweepIndex index = SweepIndex::empty(opt_.out_dir);
  scan_runs(opt_.out_dir, &index);
  RunState s = read_run_state(run_dir(2));
  s.digest = "xxh64:0000000000000000";
  write_run_state(run_dir(2), s);
  const RunState st = read_run_state(run_dir(2), &index);
  EXPECT_EQ(index.hits(), 1u);
  EXPECT_EQ(st.state, RunStatus::damaged);
  EXPECT_CONTAINS(st.detail, "the driver accepted xxh64:0000000000000000");
}

/// An entry whose file last changed long ago (settled: it is saved).
IndexedRecord old_entry(int64_t ino) {
  IndexedRecord e;
  e.file = {1, uint64_t(ino), 1000 + ino, 1000000000LL + ino, 2000000000LL + ino};
  e.digest = "xxh64:00000000000000" + std::to_string(10 + ino);
  e.status = "completed";
  e.schema_version = 4;
  e.verified = true;
  e.last_step = 150;
  e.objective_name = "final train loss";
  e.objective = 2.5 + double(ino) / 7;
  e.health = "loss_spike clipping";
  e.throughput_group = "8192 parameters, 512 tokens per step, world size 2, train.precision fp32";
  e.shared_cores = ino % 2 == 1;
  return e;
}

/// A sweep directory with nothing but runs/: an index is saved only into one.
class SweepIndexFile : public sweep_test::TempDirTest {
 protected:
  SweepIndexFile() : TempDirTest("sweep_index_test") {}
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir_ / "runs");
  }
};

TEST_F(SweepIndexFile, EntriesSurviveSavingAndLoadingWhateverTheirText) {
  const std::string dir = dir_.string();
  SweepIndex index = SweepIndex::empty(dir);
  IndexedRecord odd = old_entry(1);
  odd.problem = "a\ttab, a\nnewline, a \\ backslash and \\t as text";
  odd.inputs = {{"data.file", "/d/with\ttab\nand=equals"}, {"program", "[\"/usr/bin/python3\"]"}};
  odd.objective = NAN;
  odd.tokens_per_s_median = 1234.5;
  index.put("0123456789abcdef", odd);
  index.put("fedcba9876543210", old_entry(2));
  index.save();
  const SweepIndex back = SweepIndex::load(dir);
  EXPECT_EQ(back.note(), "");
  ASSERT_EQ(back.size(), 2u);
  const IndexedRecord* e = back.find("0123456789abcdef", odd.file);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->problem, odd.problem);
  EXPECT_EQ(e->inputs, odd.inputs);
  EXPECT_TRUE(std::isnan(e->objective));
  EXPECT_EQ(e->tokens_per_s_median, 1234.5);
  EXPECT_EQ(e->health, "loss_spike clipping");
  EXPECT_EQ(e->throughput_group, odd.throughput_group);  // what throughput_outliers compares by
  EXPECT_TRUE(e->shared_cores);
  EXPECT_EQ(back.find("fedcba9876543210", old_entry(2).file)->objective, old_entry(2).objective);
  EXPECT_FALSE(back.find("fedcba9876543210", old_entry(2).file)->shared_cores);
  // Another identity misses.
  FileIdentity moved = odd.file;
  moved.ctime_ns += 1;
  EXPECT_EQ(back.find("0123456789abcdef", moved), nullptr);
}

TEST_F(SweepIndexFile, AFreshRecordServesThisProcessButIsNotSaved) {
  const std::string dir = dir_.string();
  SweepIndex index = SweepIndex::empty(dir);
  IndexedRecord fresh = old_entry(3);
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  fresh.file.ctime_ns = int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;  // changed just now
  index.put("0123456789abcdef", fresh);
  index.put("fedcba9876543210", old_entry(2));
  EXPECT_NE(index.find("0123456789abcdef", fresh.file), nullptr);
  index.save();
  const SweepIndex back = SweepIndex::load(dir);
  EXPECT_EQ(back.size(), 1u);
  EXPECT_EQ(back.get("0123456789abcdef"), nullptr);
}

TEST_F(SweepIndexFile, AnyDamageRebuildsItWithOneLineSayingWhy) {
  const std::string dir = dir_.string(), path = dir + "/" + kIndexFile;
  SweepIndex index = SweepIndex::empty(dir);
  for (int i = 1; i <= 3; ++i) index.put("000000000000000" + std::to_string(i), old_entry(i));
  index.save();
  const std::string good = read_file(path);
  ASSERT_EQ(SweepIndex::load(dir).size(), 3u);
  const auto expect_rebuilt = [&](const std::string& text, const std::string& why, const std::string& what) {
    { std::ofstream(path, std::ios::binary | std::ios::trunc) << text; }
    const SweepIndex got = SweepIndex::load(dir);
    EXPECT_EQ(got.size(), 0u) << what;
    EXPECT_CONTAINS(got.note(), path + ": " + why);
    EXPECT_CONTAINS(got.note(), "rebuilt from the records");
    EXPECT_EQ(got.note().find('\n'), std::string::npos) << "one line";
  };
  // Cut anywhere: never taken for a shorter index.
  for (size_t n = 0; n < good.size(); n += 7) expect_rebuilt(good.substr(0, n), "", "cut at " + std::to_string(n));
  // Any one byte changed (a hand edit: a digit of a digest, a status, a count).
  for (size_t at = 0; at < good.size(); at += 5) {
    std::string edited = good;
    edited[at] = edited[at] == '0' ? '1' : edited[at] == '\n' ? ' ' : '0';
    expect_rebuilt(edited, "", "byte " + std::to_string(at) + " changed");
  }
  std::string edited = good;
  edited.replace(edited.find("completed"), 9, "diverged ");
  expect_rebuilt(edited, "damaged or edited (its checksum does not match its contents)", "a status edited");
  std::string foreign = good;
  foreign.replace(0, std::string(kIndexHead).size(), "sweep-index 9");
  expect_rebuilt(foreign, "written by another version of sweep (sweep-index 9)", "another version");
  expect_rebuilt("\x89HDF\r\n\x1a\n", "damaged (its first line is not 'sweep-index 3')", "another file");
  // Not a regular file: rebuilt in memory, and nothing is written through it.
  fs::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  SweepIndex fifo = SweepIndex::load(dir);  // (would block on open)
  EXPECT_CONTAINS(fifo.note(), "not a regular file");
  fifo.put("0000000000000001", old_entry(1));
  fifo.save();  // (would block on the FIFO)
  EXPECT_TRUE(fs::is_fifo(path));
  fs::remove(path);
  fs::create_directory(path);
  EXPECT_CONTAINS(SweepIndex::load(dir).note(), "not a regular file");
}

// A run that starts over (its record stale or damaged) keeps everything its training left,
// moved aside under one suffix and never replaced: the record, the checkpoints, a partial
// record, and its rung records, renamed so that none still reads as a rung record of the
// run (python's sweep carries a resumed run's rows on from record.h5.stopped-*).
TEST(MoveRunAside, KeepsWhatTheRunsTrainingLeftUnderOneSuffix) {
  sweep_test::TempDir tmp("move_run_aside_");
  const fs::path dir = tmp.path() / "run";
  const auto put = [&](const std::string& name, const std::string& text) {
    fs::create_directories((dir / name).parent_path());
    std::ofstream(dir / name) << text;
  };
  put("record.h5", "r");
  put("record.h5.partial", "p");
  put("record.h5.stopped-2024-01-01T00:00:00Z", "s");
  put("checkpoints/last.pt", "c");
  put("config.yaml", "y");
  put("logs/rank0.log", "l");
  const std::string moved = move_run_aside(dir.string(), "stale");
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  std::string suffix;
  for (const std::string& n : names)
    if (n.rfind("checkpoints.", 0) == 0) suffix = n.substr(12);
  ASSERT_EQ(suffix.rfind("stale-", 0), 0u) << moved;
  EXPECT_EQ(names, (std::set<std::string>{"config.yaml", "logs", "checkpoints." + suffix, "record.h5." + suffix,
                                          "record.h5.partial." + suffix,
                                          "record.h5." + suffix + ".stopped-2024-01-01T00:00:00Z"}));
  EXPECT_EQ(read_file((dir / ("record.h5." + suffix)).string()), "r");
  EXPECT_EQ(read_file((dir / ("checkpoints." + suffix) / "last.pt").string()), "c");
  EXPECT_EQ(read_file((dir / ("record.h5." + suffix + ".stopped-2024-01-01T00:00:00Z")).string()), "s");
  EXPECT_CONTAINS(moved, "checkpoints." + suffix);
  EXPECT_CONTAINS(moved, "record.h5." + suffix);
  // Again (within the same second, most likely): another suffix; the first stays as it was.
  put("record.h5", "r2");
  put("checkpoints/last.pt", "c2");
  const std::string again = move_run_aside(dir.string(), "stale");
  EXPECT_EQ(again.find("checkpoints." + suffix + ","), std::string::npos) << again;
  EXPECT_EQ(read_file((dir / ("record.h5." + suffix)).string()), "r");
  EXPECT_EQ(read_file((dir / ("checkpoints." + suffix) / "last.pt").string()), "c");
  EXPECT_FALSE(fs::exists(dir / "record.h5"));
  EXPECT_FALSE(fs::exists(dir / "checkpoints"));
  EXPECT_EQ(move_run_aside(dir.string(), "stale"), "");  // nothing left to move
}

}  // namespace
}  // namespace sweep
