#include "run_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "checksum.h"  // run_id_of_config: XXH3 of a text

namespace sweep {
namespace {

const char* kLockName = "run.lock";

std::string kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a regular file";
}

std::string read_fd(int fd) {
  std::string s;
  char buf[256];
  ssize_t n;
  off_t off = 0;
  while ((n = ::pread(fd, buf, sizeof buf, off)) > 0) s.append(buf, size_t(n)), off += n;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

/// Names sweep writes in a run directory, and whether each is a directory.
bool is_run_entry(const std::string& name, bool* dir) {
  *dir = name == "checkpoints" || name == "logs" || name == "reproduce" || name == "tmp";
  if (*dir) return true;
  if (name == "record.h5" || name == "record.h5.partial" || name == "record.h5.reserve" || name == kLockName ||
      name == "state" || name == "config.yaml")
    return true;
  // A rank's note (rank<R>.failure) and its heartbeat (rank<R>.heartbeat).
  for (const std::string suffix : {".failure", ".heartbeat"})
    if (name.rfind("rank", 0) == 0 && name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return true;
  return false;
}

}  // namespace

std::string regular_file_problem(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (S_ISREG(st.st_mode)) return "";
  return "is " + kind_of(st.st_mode) + ", not a regular file";
}

std::string read_file_tail(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return "";
  std::string text;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    const off_t size = st.st_size, from = size > off_t(max_bytes) ? size - off_t(max_bytes) : 0;
    text.resize(size_t(size - from));
    size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::pread(fd, text.data() + got, text.size() - got, from + off_t(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // shorter than fstat said (truncated meanwhile): what was there
      got += size_t(n);
    }
    text.resize(got);
  }
  ::close(fd);
  return text;
}

namespace {

/// The first entry of the log directory `dir` that is not a regular file (or, where
/// `hosts` allows, a directory of regular files), described; "" when there is none.
std::string unsafe_log_entry(const std::string& dir, bool hosts) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return "";
  std::string bad;
  struct stat st;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string p = dir + "/" + name;
    if (::lstat(p.c_str(), &st) != 0 || S_ISREG(st.st_mode)) continue;
    if (hosts && S_ISDIR(st.st_mode)) {
      if (!(bad = unsafe_log_entry(p, false)).empty()) break;
      continue;
    }
    bad = p + " is " + kind_of(st.st_mode) +
          "; sweep appends only to regular files it made there (remove it, then run again)";
    break;
  }
  ::closedir(d);
  return bad;
}

}  // namespace

void check_real_directory(const std::string& dir) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw RunRefused(dir + " is " + kind_of(st.st_mode) +
                     ", not a directory of its own; refusing to write through it (remove it, then run again)");
}

void check_run_entries(const std::string& run_dir) {
  check_real_directory(run_dir);
  struct stat st;
  DIR* d = ::opendir(run_dir.c_str());
  if (!d) return;  // not there yet
  std::string bad;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    bool want_dir = false;
    if (!is_run_entry(name, &want_dir)) continue;
    const std::string p = run_dir + "/" + name;
    if (::lstat(p.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode) || (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))) {
      bad = p + " is " + kind_of(st.st_mode) +
            "; sweep writes only regular files and directories it made there, "
            "never through links (remove it, then run again)";
      break;
    }
  }
  ::closedir(d);
  // The per-rank logs are appended to by the launcher and sweep-rank: same rule, in logs/
  // and in the per-host directories logs/<host>/ of a run that spans hosts.
  if (bad.empty()) bad = unsafe_log_entry(run_dir + "/logs", true);
  if (!bad.empty()) throw RunRefused(bad);
}

std::string rank_log_path(const std::string& run_dir, int rank) {
  const std::string name = "rank" + std::to_string(rank) + ".log";
  std::string flat = run_dir + "/logs/" + name;
  struct stat st;
  if (::lstat(flat.c_str(), &st) == 0) return flat;
  std::vector<std::string> found;
  if (DIR* d = ::opendir((run_dir + "/logs").c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string host = e->d_name;
      const std::string p = run_dir + "/logs/" + host + "/" + name;
      if (host != "." && host != ".." && ::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) found.push_back(p);
    }
    ::closedir(d);
  }
  std::sort(found.begin(), found.end());
  return found.empty() ? flat : found.front();
}

int take_lock_file(const std::string& path, std::string* holder) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) {
    if (errno == ELOOP)
      throw RunRefused(path + " is a symbolic link; refusing to write through it (remove it, then run again)");
    throw RecordError(path + ": cannot open the lock file: " + std::strerror(errno));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw RunRefused(path + " is not a regular file; refusing to use it as a lock (remove it, then run again)");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    *holder = read_fd(fd);
    if (holder->empty()) *holder = "unknown process";
    ::close(fd);
    if (err != EWOULDBLOCK) throw RecordError(path + ": cannot lock: " + std::strerror(err));
    return -1;
  }
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  const std::string who = "pid " + std::to_string(::getpid()) + " on " + host + ", since " + utc_now() + "\n";
  if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, who.data(), who.size(), 0) < 0) {
    // The lock holds without the note; only the message to a second taker gets vaguer.
  }
  return fd;
}

std::string lock_file_holder(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return "";
  std::string who;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    who = read_fd(fd);
    if (who.empty()) who = "unknown process";
  }
  ::close(fd);
  return who;
}

RunLock::RunLock(const std::string& run_dir) {
  if (::mkdir(run_dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw RecordError(run_dir + ": cannot create the run directory: " + std::strerror(errno));
  check_run_entries(run_dir);
  std::string who;
  fd_ = take_lock_file(run_dir + "/" + kLockName, &who);
  if (fd_ < 0)
    throw RunBusy(run_dir + ": another process is writing this run (" + who +
                  "); a run directory has one writer at a time");
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

std::string RunLock::holder(const std::string& run_dir) { return lock_file_holder(run_dir + "/" + kLockName); }

int create_exclusive(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw RecordError(path + ": cannot create: " + std::strerror(errno));
  return fd;
}

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw RecordError(path + ": write failed: " + std::strerror(w < 0 ? errno : ENOSPC));
    p += w, n -= size_t(w);
  }
}

void sync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw RecordError(path + ": cannot open to sync: " + std::strerror(errno));
  const int rc = ::fsync(fd), err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) throw RecordError(path + ": sync failed: " + std::strerror(err));
}

std::map<std::string, std::string> read_state_fields(const std::string& run_dir) {
  std::map<std::string, std::string> out;
  // A small regular file; anything else (a link, a FIFO, a huge file) says nothing.
  const std::string path = run_dir + "/state";
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 16)) return out;
  std::istringstream in(read_file_tail(path, 1 << 16));  // swapped for a FIFO meanwhile: empty
  std::string line;
  if (!std::getline(in, line) || line != kStateMagicLine) return out;
  while (std::getline(in, line)) {
    const size_t colon = line.find(": ");
    if (colon != std::string::npos) out[line.substr(0, colon)] = line.substr(colon + 2);
  }
  return out;
}

std::string accepted_record_path(const std::string& run_dir) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(run_dir).lexically_normal();
  const fs::path run = dir.filename().empty() ? dir.parent_path() : dir;
  if (run.parent_path().filename() != "runs" || run.filename().empty()) return "";
  return (run.parent_path().parent_path() / kAcceptedDir / run.filename()).string();
}

AcceptedRecord read_accepted_record(const std::string& run_dir) {
  AcceptedRecord a;
  const std::string path = accepted_record_path(run_dir);
  if (path.empty()) return a;
  std::istringstream in(read_file_tail(path, 1 << 12));
  std::string line;
  if (!std::getline(in, line) || line != kAcceptedMagicLine) return a;
  while (std::getline(in, line)) {
    if (line.rfind("digest: ", 0) == 0) a.digest = line.substr(8);
    if (line.rfind("bytes: ", 0) == 0) a.bytes = line.substr(7);
  }
  if (a.digest.empty()) a.bytes.clear();
  return a;
}

std::string file_bytes_hash(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw RecordError(path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw RecordError(path + ": not a regular file");
  }
  std::string h;
  try {
    h = hash_fd(fd, path);
  } catch (const std::runtime_error& e) {
    ::close(fd);
    throw RecordError(e.what());
  }
  ::close(fd);
  return h + " " + std::to_string(st.st_size);
}

std::string hash_fd(int fd, const std::string& path) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::vector<char> buf(size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n > 0) {
      XXH3_64bits_update(state, buf.data(), size_t(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const std::string why = std::strerror(errno);
      XXH3_freeState(state);
      throw std::runtime_error(path + ": cannot read it to hash it (" + why + ")");
    }
  }
  const unsigned long long h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  char text[24];
  std::snprintf(text, sizeof text, "xxh3:%016llx", h);
  return text;
}

void replace_file(const std::string& path, const std::string& text, bool sync) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());  // an earlier try of this process's, or something planted there
  const int fd = create_exclusive(tmp);
  try {
    write_all(fd, text.data(), text.size(), tmp);
    if (sync && ::fsync(fd) != 0) throw RecordError(tmp + ": " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw RecordError(path + ": " + why);
  }
}

void write_accepted_record(const std::string& run_dir, const std::string& digest) {
  namespace fs = std::filesystem;
  const std::string path = accepted_record_path(run_dir);
  if (path.empty()) return;
  std::error_code ec;
  if (digest.empty()) {
    fs::remove(path, ec);
    return;
  }
  const std::string dir = fs::path(path).parent_path().string();
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) throw RecordError(dir + ": " + std::strerror(errno));
  check_real_directory(dir);
  replace_file(path,
               std::string(kAcceptedMagicLine) + "\ndigest: " + digest +
                   "\nbytes: " + file_bytes_hash(run_dir + "/record.h5") + "\n",
               /*sync=*/true);
}

std::string accepted_record_digest(const std::string& run_dir) {
  if (AcceptedRecord a = read_accepted_record(run_dir); !a.digest.empty()) return a.digest;
  const auto fields = read_state_fields(run_dir);
  const auto it = fields.find("digest");
  return it == fields.end() ? "" : it->second;
}

std::string checkpoint_dir(const std::string& run_dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%010lld", static_cast<long long>(step));
  return run_dir + "/checkpoints/" + name;
}

std::vector<std::pair<int64_t, std::string>> complete_checkpoints(const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (fs::directory_iterator it(fs::path(run_dir) / "checkpoints", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("step_", 0) != 0 || !fs::exists(it->path() / "DONE", ec)) continue;
    try {
      out.emplace_back(std::stoll(name.substr(5)), it->path().string());
    } catch (const std::exception&) {
      // Not a step number: not a checkpoint of ours.
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string checkpoint_digest(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir + "/DONE", ec)) return "";
  std::ifstream in(dir + "/" + kCheckpointDigestFile, std::ios::binary);
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return run_id_of_config(text.str());
}

}  // namespace sweep
