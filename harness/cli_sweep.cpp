// `sweep run`, `sweep plan` and `sweep status`.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "cli.h"
#include "grid.h"
#include "plan.h"
#include "slurm_exec.h"
#include "sweep_run.h"

namespace fs = std::filesystem;

namespace sweep {
namespace {

void print_warnings(const Expansion& e) {
  for (const auto& w : e.warnings) std::fprintf(stderr, "%s\n", w.c_str());
}

struct RunOptions {
  std::string grid;
  std::string out;
  std::string trainer;
  int parallel = 0;
  double progress_every_s = 30;
  bool quiet = false;
};

int run_run(const RunOptions& o) {
  SweepSpec spec = load_grid(o.grid);
  Expansion e = expand_grid(spec);  // validates every point first: nothing is created for a bad grid
  print_warnings(e);
  if (o.parallel > 0) spec.launch.parallel = o.parallel;
  SweepRunOptions opt;
  opt.out_dir = o.out.empty() ? "sweep-out/" + spec.name : o.out;
  opt.train_binary = o.trainer.empty() ? executable_dir() + "/sweep-train" : o.trainer;
  opt.quiet = o.quiet;
  opt.tty = ::isatty(STDOUT_FILENO) == 1;
  opt.progress_every_s = o.progress_every_s;
  if (!fs::exists(opt.train_binary))
    throw ConfigError("trainer '" + opt.train_binary + "' not found (build it, or pass --trainer)");
  std::printf("sweep %s: %zu runs -> %s (launcher %s, parallel %d)\n", spec.name.c_str(), e.points.size(),
              opt.out_dir.c_str(), spec.launch.launcher.c_str(), spec.launch.parallel);
  std::fflush(stdout);
  SweepSummary s;
  if (spec.launch.launcher == "slurm") {
    // Compute nodes see paths as given: make them absolute.
    opt.out_dir = fs::absolute(opt.out_dir).lexically_normal().string();
    opt.train_binary = fs::absolute(opt.train_binary).lexically_normal().string();
    SlurmCli slurm;
    s = run_sweep_slurm(spec, e.points, opt, slurm);
  } else {
    SpawnRunner runner;
    s = run_sweep(spec, e.points, opt, runner);
  }
  std::printf("sweep %s: %d completed, %d already done, %d failed", spec.name.c_str(), s.completed, s.skipped,
              s.failed);
  if (s.interrupted) std::printf(", %d interrupted", s.interrupted);
  if (s.not_started) std::printf(", %d not started", s.not_started);
  if (s.retries) std::printf(" (%d retries)", s.retries);
  std::printf("; report: %s\n", s.report_path.c_str());
  if (s.stop_signal) return 128 + s.stop_signal;
  return s.failed ? 1 : 0;
}

struct PlanOptions {
  std::string grid;
  std::string out;
};

int run_plan(const PlanOptions& o) {
  SweepSpec spec = load_grid(o.grid);
  Expansion e = expand_grid(spec);
  print_warnings(e);
  std::string dir = o.out.empty() ? "sweep-out/" + spec.name : o.out;
  std::string text = render_plan(spec, e, dir);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

struct StatusOptions {
  std::string dir;
};

int run_status(const StatusOptions& o) {
  if (!fs::is_directory(o.dir + "/runs")) throw ConfigError(o.dir + ": not a sweep directory (no runs/ in it)");
  const std::string holder = SweepLock::holder(o.dir);
  auto runs = scan_runs(o.dir);
  auto points = read_points_file(o.dir);
  std::vector<std::pair<std::string, std::string>> rows = points;
  std::map<std::string, bool> listed;
  for (const auto& [id, v] : points) listed[id] = true;
  for (const auto& [id, st] : runs)
    if (!listed.count(id)) rows.emplace_back(id, "(not in the last grid run here)");
  std::map<std::string, int> counts;
  std::string table;
  for (const auto& [id, values] : rows) {
    auto it = runs.find(id);
    RunState st = it == runs.end() ? RunState{} : it->second;
    // "running" with no driver holding the lock: the driver died without cleaning up.
    if (st.state == "running" && holder.empty()) st.state = "stale";
    ++counts[st.state];
    char line[256];
    std::snprintf(line, sizeof line, "  %-16s  %-11s  %8d  %-11s  ", id.c_str(), st.state.c_str(), st.attempts,
                  st.failure == FailureClass::none ? "-" : failure_class_name(st.failure));
    table += line + values + (st.detail.empty() ? "" : "  [" + st.detail + "]") + "\n";
  }
  std::printf("sweep dir %s: %s\n", o.dir.c_str(),
              holder.empty() ? "no driver running" : ("driver running (" + holder + ")").c_str());
  std::string summary;
  for (const char* s : {"completed", "running", "failed", "interrupted", "diverged", "stale", "pending"})
    if (counts[s]) summary += (summary.empty() ? "" : ", ") + std::to_string(counts[s]) + " " + s;
  std::printf("%zu runs: %s\n", rows.size(), summary.empty() ? "none" : summary.c_str());
  std::printf("  %-16s  %-11s  %8s  %-11s  %s\n", "id", "state", "attempts", "failure", "values");
  std::fwrite(table.data(), 1, table.size(), stdout);
  return 0;
}

}  // namespace

CliAction setup_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "run every point of a grid not yet completed, then write report.html");
  cmd->add_option("grid", o->grid, "grid file (YAML)")->required();
  cmd->add_option("--out", o->out, "sweep directory (default sweep-out/<name>)");
  cmd->add_option("--trainer", o->trainer, "sweep-train binary (default: beside sweep)");
  cmd->add_option("--parallel", o->parallel, "runs at once (overrides launch.parallel)")->check(CLI::Range(1, 100000));
  cmd->add_option("--progress-every", o->progress_every_s, "seconds between progress lines when not on a terminal")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_flag("--quiet", o->quiet, "no per-run lines");
  return [o, cmd]() { return cmd->parsed() ? run_run(*o) : -1; };
}

CliAction setup_plan(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand("plan", "print the expanded grid and which runs are done; changes nothing");
  cmd->add_option("grid", o->grid, "grid file (YAML)")->required();
  cmd->add_option("--out", o->out, "sweep directory (default sweep-out/<name>)");
  return [o, cmd]() { return cmd->parsed() ? run_plan(*o) : -1; };
}

CliAction setup_status(CLI::App& app) {
  auto o = std::make_shared<StatusOptions>();
  auto* cmd = app.add_subcommand("status", "show each run's state in a sweep directory; changes nothing");
  cmd->add_option("dir", o->dir, "sweep directory")->required();
  return [o, cmd]() { return cmd->parsed() ? run_status(*o) : -1; };
}

}  // namespace sweep
