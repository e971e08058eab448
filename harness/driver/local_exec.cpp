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
#include <set>
#include <thread>

#include "launch.h"        // local_run_command
#include "record.h"        // read_record_status
#include "run_files.h"     // RunLock::holder, rank_log_path
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
    return !st.partial || st.status == "failed";
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

}  // namespace

SweepSummary run_sweep(const SweepSpec& spec, const std::vector<GridPoint>& points, const SweepRunOptions& opt,
                       ProcessRunner& runner) {
  StopSignals stop_signals;
  SweepSession session(spec, points, opt);
  const LaunchSpec& L = spec.launch;
  const int64_t slots = L.slots > 0 ? L.slots : default_slots(L);
  LocalLaunch local;
  local.train_binary = opt.train_binary;
  local.mpiexec = opt.mpiexec;
  local.rank_wrapper = opt.rank_wrapper;
  local.program = spec.program;
  local.sweep_id = spec.name;
  local.env = opt.run_env;
  // A grid's program runs unable to write outside its run directory (inside a container
  // the container's own confinement applies: sweep-confine is not in the image).
  if (spec.launch.container.runtime.empty()) local.confine = executable_dir() + "/sweep-confine";

  std::deque<RunTask*> queue;
  for (auto& t : session.tasks()) queue.push_back(&t);
  std::map<int, Running> running;
  // Runs whose directory another process still writes (an earlier driver's run, dying
  // of its parent-death signal, or a sweep-train started by hand): never started twice.
  std::set<RunTask*> busy;
  int64_t used = 0;
  bool stopping = false;
  int stop_count = 0;

  auto stop_run = [&](int id, Running& r, FailureClass why) {
    if (r.term_at > 0) return;
    r.term_at = monotonic_s();
    r.reason = why;
    runner.signal_group(id, SIGTERM);
  };
  // One run's I/O failure (its state file, its directory) fails that run, with the
  // errno text, and the sweep goes on.
  auto io_failed = [&](RunTask* t, const std::string& log, const std::exception& e) {
    try {
      session.attempt_ended(*t, FailureClass::config, std::string("I/O error: ") + e.what(), log);
    } catch (const std::exception&) {
      // Its state file cannot be written either: the summary and the line still say so.
    }
  };

  try {
    while (true) {
      // Ctrl-C / SIGTERM / SIGHUP: stop starting, stop everything running; a second one kills now.
      if (StopSignals::received() && !stopping) {
        stopping = true;
        session.summary().stop_signal = StopSignals::received();
        session.progress().line("sweep: " + std::string(StopSignals::name(StopSignals::received())) + ": stopping " +
                                std::to_string(running.size()) + " running runs (SIGTERM, then SIGKILL after " +
                                std::to_string(int(L.grace_s)) + " s)");
        for (auto& [id, r] : running) stop_run(id, r, FailureClass::interrupted);
      }
      if (stopping && StopSignals::count() > 1 && stop_count != StopSignals::count()) {
        stop_count = StopSignals::count();
        for (auto& [id, r] : running)
          if (!r.killed) runner.signal_group(id, SIGKILL), r.killed = true;
      }
      // Busy runs whose writer has gone: back to the front of the queue, with the state
      // that writer left (it may have completed the run).
      for (auto it = busy.begin(); it != busy.end();) {
        if (!RunLock::holder((*it)->dir).empty()) {
          ++it;
          continue;
        }
        RunTask* t = *it;
        it = busy.erase(it);
        const int attempts = t->state.attempts;
        t->state = read_run_state(t->dir);
        t->state.attempts = std::max({t->state.attempts, attempts, 1});
        if (t->state.done()) {
          try {
            session.attempt_ended(*t,
                                  t->state.state == RunStatus::completed ? FailureClass::none : FailureClass::diverged,
                                  "finished by the process that held it", rank_log_path(t->dir, 0));
          } catch (const std::exception& e) {
            io_failed(t, rank_log_path(t->dir, 0), e);
          }
        } else {
          queue.push_front(t);
        }
      }
      // Start what fits: at most `parallel` runs and `slots` cores; a run bigger than the
      // slots runs alone rather than never.
      while (!stopping && !queue.empty() && int(running.size()) < L.parallel) {
        RunTask* t = queue.front();
        int64_t cores = std::min(t->point->cores(), slots);
        if (!running.empty() && used + cores > slots) break;
        queue.pop_front();
        if (std::string who = RunLock::holder(t->dir); !who.empty()) {
          session.progress().line("waiting   " + t->point->id + ": its directory is still being written by " + who +
                                  " (an earlier attempt); it is not started twice");
          busy.insert(t);
          continue;
        }
        std::string log = t->dir + "/logs/rank0.log";
        RunCommand cmd;
        try {
          session.prepare(*t);
          local.threads = t->point->config.train.threads;
          if (!spec.program.empty()) {
            // A program's torch.distributed rendezvous: rank 0's host and a port free here.
            local.rendezvous.world = t->point->config.dist.world_size;
            local.rendezvous.port = free_port();
            local.rendezvous.addr = first_host(L);
          }
          cmd = local_run_command(L, local, int(t->point->config.dist.world_size), opt.out_dir, t->dir, spec.name,
                                  t->resume());
          log = cmd.log;
          session.attempt_started(*t, cmd.log);
        } catch (const std::exception& e) {
          io_failed(t, log, e);
          continue;
        }
        t->started_at = monotonic_s();
        int id = 0;
        try {
          id = runner.start(cmd.argv, cmd.log);
        } catch (const std::exception& e) {
          try {
            if (session.attempt_ended(*t, FailureClass::crashed, e.what(), cmd.log)) queue.push_back(t);
          } catch (const std::exception& e2) {
            io_failed(t, cmd.log, e2);
          }
          continue;
        }
        running[id] = Running{t, cmd.log};
        used += cores;
      }
      if (running.empty() && (queue.empty() || stopping)) {
        if (busy.empty() || stopping) break;
        struct timespec ts = {0, long(opt.poll_s * 1e9)};  // only busy runs left: wait for their writers
        nanosleep(&ts, nullptr);
      }

      for (auto& [id, st] : runner.wait_some(opt.poll_s)) {
        auto it = running.find(id);
        if (it == running.end()) continue;
        Running r = it->second;
        running.erase(it);
        used -= std::min(r.task->point->cores(), slots);
        try {
          std::string detail;
          FailureClass c = classify_attempt(st, r.task->dir, &detail, spec.program.json, r.task->stop_at);
          // What we stopped it for decides, unless it finished its record anyway.
          if (r.reason != FailureClass::none && c != FailureClass::none && c != FailureClass::diverged) {
            c = r.reason;
            detail =
                (c == FailureClass::timeout ? "over launch.timeout_s = " + std::to_string(int(L.timeout_s)) + " s, "
                                            : std::string("stopped by the driver, ")) +
                st.describe();
          }
          if (r.reason == FailureClass::interrupted || r.killed) runner.signal_group(id, SIGKILL);  // stragglers
          if (c == FailureClass::none) {
            char buf[32];
            std::snprintf(buf, sizeof buf, " in %.1fs", monotonic_s() - r.task->started_at);
            detail += buf;
          }
          if (session.attempt_ended(*r.task, c, detail, r.log)) {
            if (stopping) {
              session.attempt_ended(*r.task, FailureClass::interrupted, "stopped before its retry", r.log);
            } else {
              queue.push_back(r.task);
            }
          }
        } catch (const std::exception& e) {
          io_failed(r.task, r.log, e);
        }
      }
      const double now = monotonic_s();
      for (auto& [id, r] : running) {
        if (L.timeout_s > 0 && r.term_at == 0 && now - r.task->started_at > L.timeout_s)
          stop_run(id, r, FailureClass::timeout);
        if (r.term_at > 0 && !r.killed && now - r.term_at > L.grace_s)
          runner.signal_group(id, SIGKILL), r.killed = true;
        if (r.term_at == 0 && r.task->point->config.dist.world_size > 1 && rank0_finished(r)) {
          if (r.rank0_gone_at == 0) r.rank0_gone_at = now;
          if (now - r.rank0_gone_at > kLauncherLingerS) {
            session.progress().line("ending    " + r.task->point->id + ": rank 0 finished its record " +
                                    std::to_string(int(kLauncherLingerS)) +
                                    " s ago and the launcher goes on (waiting for a node that went away?)");
            stop_run(id, r, FailureClass::none);
          }
        }
      }
      session.tick();
    }
  } catch (...) {
    // A fatal driver error (out of memory, a bug): stop every run it started before the
    // error ends the driver, so none is left unsupervised.
    for (auto& [id, r] : running) runner.signal_group(id, SIGTERM);
    const double deadline = monotonic_s() + L.grace_s;
    while (!running.empty() && monotonic_s() < deadline)
      for (auto& [id, st] : runner.wait_some(0.2)) running.erase(id);
    for (auto& [id, r] : running) runner.signal_group(id, SIGKILL);
    throw;
  }
  session.summary().not_started = int(queue.size() + busy.size());
  return session.finish();
}

}  // namespace sweep
