#include "launcher_log.h"

#include <fstream>
#include <regex>

namespace sweep {

std::string latest_attempt_output(const std::string& log_path) {
  std::ifstream in(log_path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  constexpr std::streamoff kTail = std::streamoff{64} * 1024;
  const std::streamoff size = in.tellg();
  in.seekg(size > kTail ? size - kTail : 0);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.rfind("=== sweep: attempt ");
  return at == std::string::npos ? text : text.substr(at);
}

std::string launcher_finding(const std::string& text) {
  std::smatch m;
  // Open MPI 4: a rank that died on a signal.
  static const std::regex ompi_signal(
      R"(process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)( \([^)]*\))?)");
  if (std::regex_search(text, m, ompi_signal))
    return "rank " + m[1].str() + " exited on signal " + m[2].str() + m[3].str();
  // Open MPI 4: the first rank to exit non-zero ("Process name: [[job,1],rank]").
  static const std::regex ompi_exit(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\]\s*Exit code:\s*(\d+))");
  if (std::regex_search(text, m, ompi_exit)) return "rank " + m[1].str() + " exited with code " + m[2].str() + " first";
  // srun: "srun: error: node: task 1: Killed" / "... task 1: Exited with exit code 4".
  static const std::regex srun(R"(srun: error: \S+: tasks? (\d+)[^:]*: ([^\n]+))");
  if (std::regex_search(text, m, srun)) return "rank " + m[1].str() + ": " + m[2].str();
  return "";
}

std::string launcher_lost_host(const std::string& text) {
  // A daemon gone: a rank that crashed leaves its daemon, which reports the rank instead.
  const bool daemon_gone = text.find("lost communication with a remote daemon") != std::string::npos ||
                           text.find("unable to reliably start one or more daemons") != std::string::npos;
  if (!daemon_gone) return "";
  std::smatch m;
  static const std::regex daemon(R"(Remote daemon:\s*\S+ on node (\S+))");
  if (std::regex_search(text, m, daemon)) return m[1].str();
  static const std::regex peer(R"(peer process has unexpectedly disconnected[\s\S]*?Peer host:\s*(\S+))");
  if (std::regex_search(text, m, peer)) return m[1].str();
  return "";
}

}  // namespace sweep
