// Reading what a launcher (mpirun, srun) said about a job it tore down: which rank went
// first and how. A rank killed outright (SIGKILL, out of memory) leaves nothing behind
// but this line, so the driver copies it into the run's state and partial record.
#pragma once

#include <string>

namespace sweep {

/// The part of a run's launcher.log written by its latest attempt (after the last
/// "=== sweep: attempt" line the driver writes), at most the last 64 KiB.
std::string latest_attempt_output(const std::string& log_path);

/// "rank 1 exited on signal 9 (Killed)", "rank 1 exited with code 4" or "rank 1: Killed"
/// from Open MPI's or srun's messages in `text`; "" when they name no rank.
std::string launcher_finding(const std::string& text);

}  // namespace sweep
