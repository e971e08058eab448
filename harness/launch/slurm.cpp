#include "slurm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>

namespace sweep {
namespace {

/// Quotes `arg`, turning each kRunDirMark into "$dir" (the task's directory at run time),
/// each kRunIdMark into its last component, the run id, and the rendezvous marks into
/// "$master_addr" and "$master_port" (set by the script).
std::string quote_with_dir(const std::string& arg) {
  const std::pair<const std::string*, const char*> marks[] = {{&kRunDirMark, "\"$dir\""},
                                                              {&kRunIdMark, "\"${dir##*/}\""},
                                                              {&kMasterAddrMark, "\"$master_addr\""},
                                                              {&kMasterPortMark, "\"$master_port\""}};
  std::string out;
  size_t start = 0;
  while (true) {
    size_t at = std::string::npos;
    const std::pair<const std::string*, const char*>* which = nullptr;
    for (const auto& m : marks)
      if (const size_t p = arg.find(*m.first, start); p < at) at = p, which = &m;
    std::string piece = arg.substr(start, at == std::string::npos ? std::string::npos : at - start);
    if (!piece.empty() || (at == std::string::npos && out.empty())) out += shell_quote(piece);
    if (at == std::string::npos) break;
    out += which->second;
    start = at + which->first->size();
  }
  return out;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

/// Adds "J_T" for every task of `id`, which is "J_T", "J_[a-b,c%p]" or a plain "J".
void add_ids(const std::string& id, const SlurmTask& state, std::map<std::string, SlurmTask>& out) {
  auto us = id.find('_');
  if (us == std::string::npos) return void(out[id] = state);
  std::string job = id.substr(0, us), rest = id.substr(us + 1);
  if (rest.empty() || rest[0] != '[') return void(out[id] = state);
  rest = rest.substr(1, rest.find_first_of("%]") - 1);
  std::stringstream ss(rest);
  std::string part;
  while (std::getline(ss, part, ',')) {
    auto dash = part.find('-');
    long a = std::atol(part.c_str()), b = dash == std::string::npos ? a : std::atol(part.c_str() + dash + 1);
    for (long t = a; t <= b && t - a < 100000; ++t) out[job + "_" + std::to_string(t)] = state;
  }
}

}  // namespace

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string slurm_minutes(double seconds) {
  return std::to_string((long long)std::max(1.0, std::ceil(seconds / 60.0)));
}

std::string sbatch_script(const SlurmArray& a, const LaunchSpec& spec, const LocalLaunch& local) {
  std::string s = "#!/bin/bash\n";
  s += "# Written by `sweep run` for sweep " + a.sweep_name + ": task i of this job array is run i below.\n";
  s += "# Every value is a single-quoted literal; nothing from the grid is expanded by the shell.\n";
  s += "set -u\n";
  s += "runs=(\n";
  for (const auto& d : a.dirs) s += "  " + shell_quote(d) + "\n";
  s += ")\nresume=(";
  for (size_t i = 0; i < a.resume.size(); ++i) s += std::string(i ? " " : "") + (a.resume[i] ? "1" : "0");
  s += ")\n";
  const bool forks = std::any_of(a.fork_from.begin(), a.fork_from.end(), [](const auto& f) { return !f.empty(); });
  if (forks) {
    s += "forks=(\n";
    for (size_t i = 0; i < a.dirs.size(); ++i)
      s += "  " + shell_quote(i < a.fork_from.size() ? a.fork_from[i] : "") + "\n";
    s += ")\n";
  }
  s += "i=${SLURM_ARRAY_TASK_ID:?not a job array task}\n";
  s += "dir=${runs[$i]}\n";
  s += "args=()\n";
  if (local.program.empty() || local.program.pass_args) {
    s += "if [ \"${resume[$i]}\" = 1 ]; then args+=(--resume); fi\n";
    if (forks) s += "if [ -n \"${forks[$i]}\" ]; then args+=(--fork-from \"${forks[$i]}\"); fi\n";
  }
  s += "exec >>\"$dir/logs/launcher.log\" 2>&1\n";
  s += "echo \"=== sweep: slurm job ${SLURM_ARRAY_JOB_ID:-?}_$i on $(hostname) (nodes ${SLURM_JOB_NODELIST:-?}) at "
       "$(date -u +%FT%TZ) ===\"\n";
  s += "rm -f \"$dir/slurm-exit\"\n";
  // --kill-on-bad-exit: one rank dying ends its peers instead of leaving them in a collective.
  std::vector<std::string> srun = {"srun", "--mpi=" + spec.slurm.mpi, "-n", std::to_string(a.world),
                                   "--kill-on-bad-exit=1"};
  LocalLaunch l = local;
  l.threads = a.threads;  // one array per (world size, threads)
  l.sweep_id = a.sweep_name;
  if (!l.program.empty()) {
    // torch.distributed's rendezvous: the job's first node, and a port from the job id
    // (two runs of one node at once are two jobs, so two ports).
    s += "master_addr=$(scontrol show hostnames \"${SLURM_JOB_NODELIST:-localhost}\" 2>/dev/null | head -n 1)\n";
    s += "master_addr=${master_addr:-127.0.0.1}\n";
    s += "master_port=$((20000 + ${SLURM_JOB_ID:-0} % 20000))\n";
    l.rendezvous = {kMasterAddrMark, kMasterPortMark, a.world};
  }
  auto ranks = rank_command(spec, l, a.sweep_dir, kRunDirMark, a.sweep_name, /*resume=*/false);
  srun.insert(srun.end(), ranks.begin(), ranks.end());
  for (size_t i = 0; i < srun.size(); ++i) s += (i ? " " : "") + quote_with_dir(srun[i]);
  s += " \"${args[@]}\"\n";  // --resume goes last: sweep-train's own arguments end the command
  s += "rc=$?\n";
  s += "echo \"$rc\" >\"$dir/slurm-exit\"\n";
  s += "exit \"$rc\"\n";
  return s;
}

std::vector<std::string> sbatch_argv(const SlurmArray& a, const LaunchSpec& spec, const std::string& script_path) {
  // At most one node per rank. The ranks spread evenly when they divide; otherwise Slurm
  // places them (block: the first nodes filled first, every node at least one).
  const int nodes = std::min(spec.slurm.nodes, a.world);
  std::vector<std::string> argv = {"sbatch",
                                   "--parsable",
                                   "--job-name=sweep-" + a.sweep_name,
                                   "--array=0-" + std::to_string(a.dirs.size() - 1) + "%" +
                                       std::to_string(a.throttle > 0 ? a.throttle : spec.parallel),
                                   "--ntasks=" + std::to_string(a.world),
                                   "--nodes=" + std::to_string(nodes)};
  if (nodes > 1 && a.world % nodes == 0) argv.push_back("--ntasks-per-node=" + std::to_string(a.world / nodes));
  argv.push_back("--cpus-per-task=" + std::to_string(a.threads));
  argv.push_back("--chdir=" + a.sweep_dir);
  argv.push_back("--no-requeue");
  // sbatch expands %A, %a, ... in --output; a directory with '%' or '\' in its name gets
  // no batch output file rather than a wrong one (each rank still logs under logs/).
  if (a.sweep_dir.find_first_of("%\\") == std::string::npos)
    argv.push_back("--output=" + a.sweep_dir + "/slurm/%A_%a.out");
  else
    argv.push_back("--output=/dev/null");
  if (!spec.slurm.partition.empty()) argv.push_back("--partition=" + spec.slurm.partition);
  if (!spec.slurm.time.empty())
    argv.push_back("--time=" + spec.slurm.time);
  else if (spec.timeout_s > 0)
    argv.push_back("--time=" + slurm_minutes(spec.timeout_s));
  if (!spec.slurm.account.empty()) argv.push_back("--account=" + spec.slurm.account);
  if (!spec.slurm.qos.empty()) argv.push_back("--qos=" + spec.slurm.qos);
  if (!spec.slurm.constraint.empty()) argv.push_back("--constraint=" + spec.slurm.constraint);
  // Per node: a run of W ranks on N nodes gets N x gpus GPUs, wherever Slurm puts the ranks.
  if (spec.slurm.gpus > 0) argv.push_back("--gpus-per-node=" + std::to_string(spec.slurm.gpus));
  if (spec.slurm.gpus_per_task > 0) argv.push_back("--gpus-per-task=" + std::to_string(spec.slurm.gpus_per_task));
  argv.insert(argv.end(), spec.slurm.extra_args.begin(), spec.slurm.extra_args.end());
  argv.push_back(script_path);
  return argv;
}

namespace {

/// Calls f(id, state, rest) for each "id|state[|rest]" line of squeue / sacct output.
template <class F>
void for_each_id_state(const std::string& text, F&& f) {
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    const auto bar = line.find('|');
    if (bar == std::string::npos) continue;
    const auto bar2 = line.find('|', bar + 1);
    f(trim(line.substr(0, bar)), trim(line.substr(bar + 1, bar2 == std::string::npos ? bar2 : bar2 - bar - 1)),
      bar2 == std::string::npos ? std::string() : trim(line.substr(bar2 + 1)));
  }
}

}  // namespace

std::map<std::string, SlurmTask> parse_squeue(const std::string& text) {
  std::map<std::string, SlurmTask> out;
  for_each_id_state(text, [&](const std::string& id, const std::string& state, const std::string& reason) {
    add_ids(id, {state, reason}, out);
  });
  return out;
}

std::map<std::string, SlurmTask> parse_sacct(const std::string& text) {
  std::map<std::string, SlurmTask> out;
  for_each_id_state(text, [&](const std::string& id, std::string state, const std::string&) {
    state = state.substr(0, state.find_first_of(" +"));                    // "CANCELLED by 0"
    if (id.find('.') == std::string::npos) add_ids(id, {state, ""}, out);  // skip job steps (12_3.batch)
  });
  return out;
}

SlurmLimits parse_slurm_limits(const std::string& text) {
  SlurmLimits l;
  int found = 0;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    // "MaxArraySize            = 1001"
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    int* into = key == "MaxArraySize" ? &l.max_array_size : key == "MaxJobCount" ? &l.max_job_count : nullptr;
    if (!into || value.empty() || value.find_first_not_of("0123456789") != std::string::npos || value.size() > 9)
      continue;
    *into = std::atoi(value.c_str());
    ++found;
  }
  l.read = found == 2;
  return l;
}

bool throttle_updated(bool exit_ok, const std::string& output) {
  if (exit_ok) return true;
  std::istringstream in(output);
  bool updated = false, lines = false;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    lines = true;
    const size_t colon = line.find(": ");
    const std::string answer = colon == std::string::npos ? "" : line.substr(colon + 2);
    if (answer == "No error")
      updated = true;
    else if (answer != "Job has already finished")
      return false;
  }
  return lines && updated;
}

bool slurm_reason_permanent(const std::string& reason) {
  // job_state_reason_string() of Slurm 22.05-24.x; a per-job limit of a QOS or an
  // association holds whatever else runs, a per-user or group one passes.
  static const char* kNever[] = {"PartitionNodeLimit",
                                 "PartitionTimeLimit",
                                 "PartitionConfig",
                                 "InvalidAccount",
                                 "InvalidQOS",
                                 "AccountNotAllowed",
                                 "QOSNotAllowed",
                                 "BadConstraints",
                                 "DependencyNeverSatisfied",
                                 "ReservationInvalid",
                                 "ReservationDeleted",
                                 "MaxMemPerLimit",
                                 "QOSMinCpuNotSatisfied",
                                 "QOSMaxCpuPerJobLimit",
                                 "QOSMaxNodePerJobLimit",
                                 "QOSMaxWallDurationPerJobLimit",
                                 "QOSMaxCpuMinutesPerJobLimit",
                                 "AssocMaxCpuPerJobLimit",
                                 "AssocMaxNodePerJobLimit",
                                 "AssocMaxWallDurationPerJobLimit",
                                 "AssocMaxCpuMinutesPerJobLimit"};
  const std::string head = reason.substr(0, reason.find_first_of(", ("));  // "ReqNodeNotAvail, UnavailableNodes:n2"
  for (const char* r : kNever)
    if (head == r) return true;
  return false;
}

std::string describe_down_nodes(const std::string& text) {
  std::string out;
  std::vector<std::string> seen;  // a node in two partitions is listed twice
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    const size_t a = line.find('|'), b = a == std::string::npos ? a : line.find('|', a + 1);
    if (b == std::string::npos) continue;
    const std::string node = trim(line.substr(0, a)), state = trim(line.substr(a + 1, b - a - 1));
    const std::string reason = trim(line.substr(b + 1));
    const bool down = state.rfind("down", 0) == 0 || state.rfind("drain", 0) == 0 || state.rfind("fail", 0) == 0 ||
                      (!state.empty() && state.back() == '*');
    if (!down || node.empty() || std::find(seen.begin(), seen.end(), node) != seen.end()) continue;
    seen.push_back(node);
    out += (out.empty() ? "" : ", ") + node + " (" + state + (reason.empty() || reason == "none" ? "" : ": " + reason) +
           ")";
  }
  return out;
}

bool slurm_state_final(const std::string& s) {
  static const char* active[] = {"PENDING",       "RUNNING",     "CONFIGURING",  "COMPLETING",  "SUSPENDED",
                                 "REQUEUED",      "RESIZING",    "SIGNALING",    "STAGE_OUT",   "STOPPED",
                                 "RESV_DEL_HOLD", "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT"};
  for (const char* a : active)
    if (s == a) return false;
  return true;
}

FailureClass slurm_failure_class(const std::string& s) {
  if (s == "COMPLETED") return FailureClass::none;
  if (s == "TIMEOUT" || s == "DEADLINE") return FailureClass::timeout;
  if (s == "OUT_OF_MEMORY") return FailureClass::oom;
  if (s == "NODE_FAIL" || s == "BOOT_FAIL") return FailureClass::node_fail;
  if (s == "PREEMPTED") return FailureClass::preempted;
  if (s == "CANCELLED" || s == "REVOKED") return FailureClass::cancelled;
  return FailureClass::crashed;  // FAILED and whatever a newer Slurm adds
}

}  // namespace sweep
