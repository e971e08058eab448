// `sweep blas`: the OpenBLAS kernels this machine can run, each one's self-test verdict and
// speed, and the kernel a run would use.
#include <algorithm>  // find
#include <cstdio>
#include <memory>
#include <set>

#include "blas_kernel.h"  // survey_blas_kernels, choose_blas_kernel
#include "cli.h"
#include "text.h"  // join

namespace sweep {
namespace {

struct BlasCliOptions {
  std::string kernel = "auto";  // native, auto or a kernel name
  bool refresh = false;         // probe again instead of reading the cache
};

// The flags the table asks about that this CPU has, in table order: what decides the kernels.
std::string relevant_flags(const std::set<std::string>& flags) {
  std::vector<std::string> out;
  for (const auto& k : blas_kernels())
    for (const auto& f : k.needs)
      if (flags.count(f) && std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  return out.empty() ? "(none of the flags the kernels need)" : join(out, " ");
}

void print_row(const std::string& name, const ProbeReport& r, const std::string& native) {
  std::string tag = name == native ? " (native)" : "";
  std::printf("  %-24s", (name + tag).c_str());
  if (!r.ok()) {
    std::printf("%s\n", r.refused.c_str());
    return;
  }
  for (const auto& s : r.speeds) std::printf(" %14.1f", s.gflops);
  std::printf("  %s  ok\n", r.hash.c_str());
}

int run_blas(const BlasCliOptions& o) {
  // Bad names fail before anything is probed.
  if (o.kernel != "auto" && o.kernel != "native") blas_kernel_named(o.kernel, "--kernel");
  BlasSettings s = blas_settings_from_environment();
  s.refresh = o.refresh;
  if (!s.user_coretype.empty()) blas_kernel_named(s.user_coretype, "OPENBLAS_CORETYPE (set in the environment)", false);
  const std::set<std::string> flags = parse_cpu_flags(read_cpuinfo());
  const BlasSurvey survey = survey_blas_kernels(flags, s);

  std::printf("CPU flags: %s\n", relevant_flags(flags).c_str());
  std::printf("OpenBLAS: %s\n", survey.library.c_str());
  std::printf("native kernel (OpenBLAS's own choice): %s\n", survey.native.c_str());
  std::printf("best kernel the CPU flags allow: %s\n", survey.best.empty() ? "(none)" : survey.best.c_str());
  const ProbeReport* native = nullptr;
  const ProbeReport* best = nullptr;
  for (const auto& [name, r] : survey.verdicts) {
    if (name == survey.native) native = &r;
    if (name == survey.best) best = &r;
  }
  const BlasKernel* nk = find_blas_kernel(survey.native);
  const BlasKernel* bk = find_blas_kernel(survey.best);
  if (bk && (!nk || nk->level < bk->level) && native && best && native->ok() && best->ok())
    std::printf(
        "note: OpenBLAS's own kernel %s is weaker than %s, which this CPU supports (%.1f vs %.1f GFLOP/s, "
        "1024^3 sgemm)\n",
        survey.native.c_str(), survey.best.c_str(), native->peak_gflops(), best->peak_gflops());

  std::printf("\n  %-24s", "kernel (GFLOP/s, 1 thread)");
  for (const auto& v : survey.verdicts)
    if (v.second.ok()) {
      for (const auto& sp : v.second.speeds) std::printf(" %14s", sp.shape.c_str());
      break;
    }
  std::printf("  %-16s  verdict\n", "256x64x64 hash");
  for (const auto& [name, r] : survey.verdicts) print_row(name, r, survey.native);
  if (survey.cache_file.empty())
    std::printf("verdicts: probed now, not kept (no cache directory: set SWEEP_CACHE_DIR or HOME)\n");
  else if (survey.from_cache)
    std::printf("verdicts: from %s (--refresh to probe again)\n", survey.cache_file.c_str());
  else
    std::printf("verdicts: probed now, kept in %s\n", survey.cache_file.c_str());
  if (!survey.cache_error.empty()) std::fprintf(stderr, "sweep: warning: %s\n", survey.cache_error.c_str());

  const BlasChoice c = choose_blas_kernel(o.kernel, flags, s, &survey);
  std::printf("\nchoice (--kernel %s): %s", o.kernel.c_str(), c.kernel.c_str());
  std::printf(c.coretype.empty() ? " (OPENBLAS_CORETYPE left unset)" : " (OPENBLAS_CORETYPE=%s)", c.coretype.c_str());
  if (c.verdict.ok() && !c.verdict.speeds.empty()) std::printf(", %.1f GFLOP/s", c.verdict.peak_gflops());
  std::printf(": %s\n", c.note.c_str());
  if (!c.verdict.ok()) {
    std::fprintf(stderr, "sweep: error: kernel %s cannot be used: %s\n", c.kernel.c_str(), c.verdict.refused.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

CliAction setup_blas(CLI::App& app) {
  auto o = std::make_shared<BlasCliOptions>();
  auto* cmd = app.add_subcommand("blas",
                                 "the OpenBLAS kernels this CPU can run: each one's self-test (sgemm against a "
                                 "float64 reference, in a child process) and speed, cached per machine, and the "
                                 "kernel chosen; exit 0, or 2 for a kernel that is unknown or cannot be used");
  cmd->add_option(
         "--kernel", o->kernel,
         "native (OpenBLAS's own choice), auto (the fastest that passes its self-test) or a kernel name: " +
             [] {
               std::vector<std::string> names;
               for (const auto& k : blas_kernels()) names.push_back(k.name);
               return join(names);
             }())
      ->capture_default_str();
  cmd->add_flag("--refresh", o->refresh, "probe every kernel again and rewrite the cached verdicts");
  return [o, cmd]() {
    if (!cmd->parsed()) return -1;
    return run_blas(*o);
  };
}

}  // namespace sweep
