// The run record: exact round trip, never overwriting, partial and damaged files, and
// refusing a newer schema.
#include "record.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "hdf5_c.h"        // edits a record's schema version
#include "paused_child.h"  // PausedChild: the writer is another process
#include "record_util.h"   // read_error, same_bits
#include "small_disk.h"    // SmallDisk: a tmpfs to fill
#include "temp_dir.h"      // TempDirTest
#include "test_util.h"     // EXPECT_CONTAINS, read_file

namespace sweep {
namespace {

namespace fs = std::filesystem;
using sweep_test::read_error;
using sweep_test::read_file;
using sweep_test::same_bits;

RecordHeader header() {
  RecordHeader h;
  h.run_id = "0123456789abcdef";
  h.sweep_id = "quickstart";
  h.config_yaml = "train:\n  lr: 0.001\n  steps: 3\n";
  h.config = {{"train.lr", "0.001"}, {"train.steps", "3"}, {"model.layers", "2"}};
  h.environment = {{"hdf5", "1.10.8"}, {"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}, {"git_dirty", ""}, {"host", "nodé-1"}};
  h.params = {{"embed.weight", {256, 64}, 0, 16384}, {"head.scale", {}, 16384, 1}};
  return h;
}

std::vector<StepMetrics> steps() {
  std::vector<StepMetrics> s(3);
  for (size_t i = 0; i < s.size(); ++i) {
    s[i].step = int64_t(i) + 1;
    s[i].loss = 5.545177444479562 - 0.1 * double(i);
    s[i].lr = 1e-3 / 3.0 * double(i + 1);
    s[i].grad_norm = 1.0 / 7.0;
    s[i].clip_coef = 0.999999999999;
    s[i].loss_scale = 65536.0;
    s[i].skipped = int64_t(i == 1);
    s[i].tokens = 4096 + int64_t(i);
    s[i].step_time_s = 0.0123456789;
    s[i].tokens_per_s = 4096 / 0.0123456789;
  }
  s[1].loss = std::numeric_limits<double>::quiet_NaN();
  s[1].grad_norm = std::numeric_limits<double>::infinity();
  s[2].clip_coef = std::numeric_limits<double>::denorm_min();
  s[2].step_time_s = -0.0;
  return s;
}

std::vector<ChecksumRow> checksums() {
  return {{1, 0xfedcba9876543210ULL, {0x8000000000000000ULL, 1}}, {3, 42, {~0ULL, 0}}};
}

class RecordTest : public sweep_test::TempDirTest {
 protected:
  RecordTest() : TempDirTest("record_test") {}
  void SetUp() override {
    TempDirTest::SetUp();
    path_ = dir_ / "record.h5";
  }
  void write_completed(const fs::path& p) {
    RecordWriter w(p.string(), header());
    for (const auto& s : steps()) w.append_step(s);
    for (const auto& c : checksums()) w.append_checksum(c);
    w.finish("completed");
  }

  fs::path path_;
};

TEST_F(RecordTest, RoundTripsEveryValueBitForBit) {
  write_completed(path_);
  EXPECT_TRUE(fs::exists(path_));
  EXPECT_FALSE(fs::exists(path_.string() + kPartialSuffix));

  Record r = read_record(path_.string());
  RecordHeader h = header();
  EXPECT_EQ(r.path, path_.string());
  EXPECT_EQ(r.schema_version, 3);  // version 4 only with a program's own figures
  EXPECT_EQ(r.run_id, h.run_id);
  EXPECT_EQ(r.sweep_id, h.sweep_id);
  EXPECT_EQ(r.status, "completed");
  EXPECT_EQ(r.failure, "");
  EXPECT_EQ(r.config_yaml, h.config_yaml);
  EXPECT_EQ(r.config, (std::map<std::string, std::string>(h.config.begin(), h.config.end())));
  EXPECT_EQ(r.environment, (std::map<std::string, std::string>(h.environment.begin(), h.environment.end())));

  ASSERT_EQ(r.params.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r.params[i].name, h.params[i].name);
    EXPECT_EQ(r.params[i].shape, h.params[i].shape);
    EXPECT_EQ(r.params[i].offset, h.params[i].offset);
    EXPECT_EQ(r.params[i].numel, h.params[i].numel);
  }

  auto want = steps();
  ASSERT_EQ(r.steps.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const StepMetrics &a = r.steps[i], &b = want[i];
    EXPECT_EQ(a.step, b.step);
    EXPECT_TRUE(same_bits(a.loss, b.loss)) << i << ": " << a.loss;
    EXPECT_TRUE(same_bits(a.lr, b.lr)) << i;
    EXPECT_TRUE(same_bits(a.grad_norm, b.grad_norm)) << i;
    EXPECT_TRUE(same_bits(a.clip_coef, b.clip_coef)) << i;
    EXPECT_TRUE(same_bits(a.loss_scale, b.loss_scale)) << i;
    EXPECT_EQ(a.skipped, b.skipped);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_TRUE(same_bits(a.step_time_s, b.step_time_s)) << i;
    EXPECT_TRUE(same_bits(a.tokens_per_s, b.tokens_per_s)) << i;
  }
  EXPECT_TRUE(std::isnan(r.steps[1].loss));

  auto ck = checksums();
  ASSERT_EQ(r.checksums.size(), ck.size());
  for (size_t i = 0; i < ck.size(); ++i) {
    EXPECT_EQ(r.checksums[i].step, ck[i].step);
    EXPECT_EQ(r.checksums[i].params, ck[i].params);
    EXPECT_EQ(r.checksums[i].tensors, ck[i].tensors);
  }
}

TEST_F(RecordTest, ManyRowsAcrossFlushes) {
  RecordHeader h = header();
  h.params.clear();  // no per-tensor table
  {
    RecordWriter w(path_.string(), h);
    for (int64_t i = 1; i <= 5000; ++i) {
      StepMetrics m;
      m.step = i;
      m.loss = 1.0 / double(i);
      w.append_step(m);
      w.append_checksum({i, uint64_t(i) * 0x9e3779b97f4a7c15ULL, {}});
      if (i % 1234 == 0) w.flush();
    }
    w.finish("completed");
  }
  Record r = read_record(path_.string());
  ASSERT_EQ(r.steps.size(), 5000u);
  ASSERT_EQ(r.checksums.size(), 5000u);
  for (int64_t i = 1; i <= 5000; ++i) {
    ASSERT_EQ(r.steps[i - 1].step, i);
    ASSERT_EQ(r.steps[i - 1].loss, 1.0 / double(i));
    ASSERT_EQ(r.checksums[i - 1].params, uint64_t(i) * 0x9e3779b97f4a7c15ULL);
    ASSERT_TRUE(r.checksums[i - 1].tensors.empty());
  }
  EXPECT_TRUE(r.params.empty());
}

// A disk that fills part-way through a flush. HDF5 can leave a file it could not finish
// writing unreadable ("addr overflow": metadata pointing past the end the superblock
// records), and with it every row of the earlier flushes; so a flush that may not fit is
// refused before HDF5 writes, and the record stays as of its last good flush, marked
// failed with the reason. Every fill level from 384 KB to 768 KB free (the 256 KB ballast
// included), 4 KB apart, so the disk runs out at every point of a flush.
TEST_F(RecordTest, AFullDiskLeavesTheLastGoodFlushReadableAndMarkedFailed) {
  RecordHeader h = header();
  int levels = 0;
  for (size_t free_kb = 384; free_kb <= 768; free_kb += 4) {
    // Flushes of a few rows, and of more rows than the ballast holds.
    const int64_t every = free_kb % 8 ? 97 : 3001;
    const fs::path small = dir_ / ("small" + std::to_string(free_kb));
    const sweep_test::SmallDisk disk(small, "2m");
    if (!disk.mounted()) GTEST_SKIP() << "cannot mount a 2 MB tmpfs here (" << disk.error() << "); needs root";
    std::ofstream(small / "filler", std::ios::binary) << std::string((2048 - free_kb) << 10, '\0');
    const std::string path = (small / "record.h5").string();
    int64_t flushed = 0;
    std::string failure;
    {
      RecordWriter w(path, h);
      try {
        for (int64_t i = 1; i <= 200000; ++i) {
          StepMetrics m;
          m.step = i;
          m.loss = 1.0 / double(i);
          w.append_step(m);
          w.append_checksum({i, uint64_t(i), {uint64_t(i), ~uint64_t(i)}});
          if (i % every == 0) w.flush(), flushed = i;
        }
      } catch (const RecordError& e) {
        failure = e.what();
        w.abandon(failure);
      }
    }
    ASSERT_FALSE(failure.empty()) << free_kb << " KB free: the disk never filled";
    EXPECT_CONTAINS(failure, "No space left on device");
    ASSERT_FALSE(fs::exists(path));
    RecordStatus rs;
    try {
      rs = read_record_status(path);
    } catch (const RecordError& e) {
      ADD_FAILURE() << free_kb << " KB free: the partial record is unreadable after " << flushed
                    << " flushed steps: " << e.what();
      continue;
    }
    EXPECT_EQ(rs.status, "failed") << free_kb << " KB free";
    EXPECT_CONTAINS(rs.failure, "No space left on device");
    ++levels;
  }
  EXPECT_EQ(levels, 97);
}

TEST_F(RecordTest, EmptyRecordReadsBack) {
  RecordHeader h;
  h.run_id = "x";
  { RecordWriter(path_.string(), h).finish("diverged", "loss is NaN at step 0"); }
  Record r = read_record(path_.string());
  EXPECT_EQ(r.status, "diverged");
  EXPECT_EQ(r.failure, "loss is NaN at step 0");
  EXPECT_TRUE(r.steps.empty());
  EXPECT_TRUE(r.checksums.empty());
  EXPECT_TRUE(r.config.empty());
  EXPECT_TRUE(r.environment.empty());
}

TEST_F(RecordTest, NeverOverwritesACompletedRecord) {
  write_completed(path_);
  const std::string before = read_file(path_);
  ASSERT_FALSE(before.empty());
  try {
    RecordWriter w(path_.string(), header());
    FAIL() << "no RecordError";
  } catch (const RecordError& e) {
    EXPECT_CONTAINS(e.what(), path_.string());
    EXPECT_CONTAINS(e.what(), "never overwritten");
  }
  EXPECT_EQ(read_file(path_), before);
  EXPECT_FALSE(fs::exists(path_.string() + kPartialSuffix));
  EXPECT_EQ(read_record(path_.string()).status, "completed");
}

TEST_F(RecordTest, FinishRefusesWhenARecordAppearedMeanwhile) {
  RecordWriter w(path_.string(), header());
  { std::ofstream(path_) << "someone else's record"; }
  EXPECT_THROW(w.finish("completed"), RecordError);
  EXPECT_EQ(read_file(path_), "someone else's record");
}

TEST_F(RecordTest, StalePartialIsReplaced) {
  { std::ofstream(path_.string() + kPartialSuffix) << "garbage from a killed run"; }
  write_completed(path_);
  EXPECT_EQ(read_record(path_.string()).steps.size(), 3u);
  EXPECT_FALSE(fs::exists(path_.string() + kPartialSuffix));
}

TEST_F(RecordTest, UnfinishedWriterLeavesOnlyPartial) {
  {
    RecordWriter w(path_.string(), header());
    for (const auto& s : steps()) w.append_step(s);
  }  // destroyed without finish: a crash or an exception in the trainer
  const fs::path partial = path_.string() + kPartialSuffix;
  EXPECT_FALSE(fs::exists(path_));
  ASSERT_TRUE(fs::exists(partial));
  std::string msg = read_error(path_);
  EXPECT_CONTAINS(msg, "has not finished");
  EXPECT_CONTAINS(msg, partial.string());
  msg = read_error(partial);
  EXPECT_CONTAINS(msg, "partial");
  // The partial file itself is a valid record with the rows written so far.
  fs::copy_file(partial, dir_ / "copy.h5");
  EXPECT_CONTAINS(read_error(dir_ / "copy.h5"), "has no digest");  // never passes for a completed record
  Record r = read_record_unverified((dir_ / "copy.h5").string());
  EXPECT_EQ(r.status, "running");
  EXPECT_EQ(r.steps.size(), 3u);
}

// `sweep report` and `sweep status` read a running run's partial record while its writer
// (another process) holds it open: they take no HDF5 file lock, so they can read it, and
// so they can never make the writer's own reopens (to finish it, or to mark it failed)
// fail. (HDF5 refuses a second open of a file inside one process when their locking
// differs, so the writer is a child process here.)
TEST_F(RecordTest, ARunningRecordReadsWhileItsWriterHoldsItOpen) {
  sweep_test::PausedChild writer([&](const std::function<void()>& pause) {
    RecordWriter w(path_.string(), header());
    for (const auto& s : steps()) w.append_step(s);
    w.flush();
    pause();  // flushed, and still open
    w.finish("completed");
  });
  ASSERT_TRUE(writer.wait_paused());
  RecordStatus st;
  std::string error;
  int64_t step = -1;
  size_t rows = 0;
  RecordProgress progress;
  try {
    st = read_record_status(path_.string());
    progress = read_partial_progress(path_.string());
    step = progress.step;
    rows = read_record_unverified(path_.string() + kPartialSuffix).steps.size();
  } catch (const RecordError& e) {
    error = e.what();
  }
  ASSERT_EQ(writer.finish(), 0) << "the writer did not finish";
  EXPECT_EQ(error, "");
  EXPECT_TRUE(st.partial);
  EXPECT_EQ(st.status, "running");
  EXPECT_EQ(st.run_id, header().run_id);
  EXPECT_EQ(step, steps().back().step);
  EXPECT_EQ(rows, 3u);
  // When it was last written, and how long its steps take: what a stall is judged by.
  EXPECT_EQ(progress.step_time_s, 0.0123456789);  // the median of the three steps' times
  EXPECT_GT(progress.written_at, 0);
  EXPECT_EQ(read_record(path_.string()).steps.size(), 3u);
}

// Another program's reader that does lock (h5py by default) holds the partial file
// while the run's end is recorded: the writer waits for it instead of losing the run.
TEST_F(RecordTest, AReaderHoldingHdf5sLockDelaysMarkingThePartialFailedButLosesNothing) {
  {
    RecordWriter w(path_.string(), header());
    w.append_step(steps()[0]);
  }  // a killed rank: the partial says running
  const std::string partial = path_.string() + kPartialSuffix;
  const int fd = ::open(partial.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_SH | LOCK_NB), 0);  // what HDF5 takes for a read-only open
  std::thread reader([fd] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::close(fd);
  });
  const bool marked = mark_partial_failed(path_.string(), "rank 0 was killed by signal 9");
  reader.join();
  EXPECT_TRUE(marked);
  RecordStatus st = read_record_status(path_.string());
  EXPECT_EQ(st.status, "failed");
  EXPECT_EQ(st.failure, "rank 0 was killed by signal 9");
}

TEST_F(RecordTest, AbandonRecordsTheFailureAndStaysPartial) {
  {
    RecordWriter w(path_.string(), header());
    w.append_step(steps()[0]);
    w.abandon("CUDA out of memory at step 2");
  }
  const fs::path partial = path_.string() + kPartialSuffix;
  EXPECT_FALSE(fs::exists(path_));
  ASSERT_TRUE(fs::exists(partial));
  fs::copy_file(partial, dir_ / "copy.h5");
  Record r = read_record_unverified((dir_ / "copy.h5").string());
  EXPECT_EQ(r.status, "failed");
  EXPECT_EQ(r.failure, "CUDA out of memory at step 2");
  EXPECT_EQ(r.steps.size(), 1u);
}

// The trainer's watchdog thread abandons the record (a hang, SIGTERM) while the main
// thread is still appending and flushing; under ThreadSanitizer this is the record's race
// test. Whatever the main thread does afterwards writes nothing more.
TEST_F(RecordTest, AbandonFromAnotherThreadWhileTheOwnerWritesLeavesAFailedPartial) {
  RecordHeader h = header();
  h.world_size = 2;
  std::atomic<int64_t> appended{0};
  std::atomic<bool> abandoned{false};
  int64_t total = 0;
  {
    RecordWriter w(path_.string(), h);
    std::thread watchdog([&] {
      while (appended.load() < 50) std::this_thread::yield();
      w.abandon("rank 1: no progress for 3 s");
      abandoned.store(true);
    });
    StepMetrics s = steps()[0];
    // Until 50 rows after the abandon (bounded, should the other thread never run).
    for (int64_t after = 0; after < 50 && total < 10000000; after += abandoned.load() ? 1 : 0) {
      s.step = ++total;
      w.append_step(s);
      w.append_rank_times({0.5, 0.25});
      w.append_checksum({total, uint64_t(total), {uint64_t(total), uint64_t(total)}});
      if (total % 10 == 0) w.flush();
      appended.store(total);
    }
    watchdog.join();
    w.set_memory(RankMemory{{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}});
    w.set_summary("stragglers", "1");
    EXPECT_THROW(w.finish("completed"), RecordError);
  }
  EXPECT_FALSE(fs::exists(path_));
  fs::copy_file(path_.string() + kPartialSuffix, dir_ / "copy.h5");
  Record r = read_record_unverified((dir_ / "copy.h5").string());
  EXPECT_EQ(r.status, "failed");
  EXPECT_EQ(r.failure, "rank 1: no progress for 3 s");
  EXPECT_GE(r.steps.size(), 50u);
  // The rows after the abandon were not written. (The row in flight when the flag was
  // seen may be on either side of it, and the abandon may fall between a step's metrics
  // and its checksum row.)
  EXPECT_LE(r.steps.size(), size_t(total - 49));
  EXPECT_LE(r.checksums.size(), r.steps.size());
  EXPECT_GE(r.checksums.size() + 1, r.steps.size());
  EXPECT_TRUE(r.memory.params.empty());
  EXPECT_EQ(r.summary.count("stragglers"), 0u);
}

TEST_F(RecordTest, MissingRecord) { EXPECT_CONTAINS(read_error(path_), "no such record"); }

TEST_F(RecordTest, TruncatedOrGarbageFileIsRefused) {
  write_completed(dir_ / "good.h5");
  fs::copy_file(dir_ / "good.h5", path_);
  fs::resize_file(path_, fs::file_size(path_) / 2);
  std::string msg = read_error(path_);
  EXPECT_CONTAINS(msg, path_.string());
  EXPECT_CONTAINS(msg, "truncated or corrupt");

  { std::ofstream(path_, std::ios::trunc) << "this is not HDF5\n"; }
  EXPECT_CONTAINS(read_error(path_), "truncated or corrupt");
  fs::resize_file(path_, 0);
  EXPECT_CONTAINS(read_error(path_), "truncated or corrupt");
}

TEST_F(RecordTest, WrongTensorCountIsRefused) {
  RecordWriter w(path_.string(), header());
  EXPECT_THROW(w.append_checksum({1, 2, {3}}), RecordError);
  w.append_checksum({1, 2, {3, 4}});
  w.finish("completed");
  EXPECT_EQ(read_record(path_.string()).checksums.size(), 1u);
}

/// Rewrites the root attribute schema_version in place.
void set_schema_version(const fs::path& p, int64_t version) {
  hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t a = H5Aopen(f, "schema_version", H5P_DEFAULT);
  ASSERT_GE(a, 0);
  EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &version), 0);
  H5Aclose(a);
  H5Fclose(f);
}

// A program's own figures (version 4): columns by name, NaN where a row lacked one (a
// metric first logged at step 2, an eval metric on one evaluation only), read back bit for
// bit and covered by the digest; bad names and evaluations out of order are refused.
TEST_F(RecordTest, AProgramsOwnFiguresRoundTripAndAreCoveredByTheDigest) {
  RecordHeader h = header();
  h.eval = true;
  {
    RecordWriter w(path_.string(), h);
    const auto s = steps();
    w.append_step(s[0]);
    w.append_step(s[1], {{"accuracy", 0.25}, {"mfu", 0.5}});
    w.append_step(s[2], {{"accuracy", 0.75}});
    w.append_eval({2, 1.5, 10, 0.1}, {{"accuracy", 0.3}});
    w.append_eval({3, 1.25, 10, 0.1});
    EXPECT_THROW(w.append_eval({2, 1.0, 10, 0.1}), RecordError);  // out of step order
    EXPECT_THROW(w.append_step(s[2], {{"bad name", 1.0}}), RecordError);
    EXPECT_THROW(w.append_step(s[2], {{"x", 1.0}, {"x", 2.0}}), RecordError);
    w.finish("completed");
  }
  Record r = read_record(path_.string());
  EXPECT_EQ(r.schema_version, 4);
  ASSERT_EQ(r.step_extra.size(), 2u);
  const auto& acc = r.step_extra.at("accuracy");
  ASSERT_EQ(acc.size(), 3u);
  EXPECT_TRUE(std::isnan(acc[0]));
  EXPECT_EQ(acc[1], 0.25);
  EXPECT_EQ(acc[2], 0.75);
  const auto& mfu = r.step_extra.at("mfu");
  EXPECT_TRUE(std::isnan(mfu[0]));
  EXPECT_EQ(mfu[1], 0.5);
  EXPECT_TRUE(std::isnan(mfu[2]));
  ASSERT_EQ(r.evals.size(), 2u);
  ASSERT_EQ(r.eval_extra.at("accuracy").size(), 2u);
  EXPECT_EQ(r.eval_extra.at("accuracy")[0], 0.3);
  EXPECT_TRUE(std::isnan(r.eval_extra.at("accuracy")[1]));
  // One value edited behind the digest's back is damage.
  hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t d = H5Dopen2(f, "metrics/extra/accuracy", H5P_DEFAULT);
  ASSERT_GE(d, 0);
  const double edited[3] = {0.9, 0.9, 0.9};
  EXPECT_GE(H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, edited), 0);
  H5Dclose(d);
  H5Fclose(f);
  EXPECT_CONTAINS(read_error(path_), "integrity check failed");
}

// A program's timing metrics (results/analysis/timing_metrics.h): its declarations land in
// /summary timing_metrics, each name once, sorted, with the record's digest over them; a
// name that is no metric's is refused.
TEST_F(RecordTest, DeclaredTimingMetricsAreOneSortedSummaryAttribute) {
  {
    RecordWriter w(path_.string(), header());
    w.declare_timing_metric("mfu");
    w.append_step(steps()[0], {{"mfu", 0.5}, {"accuracy", 0.25}});
    w.declare_timing_metric("images_per_s");
    w.declare_timing_metric("mfu");
    EXPECT_THROW(w.declare_timing_metric("bad name"), RecordError);
    EXPECT_THROW(w.declare_timing_metric(""), RecordError);
    w.finish("completed");
  }
  const Record r = read_record(path_.string());
  EXPECT_TRUE(r.verified);
  EXPECT_EQ(r.summary.at("timing_metrics"), "images_per_s mfu");
}

TEST_F(RecordTest, GradientTelemetryAndRankNormsRoundTripAndAreCoveredByTheDigest) {
  RecordHeader h = header();
  h.world_size = 2;
  h.moe_layers = 1, h.moe_experts = 3;
  {
    RecordWriter w(path_.string(), h);
    const auto s = steps();
    w.append_step(s[0]);  // no rank norms for step 1: its row reads NaN
    w.append_step(s[1]);
    w.append_rank_grad_norms({0.5, 0.25});
    EXPECT_THROW(w.append_rank_grad_norms({0.5, 0.25}), RecordError);  // no /metrics row for it
    EXPECT_THROW(w.append_rank_grad_norms({0.5}), RecordError);        // one per rank
    w.append_telemetry({2, "every", {1.5, NAN}, {10, 0, 22}});
    EXPECT_THROW(w.append_telemetry({2, "spike", {1.5, 2.0}, {1, 2, 3}}), RecordError);  // step order, once a step
    EXPECT_THROW(w.append_telemetry({3, "last", {1.5}, {1, 2, 3}}), RecordError);        // a norm per tensor
    EXPECT_THROW(w.append_telemetry({3, "last", {1.5, 2.0}, {1, 2}}), RecordError);      // layers x experts counts
    // A program's first own figure after the first telemetry row: the record stays version
    // 5 (a version-4 reader would take the telemetry for damage, not for a newer record).
    w.append_step(s[2], {{"accuracy", 0.5}});
    w.append_telemetry({3, "last,spike", {0.125, 3.0}, {1, 2, 3}});
    w.finish("completed");
  }
  Record r = read_record(path_.string());
  EXPECT_EQ(r.schema_version, 5);
  ASSERT_EQ(r.rank_grad_norm.size(), 3u);  // padded to the steps: step 3 gave none either
  EXPECT_TRUE(std::isnan(r.rank_grad_norm[0][0]) && std::isnan(r.rank_grad_norm[0][1]));
  EXPECT_EQ(r.rank_grad_norm[1], (std::vector<double>{0.5, 0.25}));
  EXPECT_TRUE(std::isnan(r.rank_grad_norm[2][1]));
  EXPECT_EQ(r.moe_layers, 1);
  EXPECT_EQ(r.moe_experts, 3);
  ASSERT_EQ(r.telemetry.size(), 2u);
  EXPECT_EQ(r.telemetry[0].step, 2);
  EXPECT_EQ(r.telemetry[0].why, "every");
  EXPECT_EQ(r.telemetry[0].tensor_grad_norm[0], 1.5);
  EXPECT_TRUE(std::isnan(r.telemetry[0].tensor_grad_norm[1]));
  EXPECT_EQ(r.telemetry[0].routed_tokens, (std::vector<int64_t>{10, 0, 22}));
  EXPECT_EQ(r.telemetry[1].why, "last,spike");
  EXPECT_EQ(r.telemetry[1].tensor_grad_norm, (std::vector<double>{0.125, 3.0}));
  // A count edited behind the digest's back is damage; so is a norm.
  for (const char* dataset : {"telemetry/routed_tokens", "telemetry/tensor_grad_norm", "ranks/grad_norm"}) {
    SCOPED_TRACE(dataset);
    const auto saved = read_file(path_.string());
    hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    const int64_t one = 7;
    hsize_t start[2] = {0, 0}, count[2] = {1, 1};
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(2, count, nullptr);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
    EXPECT_GE(H5Dwrite(d, H5T_NATIVE_INT64, ms, fs, H5P_DEFAULT, &one), 0);  // converted for a float dataset
    H5Sclose(ms), H5Sclose(fs), H5Dclose(d), H5Fclose(f);
    EXPECT_CONTAINS(read_error(path_), "integrity check failed");
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << saved;
    EXPECT_EQ(read_error(path_), "");
  }
}

TEST_F(RecordTest, NewerSchemaVersionIsRefused) {
  write_completed(path_);
  set_schema_version(path_, 99);
  std::string msg = read_error(path_);
  EXPECT_CONTAINS(msg, path_.string());
  EXPECT_CONTAINS(msg, "schema version 99 is not supported");
  EXPECT_CONTAINS(msg, "reads version " + std::to_string(kSchemaVersion));
  set_schema_version(path_, 0);
  EXPECT_CONTAINS(read_error(path_), "schema version 0 is not supported");
  set_schema_version(path_, 3);  // what it was written as: the digest holds again
  EXPECT_EQ(read_error(path_), "");
}

TEST_F(RecordTest, FileWithoutSchemaVersionIsNotARecord) {
  hid_t f = H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  H5Fclose(f);
  EXPECT_CONTAINS(read_error(path_), "not a sweep record");
}

TEST(Hdf5Version, LooksLikeAVersion) {
  std::string v = hdf5_version();
  EXPECT_EQ(std::count(v.begin(), v.end(), '.'), 2) << v;
  EXPECT_EQ(
      v, std::to_string(H5_VERS_MAJOR) + "." + std::to_string(H5_VERS_MINOR) + "." + std::to_string(H5_VERS_RELEASE));
}

}  // namespace
}  // namespace sweep
