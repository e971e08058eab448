#include "environment.h"

#include <dlfcn.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "build_info.h"
#include "data_file.h"  // identify_data_file
#include "record.h"
#include "sweep/record_writer.h"  // program_environment_defaults
#include "torch_compat.h"         // aten_cpu_isa

namespace sweep {
namespace {

using SetThreadsFn = void (*)(int);
using GetConfigFn = char* (*)();
using GetThreadsFn = int (*)();

}  // namespace

std::string blas_description() {
  std::string desc = "unknown BLAS";
  if (auto get_config = reinterpret_cast<GetConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config")))
    desc = get_config();  // "OpenBLAS 0.3.21 DYNAMIC_ARCH ... Zen MAX_THREADS=64"
  // The library that actually provides sgemm_, whatever the alternatives system chose.
  if (void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_")) {
    Dl_info info;
    if (dladdr(sgemm, &info) && info.dli_fname) {
      char resolved[4096];
      const char* path = realpath(info.dli_fname, resolved) ? resolved : info.dli_fname;
      // The last two components name the variant: "openblas-pthread/libblas.so.3".
      std::string p = path;
      size_t cut = p.rfind('/');
      if (cut != std::string::npos && cut > 0) cut = p.rfind('/', cut - 1);
      desc += " (" + p.substr(cut == std::string::npos ? 0 : cut + 1) + ")";
    }
  }
  return desc;
}

void set_up_determinism(const RunConfig& cfg) {
  const int threads = static_cast<int>(cfg.train.threads);
  at::set_num_threads(threads);
  at::set_num_interop_threads(1);
  if (auto set_blas = reinterpret_cast<SetThreadsFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set_blas(threads);
  // Benchmark mode (train.deterministic false) lets LibTorch pick nondeterministic kernels.
  at::globalContext().setDeterministicAlgorithms(cfg.deterministic(), /*warn_only=*/false);
  // oneDNN picks its kernels by the CPU's instruction set: a machine with AVX-512 BF16
  // runs bf16 matrix products through other kernels, with other bits, than an AVX2 one,
  // and no setting pins them. SWEEP_ONEDNN=0 turns it off: LibTorch's own kernels over
  // OpenBLAS, whose kernel sweep pins (launch.blas), give the same bits on both, but bf16
  // on an AVX-512 machine runs far slower (tests/bench/README.md). The record's
  // environment says which (`onednn`).
  const char* onednn = std::getenv("SWEEP_ONEDNN");
  at::globalContext().setUserEnabledMkldnn(onednn == nullptr || std::string(onednn) != "0");
  torch::manual_seed(static_cast<uint64_t>(cfg.train.seed));
}

std::vector<std::pair<std::string, std::string>> collect_environment(const RunConfig& cfg) {
  std::vector<std::pair<std::string, std::string>> env;
  env.emplace_back("sweep_version", SWEEP_VERSION);
  env.emplace_back("git_commit", SWEEP_GIT_COMMIT);
  env.emplace_back("git_dirty", SWEEP_GIT_DIRTY ? "1" : "0");
  env.emplace_back("compiler", std::string("gcc ") + __VERSION__);
  env.emplace_back("libtorch", TORCH_VERSION);
  env.emplace_back("hdf5", hdf5_version());
  env.emplace_back("cuda", "none");
  env.emplace_back("device", "cpu");
  env.emplace_back("blas", blas_description());
  // The kernel OpenBLAS runs (its DYNAMIC_ARCH core; OPENBLAS_CORETYPE chooses it): each
  // kernel has its own bits, so `sweep reproduce` runs the recorded one.
  std::string kernel;
  if (auto core = reinterpret_cast<GetConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"))) kernel = core();
  env.emplace_back("blas.kernel", kernel);
  int blas_threads = -1;
  if (auto get = reinterpret_cast<GetThreadsFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"))) blas_threads = get();
  env.emplace_back("blas_threads", std::to_string(blas_threads));
  env.emplace_back("torch_threads", std::to_string(at::get_num_threads()));
  env.emplace_back("deterministic_algorithms", at::globalContext().deterministicAlgorithms() ? "1" : "0");
  // What train.deterministic turned on or off, in one line; the report pairs runs by it.
  env.emplace_back("determinism",
                   cfg.deterministic()
                       ? "deterministic: " + std::string(cfg.native_reduction() ? "native" : "canonical") +
                             " reduction, deterministic algorithms"
                       : "benchmark: native reduction, nondeterministic algorithms allowed; bits not "
                         "promised");
  env.emplace_back("onednn", at::globalContext().userEnabledMkldnn() ? "on" : "off (SWEEP_ONEDNN=0)");
  env.emplace_back("aten.isa", compat::aten_cpu_isa());
  // The data file, by its contents: a file rewritten under the same name is another
  // run's data (the driver re-runs a completed run whose data.hash no longer matches).
  if (!cfg.data.path.empty() && (cfg.data.kind == "tokens" || cfg.data.kind == "text" || cfg.data.kind == "hdf5")) {
    const DataFileId id = identify_data_file(cfg.data.path, sweep_cache_dir());
    env.emplace_back("data.file", id.path);
    env.emplace_back("data.size", std::to_string(id.size));
    env.emplace_back("data.mtime_ns", std::to_string(id.mtime_ns));
    env.emplace_back("data.hash", id.hash);
  }
  if (!cfg.data.eval_path.empty() &&
      (cfg.data.kind == "tokens" || cfg.data.kind == "text" || cfg.data.kind == "hdf5")) {
    const DataFileId id = identify_data_file(cfg.data.eval_path, sweep_cache_dir());
    env.emplace_back("data.eval_file", id.path);
    env.emplace_back("data.eval_size", std::to_string(id.size));
    env.emplace_back("data.eval_mtime_ns", std::to_string(id.mtime_ns));
    env.emplace_back("data.eval_hash", id.hash);
  }
  // cpu, hosts, os, env.<NAME>, program*: what any record writer states.
  for (auto& kv : program_environment_defaults())
    if (std::none_of(env.begin(), env.end(), [&](const auto& e) { return e.first == kv.first; }))
      env.push_back(std::move(kv));
  return env;
}

}  // namespace sweep
