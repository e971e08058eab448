// sweep-confine: runs a grid's program (and everything it starts) unable to write outside
// the places it is given, and unable to signal any process outside its own tree, with the
// kernel's Landlock LSM; reading is not restricted. A run's program writes its run
// directory; without this, a program that writes elsewhere (another run's directory, the
// sweep's files, the user's) or stops its driver would do so unnoticed.
//
//   sweep-confine --run DIR [--scratch DIR]... [--devices] [--write DIR]... -- COMMAND [ARGS...]
//
// --run DIR      the run directory: granted. It must be a real directory (never a link).
// --scratch DIR  a place every program may use (/tmp, /var/tmp): granted, unless it holds
//                the run directory (then it would grant the run's neighbours: the sweep's
//                files, other runs). Missing ones are skipped.
// --devices      every entry of /dev but /dev itself (a program can open /dev/null, a
//                terminal, a GPU, /dev/shm; it cannot make files in /dev), block devices
//                left out; a directory of /dev that holds the run directory (a sweep under
//                /dev/shm) is withheld like a scratch place.
// --write DIR    a place the grid grants (program.writes): granted as it is.
//
// Whether a place holds the run directory is decided on the files themselves (device and
// inode of the run directory and of each directory above it), so neither a link to the
// sweep nor a path with ".." in it can grant it by another name. When a place is withheld,
// TMPDIR is RUN/tmp, made here if missing and refused if anything but a real directory is
// in its place. SWEEP_CONFINEMENT tells the program (and its record) what held:
// "landlock-abi-N: writes[, signals]", or "none: ..." where the kernel has no Landlock
// (then the command runs unconfined after one line on stderr saying so).
//
// A write elsewhere fails in the program with EACCES ("Permission denied"), a signal to a
// process outside with EPERM, and the run fails with the program's own last line. Exits
// 127 when the command cannot be started, 2 on bad usage or a place that cannot be
// opened; otherwise it becomes the command (exec).
#include <dirent.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

// The ruleset attribute as the kernel reads it, with the fields of later ABIs than the
// system header may know: handled_access_net (ABI 4) and scoped (ABI 6).
struct RulesetAttr {
  uint64_t handled_access_fs = 0;
  uint64_t handled_access_net = 0;
  uint64_t scoped = 0;
};
constexpr uint64_t kScopeSignal = 1ULL << 1;  // LANDLOCK_SCOPE_SIGNAL (ABI 6)

// What "writing" means for Landlock, by ABI version: files written or truncated, and
// every entry made or removed in a directory (a rename is a remove and a make).
uint64_t write_rights(int abi) {
  uint64_t r = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
               LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
               LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
               LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) r |= 1ULL << 13;  // LANDLOCK_ACCESS_FS_REFER
  if (abi >= 3) r |= 1ULL << 14;  // LANDLOCK_ACCESS_FS_TRUNCATE
  return r;
}
constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_WRITE_FILE | (1ULL << 14);

int usage(const std::string& why) {
  std::fprintf(stderr,
               "sweep-confine: %s\nusage: sweep-confine --run DIR [--scratch DIR]... [--devices] [--write DIR]... -- "
               "COMMAND [ARGS...]\n",
               why.c_str());
  return 2;
}

struct FileId {
  dev_t dev;
  ino_t ino;
  bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
};

/// The run directory and every directory above it, up to the root, as files.
std::vector<FileId> run_and_above(int run_fd) {
  std::vector<FileId> ids;
  int fd = ::dup(run_fd);
  struct stat st {};
  while (fd >= 0 && ::fstat(fd, &st) == 0) {
    const FileId id{st.st_dev, st.st_ino};
    if (!ids.empty() && ids.back() == id) break;  // the root is its own parent
    ids.push_back(id);
    const int up = ::openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    fd = up;
  }
  if (fd >= 0) ::close(fd);
  return ids;
}

class Grants {
 public:
  Grants(int ruleset, uint64_t rights, std::vector<FileId> run_and_above)
      : ruleset_(ruleset), rights_(rights), above_(std::move(run_and_above)) {}

  /// Grants the file open at `fd` (closed here): a directory with every write right, a
  /// file with those that apply to files. false (withheld) when it holds the run
  /// directory and `may_hold` is false.
  bool add(int fd, const std::string& name, bool may_hold) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return ::close(fd), false;
    if (!may_hold && S_ISDIR(st.st_mode)) {
      for (const FileId& id : above_)
        if (id == FileId{st.st_dev, st.st_ino}) {
          withheld_.push_back(name);
          return ::close(fd), false;
        }
    }
    if (ruleset_ < 0) return ::close(fd), true;  // no Landlock: nothing to add to
    landlock_path_beneath_attr beneath{};
    beneath.parent_fd = fd;
    beneath.allowed_access = S_ISDIR(st.st_mode) ? rights_ : rights_ & kFileRights;
    const bool ok = syscall(SYS_landlock_add_rule, ruleset_, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) == 0;
    const int err = errno;
    ::close(fd);
    if (!ok) {
      std::fprintf(stderr, "sweep-confine: %s: cannot grant it: %s\n", name.c_str(), std::strerror(err));
      std::exit(2);
    }
    return true;
  }

  const std::vector<std::string>& withheld() const { return withheld_; }

 private:
  int ruleset_;
  uint64_t rights_;
  std::vector<FileId> above_;
  std::vector<std::string> withheld_;
};

/// Every entry of /dev, granted (or withheld) one by one; block devices are left out.
void grant_devices(Grants& g) {
  const int dev = ::open("/dev", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = dev < 0 ? nullptr : ::fdopendir(dev);
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dev, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    // A link (/dev/fd, /dev/stdout) leads to a file whose own grant decides; a block
    // device is a disk, which no training program writes raw.
    if (S_ISLNK(st.st_mode) || S_ISBLK(st.st_mode)) continue;
    const int fd = ::openat(dev, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) g.add(fd, "/dev/" + name, false);
  }
  ::closedir(d);
}

}  // namespace

int main(int argc, char** argv) {
  std::string run;
  std::vector<std::string> scratch, writes;
  bool devices = false;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--run" && i + 1 < argc) {
      run = argv[++i];
    } else if (a == "--scratch" && i + 1 < argc) {
      scratch.emplace_back(argv[++i]);
    } else if (a == "--write" && i + 1 < argc) {
      writes.emplace_back(argv[++i]);
    } else if (a == "--devices") {
      devices = true;
    } else if (a == "--") {
      ++i;
      break;
    } else {
      return usage("unknown argument '" + a + "'");
    }
  }
  if (run.empty()) return usage("no --run directory");
  if (i >= argc) return usage("no command");
  // The run directory itself, never a link planted in its place.
  const int run_fd = ::open(run.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (run_fd < 0) {
    std::fprintf(
        stderr, "sweep-confine: --run %s: %s\n", run.c_str(),
        errno == ENOTDIR || errno == ELOOP ? "not a directory (a link or a file in its place)" : std::strerror(errno));
    return 2;
  }
  const long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  const int no_landlock = errno;
  RulesetAttr attr;
  int ruleset = -1;
  if (abi >= 1) {
    attr.handled_access_fs = write_rights(int(abi));
    if (abi >= 6) attr.scoped = kScopeSignal;
    // The kernel takes the prefix of the attribute its ABI knows.
    const size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
    ruleset = int(syscall(SYS_landlock_create_ruleset, &attr, size, 0));
    if (ruleset < 0) {
      std::fprintf(stderr, "sweep-confine: landlock_create_ruleset: %s\n", std::strerror(errno));
      return 2;
    }
  }
  Grants grants(ruleset, attr.handled_access_fs, run_and_above(run_fd));
  grants.add(::dup(run_fd), run, true);
  for (const std::string& s : scratch) {
    const int fd = ::open(s.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // an optional place (/var/tmp) this machine lacks
      std::fprintf(stderr, "sweep-confine: --scratch %s: %s\n", s.c_str(), std::strerror(errno));
      return 2;
    }
    grants.add(fd, s, false);
  }
  if (devices) grant_devices(grants);
  for (const std::string& w : writes) {
    const int fd = ::open(w.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) {
      std::fprintf(stderr, "sweep-confine: --write %s: %s\n", w.c_str(), std::strerror(errno));
      return 2;
    }
    grants.add(fd, w, true);
  }
  if (!grants.withheld().empty()) {
    // A temporary directory of the run's own, made here and never a link planted there.
    if (::mkdirat(run_fd, "tmp", 0700) != 0 && errno != EEXIST) {
      std::fprintf(stderr, "sweep-confine: %s/tmp: %s\n", run.c_str(), std::strerror(errno));
      return 2;
    }
    const int tmp = ::openat(run_fd, "tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tmp < 0) {
      std::fprintf(stderr, "sweep-confine: %s/tmp: %s; remove it, then run again\n", run.c_str(),
                   errno == ENOTDIR || errno == ELOOP ? "not a directory (a link or a file in its place)"
                                                      : std::strerror(errno));
      return 2;
    }
    ::close(tmp);
    ::setenv("TMPDIR", (run + "/tmp").c_str(), 1);
  }
  ::close(run_fd);
  std::string level;
  if (ruleset < 0) {
    level = "none: this kernel has no Landlock";
    std::fprintf(stderr, "sweep-confine: this kernel has no Landlock (%s): writes are not confined\n",
                 std::strerror(no_landlock));
  } else {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
      std::fprintf(stderr, "sweep-confine: cannot confine the program: %s\n", std::strerror(errno));
      return 2;
    }
    ::close(ruleset);
    level = "landlock-abi-" + std::to_string(abi) + ": writes" + (attr.scoped & kScopeSignal ? ", signals" : "");
  }
  ::setenv("SWEEP_CONFINEMENT", level.c_str(), 1);
  ::execvp(argv[i], argv + i);
  std::fprintf(stderr, "sweep-confine: cannot start %s: %s\n", argv[i], std::strerror(errno));
  return 127;
}
