// Whether a run that is still going has stopped advancing (a rank stopped or wedged, a
// collective that never ends before dist.timeout_s), judged from its partial record alone:
// the file's own modification time says when a step was last recorded, so every reader,
// on any host that sees the file, reaches the same verdict.
#pragma once

#include <string>

#include "record.h"  // RecordProgress

namespace sweep {

/// At least this long without a new step before a run is said to make no progress.
inline constexpr double kMinStallS = 30;
/// ...or this many times its recent step time, when that is longer: a slow step is no stall.
inline constexpr double kStallSteps = 5;

/// How long the run of `p` may go without recording a step before readers say so:
/// max(kMinStallS, kStallSteps x its recent step time). The writer flushes with a step at
/// most every ~2 s, well within it.
double stall_threshold_s(const RecordProgress& p);

/// Seconds since the run of `p` last recorded a step, as of `now` (seconds since the
/// epoch), when that is beyond stall_threshold_s; 0 otherwise, and before its first step.
double stalled_for_s(const RecordProgress& p, double now);

/// What every reader says of a stalled run, as of now: ", no progress for 47 s", or ""
/// while it advances (stalled_for_s).
std::string stall_words(const RecordProgress& p);

}  // namespace sweep
