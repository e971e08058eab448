#include "record_parse.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

#include "monotonic.h"     // monotonic_s
#include "record.h"        // Record, RecordError, set_record_parse_hook
#include "record_cache.h"  // encode_record, decode_record

namespace sweep {
namespace {

/// The helper was killed (SIGKILL: from outside, or the OOM killer) without an answer:
/// the file may not be why.
struct HelperKilled : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Record parse_in_helper(const std::string& path, Record (*parse)(const std::string&));

/// The helper: its pid and our end of the socket pair. One per process, used in turns.
struct Helper {
  pid_t pid = -1;
  int fd = -1;
};
std::mutex g_mu;
Helper g_helper;
std::atomic<double> g_base_s{kRecordParseBaseS};

bool send_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    const ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w, n -= size_t(w);
  }
  return true;
}

/// The resident memory of process `pid` in bytes; 0 when it cannot be read.
uint64_t resident_bytes(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/statm", int(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  unsigned long long size = 0, resident = 0;
  if (std::sscanf(buf, "%llu %llu", &size, &resident) != 2) return 0;
  return uint64_t(resident) * uint64_t(::sysconf(_SC_PAGESIZE));
}

/// Why recv_all gave up: the stream ended, the deadline passed, or the helper (`watch`)
/// took more memory than kRecordParseMemory.
enum class RecvEnd { ok, closed, late, too_big };

/// Reads exactly `n` bytes, waiting until `deadline` (monotonic_s seconds; 0 = no
/// limit). With `watch` > 0, that process's resident memory is looked at every 100 ms
/// while it is waited for: the helper's own data limit cannot hold under the sanitizers,
/// whose shadow memory counts against it, so the reader watches it too.
RecvEnd recv_all(int fd, void* p, size_t n, double deadline, pid_t watch = 0) {
  char* c = static_cast<char*>(p);
  while (n) {
    if (deadline > 0) {
      const double left = deadline - monotonic_s();
      if (left <= 0) return RecvEnd::late;
      struct pollfd pfd = {fd, POLLIN, 0};
      const int r = ::poll(&pfd, 1, std::min(int(left * 1000) + 1, 100));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return RecvEnd::closed;
      if (r == 0) {
        if (watch > 0 && resident_bytes(watch) > kRecordParseMemory) return RecvEnd::too_big;
        continue;
      }
    }
    const ssize_t got = ::recv(fd, c, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return RecvEnd::closed;
    c += got, n -= size_t(got);
  }
  return RecvEnd::ok;
}

/// The helper's loop: a request is a path (u64 length, bytes); an answer is 'O' and the
/// encoded record, or 'E' and a message (u64 length, bytes). Ends at end of stream.
[[noreturn]] void serve(int fd, Record (*parse)(const std::string&)) {
  while (true) {
    uint64_t n = 0;
    if (recv_all(fd, &n, sizeof n, 0) != RecvEnd::ok || n > (uint64_t(1) << 20)) ::_exit(0);
    std::string path(n, '\0');
    if (recv_all(fd, path.data(), n, 0) != RecvEnd::ok) ::_exit(0);
    char kind = 'O';
    std::string payload;
    try {
      payload = encode_record(parse(path));
    } catch (const RecordError& e) {
      kind = 'E', payload = e.what();
    } catch (const std::bad_alloc&) {
      kind = 'E', payload = path + ": reading it needs more memory than there is; the record is damaged";
    } catch (const std::exception& e) {
      kind = 'E', payload = path + ": " + e.what();
    }
    const uint64_t len = payload.size();
    if (!send_all(fd, &kind, 1) || !send_all(fd, &len, sizeof len) || !send_all(fd, payload.data(), payload.size()))
      ::_exit(0);
  }
}

void stop_helper() {
  if (g_helper.fd >= 0) ::close(g_helper.fd);
  if (g_helper.pid > 0) {
    ::kill(g_helper.pid, SIGKILL);
    while (::waitpid(g_helper.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  g_helper = Helper{};
}

/// How the helper ended, in words ("killed by signal 11 (Segmentation fault)"); it is
/// reaped. Waits for it a little: it is dying or dead when this is asked.
std::string helper_end(int* signal_number) {
  int status = 0;
  *signal_number = 0;
  pid_t r = 0;
  for (int i = 0; i < 200 && (r = ::waitpid(g_helper.pid, &status, WNOHANG)) == 0; ++i) {
    struct timespec ts = {0, 10L * 1000 * 1000};
    ::nanosleep(&ts, nullptr);
  }
  std::string how = "it ended";
  if (r == g_helper.pid) {
    if (WIFSIGNALED(status)) *signal_number = WTERMSIG(status);
    if (WIFSIGNALED(status))
      how = "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    else if (WIFEXITED(status))
      how = "exit code " + std::to_string(WEXITSTATUS(status));
    g_helper.pid = -1;
  }
  stop_helper();
  return how;
}

/// In a freshly forked child: every descriptor but `fd` closed, 0-2 on /dev/null.
void keep_only(int fd) {
  int fds[1024];
  size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    const int own = ::dirfd(d);
    while (const dirent* e = ::readdir(d)) {
      const int f = std::atoi(e->d_name);
      if ((f > 0 || e->d_name[0] == '0') && f != fd && f != own && n < 1024) fds[n++] = f;
    }
    ::closedir(d);
  }
  for (size_t i = 0; i < n; ++i) ::close(fds[i]);
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int std_fd = 0; std_fd < 3; ++std_fd)
    if (null >= 0 && std_fd != fd) ::dup2(null, std_fd);
  if (null > 2) ::close(null);
}

bool start_helper(Record (*parse)(const std::string&)) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(sv[0]), ::close(sv[1]);
    return false;
  }
  if (pid == 0) {
    // It ends when the reader does: the reader's end of the socket closes with it (and no
    // command the reader starts holds it: close-on-exec). Not PR_SET_PDEATHSIG, which
    // fires when the thread that forked ends.
    if (::getppid() != parent) ::_exit(0);
    // It keeps nothing of the reader's open but its socket: a pipe end the reader waits to
    // see closed (a child's output), a lock, a terminal.
    keep_only(sv[1]);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    // A file that makes HDF5 allocate what it says (a string's length from a flipped
    // heap object) fails an allocation here instead of taking the machine's memory.
    // (Not under the sanitizers, whose shadow memory is counted too.)
    struct rlimit data = {kRecordParseMemory, kRecordParseMemory};
    ::setrlimit(RLIMIT_DATA, &data);
#endif
    serve(sv[1], parse);
  }
  ::close(sv[1]);
  g_helper.pid = pid, g_helper.fd = sv[0];
  return true;
}

}  // namespace

void isolate_record_parsing(bool on) { set_record_parse_hook(on ? parse_record_isolated : nullptr); }

void set_record_parse_base_s(double seconds) { g_base_s = seconds; }

Record parse_record_isolated(const std::string& path, Record (*parse)(const std::string&)) {
  std::lock_guard<std::mutex> lock(g_mu);
  // A helper killed from outside is not the file's fault: such a file is damaged only when
  // a fresh helper dies of it too. One that crashed (SIGSEGV, SIGBUS, an abort) did so on
  // the file.
  for (int attempt = 1;; ++attempt) {
    try {
      return parse_in_helper(path, parse);
    } catch (const HelperKilled& e) {
      if (attempt == 2) throw RecordError(e.what());
    }
  }
}

namespace {

[[noreturn]] void died(const std::string& path, const std::string& how, int sig) {
  const std::string what = path + ": reading it crashed the HDF5 library (" + how + "); the record is damaged";
  if (sig == SIGKILL) throw HelperKilled(what);
  throw RecordError(what);
}

Record parse_in_helper(const std::string& path, Record (*parse)(const std::string&)) {
  if (g_helper.fd < 0 && !start_helper(parse)) return parse(path);  // no fork to be had: as before
  const uint64_t n = path.size();
  struct stat st;
  const double bytes = ::stat(path.c_str(), &st) == 0 ? double(st.st_size) : 0;
  const double limit_s = g_base_s + bytes / kRecordParseBytesPerS;
  const double deadline = monotonic_s() + limit_s;
  char kind = 0;
  uint64_t len = 0;
  const bool sent = send_all(g_helper.fd, &n, sizeof n) && send_all(g_helper.fd, path.data(), path.size());
  RecvEnd end = sent ? recv_all(g_helper.fd, &kind, 1, deadline, g_helper.pid) : RecvEnd::closed;
  if (end == RecvEnd::ok) end = recv_all(g_helper.fd, &len, sizeof len, deadline, g_helper.pid);
  std::string payload;
  if (end == RecvEnd::ok && len > (uint64_t(1) << 36)) end = RecvEnd::closed;  // not an answer of ours
  if (end == RecvEnd::ok) {
    payload.resize(len);
    end = recv_all(g_helper.fd, payload.data(), len, deadline, g_helper.pid);
  }
  if (end != RecvEnd::ok) {
    if (end != RecvEnd::closed) ::kill(g_helper.pid, SIGKILL);
    int sig = 0;
    const std::string how = helper_end(&sig);
    if (end == RecvEnd::late)
      throw RecordError(path + ": reading it did not end within " + std::to_string(int(limit_s)) +
                        " s; the record is damaged");
    if (end == RecvEnd::too_big)
      throw RecordError(path + ": reading it took more than " + std::to_string(kRecordParseMemory >> 30) +
                        " GiB of memory; the record is damaged");
    died(path, how, sig);
  }
  if (kind == 'E') throw RecordError(payload);
  Record r;
  if (kind != 'O' || !decode_record(payload.data(), payload.size(), &r)) {
    stop_helper();
    throw RecordError(path + ": the record reader's answer did not decode; the record is damaged");
  }
  r.path = path;
  return r;
}

}  // namespace

}  // namespace sweep
