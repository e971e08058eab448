// The local and mpirun executor: starts runs within launch.parallel and launch.slots,
// enforces launch.timeout_s, retries by failure class, and on Ctrl-C / SIGTERM stops
// every run (SIGTERM to its process group, grace period, SIGKILL).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "config_error.h"  // ConfigError
#include "diagnose.h"      // diagnose: launch.diagnose
#include "launch.h"        // local_run_command
#include "record.h"        // read_record_status, read_record
#include "run_files.h"     // RunLock::holder, rank_log_path
#include "run_health.h"    // spike_decisions
#include "run_status.h"    // status_is
#include "stop_signals.h"  // StopSignals
#include "sweep_run.h"

namespace sweep {
namespace {

/// Where rank 0 of a run starts: the first of launch.hosts (or of the hostfile), else here.
std::string first_host(const LaunchSpec& l) {
  std::string host;
  if (!l.hosts.empty()) {
    host = l.hosts.front();
  } else if (!l.hostfile.empty()) {
    std::ifstream in(l.hostfile);
    for (std::string line; host.empty() && std::getline(in, line);) {
      const auto start = line.find_first_not_of(" \t");
      if (start != std::string::npos && line[start] != '#')
        host = line.substr(start, line.find_first_of(" \t", start) - start);
    }
  }
  host = host.substr(0, host.find(':'));  // "node1:2": two slots on node1
  return host.empty() ? "127.0.0.1" : host;
}

struct Running {
  RunTask* task;
  std::string log;
  double term_at = 0;                        ///< when SIGTERM was sent (0 = not yet)
  bool killed = false;                       ///< SIGKILL sent
  FailureClass reason = FailureClass::none;  ///< timeout / interrupted when we stopped it
  bool rank0_seen = false;                   ///< rank 0 held the run's lock during this attempt
  double rank0_gone_at = 0;                  ///< when rank 0 was first seen gone with its record finished
};

/// How long a launcher may go on after rank 0 has exited with its record finished
/// (completed or failed) before the driver ends it: mpirun whose peer node went away
/// waits for that node's daemon to answer, which it never does.
constexpr double kLauncherLingerS = 5;

/// Whether rank 0 of the multi-rank run `r` has exited with its record finished, the
/// launcher still running: it held the run's lock during this attempt and holds it no
/// more, and the record is complete or its partial says failed. (Before rank 0 takes
/// the lock, a partial left by an earlier attempt must not count.)
bool rank0_finished(Running& r) {
  const bool held = !RunLock::holder(r.task->dir).empty();
  if (held) r.rank0_seen = true;
  if (held || !r.rank0_seen) return false;
  try {
    const RecordStatus st = read_record_status(r.task->dir + "/record.h5");
    return !st.partial || status_is(st.status, RunStatus::failed);
  } catch (const RecordError&) {
    return false;  // caught mid-write, or no record: ask again at the next poll
  }
}

/// launch.slots when unset: the hosts' slots for mpirun over `hosts` ("node:4", a bare
/// name counts 1), else this machine's cores.
int64_t default_slots(const LaunchSpec& L) {
  if (L.launcher == "mpirun" && !L.hosts.empty()) {
    int64_t n = 0;
    for (const auto& h : L.hosts) {
      auto colon = h.rfind(':');
      n += colon == std::string::npos ? 1 : std::max(1, std::atoi(h.c_str() + colon + 1));
    }
    return n;
  }
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

/// The executor of run_sweep: a queue of runs, the ones running, and the ones whose
/// directory another process still writes, stepped by its loop.
class LocalExecutor {
 public:
  LocalExecutor(const SweepSpec& spec, const SweepRunOptions& opt, ProcessRunner& runner, SweepSession& session)
      : spec_(spec),
        opt_(opt),
        runner_(runner),
        session_(session),
        launch_(spec.launch),
        slots_(launch_.slots > 0 ? launch_.slots : default_slots(launch_)) {
    local_.train_binary = opt.train_binary;
    local_.mpiexec = opt.mpiexec;
    local_.rank_wrapper = opt.rank_wrapper;
    local_.program = spec.program;
    local_.sweep_id = spec.name;
    local_.env = opt.run_env;
    // A grid's program runs unable to write outside its run directory (inside a container
    // the container's own confinement applies: sweep-confine is not in the image).
    if (spec.launch.container.runtime.empty()) local_.confine = executable_dir() + "/sweep-confine";
    if (!opt.feed)
      for (auto& t : session.tasks()) queue_.push_back(&t);
  }

  /// Until every run has ended (or a stop signal ended them); on an exception, every run
  /// it started is stopped before the exception goes on.
  void run() {
    const double t0 = monotonic_s();
    try {
      while (true) {
        on_stop_signals();
        requeue_freed();
        start_what_fits();
        if (running_.empty() && (queue_.empty() || stopping_)) {
          if (busy_.empty() || stopping_) break;
          struct timespec ts = {0, long(opt_.poll_s * 1e9)};  // only busy runs left: wait for their writers
          nanosleep(&ts, nullptr);
        }
        collect_ended();
        watch_running();
        session_.tick();
      }
    } catch (...) {
      stop_all();
      throw;
    }
    session_.summary().wall_s = monotonic_s() - t0;
    session_.summary().not_started = int(queue_.size() + busy_.size());
    if (launch_.diagnose && !stopping_) diagnose_after_runs();
  }

 private:
  /// launch.diagnose: the last step of each run that ended diverged now, and the step of
  /// the first spike decision of each run that completed now after one (train.spike_policy
  /// skip or rewind), is replayed on its own layout, with its ranks' shares rotated and on
  /// one rank (diagnose.h), and the verdict said in one line; it stays in the run's
  /// diagnose/<n>/, where show, status and the report find it. A run that cannot be
  /// diagnosed (one rank, no checkpoint before the step) is said so, and the sweep goes on.
  void diagnose_after_runs() {
    std::vector<std::pair<std::string, bool>> runs;  // (run directory, ended diverged)
    runs.reserve(session_.summary().diverged_dirs.size() + session_.summary().completed_runs.size());
    for (const std::string& dir : session_.summary().diverged_dirs) runs.emplace_back(dir, true);
    // Once each: an asha search completes a run's attempts rung by rung.
    std::set<std::string> seen;
    for (const std::string& id : session_.summary().completed_runs)
      if (seen.insert(id).second) runs.emplace_back(run_dir(opt_.out_dir, id), false);
    for (const auto& [dir, diverged] : runs) {
      if (StopSignals::count() > 0) return;
      const std::string id = dir.substr(dir.find_last_of('/') + 1);
      int64_t spike = 0;  // a completed run's first spike decision: "step 15: ..."
      if (!diverged) {
        try {
          const std::vector<std::string> decisions = spike_decisions(read_record(dir + "/record.h5"));
          long long step = 0;
          if (decisions.empty() || std::sscanf(decisions.front().c_str(), "step %lld:", &step) != 1) continue;
          spike = step;
        } catch (const std::exception&) {
          continue;  // its record is the driver's and show's business, not a diagnosis's
        }
      }
      try {
        DiagnoseOptions o;
        o.run_dir = dir;
        o.launch = local_;
        // The replays' mpiexec, as the runs' was (found on PATH: a replay needs its path).
        if (const std::string found = resolve_program(local_.mpiexec); !found.empty()) o.launch.mpiexec = found;
        o.trainer_given = !opt_.train_binary.empty();
        // On the run's own nodes, as the grid placed it (launch.hosts with launch.mpi_args).
        if (launch_.launcher == "mpirun" && !launch_.hosts.empty())
          o.hosts = launch_.hosts, o.mpi_args = launch_.mpi_args;
        if (diverged) {
          const Record r = read_record(dir + "/record.h5");
          o.step = r.steps.empty() ? 0 : r.steps.back().step;
        } else {
          o.step = spike;
        }
        if (o.step < 1) throw ConfigError(dir + "/record.h5: no step to replay");
        const DiagnoseResult d = diagnose(o, runner_);
        session_.progress().line("diagnosed " + id + (diverged ? "" : " (its loss spike)") + ": " + d.line);
      } catch (const std::exception& e) {
        session_.progress().line("not diagnosed " + id + ": " + e.what());
      }
    }
  }

  void stop_run(int id, Running& r, FailureClass why) {
    if (r.term_at > 0) return;
    r.term_at = monotonic_s();
    r.reason = why;
    runner_.signal_group(id, SIGTERM);
  }
  /// One run's I/O failure (its state file, its directory) fails that run, with the errno
  /// text, and the sweep goes on.
  void io_failed(RunTask* t, const std::string& log, const std::exception& e) {
    try {
      session_.attempt_ended(*t, FailureClass::config, std::string("I/O error: ") + e.what(), log);
    } catch (const std::exception&) {
      // Its state file cannot be written either: the summary and the line still say so.
    }
    ended(t);
  }
  /// A run has ended for good in this invocation (no retry follows): its feed hears it.
  void ended(const RunTask* t) {
    if (opt_.feed) opt_.feed->ended(t->point->id);
  }
  /// With a feed and nothing queued: the feed's next run, if it has one now (a run it
  /// hands out with nothing to do is said ended at once, and the next one asked for).
  bool refill() {
    while (opt_.feed && queue_.empty()) {
      const std::optional<FedRun> next = opt_.feed->next();
      if (!next) return false;
      if (RunTask* t = session_.admit(*next))
        queue_.push_back(t);
      else
        opt_.feed->ended(next->id);
    }
    return !queue_.empty();
  }
  /// Ctrl-C / SIGTERM / SIGHUP: stop starting, stop everything running; a second one kills now.
  void on_stop_signals() {
    if (StopSignals::received() && !stopping_) {
      stopping_ = true;
      session_.summary().stop_signal = StopSignals::received();
      session_.progress().line("sweep: " + std::string(StopSignals::name(StopSignals::received())) + ": stopping " +
                               std::to_string(running_.size()) + " running runs (SIGTERM, then SIGKILL after " +
                               std::to_string(int(launch_.grace_s)) + " s)");
      for (auto& [id, r] : running_) stop_run(id, r, FailureClass::interrupted);
    }
    if (stopping_ && StopSignals::count() > 1 && stop_count_ != StopSignals::count()) {
      stop_count_ = StopSignals::count();
      for (auto& [id, r] : running_)
        if (!r.killed) runner_.signal_group(id, SIGKILL), r.killed = true;
    }
  }
  /// Busy runs whose writer has gone: back to the front of the queue, with the state that
  /// writer left (it may have completed the run).
  void requeue_freed() {
    for (auto it = busy_.begin(); it != busy_.end();) {
      if (!RunLock::holder((*it)->dir).empty()) {
        ++it;
        continue;
      }
      RunTask* t = *it;
      it = busy_.erase(it);
      const int attempts = t->state.attempts;
      t->state = read_run_state(t->dir);
      t->state.attempts = std::max({t->state.attempts, attempts, 1});
      if (t->state.done()) {
        try {
          session_.attempt_ended(*t,
                                 t->state.state == RunStatus::completed ? FailureClass::none : FailureClass::diverged,
                                 "finished by the process that held it", rank_log_path(t->dir, 0));
          ended(t);
        } catch (const std::exception& e) {
          io_failed(t, rank_log_path(t->dir, 0), e);
        }
      } else {
        queue_.push_front(t);
      }
    }
  }
  /// Start what fits: at most `parallel` runs and `slots_` cores; a run bigger than the
  /// slots_ runs alone rather than never.
  void start_what_fits() {
    while (!stopping_ && int(running_.size()) < launch_.parallel && (!queue_.empty() || refill())) {
      RunTask* t = queue_.front();
      int64_t cores = std::min(t->point->cores(), slots_);
      if (!running_.empty() && used_ + cores > slots_) break;
      queue_.pop_front();
      if (std::string who = RunLock::holder(t->dir); !who.empty()) {
        session_.progress().line("waiting   " + t->point->id + ": its directory is still being written by " + who +
                                 " (an earlier attempt); it is not started twice");
        busy_.insert(t);
        continue;
      }
      std::string log = t->dir + "/logs/rank0.log";
      RunCommand cmd;
      try {
        session_.prepare(*t);
        local_.threads = t->point->config.train.threads;
        if (!spec_.program.empty()) {
          // A program's torch.distributed rendezvous: rank 0's host and a port free here.
          local_.rendezvous.world = t->point->config.dist.world_size;
          local_.rendezvous.port = free_port();
          local_.rendezvous.addr = first_host(launch_);
        }
        // A fork (a pbt search's exploit) starts from its parent's checkpoint until it
        // has one of its own, as `sweep fork` starts it.
        const std::string fork = fork_source(opt_.out_dir, *t);
        cmd = local_run_command(launch_, local_, int(t->point->config.dist.world_size), opt_.out_dir, t->dir,
                                spec_.name, fork.empty() && t->resume());
        if (!fork.empty()) cmd.argv.insert(cmd.argv.end(), {"--fork-from", fork});
        log = cmd.log;
        session_.attempt_started(*t, cmd.log);
      } catch (const std::exception& e) {
        io_failed(t, log, e);
        continue;
      }
      t->started_at = monotonic_s();
      int id = 0;
      try {
        id = runner_.start(cmd.argv, cmd.log);
      } catch (const std::exception& e) {
        try {
          if (session_.attempt_ended(*t, FailureClass::crashed, e.what(), cmd.log))
            queue_.push_back(t);
          else
            ended(t);
        } catch (const std::exception& e2) {
          io_failed(t, cmd.log, e2);
        }
        continue;
      }
      running_[id] = Running{t, cmd.log};
      used_ += cores;
    }
  }
  /// The runs that ended: classified, retried or recorded.
  void collect_ended() {
    for (auto& [id, st] : runner_.wait_some(opt_.poll_s)) {
      auto it = running_.find(id);
      if (it == running_.end()) continue;
      Running r = it->second;
      running_.erase(it);
      used_ -= std::min(r.task->point->cores(), slots_);
      session_.summary().busy_s += monotonic_s() - r.task->started_at;
      try {
        std::string detail;
        FailureClass c = classify_attempt(st, r.task->dir, &detail, spec_.program.json, r.task->stop_at);
        // What we stopped it for decides, unless it finished its record anyway.
        if (r.reason != FailureClass::none && c != FailureClass::none && c != FailureClass::diverged) {
          c = r.reason;
          detail =
              (c == FailureClass::timeout ? "over launch.timeout_s = " + std::to_string(int(launch_.timeout_s)) + " s, "
                                          : std::string("stopped by the driver, ")) +
              st.describe();
        }
        if (r.reason == FailureClass::interrupted || r.killed) runner_.signal_group(id, SIGKILL);  // stragglers
        if (c == FailureClass::none) {
          char buf[32];
          std::snprintf(buf, sizeof buf, " in %.1fs", monotonic_s() - r.task->started_at);
          detail += buf;
        }
        if (session_.attempt_ended(*r.task, c, detail, r.log)) {
          if (stopping_) {
            session_.attempt_ended(*r.task, FailureClass::interrupted, "stopped before its retry", r.log);
            ended(r.task);
          } else {
            queue_.push_back(r.task);
          }
        } else {
          ended(r.task);
        }
      } catch (const std::exception& e) {
        io_failed(r.task, r.log, e);
      }
    }
  }
  /// Timeouts, the grace before SIGKILL, and a launcher that lingers after rank 0 finished.
  void watch_running() {
    const double now = monotonic_s();
    for (auto& [id, r] : running_) {
      if (launch_.timeout_s > 0 && r.term_at == 0 && now - r.task->started_at > launch_.timeout_s)
        stop_run(id, r, FailureClass::timeout);
      if (r.term_at > 0 && !r.killed && now - r.term_at > launch_.grace_s)
        runner_.signal_group(id, SIGKILL), r.killed = true;
      if (r.term_at == 0 && r.task->point->config.dist.world_size > 1 && rank0_finished(r)) {
        if (r.rank0_gone_at == 0) r.rank0_gone_at = now;
        if (now - r.rank0_gone_at > kLauncherLingerS) {
          session_.progress().line("ending    " + r.task->point->id + ": rank 0 finished its record " +
                                   std::to_string(int(kLauncherLingerS)) +
                                   " s ago and the launcher goes on (waiting for a node that went away?)");
          stop_run(id, r, FailureClass::none);
        }
      }
    }
  }
  /// A fatal driver error (out of memory, a bug): stop every run it started before the
  /// error ends the driver, so none is left unsupervised.
  void stop_all() {
    for (auto& [id, r] : running_) runner_.signal_group(id, SIGTERM);
    const double deadline = monotonic_s() + launch_.grace_s;
    while (!running_.empty() && monotonic_s() < deadline)
      for (auto& [id, st] : runner_.wait_some(0.2)) running_.erase(id);
    for (auto& [id, r] : running_) runner_.signal_group(id, SIGKILL);
  }

  const SweepSpec& spec_;
  const SweepRunOptions& opt_;
  ProcessRunner& runner_;
  SweepSession& session_;
  const LaunchSpec& launch_;
  const int64_t slots_;
  LocalLaunch local_;
  std::deque<RunTask*> queue_;
  std::map<int, Running> running_;
  // Runs whose directory another process still writes (an earlier driver's run, dying of
  // its parent-death signal, or a sweep-train started by hand): never started twice.
  std::set<RunTask*> busy_;
  int64_t used_ = 0;
  bool stopping_ = false;
  int stop_count_ = 0;
};

}  // namespace

SweepSummary run_sweep(const SweepSpec& spec, const std::vector<GridPoint>& points, const SweepRunOptions& opt,
                       ProcessRunner& runner) {
  StopSignals stop_signals;
  SweepSession session(spec, points, opt);
  LocalExecutor(spec, opt, runner, session).run();
  return session.finish();
}

}  // namespace sweep
