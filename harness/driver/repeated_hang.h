// A hang that comes back where it was is not bad luck: when an attempt hangs at the same
// step on the same rank(s) as an earlier attempt of the run, the hang is deterministic (a
// fault of the program, its data or its configuration) and is not retried, as a desync
// is not. The attempts' hangs are kept in the run's state (RunState::hangs), so the rule
// holds across `sweep run` invocations too.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace sweep {

struct RunState;  // sweep_dir.h

/// Where an attempt hung: the step and the rank(s) at fault.
struct HangSite {
  long long step = 0;
  std::vector<int> ranks;  ///< ascending
  /// "step 5 on rank 1", "step 5 on ranks 1, 3": how the state file and the verdict say it.
  std::string text() const;
};

/// The site of the hang an attempt's cause (classify_attempt's detail) describes: the
/// rank(s) that never entered the collective the others wait in and its step (the ranks'
/// heartbeats, results/record/heartbeat.h), else the rank(s) whose watchdog found itself
/// stuck computing ("(this rank is stuck)") and the step they were at. Nothing when the
/// cause names neither (a hang that cannot be located is retried as before).
std::optional<HangSite> hang_site(const std::string& cause);

/// Notes in `s.hangs` that attempt `s.attempts` hung as `cause` says, and returns the
/// verdict when an earlier attempt hung at the same site: "hang at step 5 on rank 1,
/// repeated in attempts 1 and 2: deterministic, not retried"; "" otherwise.
std::string note_hang(RunState& s, const std::string& cause);

}  // namespace sweep
