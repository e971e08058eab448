// sweep: the command line. Each subcommand is an options struct, a setup_* that
// declares its flags and a run_* that does the work; main only wires them.
// Exit codes: 0 success, 1 some runs failed, 2 bad input or usage (or the sweep dir is
// locked by another driver), 128+signal when `sweep run` was stopped by SIGINT/SIGTERM.
#include <cstdio>
#include <new>

#include "cli.h"
#include "record.h"
#include "run_config.h"

int main(int argc, char** argv) {
  CLI::App app{"sweep: reproducible, sweepable distributed training runs"};
  app.require_subcommand(1);
  std::vector<sweep::CliAction> actions = {
      sweep::setup_run(app),    sweep::setup_plan(app),    sweep::setup_status(app),
      sweep::setup_report(app), sweep::setup_compare(app), sweep::setup_reproduce(app),
      sweep::setup_export(app), sweep::setup_blas(app),    sweep::setup_keys(app)};
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
