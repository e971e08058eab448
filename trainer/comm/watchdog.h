// What a rank does when the run stops making progress or the launcher stops it, so that
// a dead or stuck rank ends the job with its cause written down instead of hanging it.
//
// - No progress for dist.timeout_s (a peer died or hung inside a collective, or this rank
//   is stuck computing): exit 4, and say which of the two it was.
// - SIGTERM / SIGINT (mpirun tears the job down after a peer's death; scancel; Ctrl-C):
//   exit 128 + signal.
// Either way the `on_stop` hook runs first (rank 0 marks its record failed with the
// cause). A rank that times out also leaves a note, <note_dir>/rank<R>.failure, which
// rank 0 folds into its cause: that is how the record names a hung rank that is not 0.
// A rank killed outright (SIGKILL, out of memory) leaves no note; the launcher names it.
//
// Hang evidence: every collective a rank enters is numbered, and the rank keeps a ring of
// its last kCollectiveRing (number, operation, bytes, start and end). In a run of several
// ranks a rank that stops (its timeout, or the launcher's signal) writes that ring to
// <note_dir>/rank<R>.collectives (results/record/collective_ring.h), which the sweep driver
// merges with the other ranks' to name the first collective they disagree on
// (results/analysis/hang_verdict.h). A timeout names the
// collective the rank waits in, or the last one it finished ("rank 1 ... outside any
// collective (its last, #811 allreduce, ended 3.2 s ago); rank 0 ... in allreduce
// (collective #812, ...)": rank 1 never reached #812), prints the ring and a stack trace
// of the main thread to the rank's log, and puts the top of that stack in the cause.
// In a run of several ranks each rank also publishes its place among the collectives in
// <note_dir>/rank<R>.heartbeat (results/record/heartbeat.h) as it enters and leaves each,
// and rank 0's cause of a hang ends with the rank(s) that never entered the collective the
// others wait in ("rank 1 never entered collective #812 (allreduce at step 40); rank 0
// waits in it"), which a rank that leaves no note (stopped, wedged) cannot say itself.
#pragma once

#include <pthread.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "communicator.h"  // Communicator

namespace sweep {

class HeartbeatWriter;  // heartbeat.h

class Watchdog {
 public:
  /// `timeout_s` <= 0 disables the progress check (signals are still handled). Installs
  /// the SIGTERM and SIGINT handlers; one Watchdog per process. With `world` > 1 ranks the
  /// rank publishes its heartbeat in `note_dir`.
  Watchdog(double timeout_s, int rank, std::string note_dir, int world = 1);
  /// Restores the previous signal handlers.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Runs on the watchdog thread with the cause, just before the process exits. The
  /// main thread may be anywhere, so the hook must lock whatever it touches.
  void on_stop(std::function<void(const std::string&)> hook);
  /// Starts the progress check: from now on `beat` must come every timeout_s.
  void arm();
  /// Marks progress: step `step` has started.
  void beat(long long step);
  /// Writes this rank's note (a failure the other ranks cannot see), read by rank 0.
  void leave_note(const std::string& why) const;
  /// The notes other ranks left, one per line, or "" when there are none.
  std::string peer_notes() const;

  /// Each rank's host, in rank order: a cause that names a peer rank names its host too.
  void set_hosts(std::vector<std::string> hosts);

  /// Marks the time this rank waits for its peers (see WatchedCommunicator); `peer` is the
  /// one rank it waits on (a sendrecv's source, this rank itself for an exchange with no
  /// other), -1 for a collective of all ranks; `bytes` what this rank sends. Each Waiting is
  /// one numbered collective of the ring.
  class Waiting {
   public:
    Waiting(Watchdog& dog, const char* op, int peer = -1, size_t bytes = 0) : dog_(dog) { dog_.enter(op, peer, bytes); }
    ~Waiting() { dog_.leave(); }
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

   private:
    Watchdog& dog_;
  };

  /// One collective in the ring: its number (from 1), operation, bytes, and times
  /// (seconds on the steady clock; end_s < 0 while it runs).
  struct Collective {
    long long seq = 0;
    const char* op = nullptr;
    size_t bytes = 0;
    double start_s = 0, end_s = -1;
    long long group = 0;  ///< collectives of all ranks entered, this one included (the same on every rank)
    long long step = 0;   ///< the step the rank was at
    int peer = -1;        ///< the one rank it waits on; -1: all ranks
  };
  /// At least 64, as the issue asked: a step of the tests' tiny model enters about 6, so
  /// the ring reaches back some 10 steps (a larger model's step, with more exchanges, less).
  static constexpr size_t kCollectiveRing = 64;
  /// The ring, oldest first (at most kCollectiveRing, fewer before as many collectives).
  std::vector<Collective> last_collectives();

 private:
  void watch();
  /// "at step S while ..." (locks hook_mu_: not from a stop hook). `stuck`: the rank made no
  /// progress, so computing outside a collective means it is the one stuck; a rank stopped
  /// by a signal is not stuck, only stopped.
  std::string where(bool stuck = true);
  [[noreturn]] void stop(const std::string& why, int code);
  static double epoch_s();  // seconds since the epoch
  void enter(const char* op, int peer, size_t bytes);
  void leave();
  /// The ring as one line per collective, for the log.
  std::string ring_text();
  /// Writes the ring to <note_dir>/rank<R>.collectives (a run of several ranks only).
  void write_ring();
  /// A stack trace of the thread that made the Watchdog (the main thread), taken by a
  /// signal: every frame for the log (`all`), and the top frames of this program and its
  /// libraries as one line ("" when the thread did not answer within a second).
  std::string main_stack(std::string* all);

  double timeout_s_;
  int rank_;
  std::string note_dir_;
  std::function<void(const std::string&)> hook_;
  std::mutex hook_mu_;
  std::atomic<bool> armed_{false};
  std::atomic<double> last_{0};
  std::atomic<long long> step_{0};
  std::atomic<const char*> waiting_in_{nullptr};
  std::atomic<int> peer_{-1};
  std::mutex ring_mu_;
  std::array<Collective, kCollectiveRing> ring_{};  // under ring_mu_; slot seq % kCollectiveRing
  long long seq_ = 0;                               // under ring_mu_: collectives entered
  long long group_ = 0;                             // under ring_mu_: of them, collectives of all ranks
  int world_;
  std::unique_ptr<HeartbeatWriter> heartbeat_;    // null for one rank; written by the main thread only
  std::atomic<HeartbeatWriter*> alive_{nullptr};  // heartbeat_ once armed: the watchdog thread touches it
  double stopped_s_ = 0;                          // when this rank decided to stop (epoch s); the watchdog thread only
  long long started_ = 0;                         // when this Watchdog was made, seconds since the epoch
  pthread_t main_;
  std::vector<std::string> hosts_;  // under hook_mu_
  std::string host_of(int rank);    // "" when unknown
  int wake_[2] = {-1, -1};          // self-pipe: the signal handler and the destructor write to it
  std::thread thread_;
};

/// The watch over MPI start-up, before any Watchdog exists: MPI_Init and the first
/// collectives are where ranks that cannot reach each other (a transport that does not
/// connect two hosts) hang. Unless done() comes within `timeout_s` (<= 0: never), the
/// process prints why and exits 4, as a Watchdog timeout does. Start-up is not a step: on
/// a loaded machine starting the ranks alone can take seconds, so a caller gives it at
/// least kMinStartupTimeoutS (startup_timeout_s).
inline constexpr double kMinStartupTimeoutS = 60;

/// The start-up guard's time for a run whose dist.timeout_s is `timeout_s`: that, but at
/// least kMinStartupTimeoutS; 0 (no guard) when the run has no timeout.
inline double startup_timeout_s(double timeout_s) {
  return timeout_s > 0 ? (timeout_s > kMinStartupTimeoutS ? timeout_s : kMinStartupTimeoutS) : 0;
}

class StartupGuard {
 public:
  explicit StartupGuard(double timeout_s);
  ~StartupGuard() { done(); }
  StartupGuard(const StartupGuard&) = delete;
  StartupGuard& operator=(const StartupGuard&) = delete;
  /// Start-up is over: the guard stands down.
  void done();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

/// A Communicator that tells the watchdog when this rank waits on its peers, so a
/// timeout can say "waiting in allgather" (a peer is at fault) or "computing" (this
/// rank is). Forwards every call to `inner`.
class WatchedCommunicator : public Communicator {
 public:
  WatchedCommunicator(Communicator& inner, Watchdog& dog) : inner_(inner), dog_(dog) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void barrier() override {
    Watchdog::Waiting w(dog_, "barrier");
    inner_.barrier();
  }
  void allgather(const void* send, size_t bytes_per_rank, void* recv) override {
    Watchdog::Waiting w(dog_, "allgather", -1, bytes_per_rank);
    inner_.allgather(send, bytes_per_rank, recv);
  }
  void sendrecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes, int src) override {
    Watchdog::Waiting w(dog_, "the gradient exchange (sendrecv)", src, send_bytes);
    inner_.sendrecv(send, send_bytes, dst, recv, recv_bytes, src);
  }
  void allreduce_sum_native(float* data, size_t n) override {
    Watchdog::Waiting w(dog_, "allreduce", -1, n * sizeof(float));
    inner_.allreduce_sum_native(data, n);
  }
  void allreduce_sum_i64(int64_t* data, size_t n) override {
    Watchdog::Waiting w(dog_, "allreduce", -1, n * sizeof(int64_t));
    inner_.allreduce_sum_i64(data, n);
  }
  void allreduce_max_double(double* data, size_t n) override {
    Watchdog::Waiting w(dog_, "allreduce", -1, n * sizeof(double));
    inner_.allreduce_max_double(data, n);
  }
  [[noreturn]] void abort(int code, const std::string& why) override {
    inner_.abort(code, why);
    std::_Exit(code);  // not reached; GCC does not carry [[noreturn]] through a virtual call
  }

 private:
  Communicator& inner_;
  Watchdog& dog_;
};

}  // namespace sweep
