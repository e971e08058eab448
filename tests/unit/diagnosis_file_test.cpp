// A run's diagnose verdicts as show, status and the report read them (diagnosis_file.h):
// the newest one, only from a regular verdict file of this version, never blocking.
#include "diagnosis_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "temp_dir.h"  // TempDirTest

namespace sweep {
namespace {

namespace fs = std::filesystem;

class DiagnosisFileTest : public sweep_test::TempDirTest {
 protected:
  DiagnosisFileTest() : TempDirTest("sweep_diagnosis_file") {}
  /// <dir>/diagnose/<n>/verdict.txt, its parent made.
  std::string verdict(int n) const {
    const fs::path d = dir_ / "diagnose" / std::to_string(n);
    fs::create_directories(d);
    return (d / "verdict.txt").string();
  }
};

TEST_F(DiagnosisFileTest, TheNewestVerdictsLineWithItsFile) {
  EXPECT_EQ(newest_diagnosis(dir_.string()), "");  // none yet
  std::ofstream(verdict(1)) << kVerdictMagic << "\nstep 5\nline diagnose step 5: transient\n";
  std::ofstream(verdict(2)) << kVerdictMagic << "\nstep 7\nverdict rank\nline diagnose step 7: rank 1\n";
  EXPECT_EQ(newest_diagnosis(dir_.string()), "diagnose step 7: rank 1 (" + verdict(2) + ")");
  // Another version's file is no verdict of ours: nothing is said, not an older one.
  std::ofstream(verdict(3)) << "sweep-diagnose-verdict 9\nline diagnose step 8: rank 0\n";
  EXPECT_EQ(newest_diagnosis(dir_.string()), "");
}

// A FIFO planted as the newest verdict would block a reader that opened it (show, status
// and every report of the sweep); it is passed over without being opened.
TEST_F(DiagnosisFileTest, APlantedFifoOrAHugeFileIsNotRead) {
  std::ofstream(verdict(1)) << kVerdictMagic << "\nline diagnose step 5: transient\n";
  ASSERT_EQ(::mkfifo(verdict(2).c_str(), 0644), 0);
  EXPECT_EQ(newest_diagnosis(dir_.string()), "");  // returns at once
  fs::remove(verdict(2));
  std::ofstream(verdict(2)) << kVerdictMagic << "\nline diagnose step 6: transient\n" << std::string(2u << 20, 'x');
  EXPECT_EQ(newest_diagnosis(dir_.string()), "");
}

}  // namespace
}  // namespace sweep
