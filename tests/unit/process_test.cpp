// The real posix_spawn runner (process.h) on tiny commands: argv passed verbatim, stdout
// and stderr appended to the log, the exit status and the killing signal, and what it
// refuses to start.
#include "process.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "temp_dir.h"   // TempDirTest
#include "test_util.h"  // EXPECT_CONTAINS, read_file

namespace sweep {
namespace {

namespace fs = std::filesystem;
using sweep_test::read_file;

TEST(ExitStatus, Describe) {
  ExitStatus ok;
  ok.code = 0;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.describe(), "exit code 0");
  ExitStatus two;
  two.code = 2;
  EXPECT_FALSE(two.ok());
  EXPECT_EQ(two.describe(), "exit code 2");
  ExitStatus killed;
  killed.signal = 9;
  EXPECT_FALSE(killed.ok());
  EXPECT_CONTAINS(killed.describe(), "killed by signal 9 (");
  EXPECT_FALSE(ExitStatus{}.ok());  // never ran
}

class SpawnRunnerTest : public sweep_test::TempDirTest {
 protected:
  SpawnRunnerTest() : TempDirTest("spawn_test") {}
  void SetUp() override {
    TempDirTest::SetUp();
    log_ = (dir_ / "log.txt").string();
  }
  std::string log_;
  SpawnRunner runner_;
};

TEST_F(SpawnRunnerTest, PassesArgvVerbatimAndAppendsToTheLog) {
  const std::string pwned = (dir_ / "pwned").string();
  std::vector<std::string> argv = {"/usr/bin/printf", "[%s]\\n", "a b", "$(touch " + pwned + ")", "'; exit 3", "", "*"};
  ExitStatus st = runner_.run(argv, log_);
  EXPECT_TRUE(st.ok()) << st.describe();
  st = runner_.run({"/usr/bin/printf", "again\\n"}, log_);
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(read_file(log_), "[a b]\n[$(touch " + pwned + ")]\n['; exit 3]\n[]\n[*]\nagain\n");
  EXPECT_FALSE(fs::exists(pwned));
}

TEST_F(SpawnRunnerTest, StderrGoesToTheLogToo) {
  ExitStatus st = runner_.run({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, log_);
  EXPECT_EQ(st.code, 3);
  EXPECT_EQ(st.signal, 0);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(read_file(log_), "out\nerr\n");
}

TEST_F(SpawnRunnerTest, ReportsTheKillingSignal) {
  ExitStatus st = runner_.run({"/bin/sh", "-c", "kill -KILL $$"}, log_);
  EXPECT_EQ(st.signal, 9);
  EXPECT_EQ(st.code, -1);
  EXPECT_CONTAINS(st.describe(), "signal 9");
}

TEST_F(SpawnRunnerTest, MissingProgramThrows) {
  try {
    runner_.run({(dir_ / "no-such-trainer").string()}, log_);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_CONTAINS(e.what(), "cannot start");
    EXPECT_CONTAINS(e.what(), "no-such-trainer");
  }
  EXPECT_THROW(runner_.run({}, log_), std::runtime_error);
}

TEST_F(SpawnRunnerTest, UnwritableLogThrows) {
  EXPECT_THROW(runner_.run({"/bin/true"}, (dir_ / "missing-dir" / "log.txt").string()), std::runtime_error);
}

}  // namespace
}  // namespace sweep
