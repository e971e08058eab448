#include "slurm_exec.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "atomic_file.h"   // write_file_atomically
#include "run_files.h"     // RunLock::holder
#include "slurm.h"         // sbatch_script, sbatch_argv, parse_squeue, parse_sacct
#include "stop_signals.h"  // StopSignals

namespace fs = std::filesystem;

namespace sweep {
namespace {

/// Polls with no answer for a task before it counts as lost (squeue and sacct both forgot it).
constexpr int kMissingPolls = 3;

struct Active {
  RunTask* task;
  std::string job;  ///< array job id
  int missing = 0;  ///< polls in a row without a state
};

/// The exit code the batch script wrote, as an ExitStatus (code -1 when absent).
ExitStatus script_exit(const std::string& dir) {
  ExitStatus st;
  std::ifstream in(dir + "/slurm-exit");
  int rc;
  if (in >> rc) {
    // srun reports a rank killed by signal S as 128+S.
    if (rc > 128 && rc < 160)
      st.signal = rc - 128;
    else
      st.code = rc;
  }
  return st;
}

}  // namespace

std::string SlurmCli::submit(const std::vector<std::string>& argv) {
  Captured c = capture(argv, 120);
  if (!c.status.ok()) throw std::runtime_error("sbatch failed (" + c.status.describe() + "): " + c.output);
  // --parsable prints "jobid" or "jobid;cluster".
  std::string id = c.output.substr(0, c.output.find_first_of(";\n"));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error("sbatch printed no job id: " + c.output);
  return id;
}

std::map<std::string, std::string> SlurmCli::states(const std::vector<std::string>& jobs) {
  std::map<std::string, std::string> out;
  for (const auto& j : jobs) {
    Captured q = capture({"squeue", "--noheader", "--array", "--states=all", "--jobs=" + j, "--format=%i|%T"}, 60);
    auto s = q.status.ok() ? parse_squeue(q.output) : std::map<std::string, std::string>{};
    if (s.empty()) {
      // Finished longer ago than the cluster's MinJobAge: only accounting remembers.
      Captured a =
          capture({"sacct", "--noheader", "--parsable2", "--allocations", "--jobs=" + j, "--format=JobID,State"}, 60);
      if (a.status.ok()) s = parse_sacct(a.output);
    }
    out.insert(s.begin(), s.end());
  }
  return out;
}

void SlurmCli::cancel(const std::vector<std::string>& jobs) {
  if (jobs.empty()) return;
  std::vector<std::string> argv = {"scancel"};
  argv.insert(argv.end(), jobs.begin(), jobs.end());
  capture(argv, 60);
}

std::string SlurmCli::nodes_of(const std::string& job_task) {
  Captured q = capture({"squeue", "--noheader", "--array", "--states=all", "--jobs=" + job_task, "--format=%N"}, 60);
  std::string nodes = q.status.ok() ? q.output.substr(0, q.output.find('\n')) : "";
  while (!nodes.empty() && (nodes.back() == ' ' || nodes.back() == '\r')) nodes.pop_back();
  if (nodes.empty() || nodes.find_first_of(" |") != std::string::npos) return "";
  Captured i = capture({"sinfo", "--noheader", "--Node", "--nodes=" + nodes, "--format=%N|%T|%E"}, 60);
  const std::string down = i.status.ok() ? describe_down_nodes(i.output) : "";
  return "on " + nodes + (down.empty() ? "" : ", down: " + down);
}

SweepSummary run_sweep_slurm(const SweepSpec& spec, const std::vector<GridPoint>& points, const SweepRunOptions& opt,
                             SlurmClient& slurm) {
  StopSignals stop_signals;
  SweepSession session(spec, points, opt);
  LocalLaunch local;
  local.train_binary = opt.train_binary;
  local.rank_wrapper = opt.rank_wrapper.empty() ? executable_dir() + "/sweep-rank" : opt.rank_wrapper;
  local.program = spec.program;
  local.env = opt.run_env;
  // A grid's program runs unable to write outside its run directory (inside a container
  // the container's own confinement applies: sweep-confine is not in the image).
  if (spec.launch.container.runtime.empty()) local.confine = executable_dir() + "/sweep-confine";
  fs::create_directories(opt.out_dir + "/slurm");
  std::map<std::string, Active> active;  // "JOB_TASK" -> task
  int batches = 0;

  // One array per run shape; tasks keep their order.
  auto submit = [&](const std::vector<RunTask*>& tasks) {
    std::map<std::pair<int64_t, int64_t>, std::vector<RunTask*>> shapes;
    for (RunTask* t : tasks) shapes[{t->point->config.dist.world_size, t->point->config.train.threads}].push_back(t);
    for (auto& [shape, group] : shapes) {
      SlurmArray a;
      a.sweep_name = spec.name;
      a.sweep_dir = opt.out_dir;
      a.world = int(shape.first);
      a.threads = int(shape.second);
      std::vector<RunTask*> ready;
      for (RunTask* t : group) {
        // A run still written by another process (a job of an earlier driver) is not
        // submitted twice; one whose directory is unusable fails alone, with the reason.
        if (std::string who = RunLock::holder(t->dir); !who.empty()) {
          session.progress().line("skipped   " + t->point->id + ": its directory is still being written by " + who +
                                  "; run `sweep run` again once it has finished");
          ++session.summary().not_started;
          continue;
        }
        try {
          session.prepare(*t);
        } catch (const std::exception& e) {
          try {
            session.attempt_ended(*t, FailureClass::config, std::string("I/O error: ") + e.what(),
                                  t->dir + "/logs/launcher.log");
          } catch (const std::exception&) {
          }
          continue;
        }
        ready.push_back(t), a.dirs.push_back(t->dir), a.resume.push_back(t->resume());
      }
      if (ready.empty()) continue;
      group = ready;
      const std::string script = opt.out_dir + "/slurm/batch-" + std::to_string(++batches) + ".sh";
      write_file_atomically(script, sbatch_script(a, spec.launch, local));
      fs::permissions(script, fs::perms::owner_all, fs::perm_options::add);
      std::string job;
      try {
        job = slurm.submit(sbatch_argv(a, spec.launch, script));
      } catch (const std::exception& e) {
        for (RunTask* t : group) {
          session.attempt_started(*t, t->dir + "/logs/launcher.log");
          session.attempt_ended(*t, FailureClass::crashed, e.what(), script);
        }
        continue;
      }
      session.progress().line("submitted job array " + job + ": " + std::to_string(group.size()) + " runs of " +
                              std::to_string(a.world) + " ranks (" + script + ")");
      for (size_t i = 0; i < group.size(); ++i) {
        session.attempt_started(*group[i], group[i]->dir + "/logs/launcher.log");
        active[job + "_" + std::to_string(i)] = Active{group[i], job};
      }
    }
  };

  std::vector<RunTask*> all;
  for (auto& t : session.tasks()) all.push_back(&t);
  if (!all.empty()) submit(all);

  while (!active.empty()) {
    if (StopSignals::received()) {
      session.summary().stop_signal = StopSignals::received();
      std::vector<std::string> jobs;
      for (const auto& [key, a] : active)
        if (std::find(jobs.begin(), jobs.end(), a.job) == jobs.end()) jobs.push_back(a.job);
      session.progress().line("sweep: stopping: scancel " + std::to_string(jobs.size()) + " job arrays");
      slurm.cancel(jobs);
      // Wait (bounded) until Slurm has ended the tasks, so a `sweep run` right after this
      // one cannot start a run whose cancelled task is still writing; a second Ctrl-C
      // stops waiting.
      const int first = StopSignals::count();
      for (double waited = 0; waited < spec.launch.grace_s + 60 && StopSignals::count() == first; waited += 1) {
        auto now = slurm.states(jobs);
        bool all_final = true;
        for (const auto& [key, a] : active) {
          auto s = now.find(key);
          if (s != now.end() && !slurm_state_final(s->second)) all_final = false;
        }
        if (all_final) break;
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      for (auto& [key, a] : active)
        session.attempt_ended(*a.task, FailureClass::interrupted, "scancel by the driver",
                              a.task->dir + "/logs/launcher.log");
      active.clear();
      break;
    }
    std::vector<std::string> jobs;
    for (const auto& [key, a] : active)
      if (std::find(jobs.begin(), jobs.end(), a.job) == jobs.end()) jobs.push_back(a.job);
    auto states = slurm.states(jobs);
    std::vector<RunTask*> retry;
    for (auto it = active.begin(); it != active.end();) {
      Active& a = it->second;
      auto s = states.find(it->first);
      std::string state;
      if (s == states.end()) {
        if (++a.missing < kMissingPolls) {
          ++it;
          continue;
        }
        state = "UNKNOWN";
      } else {
        a.missing = 0;
        state = s->second;
        if (!slurm_state_final(state)) {
          ++it;
          continue;
        }
      }
      const std::string log = a.task->dir + "/logs/launcher.log";
      std::string detail;
      const ExitStatus exit = script_exit(a.task->dir);
      FailureClass c = classify_attempt(exit, a.task->dir, &detail, spec.program.json, a.task->stop_at);
      // Killed by Slurm before the script could write its exit code: Slurm says why.
      if (exit.code == -1 && exit.signal == 0 && c != FailureClass::none && c != FailureClass::diverged)
        detail = "no exit code from the batch script";
      // A completed or diverged record decides; otherwise Slurm's word on why it ended. A
      // node that failed is the cause of a rank's hang (its peers wait for it), not a hang.
      if (c != FailureClass::none && c != FailureClass::diverged && c != FailureClass::config &&
          (c != FailureClass::hang || slurm_failure_class(state) == FailureClass::node_fail)) {
        FailureClass sc = slurm_failure_class(state);
        if (sc != FailureClass::none && sc != FailureClass::crashed) c = sc;
        // "COMPLETED" (or forgotten) without a completed record: the classic silent failure.
        if (state == "UNKNOWN" || (state == "COMPLETED" && exit.code <= 0 && exit.signal == 0)) c = FailureClass::lost;
      }
      // Which node failed: Slurm still knows the task's nodes and holds the failed one down.
      std::string where = c == FailureClass::node_fail ? slurm.nodes_of(it->first) : "";
      detail = "Slurm " + state + (where.empty() ? "" : " " + where) + ", " + detail;
      if (session.attempt_ended(*a.task, c, detail, log)) retry.push_back(a.task);
      it = active.erase(it);
    }
    if (!retry.empty()) submit(retry);
    session.tick();
    // Sleep in short pieces so Ctrl-C is answered at once.
    for (double slept = 0; slept < spec.launch.slurm.poll_s && !StopSignals::received(); slept += 0.1)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return session.finish();
}

}  // namespace sweep
