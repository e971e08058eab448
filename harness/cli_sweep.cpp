// `sweep run` and `sweep plan`.
#include <cstdio>
#include <filesystem>

#include "cli.h"
#include "grid.h"
#include "sweep_run.h"

namespace sweep {
namespace {
struct RunOptions {
  std::string grid;
  std::string out;
  std::string trainer;
  bool quiet = false;
};

int run_run(const RunOptions& o) {
  SweepSpec spec = load_grid(o.grid);
  std::vector<GridPoint> points = expand(spec);  // validates every point first
  SweepRunOptions opt;
  opt.out_dir = o.out.empty() ? "sweep-out/" + spec.name : o.out;
  opt.train_binary = o.trainer.empty() ? executable_dir() + "/sweep-train" : o.trainer;
  opt.quiet = o.quiet;
  if (!std::filesystem::exists(opt.train_binary))
    throw ConfigError("trainer '" + opt.train_binary + "' not found (build it, or pass --trainer)");
  SpawnRunner runner;
  std::printf("sweep %s: %zu runs -> %s\n", spec.name.c_str(), points.size(), opt.out_dir.c_str());
  SweepSummary s = run_sweep(spec, points, opt, runner);
  std::printf("sweep %s: %d completed, %d already done, %d failed; report: %s\n", spec.name.c_str(), s.completed,
              s.skipped, s.failed, s.report_path.c_str());
  return s.failed ? 1 : 0;
}

}  // namespace

CliAction setup_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "run every point of a grid not yet completed, then write report.html");
  cmd->add_option("grid", o->grid, "grid file (YAML)")->required();
  cmd->add_option("--out", o->out, "sweep directory (default sweep-out/<name>)");
  cmd->add_option("--trainer", o->trainer, "sweep-train binary (default: beside sweep)");
  cmd->add_flag("--quiet", o->quiet, "no per-run progress lines");
  return [o, cmd]() { return cmd->parsed() ? run_run(*o) : -1; };
}

namespace {

struct PlanOptions {
  std::string grid;
  std::string out;
};

int run_plan(const PlanOptions& o) {
  SweepSpec spec = load_grid(o.grid);
  auto points = expand(spec);
  std::string dir = o.out.empty() ? "sweep-out/" + spec.name : o.out;
  std::printf("sweep %s: %zu runs in %s\n", spec.name.c_str(), points.size(), dir.c_str());
  for (const auto& p : points) {
    bool done = std::filesystem::exists(record_path(dir, p.id));
    std::printf("  %s  %-9s", p.id.c_str(), done ? "done" : "pending");
    for (const auto& [k, v] : p.values) std::printf("  %s=%s", k.c_str(), v.c_str());
    std::printf("\n");
  }
  return 0;
}

}  // namespace

CliAction setup_plan(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand("plan", "print the expanded grid and which runs are done; changes nothing");
  cmd->add_option("grid", o->grid, "grid file (YAML)")->required();
  cmd->add_option("--out", o->out, "sweep directory (default sweep-out/<name>)");
  return [o, cmd]() { return cmd->parsed() ? run_plan(*o) : -1; };
}

}  // namespace sweep
