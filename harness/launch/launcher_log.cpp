#include "launcher_log.h"

#include <regex>

#include "run_files.h"  // read_file_tail

namespace sweep {

std::string latest_attempt_output(const std::string& log_path) {
  const std::string text = read_file_tail(log_path, size_t{64} * 1024);  // regular files only, never blocking
  const auto at = text.rfind("=== sweep: attempt ");
  return at == std::string::npos ? text : text.substr(at);
}

std::string launcher_finding(const std::string& text) {
  std::smatch m;
  // First the root cause of a job that hangs or dies across hosts: a transport that does
  // not connect them (btl_tcp_if_include naming an interface that does not reach the
  // other host, a firewall).
  static const std::regex tcp(
      R"(failed to TCP connect to a peer MPI process[\s\S]*?Local host:\s*(\S+)[\s\S]*?Message:\s*([^\n]+))");
  if (std::regex_search(text, m, tcp))
    return "the ranks cannot reach each other: on " + m[1].str() + ", " + m[2].str() +
           " (check the network between the hosts and Open MPI's btl_tcp_if_include)";
  static const std::regex stranger(
      R"(accepted a TCP connection from what appears to be[\s\S]*?cannot find a corresponding process[\s\S]*?Local host:\s*(\S+))");
  if (std::regex_search(text, m, stranger))
    return "the ranks cannot reach each other: on " + m[1].str() +
           ", a connection came from a process that is not its peer (each host reached itself: an interface such as "
           "lo in Open MPI's btl_tcp_if_include)";
  if (text.find("unable to reach each other for MPI communications") != std::string::npos)
    return "the ranks cannot reach each other over the transports Open MPI may use (its btl list)";
  // Open MPI 4: a rank that died on a signal.
  static const std::regex ompi_signal(
      R"(process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)( \([^)]*\))?)");
  if (std::regex_search(text, m, ompi_signal))
    return "rank " + m[1].str() + " exited on signal " + m[2].str() + m[3].str();
  // Open MPI 4: the first rank to exit non-zero ("Process name: [[job,1],rank]").
  static const std::regex ompi_exit(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\]\s*Exit code:\s*(\d+))");
  if (std::regex_search(text, m, ompi_exit)) return "rank " + m[1].str() + " exited with code " + m[2].str() + " first";
  // A host the launcher could not start on: a name that does not resolve, a host it cannot
  // log in to or that cannot connect back (Open MPI names no host; ssh names one).
  static const std::regex unresolved(R"(Could not resolve hostname ([^:\s]+))");
  if (std::regex_search(text, m, unresolved))
    return "host " + m[1].str() + " does not resolve (a name in launch.hosts or the hostfile)";
  if (text.find("unable to reliably start one or more daemons") != std::string::npos &&
      text.find("peer process has unexpectedly disconnected") == std::string::npos)
    return "mpirun could not start on every host (a host name that does not resolve, a host it cannot log in to, "
           "or one that cannot connect back to this machine: see logs/launcher.log)";
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
