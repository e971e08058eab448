#include "slurm_exec.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

#include "atomic_file.h"   // write_file_atomically
#include "run_files.h"     // RunLock::holder
#include "slurm_jobs.h"    // append_slurm_job, read_slurm_jobs
#include "stop_signals.h"  // StopSignals

namespace fs = std::filesystem;

namespace sweep {
namespace {

/// Polls with no answer for a task before it counts as lost (squeue and sacct both forgot it).
constexpr int kMissingPolls = 3;
/// NODE_FAIL tasks per poll whose nodes Slurm is asked for (a squeue and a sinfo each):
/// a node that takes a thousand tasks down costs ten, not a thousand.
constexpr int kNodesAskedPerPoll = 10;

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

/// A command's output as one line: "a; b" for "a\nb\n".
std::string one_line(const std::string& text) {
  std::string out;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    std::string l = text.substr(at, nl - at);
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ')) l.pop_back();
    if (!l.empty()) out += (out.empty() ? "" : "; ") + l;
    at = nl + 1;
  }
  return out;
}

std::string joined(const std::vector<std::string>& v, char sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : std::string(1, sep)) + s;
  return out;
}

/// The next free batch script number under <dir>/slurm: scripts of an earlier driver stay
/// as they are (their arrays may still be queued).
int next_batch_number(const std::string& dir) {
  int last = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir + "/slurm", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind("batch-", 0) != 0 || n.size() < 10 || n.compare(n.size() - 3, 3, ".sh") != 0) continue;
    const std::string num = n.substr(6, n.size() - 9);
    if (!num.empty() && num.size() < 9 && num.find_first_not_of("0123456789") == std::string::npos)
      last = std::max(last, std::atoi(num.c_str()));
  }
  return last + 1;
}

using Shape = std::pair<int64_t, int64_t>;  ///< (ranks, threads per rank): one array per shape

Shape shape_of(const GridPoint& p) { return {p.config.dist.world_size, p.config.train.threads}; }

std::string shape_words(const Shape& s) {
  return std::to_string(s.first) + (s.first == 1 ? " rank" : " ranks") +
         (s.second > 1 ? " x " + std::to_string(s.second) + " threads" : "");
}

/// One sweep on Slurm: what is submitted, what waits, and the arrays' throttles.
class SlurmRun {
 public:
  SlurmRun(const SweepSpec& spec, const SweepRunOptions& opt, SlurmClient& slurm, SweepSession& session)
      : spec_(spec), opt_(opt), slurm_(slurm), session_(session), local_(slurm_local_launch(spec, opt)) {}

  void run();
  const SlurmCalls& calls() const { return calls_; }

 private:
  struct Active {
    RunTask* task;
    std::string job;  ///< array job id
    int missing = 0;  ///< polls in a row without a state
  };
  struct Array {
    std::string job;
    int throttle = 1;    ///< its `%` throttle as Slurm has it
    int unfinished = 0;  ///< tasks not yet ended (pending or running)
    bool fixed = false;  ///< Slurm refused a throttle update: left as it is
  };

  void reattach(std::set<RunTask*>& handled);
  void fill();
  size_t submit_array(const Shape& shape, size_t max_tasks, int throttle);
  void poll();
  bool end_attempt(const std::string& key, Active& a, const std::string& state);
  /// end_attempt with the run's own verdict (classify_attempt of its exit and record)
  /// already read.
  bool end_attempt(const std::string& key, Active& a, const std::string& state, const ExitStatus& exit, FailureClass c,
                   std::string detail);
  void cancel_never(const std::vector<std::pair<std::string, std::string>>& never);
  void block(const Shape& shape, const std::string& why);
  void stop_all();
  void not_started_rest(const std::string& why);
  void add_active(const std::string& key, RunTask* t, const std::string& job);
  /// A run has ended for good in this invocation (no retry follows): its feed hears it.
  void feed_ended(const RunTask* t) {
    if (opt_.feed) opt_.feed->ended(t->point->id);
  }
  std::map<std::string, Active>::iterator drop_active(std::map<std::string, Active>::iterator it);
  std::vector<std::string> live_jobs() const;
  bool waiting() const;

  const SweepSpec& spec_;
  const SweepRunOptions& opt_;
  SlurmClient& slurm_;
  SweepSession& session_;
  LocalLaunch local_;
  SlurmCalls calls_;
  size_t chunk_ = 1001;                   ///< tasks per array: MaxArraySize
  long job_budget_ = 9000;                ///< the sweep's queued + running tasks stay at most this
  std::map<std::string, Active> active_;  ///< "JOB_TASK" -> its run
  std::vector<Array> arrays_;             ///< in submission order (the oldest first gets its share)
  std::map<std::string, size_t> array_of_;
  std::map<Shape, std::deque<RunTask*>> waiting_;  ///< runs not yet submitted, per shape
  std::map<Shape, std::string> blocked_;           ///< shapes Slurm can never start, and why
  int next_batch_ = 1;
  int nodes_asked_ = 0;  ///< nodes_of calls this poll
  std::string refused_;  ///< sbatch's refusal: nothing more is submitted
};

void SlurmRun::add_active(const std::string& key, RunTask* t, const std::string& job) {
  active_[key] = Active{t, job};
  ++arrays_[array_of_.at(job)].unfinished;
}

std::map<std::string, SlurmRun::Active>::iterator SlurmRun::drop_active(std::map<std::string, Active>::iterator it) {
  --arrays_[array_of_.at(it->second.job)].unfinished;
  return active_.erase(it);
}

std::vector<std::string> SlurmRun::live_jobs() const {
  std::vector<std::string> jobs;
  for (const Array& a : arrays_)
    if (a.unfinished > 0) jobs.push_back(a.job);
  return jobs;
}

bool SlurmRun::waiting() const {
  for (const auto& [shape, q] : waiting_)
    if (!q.empty()) return true;
  return false;
}

void SlurmRun::run() {
  ++calls_.scontrol;
  const SlurmLimits limits = slurm_.limits();
  chunk_ = size_t(std::max(1, limits.max_array_size));
  // A margin below MaxJobCount: other users' jobs count there too, and finished tasks stay
  // until MinJobAge.
  job_budget_ = std::max<long>(1, limits.max_job_count - std::max(1, limits.max_job_count / 10));
  if (!limits.read)
    session_.progress().line(
        "slurm: cannot read MaxArraySize and MaxJobCount (scontrol show config); using Slurm's "
        "defaults, arrays of at most " +
        std::to_string(chunk_) + " runs");
  next_batch_ = next_batch_number(opt_.out_dir);

  std::set<RunTask*> handled;
  reattach(handled);
  size_t todo = 0;
  for (auto& t : session_.tasks())
    if (!handled.count(&t) && !opt_.feed) waiting_[shape_of(*t.point)].push_back(&t), ++todo;
  if (todo > chunk_)
    session_.progress().line("slurm: " + std::to_string(todo) + " runs go in job arrays of at most " +
                             std::to_string(chunk_) + " (MaxArraySize), at most " +
                             std::to_string(spec_.launch.parallel) + " running at once over all of them");

  fill();
  while (!active_.empty() || (waiting() && refused_.empty())) {
    if (StopSignals::received()) {
      session_.summary().stop_signal = StopSignals::received();
      stop_all();
      break;
    }
    // Sleep in short pieces so Ctrl-C is answered at once.
    for (double slept = 0; slept < spec_.launch.slurm.poll_s && !StopSignals::received(); slept += 0.1)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (StopSignals::received()) continue;
    poll();
    if (refused_.empty()) fill();
    session_.tick();
  }
  if (!refused_.empty()) not_started_rest("sbatch refused an array");
  session_.progress().line("slurm: " + std::to_string(calls_.sbatch) + " sbatch, " + std::to_string(calls_.polls) +
                           " polls (" + std::to_string(calls_.squeue) + " squeue, " + std::to_string(calls_.sacct) +
                           " sacct), " + std::to_string(calls_.scancel) + " scancel, " +
                           std::to_string(calls_.scontrol) + " scontrol");
}

void SlurmRun::reattach(std::set<RunTask*>& handled) {
  const auto latest = latest_slurm_tasks(read_slurm_jobs(opt_.out_dir));
  if (latest.empty()) return;
  // Runs an earlier driver left "running": their tasks may still be queued or running.
  std::vector<std::pair<RunTask*, SlurmTaskOf>> left;
  std::vector<std::string> jobs;
  for (auto& t : session_.tasks()) {
    const auto it = latest.find(t.point->id);
    if (t.state.state != RunStatus::running || it == latest.end()) continue;
    left.emplace_back(&t, it->second);
    if (std::find(jobs.begin(), jobs.end(), it->second.job) == jobs.end()) jobs.push_back(it->second.job);
  }
  if (left.empty()) return;
  ++calls_.squeue;
  const SlurmAnswer q = slurm_.queue(jobs);
  std::vector<std::string> forgotten;
  for (const auto& [t, ref] : left)
    if (!q.tasks.count(ref.key()) && std::find(forgotten.begin(), forgotten.end(), ref.job) == forgotten.end())
      forgotten.push_back(ref.job);
  SlurmAnswer acct;
  if (!forgotten.empty()) ++calls_.sacct, acct = slurm_.accounting(forgotten);
  size_t adopted = 0;
  std::set<std::string> adopted_jobs;
  for (auto& [t, ref] : left) {
    const std::string key = ref.key();
    const SlurmTask* s = nullptr;
    if (auto f = q.tasks.find(key); f != q.tasks.end())
      s = &f->second;
    else if (auto g = acct.tasks.find(key); g != acct.tasks.end())
      s = &g->second;
    if (!s) {
      // Slurm has forgotten the task (it ended long ago, or the cluster was reset): the
      // run is submitted again, resuming. Without an answer it is left alone: it may
      // still be queued, and must not run twice.
      if (!q.answered) {
        handled.insert(t), ++session_.summary().not_started;
        session_.progress().line("skipped   " + t->point->id + ": Slurm did not answer about job " + key +
                                 " of an earlier driver; run `sweep run` again");
      }
      continue;
    }
    if (!array_of_.count(ref.job)) {
      array_of_[ref.job] = arrays_.size();
      arrays_.push_back(Array{ref.job, std::max(1, ref.throttle), 0, false});
    }
    handled.insert(t);
    add_active(key, t, ref.job);
    if (opt_.feed) {
      // An asynchronous search's run: its step is in its stop_at file, as that driver wrote it.
      std::ifstream stop(t->dir + "/stop_at");
      long long at = 0;
      t->stop_at = stop >> at ? at : 0;
      opt_.feed->adopted(t->point->id);
    }
    const bool ended = slurm_state_final(s->state);
    session_.attempt_adopted(
        *t,
        ended ? ""
              : "job " + key + " of an earlier driver, " + s->state +
                    (s->state == "PENDING" && !s->reason.empty() && s->reason != "None" ? " (" + s->reason + ")" : ""));
    if (ended) {
      // It ended while no driver watched: its record, exit code and Slurm's word decide now.
      auto it = active_.find(key);
      if (end_attempt(key, it->second, s->state))
        waiting_[shape_of(*t->point)].push_front(t);
      else
        feed_ended(t);
      drop_active(it);
      continue;
    }
    ++adopted, adopted_jobs.insert(ref.job);
  }
  if (adopted)
    session_.progress().line("slurm: re-attached to " + std::to_string(adopted_jobs.size()) +
                             " job arrays of an earlier driver: " + std::to_string(adopted) +
                             " runs still queued or running in Slurm, waited for, not submitted again");
}

void SlurmRun::fill() {
  // launch.parallel over all arrays: the oldest first gets as many as it has unfinished
  // tasks, the next what is left, ... An array's throttle only falls to its own unfinished
  // count as tasks end (which needs no update), so at most one array, the newest with
  // unfinished tasks, is held below them; a new array comes only when every earlier one
  // may run all it has.
  int remaining = std::max(1, spec_.launch.parallel);
  long queued = 0;
  for (Array& a : arrays_) {
    if (a.unfinished == 0) continue;
    queued += a.unfinished;
    const int share = std::min(a.unfinished, remaining);
    remaining -= share;
    // Slurm reads a throttle of 0 as "no limit": an array left no share keeps 1.
    const int want = std::max(1, share), now = std::min(a.throttle, a.unfinished);
    if (want != now && !a.fixed) {
      ++calls_.scontrol;
      if (slurm_.set_throttle(a.job, want)) {
        a.throttle = want;
      } else {
        a.fixed = true;
        session_.progress().line("slurm: warning: Slurm refused to change the throttle of job array " + a.job + " to " +
                                 std::to_string(want) + "; it keeps " + std::to_string(a.throttle));
      }
    }
  }
  long budget = job_budget_ - queued;
  // An asynchronous search's runs, one for each place left (retries waiting go first).
  size_t waiting_now = 0;
  for (const auto& [shape, q] : waiting_) waiting_now += q.size();
  while (opt_.feed && refused_.empty() && long(waiting_now) < std::min<long>(remaining, budget)) {
    const std::optional<FedRun> run = opt_.feed->next();
    if (!run) break;
    RunTask* t = session_.admit(*run);
    if (!t) {
      opt_.feed->ended(run->id);
      continue;
    }
    if (const auto b = blocked_.find(shape_of(*t->point)); b != blocked_.end()) {
      session_.attempt_ended(*t, FailureClass::config, "Slurm cannot start runs of its shape: " + b->second,
                             t->dir + "/logs/launcher.log");
      opt_.feed->ended(run->id);
      continue;
    }
    waiting_[shape_of(*t->point)].push_back(t), ++waiting_now;
  }
  while (remaining > 0 && budget > 0 && refused_.empty()) {
    const Shape* next = nullptr;
    for (const auto& [shape, q] : waiting_)
      if (!q.empty() && !blocked_.count(shape)) {
        next = &shape;
        break;
      }
    if (!next) break;
    const size_t n = submit_array(*next, std::min<size_t>(chunk_, size_t(budget)), remaining);
    remaining -= std::min<int>(remaining, int(n));
    budget -= long(n);
  }
}

size_t SlurmRun::submit_array(const Shape& shape, size_t max_tasks, int throttle) {
  auto& q = waiting_[shape];
  SlurmArray a;
  a.sweep_name = spec_.name;
  a.sweep_dir = opt_.out_dir;
  a.world = int(shape.first);
  a.threads = int(shape.second);
  std::vector<RunTask*> group;
  while (!q.empty() && group.size() < max_tasks) {
    RunTask* t = q.front();
    q.pop_front();
    // A run still written by another process (a job of an earlier driver) is not
    // submitted twice; one whose directory is unusable fails alone, with the reason.
    if (std::string who = RunLock::holder(t->dir); !who.empty()) {
      session_.progress().line("skipped   " + t->point->id + ": its directory is still being written by " + who +
                               "; run `sweep run` again once it has finished");
      ++session_.summary().not_started;
      continue;
    }
    try {
      session_.prepare(*t);
    } catch (const std::exception& e) {
      try {
        session_.attempt_ended(*t, FailureClass::config, std::string("I/O error: ") + e.what(),
                               t->dir + "/logs/launcher.log");
      } catch (const std::exception&) {
      }
      continue;
    }
    // A fork (a pbt search's exploit) starts from its parent's checkpoint until it has
    // one of its own, as the local executor starts it.
    const std::string fork = fork_source(opt_.out_dir, *t);
    group.push_back(t), a.dirs.push_back(t->dir), a.resume.push_back(fork.empty() && t->resume());
    a.fork_from.push_back(fork);
  }
  if (group.empty()) return 0;
  a.throttle = std::min(throttle, int(group.size()));
  const std::string name = "batch-" + std::to_string(next_batch_++) + ".sh";
  const std::string script = opt_.out_dir + "/slurm/" + name;
  write_file_atomically(script, sbatch_script(a, spec_.launch, local_));
  fs::permissions(script, fs::perms::owner_all, fs::perm_options::add);
  std::string job;
  ++calls_.sbatch;
  try {
    job = slurm_.submit(sbatch_argv(a, spec_.launch, script));
  } catch (const std::exception& e) {
    // Nothing of this array started: its runs wait with the rest, counted not started.
    for (auto it = group.rbegin(); it != group.rend(); ++it) q.push_front(*it);
    refused_ = one_line(e.what());
    const auto live = live_jobs();
    session_.progress().line("sweep: stopping: sbatch refused a job array of " + std::to_string(group.size()) +
                             " runs of " + shape_words(shape) + " (" + script + "): " + refused_ +
                             (live.empty() ? std::string()
                                           : "; submitting no more, waiting for the " + std::to_string(live.size()) +
                                                 " job arrays already submitted (Ctrl-C cancels them)"));
    session_.summary().stop_reason = "sbatch refused a job array: " + refused_;
    return 0;
  }
  std::vector<std::string> ids;
  ids.reserve(group.size());
  for (RunTask* t : group) ids.push_back(t->point->id);
  try {
    append_slurm_job(opt_.out_dir, SlurmJobLine{job, a.throttle, name, ids});
  } catch (const std::exception& e) {
    session_.progress().line("sweep: warning: job array " + job + " is not noted in slurm-jobs (" + e.what() +
                             "): a driver started after this one dies would not find it");
  }
  session_.progress().line("submitted job array " + job + ": " + std::to_string(group.size()) + " runs of " +
                           shape_words(shape) + ", at most " + std::to_string(a.throttle) + " at once (" + script +
                           ")");
  array_of_[job] = arrays_.size();
  arrays_.push_back(Array{job, a.throttle, 0, false});
  for (size_t i = 0; i < group.size(); ++i) {
    session_.attempt_started(*group[i], group[i]->dir + "/logs/launcher.log");
    add_active(job + "_" + std::to_string(i), group[i], job);
  }
  return group.size();
}

void SlurmRun::poll() {
  const std::vector<std::string> jobs = live_jobs();
  if (jobs.empty()) return;
  ++calls_.polls, ++calls_.squeue;
  nodes_asked_ = 0;
  const SlurmAnswer q = slurm_.queue(jobs);
  // Tasks squeue no longer lists (ended longer ago than MinJobAge): one sacct for their jobs.
  std::vector<std::string> forgotten;
  for (const auto& [key, a] : active_)
    if (!q.tasks.count(key) && std::find(forgotten.begin(), forgotten.end(), a.job) == forgotten.end())
      forgotten.push_back(a.job);
  SlurmAnswer acct;
  if (!forgotten.empty()) ++calls_.sacct, acct = slurm_.accounting(forgotten);
  std::vector<std::pair<std::string, std::string>> never;  // task, reason
  std::vector<RunTask*> retry;
  for (auto it = active_.begin(); it != active_.end();) {
    Active& a = it->second;
    const SlurmTask* s = nullptr;
    if (auto f = q.tasks.find(it->first); f != q.tasks.end())
      s = &f->second;
    else if (auto g = acct.tasks.find(it->first); g != acct.tasks.end())
      s = &g->second;
    std::string state;
    if (!s) {
      // Without squeue's answer nothing is known of it; with one, a task both forgot
      // several polls in a row is lost.
      if (!q.answered || ++a.missing < kMissingPolls) {
        ++it;
        continue;
      }
      state = "UNKNOWN";
    } else {
      a.missing = 0;
      state = s->state;
      if (!slurm_state_final(state)) {
        if (state == "PENDING" && slurm_reason_permanent(s->reason)) never.emplace_back(it->first, s->reason);
        ++it;
        continue;
      }
    }
    if (end_attempt(it->first, a, state))
      retry.push_back(a.task);
    else
      feed_ended(a.task);
    it = drop_active(it);
  }
  if (!never.empty()) cancel_never(never);
  // Retries go first among the runs of their shape, in the order they ended.
  for (auto it = retry.rbegin(); it != retry.rend(); ++it) waiting_[shape_of(*(*it)->point)].push_front(*it);
}

bool SlurmRun::end_attempt(const std::string& key, Active& a, const std::string& state) {
  std::string detail;
  const ExitStatus exit = script_exit(a.task->dir);
  const FailureClass c = classify_attempt(exit, a.task->dir, &detail, spec_.program.json, a.task->stop_at);
  return end_attempt(key, a, state, exit, c, std::move(detail));
}

bool SlurmRun::end_attempt(const std::string& key, Active& a, const std::string& state, const ExitStatus& exit,
                           FailureClass c, std::string detail) {
  const std::string log = a.task->dir + "/logs/launcher.log";
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
  std::string where = c == FailureClass::node_fail && nodes_asked_++ < kNodesAskedPerPoll ? slurm_.nodes_of(key) : "";
  detail = "Slurm " + state + (where.empty() ? "" : " " + where) + ", " + detail;
  return session_.attempt_ended(*a.task, c, detail, log);
}

void SlurmRun::cancel_never(const std::vector<std::pair<std::string, std::string>>& never) {
  std::vector<std::string> ids;
  ids.reserve(never.size());
  for (const auto& [key, reason] : never) ids.push_back(key);
  ++calls_.scancel;
  slurm_.cancel(ids);
  std::map<std::string, std::pair<std::string, size_t>> per_job;  // job -> reason, tasks
  std::vector<std::pair<Shape, std::string>> shapes;              // to block, and why
  for (const auto& [key, reason] : never) {
    auto it = active_.find(key);
    if (it == active_.end()) continue;
    RunTask* t = it->second.task;
    auto& pj = per_job[it->second.job];
    pj.first = reason, ++pj.second;
    session_.attempt_ended(*t, FailureClass::config,
                           "Slurm cannot start it: " + reason + " (job " + key +
                               ", which waits for a change of the job or of the cluster's configuration; cancelled by "
                               "the driver)",
                           t->dir + "/logs/launcher.log");
    feed_ended(t);
    shapes.emplace_back(shape_of(*t->point), reason);
    drop_active(it);
  }
  for (const auto& [job, what] : per_job)
    session_.progress().line("sweep: job array " + job + " can never start (Slurm: " + what.first + "): its " +
                             std::to_string(what.second) + " waiting runs were cancelled and failed");
  for (const auto& [shape, why] : shapes) block(shape, why);
}

void SlurmRun::block(const Shape& shape, const std::string& why) {
  if (blocked_.count(shape)) return;
  blocked_[shape] = why;
  auto& q = waiting_[shape];
  if (q.empty()) return;
  session_.progress().line("sweep: " + std::to_string(q.size()) + " more runs of " + shape_words(shape) +
                           " are not submitted: Slurm would hold them the same way (" + why + ")");
  session_.summary().not_started += int(q.size());
  if (session_.summary().stop_reason.empty()) session_.summary().stop_reason = "Slurm cannot start a job: " + why;
  q.clear();
}

void SlurmRun::not_started_rest(const std::string& why) {
  size_t n = 0;
  for (auto& [shape, q] : waiting_) n += q.size(), q.clear();
  if (n) session_.summary().not_started += int(n);
  (void)why;
}

void SlurmRun::stop_all() {
  const std::vector<std::string> jobs = live_jobs();
  session_.progress().line("sweep: stopping: scancel " + std::to_string(jobs.size()) + " job arrays");
  if (!jobs.empty()) {
    ++calls_.scancel;
    slurm_.cancel(jobs);
  }
  // Wait (bounded) until Slurm has ended the tasks, so a `sweep run` right after this
  // one cannot start a run whose cancelled task is still writing; a second Ctrl-C
  // stops waiting.
  const int first = StopSignals::count();
  SlurmAnswer now;
  for (double waited = 0; !jobs.empty() && waited < spec_.launch.grace_s + 60 && StopSignals::count() == first;
       waited += 1) {
    ++calls_.squeue;
    now = slurm_.queue(jobs);
    bool all_final = now.answered;
    for (const auto& [key, a] : active_) {
      auto s = now.tasks.find(key);
      if (s != now.tasks.end() && !slurm_state_final(s->second.state)) all_final = false;
    }
    if (all_final) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  // A task that finished its run before the scancel reached it (or before the last poll
  // saw it end) has a completed or diverged record, which decides, as in poll(); the
  // others were stopped. Their retries are not made: the sweep stops.
  for (auto& [key, a] : active_) {
    std::string detail;
    const ExitStatus exit = script_exit(a.task->dir);
    const FailureClass c = classify_attempt(exit, a.task->dir, &detail, spec_.program.json, a.task->stop_at);
    if (c == FailureClass::none || c == FailureClass::diverged) {
      const auto s = now.tasks.find(key);
      end_attempt(key, a, s != now.tasks.end() ? s->second.state : "(state not known)", exit, c, std::move(detail));
    } else {
      session_.attempt_ended(*a.task, FailureClass::interrupted, "scancel by the driver",
                             a.task->dir + "/logs/launcher.log");
    }
  }
  active_.clear();
  for (Array& a : arrays_) a.unfinished = 0;
  not_started_rest("stopped");
}

}  // namespace

LocalLaunch slurm_local_launch(const SweepSpec& spec, const SweepRunOptions& opt) {
  LocalLaunch local;
  local.train_binary = opt.train_binary;
  local.rank_wrapper = opt.rank_wrapper.empty() ? executable_dir() + "/sweep-rank" : opt.rank_wrapper;
  local.program = spec.program;
  local.env = opt.run_env;
  // A grid's program runs unable to write outside its run directory (inside a container
  // the container's own confinement applies: sweep-confine is not in the image).
  if (spec.launch.container.runtime.empty()) local.confine = executable_dir() + "/sweep-confine";
  return local;
}

std::string SlurmCli::submit(const std::vector<std::string>& argv) {
  Captured c = capture(argv, 120);
  if (!c.status.ok()) throw std::runtime_error("sbatch failed (" + c.status.describe() + "): " + c.output);
  // --parsable prints "jobid" or "jobid;cluster".
  std::string id = c.output.substr(0, c.output.find_first_of(";\n"));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error("sbatch printed no job id: " + c.output);
  return id;
}

SlurmAnswer SlurmCli::queue(const std::vector<std::string>& jobs) {
  SlurmAnswer a;
  if (jobs.empty()) return a.answered = true, a;
  // Without --array a pending range stays one line ("12_[40-999%8]"): an array of a
  // thousand queued tasks is one line, not a thousand.
  Captured q =
      capture({"squeue", "--noheader", "--states=all", "--jobs=" + joined(jobs, ','), "--format=%i|%T|%r"}, 60);
  if (q.status.ok()) {
    a.answered = true;
    a.tasks = parse_squeue(q.output);
  } else if (q.output.find("Invalid job id specified") != std::string::npos) {
    a.answered = true;  // squeue of a single job Slurm has forgotten
  }
  return a;
}

SlurmAnswer SlurmCli::accounting(const std::vector<std::string>& jobs) {
  SlurmAnswer a;
  if (jobs.empty()) return a.answered = true, a;
  Captured c = capture(
      {"sacct", "--noheader", "--parsable2", "--allocations", "--jobs=" + joined(jobs, ','), "--format=JobID,State"},
      60);
  if (c.status.ok()) a.answered = true, a.tasks = parse_sacct(c.output);
  return a;
}

void SlurmCli::cancel(const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  std::vector<std::string> argv = {"scancel"};
  argv.insert(argv.end(), ids.begin(), ids.end());
  capture(argv, 60);
}

bool SlurmCli::set_throttle(const std::string& job, int n) {
  const Captured c = capture({"scontrol", "update", "JobId=" + job, "ArrayTaskThrottle=" + std::to_string(n)}, 60);
  return throttle_updated(c.status.ok(), c.output);
}

SlurmLimits SlurmCli::limits() {
  try {
    Captured c = capture({"scontrol", "show", "config"}, 60);
    if (c.status.ok()) return parse_slurm_limits(c.output);
  } catch (const std::runtime_error&) {
    // No scontrol here: Slurm's defaults.
  }
  return SlurmLimits{};
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
                             SlurmClient& slurm, SlurmCalls* calls) {
  StopSignals stop_signals;
  SweepSession session(spec, points, opt);
  fs::create_directories(opt.out_dir + "/slurm");
  SlurmRun run(spec, opt, slurm, session);
  run.run();
  if (calls) *calls = run.calls();
  return session.finish();
}

SlurmPreview preview_slurm(const SweepSpec& spec, const std::vector<GridPoint>& points, const SweepRunOptions& opt,
                           const SlurmLimits& limits) {
  SlurmPreview p;
  p.limits = limits;
  const size_t chunk = size_t(std::max(1, limits.max_array_size));
  const auto known = scan_runs(opt.out_dir);  // a missing directory is an empty one
  std::map<Shape, std::vector<const GridPoint*>> todo;
  std::map<std::string, int> attempts;
  for (const GridPoint& pt : points) {
    const auto it = known.find(pt.id);
    if (it != known.end() && it->second.done()) continue;
    attempts[pt.id] = it == known.end() ? 0 : it->second.attempts;
    todo[shape_of(pt)].push_back(&pt);
  }
  for (const auto& [shape, v] : todo) p.arrays += (v.size() + chunk - 1) / chunk;
  if (todo.empty()) return p;
  const auto& [shape, first] = *todo.begin();
  SlurmArray a;
  a.sweep_name = spec.name;
  a.sweep_dir = opt.out_dir;
  a.world = int(shape.first);
  a.threads = int(shape.second);
  for (size_t i = 0; i < first.size() && i < chunk; ++i) {
    a.dirs.push_back(run_dir(opt.out_dir, first[i]->id));
    a.resume.push_back(attempts[first[i]->id] > 0);
  }
  a.throttle = std::min(std::max(1, spec.launch.parallel), int(a.dirs.size()));
  p.runs = a.dirs.size();
  p.script = sbatch_script(a, spec.launch, slurm_local_launch(spec, opt));
  p.argv = sbatch_argv(a, spec.launch,
                       opt.out_dir + "/slurm/batch-" + std::to_string(next_batch_number(opt.out_dir)) + ".sh");
  return p;
}

std::map<std::string, SlurmRunView> slurm_run_views(const std::string& dir, const std::vector<std::string>& ids,
                                                    SlurmClient& slurm) {
  std::map<std::string, SlurmRunView> out;
  const auto latest = latest_slurm_tasks(read_slurm_jobs(dir));
  std::vector<std::string> jobs;
  for (const auto& id : ids)
    if (auto it = latest.find(id); it != latest.end())
      if (std::find(jobs.begin(), jobs.end(), it->second.job) == jobs.end()) jobs.push_back(it->second.job);
  if (jobs.empty()) return out;
  const SlurmAnswer q = slurm.queue(jobs);
  for (const auto& id : ids) {
    const auto it = latest.find(id);
    if (it == latest.end()) continue;
    const std::string key = it->second.key();
    const auto s = q.tasks.find(key);
    if (s == q.tasks.end() || slurm_state_final(s->second.state)) continue;
    if (s->second.state == "PENDING") {
      const std::string& r = s->second.reason;
      out[id] = {true, "queued in Slurm (job " + key + (r.empty() || r == "None" ? "" : ", " + r) +
                           (slurm_reason_permanent(r) ? ": it can never start as it is" : "") + ")"};
    } else {
      out[id] = {false, s->second.state == "RUNNING" ? "running in Slurm (job " + key + ")"
                                                     : s->second.state + " in Slurm (job " + key + ")"};
    }
  }
  return out;
}

}  // namespace sweep
