// sweep: the command line. Each subcommand is an options struct, a setup_* that
// declares its flags and a run_* that does the work; main only wires them.
// Exit codes: 0 success, 1 some runs failed, 2 bad input or usage (or the sweep dir is
// locked by another driver), 128+signal when `sweep run` was stopped by SIGINT/SIGTERM.
#include <cstdio>
#include <cstdlib>  // unsetenv, setenv
#include <cstring>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "cli.h"
#include "process.h"  // executable_dir
#include "record.h"
#include "record_parse.h"  // isolate_record_parsing
#include "run_config.h"

extern char** environ;

#ifdef SWEEP_JEMALLOC
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen);
#endif

namespace {

/// SWEEP_PROGRAM*, SWEEP_DATA_* and SWEEP_CONTAINER_* say which grid program, data and image made a
/// run, and the driver sets them for the runs they are true of. Stray ones in the
/// caller's environment would reach every run and be copied into its record (and
/// `sweep reproduce` would then run the program they name), so they go first.
void drop_stray_run_variables() {
  std::vector<std::string> names;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    if (entry.rfind("SWEEP_PROGRAM", 0) == 0 || entry.rfind("SWEEP_CONTAINER_", 0) == 0 ||
        entry.rfind("SWEEP_DATA_", 0) == 0)
      names.push_back(entry.substr(0, entry.find('=')));
  }
  for (const auto& n : names) ::unsetenv(n.c_str());
}

/// A grid's Python program imports sweep's Python API (`import sweep`, `sweep_record`)
/// without setup: the directory that holds it, beside this program (the build tree's
/// python/, or an installed share/sweep/python), goes at the end of PYTHONPATH, which
/// every run inherits. The caller's own entries come first.
void offer_python_api() {
  const std::string exe = sweep::executable_dir();
  for (const std::string& dir : {exe + "/../../python", exe + "/../share/sweep/python"}) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(dir + "/sweep/__init__.py", ec)) continue;
    const std::string api = std::filesystem::canonical(dir, ec).string();
    if (ec) continue;
    const char* old = std::getenv("PYTHONPATH");
    const std::string path = old && *old ? std::string(old) + ":" + api : api;
    ::setenv("PYTHONPATH", path.c_str(), 1);
    return;
  }
}

/// What `sweep --version` prints: the version and which malloc this program runs on (the
/// readers' speed depends on it: tests/bench/README.md).
std::string version_line() {
  std::string malloc_name = "the system's (glibc)";
#ifdef SWEEP_JEMALLOC
  const char* v = nullptr;
  size_t n = sizeof v;
  malloc_name = "jemalloc";
  if (mallctl("version", static_cast<void*>(&v), &n, nullptr, 0) == 0 && v) malloc_name += std::string(" ") + v;
#endif
  return std::string("sweep ") + SWEEP_VERSION_STRING + "; malloc: " + malloc_name;
}

}  // namespace

int main(int argc, char** argv) {
  drop_stray_run_variables();
  offer_python_api();
  // Every record file is parsed in a helper process: one the HDF5 library cannot survive
  // makes that record damaged, not this command crash.
  sweep::isolate_record_parsing(true);
  CLI::App app{"sweep: reproducible, sweepable distributed training runs"};
  app.set_version_flag("--version", version_line());
  app.require_subcommand(1);
  std::vector<sweep::CliAction> actions = {
      sweep::setup_run(app),     sweep::setup_plan(app),      sweep::setup_status(app), sweep::setup_report(app),
      sweep::setup_compare(app), sweep::setup_reproduce(app), sweep::setup_export(app), sweep::setup_blas(app),
      sweep::setup_keys(app),    sweep::setup_show(app),      sweep::setup_verify(app), sweep::setup_resume(app),
      sweep::setup_fork(app),    sweep::setup_accept(app),    sweep::setup_serve(app),  sweep::setup_diagnose(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    for (auto& act : actions) {
      int rc = act();
      if (rc >= 0) return rc;
    }
    return 2;
  } catch (const sweep::ConfigError& e) {
    std::fprintf(stderr, "sweep: error: %s\n", e.what());
    return 2;
  } catch (const sweep::RecordError& e) {
    std::fprintf(stderr, "sweep: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "sweep: error: out of memory (a very large grid or sweep directory?)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sweep: error: %s\n", e.what());
    return 1;
  }
}
