// One writer per run directory, no writing through planted links, and records whose
// damage is detected: results/record/run_files.h and the record digest (results/SCHEMA.md).
#include "run_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "hdf5_c.h"  // damages records
#include "record.h"
#include "record_util.h"  // read_error
#include "temp_dir.h"     // TempDirTest
#include "test_util.h"    // EXPECT_CONTAINS, read_file

namespace sweep {
namespace {

namespace fs = std::filesystem;
using sweep_test::read_error;
using sweep_test::read_file;

RecordHeader small_header() {
  RecordHeader h;
  h.run_id = "00000000000000aa";
  h.config_yaml = "train:\n  steps: 2\n";
  h.config = {{"train.steps", "2"}};
  h.params = {{"w", {2, 2}, 0, 4}};
  return h;
}

void write_completed(const fs::path& path) {
  RecordWriter w(path.string(), small_header());
  for (int i = 1; i <= 2; ++i) {
    StepMetrics m;
    m.step = i;
    m.loss = 3.0 - 0.25 * i;
    w.append_step(m);
    w.append_checksum({i, uint64_t(i) * 77, {uint64_t(i)}});
  }
  w.finish("completed");
}

/// Opens `path` read-write with the HDF5 C API, lets `edit` change it, closes it.
template <class Edit>
void edit_h5(const fs::path& path, Edit edit) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  edit(f);
  H5Fclose(f);
}

class RunFilesTest : public sweep_test::TempDirTest {
 protected:
  RunFilesTest() : TempDirTest("run_files_test") {}
  void SetUp() override {
    TempDirTest::SetUp();
    run_ = dir_ / "run";
    fs::create_directories(run_);
  }
  fs::path run_;
};

TEST_F(RunFilesTest, ASecondWriterIsRefusedWhileTheFirstHoldsTheRun) {
  EXPECT_EQ(RunLock::holder(run_.string()), "");
  {
    RunLock first(run_.string());
    EXPECT_CONTAINS(RunLock::holder(run_.string()), "pid " + std::to_string(::getpid()));
    try {
      RunLock second(run_.string());
      ADD_FAILURE() << "a second lock on the same run directory was granted";
    } catch (const RunBusy& e) {
      EXPECT_CONTAINS(e.what(), "another process is writing this run");
      EXPECT_CONTAINS(e.what(), "pid " + std::to_string(::getpid()));
    }
  }
  EXPECT_EQ(RunLock::holder(run_.string()), "");
  RunLock again(run_.string());  // released with its holder
}

TEST_F(RunFilesTest, LinksAndSpecialFilesInTheRunDirectoryAreRefused) {
  const fs::path outside = dir_ / "outside.txt";
  std::ofstream(outside) << "precious";
  fs::create_symlink(outside, run_ / "record.h5.partial");
  try {
    RunLock lock(run_.string());
    ADD_FAILURE() << "a run directory with a planted link was accepted";
  } catch (const RunRefused& e) {
    EXPECT_CONTAINS(e.what(), "record.h5.partial is a symbolic link");
  }
  fs::remove(run_ / "record.h5.partial");
  ASSERT_EQ(::mkfifo((run_ / "state").c_str(), 0644), 0);
  EXPECT_THROW(check_run_entries(run_.string()), RunRefused);
  fs::remove(run_ / "state");
  fs::create_symlink(outside, run_ / "run.lock");
  EXPECT_THROW(RunLock lock(run_.string()), RunRefused);
  EXPECT_EQ(read_file(outside), "precious");
}

TEST_F(RunFilesTest, PerHostLogDirectoriesAreAcceptedAndALinkInThemIsRefused) {
  // A run across hosts logs to logs/<host>/rank<r>.log: directories of regular files.
  fs::create_directories(run_ / "logs" / "node-a");
  std::ofstream(run_ / "logs" / "node-a" / "rank0.log") << "rank 0\n";
  std::ofstream(run_ / "logs" / "launcher.log") << "mpirun\n";
  EXPECT_NO_THROW(check_run_entries(run_.string()));
  EXPECT_EQ(rank_log_path(run_.string(), 0), (run_ / "logs" / "node-a" / "rank0.log").string());
  // A flat log wins (a run on one host); a rank with no log gets the flat path.
  std::ofstream(run_ / "logs" / "rank0.log") << "flat\n";
  EXPECT_EQ(rank_log_path(run_.string(), 0), (run_ / "logs" / "rank0.log").string());
  EXPECT_EQ(rank_log_path(run_.string(), 7), (run_ / "logs" / "rank7.log").string());
  const fs::path outside = dir_ / "outside.txt";
  std::ofstream(outside) << "precious";
  fs::create_symlink(outside, run_ / "logs" / "node-a" / "rank1.log");
  try {
    check_run_entries(run_.string());
    ADD_FAILURE() << "a link planted in a per-host log directory was accepted";
  } catch (const RunRefused& e) {
    EXPECT_CONTAINS(e.what(), "node-a/rank1.log is a symbolic link");
  }
  EXPECT_EQ(read_file(outside), "precious");
}

TEST_F(RunFilesTest, TheRecordWriterNeverWritesThroughAPlantedPartial) {
  const fs::path outside = dir_ / "outside.txt";
  std::ofstream(outside) << "precious";
  fs::create_symlink(outside, run_ / "record.h5.partial");
  EXPECT_THROW(RecordWriter((run_ / "record.h5").string(), small_header()), RecordError);
  EXPECT_EQ(read_file(outside), "precious");
  EXPECT_TRUE(fs::is_symlink(run_ / "record.h5.partial"));
}

TEST_F(RunFilesTest, AStalePartialIsReplacedNotAppendedTo) {
  std::ofstream(run_ / "record.h5.partial") << "a dead attempt's bytes";
  write_completed(run_ / "record.h5");
  EXPECT_FALSE(fs::exists(run_ / "record.h5.partial"));
  Record r = read_record((run_ / "record.h5").string());
  EXPECT_EQ(r.steps.size(), 2u);
}

TEST_F(RunFilesTest, ACompletedRecordCarriesADigestThatEveryReaderChecks) {
  const fs::path rec = run_ / "record.h5";
  write_completed(rec);
  Record r = read_record(rec.string());
  EXPECT_TRUE(r.verified);
  EXPECT_EQ(r.schema_version, 3);  // a record without a program's figures or telemetry
  EXPECT_EQ(r.digest.rfind("xxh64:", 0), 0u) << r.digest;
  EXPECT_EQ(r.digest, r.computed_digest);

  // One metric value changed after completion: the reader says so.
  const fs::path flipped = dir_ / "flipped.h5";
  fs::copy_file(rec, flipped);
  edit_h5(flipped, [](hid_t f) {
    hid_t d = H5Dopen2(f, "metrics/loss", H5P_DEFAULT);
    hid_t space = H5Dget_space(d);
    hsize_t start = 1, count = 1;
    H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
    hid_t mem = H5Screate_simple(1, &count, nullptr);
    double v = 2.5000000000000004;  // one ulp away from the recorded 2.5
    H5Dwrite(d, H5T_NATIVE_DOUBLE, mem, space, H5P_DEFAULT, &v);
    H5Sclose(mem), H5Sclose(space), H5Dclose(d);
  });
  EXPECT_CONTAINS(read_error(flipped), "integrity check failed");

  // A status attribute rewritten by hand: refused too.
  const fs::path restatus = dir_ / "restatus.h5";
  fs::copy_file(rec, restatus);
  edit_h5(restatus, [](hid_t f) { H5Adelete(f, "digest"); });
  EXPECT_CONTAINS(read_error(restatus), "has no digest");

  // One byte of the file flipped where step 1's loss (2.75) is stored, as a bad disk
  // or a stray write would: found by the digest, not by HDF5.
  std::string bytes = read_file(rec);
  const double loss = 2.75;
  const std::string pattern(reinterpret_cast<const char*>(&loss), sizeof loss);
  const size_t at = bytes.find(pattern);
  ASSERT_NE(at, std::string::npos);
  bytes[at] = char(bytes[at] ^ 0x01);
  std::ofstream(dir_ / "byte.h5", std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_CONTAINS(read_error(dir_ / "byte.h5"), "integrity check failed");
}

TEST_F(RunFilesTest, VersionOneRecordsAreStillReadUnverified) {
  const fs::path rec = run_ / "record.h5";
  write_completed(rec);
  edit_h5(rec, [](hid_t f) {
    H5Adelete(f, "digest");
    int64_t one = 1;
    hid_t a = H5Aopen(f, "schema_version", H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &one);
    H5Aclose(a);
  });
  Record r = read_record(rec.string());
  EXPECT_EQ(r.schema_version, 1);
  EXPECT_FALSE(r.verified);
  EXPECT_EQ(r.steps.size(), 2u);
}

TEST_F(RunFilesTest, AFifoIsRefusedWithoutBlocking) {
  const fs::path fifo = dir_ / "record.h5";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_CONTAINS(regular_file_problem(fifo.string()), "FIFO");
  EXPECT_CONTAINS(read_error(fifo), "FIFO");  // returns: HDF5 never opened it
  EXPECT_THROW(read_record_status(fifo.string()), RecordError);
}

TEST_F(RunFilesTest, ExclusiveCreateNeverFollowsALink) {
  const fs::path outside = dir_ / "outside.txt";
  std::ofstream(outside) << "precious";
  fs::create_symlink(outside, run_ / "new");
  EXPECT_THROW(create_exclusive((run_ / "new").string()), RecordError);
  fs::create_symlink(dir_ / "nowhere", run_ / "dangling");
  EXPECT_THROW(create_exclusive((run_ / "dangling").string()), RecordError);
  EXPECT_FALSE(fs::exists(dir_ / "nowhere"));
  EXPECT_EQ(read_file(outside), "precious");
}

}  // namespace
}  // namespace sweep
