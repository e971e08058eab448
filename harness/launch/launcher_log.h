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
/// from Open MPI's or srun's messages in `text`; otherwise what stopped the job across
/// hosts: a host that does not resolve or that mpirun could not start on, or ranks that
/// cannot reach each other (the transport); "" when it says none of these.
std::string launcher_finding(const std::string& text);

/// The host whose Open MPI daemon went away mid-job (every process of a node killed, or
/// the node itself gone), from `text`: mpirun's "lost communication with a remote daemon"
/// or "unable to reliably start one or more daemons", the host named by its "Remote
/// daemon: ... on node H" or by a surviving rank's "peer process has unexpectedly
/// disconnected ... Peer host: H". "" when no daemon was lost (a rank that crashed alone
/// is reported by its daemon: launcher_finding) or no host is named.
std::string launcher_lost_host(const std::string& text);

}  // namespace sweep
