// The record-writing API for programs (include/sweep/record_writer.h): the environment facts
// of a record that need no LibTorch, shared by sweep-train's collect_environment and by
// programs that write records themselves, and the health judge such a record stores.
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "checksum.h"    // run_id_of_config
#include "run_health.h"  // compute_health, health_attributes
#include "sweep/record_writer.h"

namespace sweep {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

/// The widest instruction set among those that change which kernels oneDNN and LibTorch
/// pick (and so the bits of bf16 and vectorised ops): "amx_bf16", "avx512_bf16",
/// "avx512", "avx2" or "baseline".
std::string cpu_isa() {
  __builtin_cpu_init();
  std::ifstream in("/proc/cpuinfo");  // AMX has no __builtin_cpu_supports name in GCC 12
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) break;
  if ((" " + line + " ").find(" amx_bf16 ") != std::string::npos) return "amx_bf16";
  if (__builtin_cpu_supports("avx512bf16")) return "avx512_bf16";
  if (__builtin_cpu_supports("avx512f")) return "avx512";
  if (__builtin_cpu_supports("avx2")) return "avx2";
  return "baseline";
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

std::string run_id_of_text(const std::string& config_text) { return run_id_of_config(config_text); }

std::vector<std::pair<std::string, std::string>> program_environment_defaults() {
  std::vector<std::pair<std::string, std::string>> env;
  // Every key results/SCHEMA.md documents, empty where only the program can know it.
  for (const char* key : {"sweep_version", "git_commit", "git_dirty", "compiler", "libtorch"})
    env.emplace_back(key, "");
  env.emplace_back("hdf5", hdf5_version());
  for (const char* key : {"cuda", "device", "blas", "blas.kernel", "blas_threads", "torch_threads",
                          "deterministic_algorithms", "onednn", "determinism"})
    env.emplace_back(key, "");
  env.emplace_back("cpu", cpu_model());
  env.emplace_back("cpu.isa", cpu_isa());
  env.emplace_back("aten.isa", "");  // LibTorch's kernels: only a program with LibTorch knows
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  env.emplace_back("hosts", host);
  env.emplace_back("rank_hosts", host);  // the writing process's; sweep-train puts every rank's
  struct utsname u;
  if (uname(&u) == 0) env.emplace_back("os", std::string(u.sysname) + " " + u.release + " " + u.machine);
  for (const char* var : kNumericsEnv) env.emplace_back(std::string("env.") + var, env_or_empty(var));
  for (const auto& [key, var] : kSlurmEnv) env.emplace_back(key, env_or_empty(var));
  for (const char* key : {"data.entropy_floor", "data.size", "data.mtime_ns", "trainer", "trainer.models"})
    env.emplace_back(key, "");
  // A grid's program's data files (program.data), hashed by the driver: the first as
  // data.file and data.hash, all of them in program.data.
  env.emplace_back("data.file", env_or_empty("SWEEP_DATA_FILE"));
  env.emplace_back("data.hash", env_or_empty("SWEEP_DATA_HASH"));
  env.emplace_back("program.data", env_or_empty("SWEEP_DATA_FILES"));
  // Its source files with their hashes (argv's and program.files) and where it started.
  env.emplace_back("program.files", env_or_empty("SWEEP_PROGRAM_FILES"));
  env.emplace_back("program.trees", env_or_empty("SWEEP_PROGRAM_TREES"));  // its directories and globs
  env.emplace_back("program.cwd", env_or_empty("SWEEP_PROGRAM_CWD"));
  env.emplace_back("program.pass_args", env_or_empty("SWEEP_PROGRAM_PASS_ARGS"));
  env.emplace_back("program", env_or_empty("SWEEP_PROGRAM"));
  env.emplace_back("program.digest", env_or_empty("SWEEP_PROGRAM_DIGEST"));
  env.emplace_back("program.keys", env_or_empty("SWEEP_PROGRAM_KEYS"));
  env.emplace_back("program.writes", env_or_empty("SWEEP_PROGRAM_WRITES"));
  // The metrics its grid declared timing (program.timing_metrics): never compared bit for bit.
  env.emplace_back("program.timing_metrics", env_or_empty("SWEEP_PROGRAM_TIMING_METRICS"));
  // How it names its batch and steps, and whether one rank gets torch.distributed's variables.
  env.emplace_back("program.conventions", env_or_empty("SWEEP_PROGRAM_CONVENTIONS"));
  // What held the program: sweep-confine's level ("landlock-abi-7: writes, signals").
  env.emplace_back("program.confinement", env_or_empty("SWEEP_CONFINEMENT"));
  // The image the run's ranks ran in, as the driver identified it (harness/launch/container_image.h).
  env.emplace_back("container.runtime", env_or_empty("SWEEP_CONTAINER_RUNTIME"));
  env.emplace_back("container.image", env_or_empty("SWEEP_CONTAINER_IMAGE"));
  env.emplace_back("container.digest", env_or_empty("SWEEP_CONTAINER_DIGEST"));
  return env;
}

std::vector<std::pair<std::string, std::string>> judge_health_attributes(const Record& r) {
  return health_attributes(compute_health(r));
}

}  // namespace sweep
