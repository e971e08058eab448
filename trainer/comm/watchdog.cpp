#include "watchdog.h"

#include <cxxabi.h>
#include <execinfo.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "collective_ring.h"  // write_collective_ring: the ring the driver merges
#include "heartbeat.h"        // HeartbeatWriter, read_heartbeats, absent_from_collective
#include "monotonic.h"        // monotonic_s

namespace fs = std::filesystem;

namespace sweep {
namespace {

// The handler may only touch these: one watchdog per process.
int g_wake_fd = -1;
volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_old_term, g_old_int, g_old_urg;

// The main thread's stack, taken in its SIGURG handler (the watchdog asks for it).
constexpr int kMaxFrames = 64;
void* g_frames[kMaxFrames];
std::atomic<int> g_frame_count{-1};

void on_stack_request(int) {
  // backtrace was called once before (the constructor), so it does not load anything here.
  g_frame_count.store(::backtrace(g_frames, kMaxFrames));
}

/// "libfoo.so(_ZN5sweep3fooEv+0x12) [0x...]" -> "sweep::foo()", "" without a symbol.
std::string frame_name(const char* text) {
  const char* open = std::strchr(text, '(');
  const char* plus = open ? std::strpbrk(open, "+)") : nullptr;
  if (!open || !plus || plus == open + 1) return "";
  const std::string mangled(open + 1, plus);
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  return out;
}

void on_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
  if (g_wake_fd >= 0) {
    const char c = 's';
    [[maybe_unused]] ssize_t r = ::write(g_wake_fd, &c, 1);
  }
}

// Rank 0 gives the other ranks a moment longer, so that a rank stuck computing times
// out first and leaves the note that names it before rank 0 writes the record's cause.
constexpr double kRootGraceS = 1.0;

std::string note_path(const std::string& dir, int rank) { return dir + "/rank" + std::to_string(rank) + ".failure"; }

}  // namespace

Watchdog::Watchdog(double timeout_s, int rank, std::string note_dir, int world)
    : timeout_s_(timeout_s), rank_(rank), note_dir_(std::move(note_dir)), world_(world), main_(::pthread_self()) {
  std::error_code ec;
  fs::remove(note_path(note_dir_, rank_), ec);             // a note from an earlier attempt is stale
  fs::remove(collective_ring_path(note_dir_, rank_), ec);  // and so is its ring
  started_ = static_cast<long long>(std::time(nullptr));
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error(std::string("watchdog: pipe: ") + std::strerror(errno));
  g_signal = 0;
  g_wake_fd = wake_[1];
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &g_old_term);
  ::sigaction(SIGINT, &sa, &g_old_int);
  void* probe[1];
  ::backtrace(probe, 1);  // loads the unwinder now, not in the signal handler
  struct sigaction urg = {};
  urg.sa_handler = on_stack_request;
  urg.sa_flags = SA_RESTART;
  sigemptyset(&urg.sa_mask);
  ::sigaction(SIGURG, &urg, &g_old_urg);
  thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGURG, &g_old_urg, nullptr);
  g_wake_fd = -1;
  const char c = 'q';
  [[maybe_unused]] ssize_t r = ::write(wake_[1], &c, 1);
  thread_.join();
  ::close(wake_[0]);
  ::close(wake_[1]);
  // A signal that came while the run was finishing still ends the process as asked.
  if (g_signal != 0) std::_Exit(128 + g_signal);
}

void Watchdog::on_stop(std::function<void(const std::string&)> hook) {
  std::lock_guard<std::mutex> lock(hook_mu_);
  hook_ = std::move(hook);
}

void Watchdog::arm() {
  // The heartbeat starts with the run, once nothing can reject its config (bad input
  // writes nothing). Emptied and rewritten at once: an earlier attempt's heartbeat is
  // stale too. A peer's that is older than this rank's start (less a second of clock
  // granularity) is another attempt's, left by a rank that has not started yet.
  if (world_ > 1 && !heartbeat_) {
    heartbeat_ = std::make_unique<HeartbeatWriter>(note_dir_, rank_);
    alive_.store(heartbeat_.get());
  }
  last_.store(monotonic_s());
  armed_.store(true);
}

void Watchdog::beat(long long step) {
  step_.store(step);
  last_.store(monotonic_s());
}

void Watchdog::leave_note(const std::string& why) const {
  // Best effort: the directory may be on another node's disk.
  // Never through a link planted at the note's name.
  int fd = ::open(note_path(note_dir_, rank_).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string line = why + "\n";
  if (::write(fd, line.data(), line.size()) < 0) {
    // Best effort, as above.
  }
  ::close(fd);
}

std::string Watchdog::peer_notes() const {
  std::string out;
  std::error_code ec;
  for (fs::directory_iterator it(note_dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("rank", 0) != 0 || it->path().extension() != ".failure" ||
        name == "rank" + std::to_string(rank_) + ".failure")
      continue;
    std::ifstream in(it->path());
    std::string line;
    if (std::getline(in, line) && !line.empty()) out += (out.empty() ? "" : "; ") + line;
  }
  return out;
}

void Watchdog::set_hosts(std::vector<std::string> hosts) {
  std::lock_guard<std::mutex> lock(hook_mu_);
  hosts_ = std::move(hosts);
}

std::string Watchdog::host_of(int rank) {
  std::lock_guard<std::mutex> lock(hook_mu_);
  return rank >= 0 && size_t(rank) < hosts_.size() ? hosts_[size_t(rank)] : "";
}

void Watchdog::enter(const char* op, int peer, size_t bytes) {
  long long seq = 0, group = 0;
  {
    std::lock_guard<std::mutex> lock(ring_mu_);
    ++seq_;
    if (peer < 0) ++group_;
    ring_[size_t(seq_) % kCollectiveRing] = Collective{seq_, op, bytes, monotonic_s(), -1, group_, step_.load(), peer};
    seq = seq_, group = group_;
  }
  peer_.store(peer);
  waiting_in_.store(op);
  if (heartbeat_) heartbeat_->publish(seq, group, step_.load(), true, peer, op);
}

void Watchdog::leave() {
  waiting_in_.store(nullptr);
  long long seq = 0, group = 0;
  const char* op = nullptr;
  {
    std::lock_guard<std::mutex> lock(ring_mu_);
    Collective& c = ring_[size_t(seq_) % kCollectiveRing];
    c.end_s = monotonic_s();
    seq = seq_, group = group_, op = c.op;
  }
  if (heartbeat_) heartbeat_->publish(seq, group, step_.load(), false, peer_.load(), op);
}

std::vector<Watchdog::Collective> Watchdog::last_collectives() {
  std::lock_guard<std::mutex> lock(ring_mu_);
  std::vector<Collective> out;
  for (long long s = std::max(1LL, seq_ - (long long)kCollectiveRing + 1); s <= seq_; ++s)
    out.push_back(ring_[size_t(s) % kCollectiveRing]);
  return out;
}

namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 1 ? "%.3g s" : "%.1f s", s);
  return buf;
}

}  // namespace

std::string Watchdog::ring_text() {
  std::string out;
  const double now = monotonic_s();
  for (const Collective& c : last_collectives())
    out += "  #" + std::to_string(c.seq) + " " + c.op + ", " + std::to_string(c.bytes) + " bytes, " +
           (c.end_s < 0 ? "running for " + seconds(now - c.start_s)
                        : "took " + seconds(c.end_s - c.start_s) + ", ended " + seconds(now - c.end_s) + " ago") +
           "\n";
  return out;
}

void Watchdog::write_ring() {
  if (world_ <= 1) return;
  // Steady-clock times to the epoch's, so that the driver can set the ranks' rings side by side.
  const double mono = monotonic_s();
  const double wall = epoch_s();
  std::vector<RingEntry> ring;
  for (const Collective& c : last_collectives())
    ring.push_back(RingEntry{c.seq, c.group, c.step, c.peer, static_cast<long long>(c.bytes), c.op ? c.op : "?",
                             wall - (mono - c.start_s), c.end_s < 0 ? -1 : wall - (mono - c.end_s)});
  // When it decided to stop: what it entered after that (its peers moved on meanwhile, or a
  // launcher continued it to end it) the driver's merge leaves out.
  write_collective_ring(note_dir_, rank_, ring, stopped_s_ > 0 ? stopped_s_ : wall);
}

std::string Watchdog::where(bool stuck) {
  const std::vector<Collective> ring = last_collectives();
  const double now = monotonic_s();
  const char* op = waiting_in_.load();
  if (!op) {
    std::string last = " (no collective yet)";
    if (!ring.empty() && ring.back().end_s >= 0)
      last = " (its last, #" + std::to_string(ring.back().seq) + " " + ring.back().op + ", ended " +
             seconds(now - ring.back().end_s) + " ago)";
    return "at step " + std::to_string(step_.load()) + " while computing, outside any collective" + last +
           (stuck ? " (this rank is stuck)" : "");
  }
  std::string peer;
  if (const int p = peer_.load(); p >= 0 && p != rank_) {
    const std::string host = host_of(p);
    peer = " with rank " + std::to_string(p) + (host.empty() ? "" : " on " + host);
  }
  std::string which;
  if (!ring.empty() && ring.back().end_s < 0)
    which = " (collective #" + std::to_string(ring.back().seq) + ", " + std::to_string(ring.back().bytes) +
            " bytes, for " + seconds(now - ring.back().start_s) + ")";
  return "at step " + std::to_string(step_.load()) + " while waiting for the other ranks in " + op + peer + which;
}

std::string Watchdog::main_stack(std::string* all) {
  g_frame_count.store(-1);
  if (::pthread_kill(main_, SIGURG) != 0) return "";
  const double until = monotonic_s() + 1.0;
  while (g_frame_count.load() < 0 && monotonic_s() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int n = g_frame_count.load();
  if (n <= 0) return "";
  char** text = ::backtrace_symbols(g_frames, n);
  if (!text) return "";
  std::string top;
  int named = 0;
  // Frame 0 is the handler and frame 1 the signal trampoline: the thread's own frames follow.
  for (int i = 2; i < n; ++i) {
    const std::string name = frame_name(text[i]);
    *all += "  #" + std::to_string(i - 2) + " " + (name.empty() ? std::string(text[i]) : name + "  " + text[i]) + "\n";
    if (!name.empty() && named < 4) top += (named++ ? " < " : "") + name;
  }
  std::free(text);
  return top;
}

double Watchdog::epoch_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Watchdog::stop(const std::string& why, int code) {
  if (stopped_s_ <= 0) stopped_s_ = epoch_s();
  // The rank that is at fault first: a peer's note says "this rank is stuck".
  const std::string notes = rank_ == 0 ? peer_notes() : "";
  std::string cause = notes.empty() ? why : notes + "; " + why;
  // A hang (this rank's timeout, or a peer's): the ranks' heartbeats say which never
  // entered the collective the others wait in, even of a rank that left no note.
  if (rank_ == 0 && world_ > 1 && (code == 4 || notes.find("(dist.timeout_s)") != std::string::npos))
    if (const std::string absent = absent_from_collective(read_heartbeats(note_dir_, world_, started_ - 1));
        !absent.empty())
      cause += "; " + absent;
  std::fprintf(stderr, "sweep-train: %s; exiting (%d)\n", cause.c_str(), code);
  std::fflush(stderr);
  write_ring();  // before the hook: rank 0's record may be the last thing it finishes
  {
    std::lock_guard<std::mutex> lock(hook_mu_);
    if (hook_) hook_(cause);
  }
  // Not MPI_Abort: MPI_THREAD_FUNNELED forbids MPI calls from this thread. The launcher
  // sees the exit and ends the remaining ranks.
  std::_Exit(code);
}

void Watchdog::watch() {
  double touched = 0;
  while (true) {
    pollfd p = {wake_[0], POLLIN, 0};
    ::poll(&p, 1, 100);
    // This process is alive (heartbeat.h's kAliveEveryS): a stopped one's heartbeat goes stale.
    if (HeartbeatWriter* beat = alive_.load(); beat && monotonic_s() - touched >= kAliveEveryS) {
      beat->touch();
      touched = monotonic_s();
    }
    char buf[16];
    bool quit = false;
    while (true) {
      ssize_t got = ::read(wake_[0], buf, sizeof buf);
      if (got <= 0) break;
      for (ssize_t i = 0; i < got; ++i) quit |= buf[i] == 'q';
    }
    if (const int sig = g_signal; sig != 0) {
      if (quit) return;  // the destructor exits with the signal's status
      stopped_s_ = epoch_s();
      stop("rank " + std::to_string(rank_) + ": stopped by " + (sig == SIGTERM ? "SIGTERM" : "SIGINT") + " " +
               where(/*stuck=*/false) +
               (waiting_in_.load() ? " (the launcher ends every rank once one has exited)" : ""),
           128 + sig);
    }
    if (quit) return;
    const double limit = timeout_s_ + (rank_ == 0 ? kRootGraceS : 0.0);
    if (timeout_s_ > 0 && armed_.load() && monotonic_s() - last_.load() > limit) {
      stopped_s_ = epoch_s();  // before the stack is taken: the main thread may move on meanwhile
      char head[96];
      std::snprintf(head, sizeof head, "rank %d: no progress for %.0f s (dist.timeout_s) ", rank_, timeout_s_);
      std::string frames;
      const std::string top = main_stack(&frames);
      std::fprintf(stderr, "sweep-train: rank %d: its last collectives, oldest first:\n%s", rank_, ring_text().c_str());
      if (!frames.empty())
        std::fprintf(stderr, "sweep-train: rank %d: stack of its main thread:\n%s", rank_, frames.c_str());
      const std::string why = head + where() + (top.empty() ? "" : "; stack: " + top);
      if (rank_ != 0) leave_note(why);
      stop(why, 4);
    }
  }
}

StartupGuard::StartupGuard(double timeout_s) {
  if (timeout_s <= 0) return;
  thread_ = std::thread([this, timeout_s] {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] { return done_; })) return;
    // No communicator yet, so no rank() either: the launcher's name for it.
    const char* rank = nullptr;
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
      if ((rank = std::getenv(v)) != nullptr) break;
    std::fprintf(stderr,
                 "sweep-train: rank %s: no progress for %.0f s (dist.timeout_s, at least 60 s for start-up) while the "
                 "ranks connect to each other (MPI start-up): they cannot reach each other; exiting (4)\n",
                 rank ? rank : "?", timeout_s);
    std::fflush(stderr);
    std::_Exit(4);
  });
}

void StartupGuard::done() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace sweep
