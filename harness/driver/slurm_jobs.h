// <dir>/slurm-jobs: every job array a driver submitted for a sweep directory, one line
// each, appended the moment sbatch answers. A driver started after one that died (even by
// SIGKILL) reads it to find the arrays still queued or running and waits for them instead
// of submitting their runs again; `sweep status` reads it to ask Slurm about them.
//
//   sweep-slurm-jobs 1
//   JOB THROTTLE SCRIPT RUN_ID_OF_TASK_0 RUN_ID_OF_TASK_1 ...
#pragma once

#include <map>
#include <string>
#include <vector>

namespace sweep {

/// One submitted job array.
struct SlurmJobLine {
  std::string job;                ///< Slurm's job id of the array
  int throttle = 0;               ///< its `%` throttle when submitted
  std::string script;             ///< batch script, relative to <dir>/slurm
  std::vector<std::string> runs;  ///< run id of task i
};

/// Appends `line` to <dir>/slurm-jobs (created with its version line), in one write
/// followed by fsync. Throws std::runtime_error on an I/O error.
void append_slurm_job(const std::string& dir, const SlurmJobLine& line);

/// Every whole line of <dir>/slurm-jobs in order; none when it is missing or of another
/// version. A last line without its newline (a driver killed mid-write) is left out.
std::vector<SlurmJobLine> read_slurm_jobs(const std::string& dir);

/// Where a run was submitted last: its array and task index.
struct SlurmTaskOf {
  std::string job;
  int task = 0;
  int throttle = 0;  ///< the array's throttle when submitted
  std::string key() const { return job + "_" + std::to_string(task); }
};
/// Run id -> its latest submission (a later line supersedes an earlier one: a retry).
std::map<std::string, SlurmTaskOf> latest_slurm_tasks(const std::vector<SlurmJobLine>& lines);

}  // namespace sweep
