// sweep-confine: runs a grid's program (and everything it starts) unable to write outside
// the directories it is given, with the kernel's Landlock LSM; reading is not restricted.
// A run's program writes its run directory; without this, a program that writes
// elsewhere (another run's directory, the sweep's files, the user's) would do so unnoticed.
//
//   sweep-confine [--write DIR]... [--tmp DIR] -- COMMAND [ARGS...]
//
// --tmp DIR: creates DIR (if missing), lets the command write it and sets TMPDIR to it, for
// a command that may not write /tmp.
//
// A write elsewhere fails in the program with EACCES ("Permission denied"), and the run
// fails with the program's own last line. Where the kernel has no Landlock, the command runs
// unconfined after one line on stderr saying so. Exits 127 when the command cannot be
// started, 2 on bad usage or a --write directory that cannot be opened; otherwise it becomes
// the command (exec).
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
#include <vector>

namespace {

// What "writing" means for Landlock, by ABI version: files written or truncated, and
// every entry made or removed in a directory (a rename is a remove and a make).
uint64_t write_rights(int abi) {
  uint64_t r = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
               LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
               LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
               LANDLOCK_ACCESS_FS_MAKE_SYM;
#ifdef LANDLOCK_ACCESS_FS_REFER
  if (abi >= 2) r |= LANDLOCK_ACCESS_FS_REFER;
#endif
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
  if (abi >= 3) r |= LANDLOCK_ACCESS_FS_TRUNCATE;
#endif
  return r;
}

int usage(const char* why) {
  std::fprintf(stderr, "sweep-confine: %s\nusage: sweep-confine [--write DIR]... [--tmp DIR] -- COMMAND [ARGS...]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> dirs;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--write" && i + 1 < argc) {
      dirs.emplace_back(argv[++i]);
    } else if (a == "--tmp" && i + 1 < argc) {
      const std::string tmp = argv[++i];
      if (::mkdir(tmp.c_str(), 0700) != 0 && errno != EEXIST) {
        std::fprintf(stderr, "sweep-confine: --tmp %s: %s\n", tmp.c_str(), std::strerror(errno));
        return 2;
      }
      ::setenv("TMPDIR", tmp.c_str(), 1);
      dirs.push_back(tmp);
    } else if (a == "--") {
      ++i;
      break;
    } else {
      return usage(("unknown argument '" + a + "'").c_str());
    }
  }
  if (i >= argc) return usage("no command");
  const long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) {
    std::fprintf(stderr, "sweep-confine: this kernel has no Landlock (%s): writes are not confined\n",
                 std::strerror(errno));
  } else {
    landlock_ruleset_attr attr{};
    attr.handled_access_fs = write_rights(int(abi));
    const int ruleset = int(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
    if (ruleset < 0) {
      std::fprintf(stderr, "sweep-confine: landlock_create_ruleset: %s\n", std::strerror(errno));
      return 2;
    }
    for (const std::string& d : dirs) {
      landlock_path_beneath_attr beneath{};
      beneath.allowed_access = attr.handled_access_fs;
      beneath.parent_fd = ::open(d.c_str(), O_PATH | O_CLOEXEC);
      if (beneath.parent_fd < 0) {
        if (errno == ENOENT) continue;  // an optional place (/var/tmp) this machine lacks
        std::fprintf(stderr, "sweep-confine: --write %s: %s\n", d.c_str(), std::strerror(errno));
        return 2;
      }
      // A file rather than a directory (/dev/null) gets the rights that apply to files.
      if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) != 0) {
        beneath.allowed_access &= LANDLOCK_ACCESS_FS_WRITE_FILE
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
                                  | (abi >= 3 ? LANDLOCK_ACCESS_FS_TRUNCATE : 0)
#endif
            ;
        if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) != 0) {
          std::fprintf(stderr, "sweep-confine: --write %s: %s\n", d.c_str(), std::strerror(errno));
          return 2;
        }
      }
      ::close(beneath.parent_fd);
    }
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
      std::fprintf(stderr, "sweep-confine: cannot confine the program: %s\n", std::strerror(errno));
      return 2;
    }
    ::close(ruleset);
  }
  ::execvp(argv[i], argv + i);
  std::fprintf(stderr, "sweep-confine: cannot start %s: %s\n", argv[i], std::strerror(errno));
  return 127;
}
