// What test files here share instead of each keeping a copy: EXPECT_CONTAINS and
// reading a whole file.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>
#include <fstream>
#include <iterator>
#include <string>

/// Expects `needle` in `hay`, and prints `hay` when it is not there.
#define EXPECT_CONTAINS(hay, needle) EXPECT_NE(std::string(hay).find(needle), std::string::npos) << "in: " << (hay)

namespace sweep_test {

/// The whole file, byte for byte; "" when it cannot be read.
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
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
