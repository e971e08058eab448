// sweep: the command line. Each subcommand is an options struct, a setup_* that
// declares its flags and a run_* that does the work; main only wires them.
// Exit codes: 0 success, 1 some runs failed, 2 bad input or usage.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <functional>

#include "grid.h"
#include "record.h"
#include "report.h"
#include "sweep_run.h"

namespace {

using Action = std::function<int()>;

struct RunOptions {
  std::string grid;
  std::string out;
  std::string trainer;
  bool quiet = false;
};

int run_run(const RunOptions& o) {
  sweep::SweepSpec spec = sweep::load_grid(o.grid);
  std::vector<sweep::GridPoint> points = sweep::expand(spec);  // validates every point first
  sweep::SweepRunOptions opt;
  opt.out_dir = o.out.empty() ? "sweep-out/" + spec.name : o.out;
  opt.train_binary = o.trainer.empty() ? sweep::executable_dir() + "/sweep-train" : o.trainer;
  opt.quiet = o.quiet;
  if (!std::filesystem::exists(opt.train_binary))
    throw sweep::ConfigError("trainer '" + opt.train_binary + "' not found (build it, or pass --trainer)");
  sweep::SpawnRunner runner;
  std::printf("sweep %s: %zu runs -> %s\n", spec.name.c_str(), points.size(), opt.out_dir.c_str());
  sweep::SweepSummary s = sweep::run_sweep(spec, points, opt, runner);
  std::printf("sweep %s: %d completed, %d already done, %d failed; report: %s\n", spec.name.c_str(), s.completed,
              s.skipped, s.failed, s.report_path.c_str());
  return s.failed ? 1 : 0;
}

Action setup_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "run every point of a grid not yet completed, then write report.html");
  cmd->add_option("grid", o->grid, "grid file (YAML)")->required();
  cmd->add_option("--out", o->out, "sweep directory (default sweep-out/<name>)");
  cmd->add_option("--trainer", o->trainer, "sweep-train binary (default: beside sweep)");
  cmd->add_flag("--quiet", o->quiet, "no per-run progress lines");
  return [o, cmd]() { return cmd->parsed() ? run_run(*o) : -1; };
}

struct PlanOptions {
  std::string grid;
  std::string out;
};

int run_plan(const PlanOptions& o) {
  sweep::SweepSpec spec = sweep::load_grid(o.grid);
  auto points = sweep::expand(spec);
  std::string dir = o.out.empty() ? "sweep-out/" + spec.name : o.out;
  std::printf("sweep %s: %zu runs in %s\n", spec.name.c_str(), points.size(), dir.c_str());
  for (const auto& p : points) {
    bool done = std::filesystem::exists(sweep::record_path(dir, p.id));
    std::printf("  %s  %-9s", p.id.c_str(), done ? "done" : "pending");
    for (const auto& [k, v] : p.values) std::printf("  %s=%s", k.c_str(), v.c_str());
    std::printf("\n");
  }
  return 0;
}

Action setup_plan(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand("plan", "print the expanded grid and which runs are done; changes nothing");
  cmd->add_option("grid", o->grid, "grid file (YAML)")->required();
  cmd->add_option("--out", o->out, "sweep directory (default sweep-out/<name>)");
  return [o, cmd]() { return cmd->parsed() ? run_plan(*o) : -1; };
}

struct ReportOptions {
  std::string dir;
  std::string output;
};

int run_report(const ReportOptions& o) {
  if (!std::filesystem::is_directory(o.dir)) throw sweep::ConfigError(o.dir + ": not a sweep directory");
  std::string out = o.output.empty() ? o.dir + "/report.html" : o.output;
  std::string title = std::filesystem::path(o.dir).filename().string();
  sweep::write_report(o.dir, title.empty() ? o.dir : title, out);
  std::printf("report: %s\n", out.c_str());
  return 0;
}

Action setup_report(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  auto* cmd = app.add_subcommand("report", "write the HTML report of a sweep directory");
  cmd->add_option("dir", o->dir, "sweep directory")->required();
  cmd->add_option("-o,--output", o->output, "output file (default <dir>/report.html)");
  return [o, cmd]() { return cmd->parsed() ? run_report(*o) : -1; };
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sweep: reproducible, sweepable distributed training runs"};
  app.require_subcommand(1);
  std::vector<Action> actions = {setup_run(app), setup_plan(app), setup_report(app)};
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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sweep: error: %s\n", e.what());
    return 1;
  }
}
