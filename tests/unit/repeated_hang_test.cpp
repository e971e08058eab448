// harness/driver/repeated_hang.h: where a hang was, read from an attempt's cause, and the
// rule that a hang at the site of an earlier attempt's is deterministic; the run's state
// file keeps the attempts' hangs.
#include "repeated_hang.h"

#include <gtest/gtest.h>

#include "sweep_dir.h"  // RunState, write_run_state, read_run_state
#include "temp_dir.h"   // TempDir

namespace sweep {
namespace {

TEST(HangSite, TheRanksThatNeverEnteredTheCollectiveAndItsStepLocateAHang) {
  // What classify_attempt says of a hang on four ranks (shortened).
  const std::string cause =
      "exit code 4; rank 1: no progress for 3 s (dist.timeout_s) at step 12 while computing, outside any collective "
      "(its last, #56 allgather, ended 3.0 s ago) (this rank is stuck); stack: nanosleep < sweep::train(...); rank 0: "
      "no progress for 3 s (dist.timeout_s) at step 12 while waiting for the other ranks in the gradient exchange "
      "(sendrecv) (collective #57, 8 bytes, for 4.0 s); ranks 1, 3 never entered collective #57 (the gradient "
      "exchange (sendrecv) at step 12); ranks 0, 2 wait in it (a rank made no progress)";
  const auto site = hang_site(cause);
  ASSERT_TRUE(site);
  EXPECT_EQ(site->step, 12);
  EXPECT_EQ(site->ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(site->text(), "step 12 on ranks 1, 3");
}

TEST(HangSite, WithoutHeartbeatsTheRanksStuckComputingLocateIt) {
  const auto site = hang_site(
      "rank 2: no progress for 3 s (dist.timeout_s) at step 7 while computing, outside any collective (no collective "
      "yet) (this rank is stuck); rank 0: no progress for 3 s (dist.timeout_s) at step 7 while computing, outside any "
      "collective (its last, #3 allreduce, ended 4.0 s ago) (this rank is stuck)");
  ASSERT_TRUE(site);
  EXPECT_EQ(site->text(), "step 7 on ranks 0, 2");
  // A rank waiting on its peers is not at fault; a cause that names no site locates nothing.
  EXPECT_FALSE(
      hang_site("rank 0: no progress for 3 s (dist.timeout_s) at step 7 while waiting for the other ranks in "
                "allreduce (collective #9, 8 bytes, for 3.0 s)"));
  EXPECT_FALSE(hang_site("exit code 4 (a rank made no progress)"));
  EXPECT_FALSE(hang_site(""));
}

TEST(NoteHang, AHangAtTheSiteOfAnEarlierAttemptsIsDeterministic) {
  const std::string at5 = "rank 1 never entered collective #40 (allreduce at step 5); rank 0 waits in it";
  const std::string at9 = "rank 1 never entered collective #70 (allreduce at step 9); rank 0 waits in it";
  RunState s;
  s.attempts = 1;
  EXPECT_EQ(note_hang(s, at5), "");  // the first: retried as any hang
  s.attempts = 2;
  EXPECT_EQ(note_hang(s, at9), "");  // elsewhere: bad luck again, retried
  s.attempts = 3;
  EXPECT_EQ(note_hang(s, at5), "hang at step 5 on rank 1, repeated in attempts 1 and 3: deterministic, not retried");
  s.attempts = 4;
  EXPECT_EQ(note_hang(s, "exit code 4"), "");  // not located: retried
  s.attempts = 5;
  EXPECT_EQ(note_hang(s, at5), "hang at step 5 on rank 1, repeated in attempts 1, 3 and 5: deterministic, not retried");
  ASSERT_EQ(s.hangs.size(), 4u);
  EXPECT_EQ(s.hangs[1].attempt, 2);
  EXPECT_EQ(s.hangs[1].site, "step 9 on rank 1");
  // The same rank at another step, or another rank at the same step, is another site.
  RunState t;
  t.hangs = {{1, "step 5 on rank 1"}};
  t.attempts = 2;
  EXPECT_EQ(note_hang(t, "rank 2 never entered collective #40 (allreduce at step 5); rank 0 waits in it"), "");
  t.attempts = 3;
  EXPECT_EQ(note_hang(t, "ranks 1, 2 never entered collective #40 (allreduce at step 5); rank 0 waits in it"), "");
}

TEST(NoteHang, TheStateFileKeepsTheAttemptsHangs) {
  sweep_test::TempDir tmp("sweep_hangs_");
  RunState s;
  s.state = RunStatus::failed;
  s.failure = FailureClass::hang;
  s.attempts = 2;
  s.hangs = {{1, "step 5 on rank 1"}, {2, "step 5 on ranks 1, 3"}};
  write_run_state(tmp.path().string(), s);
  const RunState back = read_run_state(tmp.path().string());
  ASSERT_EQ(back.hangs.size(), 2u);
  EXPECT_EQ(back.hangs[0].attempt, 1);
  EXPECT_EQ(back.hangs[0].site, "step 5 on rank 1");
  EXPECT_EQ(back.hangs[1].attempt, 2);
  EXPECT_EQ(back.hangs[1].site, "step 5 on ranks 1, 3");
  write_run_state(tmp.path().string(), RunState{});
  EXPECT_TRUE(read_run_state(tmp.path().string()).hangs.empty());
}

}  // namespace
}  // namespace sweep
