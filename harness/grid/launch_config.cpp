#include "launch_config.h"

#include <algorithm>
#include <charconv>

#include "blas_kernel.h"   // blas_kernel_named
#include "config_error.h"  // ConfigError
#include "text.h"          // printable
#include "yaml_read.h"

namespace sweep {
namespace {

struct ClassName {
  FailureClass c;
  const char* name;
};
const ClassName kClassNames[] = {
    {FailureClass::none, "none"},
    {FailureClass::config, "config"},
    {FailureClass::diverged, "diverged"},
    {FailureClass::crashed, "crashed"},
    {FailureClass::hang, "hang"},
    {FailureClass::timeout, "timeout"},
    {FailureClass::oom, "oom"},
    {FailureClass::node_fail, "node_fail"},
    {FailureClass::preempted, "preempted"},
    {FailureClass::cancelled, "cancelled"},
    {FailureClass::lost, "lost"},
    {FailureClass::interrupted, "interrupted"},
    {FailureClass::desync, "desync"},
};

std::vector<std::string> retryable_names() {
  std::vector<std::string> out;
  for (FailureClass c : retryable_classes()) out.push_back(failure_class_name(c));
  return out;
}

/// `retries: N` (every retryable class) or `retries: {crashed: 2, timeout: 1}`.
std::map<FailureClass, int> parse_retries(const YAML::Node& node, const std::string& source) {
  std::map<FailureClass, int> out;
  const int kMax = 100;
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    int n = -1;
    auto r = std::from_chars(s.data(), s.data() + s.size(), n);
    if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || n < 0 || n > kMax)
      throw ConfigError(yaml_where(source, node) + ": key 'launch.retries': expected an integer in [0, " +
                        std::to_string(kMax) + "] or a mapping of failure class to count, got '" + s + "'");
    for (FailureClass c : retryable_classes()) out[c] = n;
    return out;
  }
  if (!node.IsMap())
    throw ConfigError(yaml_where(source, node) +
                      ": key 'launch.retries': expected a count, or a mapping of failure class to count");
  // Config errors and divergence repeat identically, so retrying them only burns time.
  for (const auto& kv : node) {
    const std::string k = kv.first.Scalar();
    const FailureClass c = failure_class_from(k);
    if (c == FailureClass::config || c == FailureClass::diverged || c == FailureClass::interrupted ||
        c == FailureClass::cancelled || c == FailureClass::desync)
      throw ConfigError(yaml_where(source, kv.first) + ": key 'launch.retries." + k + "': " + k +
                        " runs are never retried (the same run would end the same way)");
  }
  auto names = retryable_names();
  YamlMap m(node, source, "launch.retries", names);
  for (const auto& n : names) out[failure_class_from(n)] = int(m.integer(n, 0, 0, kMax));
  return out;
}

SlurmSpec parse_slurm(const YAML::Node& node, const std::string& source) {
  YamlMap m(node, source, "launch.slurm",
            {"partition", "account", "qos", "constraint", "time", "gpus", "gpus_per_task", "nodes", "mpi", "extra_args",
             "poll_s"});
  SlurmSpec s;
  // Each reaches sbatch as one argv element (--account=VALUE), never through a shell; a
  // name with a blank or a control character is a typo Slurm would only answer later.
  // Empty: Slurm's default.
  const auto name = [&](const char* key, const char* what) {
    std::string v = m.text(key, "");
    if (std::any_of(v.begin(), v.end(), [](unsigned char c) { return c <= ' ' || c == 0x7f; }))
      throw ConfigError(m.at(key) + "expected " + what + " without blanks, got '" + printable(v) + "'");
    return v;
  };
  s.partition = name("partition", "a partition name");
  s.account = name("account", "an account name");
  s.qos = name("qos", "a QOS name");
  s.constraint = name("constraint", "node features such as a100 or 'a100|h100'");
  s.time = m.text("time", "");
  s.gpus = int(m.integer("gpus", 0, 0, 1024));
  s.gpus_per_task = int(m.integer("gpus_per_task", 0, 0, 1024));
  if (s.gpus > 0 && s.gpus_per_task > 0)
    throw ConfigError(m.at("gpus_per_task") +
                      "give GPUs per node (gpus) or per rank (gpus_per_task), not both: Slurm would have to satisfy "
                      "both at once");
  s.nodes = int(m.integer("nodes", s.nodes, 1, 100000));
  s.mpi = m.text("mpi", s.mpi);
  if (s.mpi.empty() || s.mpi.find_first_of(" \t\n") != std::string::npos)
    throw ConfigError(m.at("mpi") + "expected an srun --mpi type such as pmix, pmi2 or none");
  s.extra_args = m.texts("extra_args");
  s.poll_s = m.number("poll_s", s.poll_s, 0.1, 3600);
  return s;
}

ContainerSpec parse_container(const YAML::Node& node, const std::string& source) {
  YamlMap m(node, source, "launch.container", {"runtime", "command", "image", "binds", "gpus", "trainer"});
  ContainerSpec c;
  c.runtime = m.choice("runtime", "", {"apptainer", "singularity", "docker", "podman", "charliecloud"});
  c.command = m.text("command", c.runtime == "charliecloud" ? "ch-run" : c.runtime);
  c.image = m.text("image", "");
  if (c.image.empty()) throw ConfigError(m.where("runtime") + ": key 'launch.container.image': required");
  // The image is a positional of the runtime's argv: one starting with '-' would be read as
  // an option of the runtime's own ("--privileged").
  if (c.image.front() == '-')
    throw ConfigError(m.at("image") + "'" + printable(c.image) + "' starts with '-', which " + c.runtime +
                      " would read as an option of its own; expected an image name or path (write a path as ./" +
                      printable(c.image) + ")");
  c.binds = m.texts("binds");
  for (const auto& b : c.binds)
    if (b.empty() || b.front() == ':' || b.front() == '-')
      throw ConfigError(m.at("binds") + "expected host[:container[:options]] with a host path, got '" + printable(b) +
                        "'");
  // ch-run's -b takes SRC[:DST] only: a bind's options would be silently lost.
  if (c.runtime == "charliecloud")
    for (const auto& b : c.binds)
      if (std::count(b.begin(), b.end(), ':') > 1)
        throw ConfigError(m.at("binds") + "charliecloud binds are host[:container], without options; got '" + b + "'");
  c.gpus = m.boolean("gpus", false);
  // ch-run has no switch for GPUs: the host's driver libraries go into the image once.
  if (c.gpus && c.runtime == "charliecloud")
    throw ConfigError(m.at("gpus") +
                      "charliecloud has no run-time GPU switch: inject the host's NVIDIA libraries into the image "
                      "once (ch-fromhost --nvidia IMAGE) and leave gpus false");
  c.trainer = m.text("trainer", c.trainer);
  return c;
}

}  // namespace

const char* failure_class_name(FailureClass c) {
  for (const auto& n : kClassNames)
    if (n.c == c) return n.name;
  return "none";
}

FailureClass failure_class_from(const std::string& name) {
  for (const auto& n : kClassNames)
    if (name == n.name) return n.c;
  return FailureClass::none;
}

const std::vector<FailureClass>& retryable_classes() {
  static const std::vector<FailureClass> v = {FailureClass::crashed, FailureClass::hang,      FailureClass::timeout,
                                              FailureClass::oom,     FailureClass::node_fail, FailureClass::preempted,
                                              FailureClass::lost};
  return v;
}

int retries_for(const LaunchSpec& l, FailureClass c) {
  auto it = l.retries.find(c);
  return it == l.retries.end() ? 0 : it->second;
}

LaunchSpec parse_launch(const YAML::Node& node, const std::string& source) {
  YamlMap m(node, source, "launch",
            {"launcher", "parallel", "slots", "hosts", "hostfile", "mpi_args", "retries", "timeout_s", "grace_s",
             "device", "trainer", "blas", "slurm", "container", "diagnose"});
  LaunchSpec l;
  l.launcher = m.choice("launcher", l.launcher, {"local", "mpirun", "slurm"});
  l.parallel = int(m.integer("parallel", l.parallel, 1, 100000));
  l.device = m.choice("device", l.device, {"cpu", "cuda"});
  l.trainer = m.text("trainer", "");
  l.blas = m.text("blas", l.blas);
  if (l.blas != "auto" && l.blas != "native") {
    try {
      l.blas = blas_kernel_named(l.blas, "kernel").name;  // OpenBLAS's own spelling
    } catch (const ConfigError& e) {
      throw ConfigError(m.at("blas") + e.what());
    }
  }
  l.slots = int(m.integer("slots", l.slots, 0, 1 << 20));
  l.hosts = m.texts("hosts");
  l.hostfile = m.text("hostfile", "");
  if (m.has("hostfile")) l.hostfile_where = m.where("hostfile");
  if ((!l.hosts.empty() || !l.hostfile.empty()) && l.launcher != "mpirun")
    throw ConfigError(m.at(l.hosts.empty() ? "hostfile" : "hosts") + "only used with launcher: mpirun (launcher is " +
                      l.launcher + ")");
  if (!l.hosts.empty() && !l.hostfile.empty()) throw ConfigError(m.at("hostfile") + "give hosts or hostfile, not both");
  l.mpi_args = m.texts("mpi_args");
  if (m.has("retries")) l.retries = parse_retries(m.node("retries"), source);
  l.timeout_s = m.number("timeout_s", 0, 0, 1e8);
  l.grace_s = m.number("grace_s", l.grace_s, 0, 3600);
  if (m.has("slurm")) {
    if (l.launcher != "slurm")
      throw ConfigError(m.at("slurm") + "only used with launcher: slurm (launcher is " + l.launcher + ")");
    l.slurm = parse_slurm(m.node("slurm"), source);
  }
  if (m.has("container")) l.container = parse_container(m.node("container"), source);
  l.diagnose = m.boolean("diagnose", false);
  if (l.diagnose && l.launcher == "slurm")  // the replays would run where the driver runs
    throw ConfigError(m.at("diagnose") +
                      "only with launcher local or mpirun (launcher is slurm): run `sweep diagnose "
                      "RUN --step S` on a node instead");
  return l;
}

}  // namespace sweep
