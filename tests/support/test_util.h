// What test files here share instead of each keeping a copy: EXPECT_CONTAINS, reading and
// writing whole files, listing a directory, the message a call throws, and running a
// check that may block in a child. The standard library and gtest only, so any test can
// include it.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <utility>

/// Expects `needle` in `hay`, and prints `hay` when it is not there.
#define EXPECT_CONTAINS(hay, needle) EXPECT_NE(std::string(hay).find(needle), std::string::npos) << "in: " << (hay)

namespace sweep_test {

/// The whole file, byte for byte; "" when it cannot be read. A read that fails midway
/// (a /proc file of a process that exits meanwhile: ESRCH, which libstdc++'s filebuf throws
/// as ios_base::failure) is "" too, never an exception in the test's body.
inline std::string read_file(const std::filesystem::path& p) {
  try {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  } catch (const std::exception&) {
    return "";
  }
}

/// Writes `text` to `p`, replacing what was there; returns the path as a string.
inline std::string write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

/// Every path below `dir`, relative to it: what a command that must create nothing has to
/// leave as it found it.
inline std::set<std::string> listing(const std::filesystem::path& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    names.insert(std::filesystem::relative(e.path(), dir).string());
  return names;
}

/// The message of the `Error` that `call()` throws; `none` when it returns. Any other
/// exception goes on to the test.
template <class Error, class Call>
std::string thrown_message(Call&& call, const std::string& none = "") {
  try {
    std::forward<Call>(call)();
  } catch (const Error& e) {
    return e.what();
  }
  return none;
}

/// How a check run by passes_in_child went.
enum class ChildCheck { passed, failed, timed_out };

/// Runs `check` in a forked child and waits up to `seconds` for it: for code that may
/// block forever (a FIFO opened for reading, a parser that loops), which would otherwise
/// hang the test itself. The child is killed when it runs out of time.
inline ChildCheck passes_in_child(const std::function<bool()>& check, double seconds) {
  const pid_t pid = ::fork();
  if (pid < 0) return ChildCheck::failed;
  if (pid == 0) ::_exit(check() ? 0 : 1);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return ChildCheck::timed_out;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? ChildCheck::passed : ChildCheck::failed;
}

}  // namespace sweep_test
