// `sweep run`, `sweep plan` and `sweep status`.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "accepted_changes.h"  // acceptance_lines
#include "asha_search.h"       // run_asha_search
#include "blas_kernel.h"
#include "cli.h"
#include "container_image.h"  // container_image_digest, check_charliecloud_image
#include "data_file.h"        // sweep_cache_dir
#include "diagnose.h"         // newest_diagnosis: a run's newest verdict
#include "grid.h"
#include "grid_overrides.h"  // parse_overrides, load_overridden_grid
#include "halving_search.h"  // run_halving_search
#include "monotonic.h"       // monotonic_s
#include "pbt_search.h"      // run_pbt_search
#include "plan.h"
#include "record.h"         // read_partial_progress
#include "report.h"         // load_sweep
#include "run_health.h"     // HealthFlag, health_names
#include "slurm.h"          // shell_quote
#include "slurm_exec.h"     // SlurmCli, preview_slurm, slurm_run_views
#include "stall.h"          // stall_words: a running run that no longer advances
#include "stop_signals.h"   // StopSignals
#include "sweep_accept.h"   // accept_changes
#include "sweep_index.h"    // SweepIndex: status reads what has not changed from it
#include "sweep_lock.h"     // SweepLock: a tpe search holds it across its batches
#include "sweep_records.h"  // read_points_file
#include "sweep_run.h"
#include "tpe_search.h"  // run_tpe_search

namespace fs = std::filesystem;

namespace sweep {
namespace {

void print_warnings(const Expansion& e) {
  for (const auto& w : e.warnings) std::fprintf(stderr, "%s\n", w.c_str());
}

// Absolute, so that every launcher (a container bind, a Slurm compute node, a rank's
// working directory) sees the directory the driver means; no trailing '/'.
std::string absolute_dir(const std::string& dir) {
  fs::path p = fs::absolute(dir).lexically_normal();
  if (p.filename().empty() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p.string();
}

/// The OpenBLAS kernel every run of `spec` uses (launch.blas), as NAME=VALUE for the
/// runs' commands (empty: OpenBLAS chooses), and the line plan and run print when it is
/// not simply OpenBLAS's own, well-chosen kernel. Throws ConfigError when a kernel named
/// in the grid is refused by its self-test or by the CPU's flags.
std::vector<std::string> choose_blas(const SweepSpec& spec, std::string* line) {
  const std::set<std::string> flags = parse_cpu_flags(read_cpuinfo());
  if (flags.empty()) return {};  // not x86: no OpenBLAS kernel table here
  const LaunchSpec& l = spec.launch;
  std::string request = l.blas;
  std::string remote;
  if (request == "auto" && (l.launcher == "slurm" || !l.hosts.empty() || !l.hostfile.empty())) {
    // The self-test runs here, not on the nodes: each node's OpenBLAS chooses for itself.
    request = "native";
    remote = "; launch.blas auto is native on Slurm and remote hosts (name a kernel to pin one)";
  }
  const BlasSettings settings = blas_settings_from_environment();
  BlasChoice c;
  BlasSurvey survey;
  try {
    const ProbeReport id = run_blas_probe(settings, "", /*identify=*/true);
    const BlasKernel* own = find_blas_kernel(id.core);
    const BlasKernel* best = find_blas_kernel(best_kernel(flags));
    const bool weak = own && best && own->level < best->level;
    if (weak && request != "native") survey = survey_blas_kernels(flags, settings);
    c = choose_blas_kernel(request, flags, settings, weak && request != "native" ? &survey : nullptr);
    auto speed = [&](const std::string& kernel) {
      for (const auto& [name, r] : survey.verdicts)
        if (name == kernel && r.ok()) return " (" + std::to_string(std::lround(r.peak_gflops())) + " GFLOP/s)";
      return std::string();
    };
    if (weak || !c.coretype.empty() || !settings.user_coretype.empty())
      *line = "BLAS kernel " + c.kernel + speed(c.kernel) +
              (c.kernel == id.core ? "" : ", not OpenBLAS's own choice " + id.core + speed(id.core)) +
              (weak ? " (weaker than the " + best->name + " this CPU runs)" : "") + ": " + c.note + remote;
  } catch (const std::runtime_error& e) {
    if (request != "auto" && request != "native") throw ConfigError("launch.blas " + request + ": " + e.what());
    *line = std::string("BLAS kernel: OpenBLAS's own choice (") + e.what() + ")";
    return {};
  }
  if (!c.verdict.ok() && request != "auto" && request != "native")
    throw ConfigError(spec.source + ": key 'launch.blas': " + request + ": " + c.verdict.refused);
  if (c.coretype.empty()) return {};
  return {"OPENBLAS_CORETYPE=" + c.coretype};
}

struct RunOptions {
  std::string grid;
  std::vector<std::string> overrides;  ///< key=value arguments after the grid (grid_overrides.h)
  std::string name;                    ///< --name
  std::string out;
  std::string trainer;
  int parallel = 0;
  double progress_every_s = 30;
  double report_every_s = 30;
  bool quiet = false;
};

/// What a run's command needs that the grid does not say, as `sweep run` and `sweep plan
/// --slurm-script` both work it out: the trainer, the BLAS kernel and the container image's
/// digest. `*blas` gets choose_blas's line.
SweepRunOptions command_options(const SweepSpec& spec, const std::string& out_dir, std::string* blas) {
  SweepRunOptions opt;
  opt.out_dir = out_dir;
  opt.train_binary = spec.launch.trainer.empty() ? executable_dir() + "/sweep-train" : spec.launch.trainer;
  if (spec.program.empty() && !fs::exists(opt.train_binary))
    throw ConfigError("trainer '" + opt.train_binary + "' not found (build it, or pass --trainer)");
  opt.run_env = choose_blas(spec, blas);
  // The image by its contents, once per invocation: every record names it (container.*).
  if (const ContainerSpec& box = spec.launch.container; !box.runtime.empty()) {
    check_charliecloud_image(box, opt.out_dir, spec.source);
    const auto env = container_run_env(box, container_image_digest(box, sweep_cache_dir()));
    opt.run_env.insert(opt.run_env.end(), env.begin(), env.end());
  }
  if (spec.launch.launcher == "slurm")  // compute nodes see paths as given: make them absolute (out_dir already is)
    opt.train_binary = fs::absolute(opt.train_binary).lexically_normal().string();
  return opt;
}

int run_run(const RunOptions& o) {
  SweepSpec spec = load_overridden_grid(o.grid, o.trainer, parse_overrides(o.overrides, o.name));
  Expansion e = expand_grid(spec);  // validates every point first: nothing is created for a bad grid
  print_warnings(e);
  for (const auto& note : check_data_files(spec, e.points)) std::fprintf(stderr, "%s\n", note.c_str());
  if (o.parallel > 0) spec.launch.parallel = o.parallel;
  const std::string out = o.out.empty() ? "sweep-out/" + spec.name : o.out;
  check_sweep_dir_target(out, o.out.empty() ? "" : "--out ");
  std::string blas;
  SweepRunOptions opt = command_options(spec, absolute_dir(out), &blas);
  opt.quiet = o.quiet;
  opt.tty = ::isatty(STDOUT_FILENO) == 1;
  opt.progress_every_s = o.progress_every_s;
  opt.report_every_s = o.report_every_s;
  opt.report_binary = executable_dir() + "/sweep";
  if (!blas.empty()) std::printf("%s\n", blas.c_str());
  // Runs on other hosts take run.lock there: locks this directory's file system keeps to
  // one host would let a second writer in unseen.
  if (spec.launch.launcher == "slurm" || !spec.launch.hosts.empty() || !spec.launch.hostfile.empty())
    if (const std::string why = locks_local_to_host(opt.out_dir); !why.empty())
      throw ConfigError(opt.out_dir + ": " + why +
                        "; runs on other hosts need locks every host sees (see docs/grid.md, "
                        "Slurm: shared file systems)");
  std::printf("sweep %s: %zu runs -> %s (launcher %s, parallel %d)\n", spec.name.c_str(), e.points.size(),
              opt.out_dir.c_str(), spec.launch.launcher.c_str(), spec.launch.parallel);
  std::fflush(stdout);
  const auto run_points = [&](const std::vector<GridPoint>& points, const std::map<std::string, int64_t>& stop) {
    opt.stop_at = stop;
    if (spec.launch.launcher == "slurm") {
      SlurmCli slurm;
      return run_sweep_slurm(spec, points, opt, slurm);
    }
    // Each run under sweep-box: it ends with everything it started (process_tree.h).
    SpawnRunner runner(executable_dir() + "/sweep-box", spec.launch.grace_s);
    return run_sweep(spec, points, opt, runner);
  };
  // A tpe search runs batch after batch, each proposed from the records of the ones
  // before, under one hold of the directory's lock: no other driver runs between batches.
  // A halving search likewise, rung after rung, and a pbt search generation after generation;
  // an asha search writes search.log before its one session starts.
  std::unique_ptr<SweepLock> search_lock;
  const bool staged = spec.search.kind == "tpe" || spec.search.halves() || spec.search.kind == "pbt";
  if (staged) search_lock = std::make_unique<SweepLock>(opt.out_dir), opt.lock_held = true;
  // And between batches too a stop signal is caught, not fatal: it stops the next batch at
  // once, as it would have stopped this one (each batch's executor takes the handlers over
  // and hands them back). Without this, a Ctrl-C right after search.log named a batch's
  // trials killed the driver before that batch's executor had its handlers.
  std::optional<StopSignals> between_batches;
  if (staged) between_batches.emplace();
  const auto whole = [&](const std::vector<GridPoint>& points) { return run_points(points, {}); };
  const auto fed = [&](const std::vector<GridPoint>& points, RunFeed& feed) {
    opt.feed = &feed;
    SweepSummary r = run_points(points, {});
    opt.feed = nullptr;
    return r;
  };
  const double started = monotonic_s();
  SweepSummary s = spec.search.kind == "tpe"       ? run_tpe_search(spec, opt.out_dir, whole)
                   : spec.search.kind == "halving" ? run_halving_search(spec, e.points, opt.out_dir, run_points)
                   : spec.search.kind == "asha"    ? run_asha_search(spec, e.points, opt.out_dir, fed)
                   : spec.search.kind == "pbt"     ? run_pbt_search(spec, e.points, opt.out_dir, run_points)
                                                   : whole(e.points);
  s.wall_s = monotonic_s() - started;
  // How busy the workers were: where synchronous halving waits for a rung's last run and
  // asha does not, it shows here.
  if (spec.search.halves() && s.busy_s > 0)
    std::printf("sweep %s: %d workers (launch.parallel) busy %.0f%% of %.1f s (%.1f run-seconds)\n", spec.name.c_str(),
                spec.launch.parallel, 100.0 * s.busy_s / (s.wall_s * spec.launch.parallel), s.wall_s, s.busy_s);
  // A search decides after its last batch or rung ran (its last trials' results, the
  // bracket's best, "done"): the report the last batch wrote predates that, so it is
  // written again from what search.log now says.
  if (staged && !s.stop_signal && s.report_path != "(not written)") {
    try {
      write_report(opt.out_dir, spec.name, s.report_path);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "sweep: warning: report not written: %s (try `sweep report %s`)\n", ex.what(),
                   opt.out_dir.c_str());
    }
  }
  std::printf("sweep %s: %d completed, %d already done, %d failed", spec.name.c_str(), s.completed, s.skipped,
              s.failed);
  if (s.interrupted) std::printf(", %d interrupted", s.interrupted);
  if (s.not_started) std::printf(", %d not started", s.not_started);
  if (s.retries) std::printf(" (%d retries)", s.retries);
  std::printf("; report: %s\n", s.report_path.c_str());
  if (!s.stop_reason.empty()) std::printf("sweep %s: stopped: %s\n", spec.name.c_str(), s.stop_reason.c_str());
  if (s.stop_signal) return 128 + s.stop_signal;
  return s.failed || !s.stop_reason.empty() ? 1 : 0;
}

struct PlanOptions {
  std::string grid;
  std::vector<std::string> overrides;  ///< as for run
  std::string name;                    ///< as for run
  std::string out;
  std::string trainer;
  int parallel = 0;
  bool slurm_script = false;
  std::string show;  ///< --show ID: that point's config, as its run gets it
};

/// `sweep plan --show ID`: the point whose run id is (or starts with) `id`, its config text
/// byte for byte as the run's config.yaml will hold it, and for a grid's program what it
/// is handed and what it keeps as its own. Exit 2 for an id that names no point, or several.
int show_point(const SweepSpec& spec, const std::string& id) {
  std::vector<GridPoint> found;
  (void)expand_grid_each(spec, [&](GridPoint&& p) {
    if (p.id.rfind(id, 0) == 0) found.push_back(std::move(p));
  });
  if (found.size() != 1)
    throw ConfigError(spec.source + ": --show '" + printable(id) + "': " +
                      (found.empty() ? std::string("no point of the grid has that run id")
                                     : std::to_string(found.size()) + " points have run ids that start so") +
                      " (sweep plan " + spec.source + " lists them)");
  const GridPoint& p = found.front();
  std::string values;
  for (const auto& [k, v] : p.values) values += (values.empty() ? "" : " ") + k + "=" + v;
  std::printf("# run %s%s: its config.yaml, byte for byte (the run id is its XXH3-64)\n", p.id.c_str(),
              values.empty() ? "" : (" (" + values + ")").c_str());
  const std::string text = to_yaml(p.config);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (spec.program.empty()) return 0;
  const ProgramSpec& prog = spec.program;
  const RunConfig& c = p.config;
  std::printf("# the program is handed these keys only; it keeps its own default for every other built-in key\n");
  if (prog.accum == "global" && c.writes("train.accum"))
    std::printf("# program.accum global: its accumulation key gets train.accum x dist.world_size = %lld\n",
                static_cast<long long>(c.train.accum) * static_cast<long long>(c.dist.world_size));
  if (prog.steps == "plus_one" && c.writes("train.steps"))
    std::printf("# program.steps plus_one: its step key gets train.steps - 1 = %lld (it trains iterations 0 to %lld)\n",
                static_cast<long long>(c.train.steps - 1), static_cast<long long>(c.train.steps - 1));
  std::printf("# torch.distributed's RANK, WORLD_SIZE, MASTER_ADDR, ...: %s\n",
              c.dist.world_size > 1  ? "set (more than one rank)"
              : prog.single_rank_env ? "set (program.single_rank_env)"
                                     : "not set (one rank; program.single_rank_env: true sets them)");
  return 0;
}

/// `sweep plan --slurm-script`: the sbatch argv and batch script of the first job array
/// `sweep run` would submit, exactly; nothing is submitted or written.
int print_slurm_script(const SweepSpec& spec, const Expansion& e, const std::string& dir) {
  if (spec.launch.launcher != "slurm")
    throw ConfigError(spec.source + ": --slurm-script: launch.launcher is " + spec.launch.launcher + ", not slurm");
  std::string blas;
  const SweepRunOptions opt = command_options(spec, absolute_dir(dir), &blas);
  SlurmCli cli;
  const SlurmPreview p = preview_slurm(spec, e.points, opt, cli.limits());
  if (p.argv.empty()) {
    std::printf("# sweep %s: every run is done; `sweep run` would submit nothing\n", spec.name.c_str());
    return 0;
  }
  std::string line;
  for (const auto& a : p.argv) line += (line.empty() ? "" : " ") + shell_quote(a);
  std::printf("# sweep %s: the first of %zu job arrays, %zu runs (MaxArraySize %d%s); nothing is submitted\n",
              spec.name.c_str(), p.arrays, p.runs, p.limits.max_array_size,
              p.limits.read ? ", from scontrol show config" : ": Slurm's default, scontrol show config unread");
  if (!blas.empty()) std::printf("# %s\n", blas.c_str());
  std::printf("# sbatch argv, one argument per word (sbatch inherits the environment of `sweep run`):\n%s\n",
              line.c_str());
  std::printf("# batch script, written to %s by `sweep run`:\n", p.argv.back().c_str());
  std::fwrite(p.script.data(), 1, p.script.size(), stdout);
  return 0;
}

int run_plan(const PlanOptions& o) {
  SweepSpec spec = load_overridden_grid(o.grid, o.trainer, parse_overrides(o.overrides, o.name));
  if (o.parallel > 0) spec.launch.parallel = o.parallel;
  std::string dir = o.out.empty() ? "sweep-out/" + spec.name : o.out;
  if (!o.show.empty()) return show_point(spec, o.show);
  if (o.slurm_script) {
    Expansion e = expand_grid(spec);
    print_warnings(e);
    for (const auto& note : check_data_files(spec, e.points)) std::fprintf(stderr, "%s\n", note.c_str());
    return print_slurm_script(spec, e, dir);
  }
  // The points stream through the table, which keeps a few dozen bytes of each; only a
  // halving or pbt search, whose schedule the table states, keeps them all.
  PlanTable table(spec, dir);
  DataFileCheck data_files(spec);
  std::vector<GridPoint> kept;
  const bool keep = spec.search.halves() || spec.search.kind == "pbt";
  Expansion e = expand_grid_each(spec, [&](GridPoint&& p) {
    data_files.add(p);
    table.add(p);
    if (keep) kept.push_back(std::move(p));
  });
  e.points = std::move(kept);
  print_warnings(e);
  for (const auto& note : data_files.finish()) std::fprintf(stderr, "%s\n", note.c_str());
  std::string blas;
  const auto env = choose_blas(spec, &blas);
  table.render(e, stdout);
  if (!blas.empty()) std::printf("%s\n", blas.c_str());
  return 0;
}

struct StatusOptions {
  std::string dir;
};

/// Where a running run is: "step 37/100, loss 2.31, 1m12s into attempt 1", read from its
/// partial record without disturbing the writer; the time alone when the record cannot be
/// read right now (before its first flush, or caught mid-update). A run whose record has
/// not advanced for longer than stall_threshold_s says so: "step 37/100, loss 2.31, no
/// progress for 47 s, ...".
std::string running_detail(const std::string& run_dir, const RunState& st) {
  std::string out;
  try {
    const RecordProgress p = read_partial_progress(run_dir + "/record.h5");
    char buf[96];
    std::snprintf(buf, sizeof buf, "step %lld/%lld, loss %.4g", static_cast<long long>(p.step),
                  static_cast<long long>(p.steps), p.loss);
    out = (p.step > 0 ? buf : "no step recorded yet") + stall_words(p);
  } catch (const RecordError&) {
    out = "no step recorded yet";
  }
  if (const std::time_t started = attempt_started(st); started > 0)
    out += ", " + attempt_age_words(started, st.attempts, std::time(nullptr));
  return out;
}

/// What each completed run came to, by run id: its objective and every health flag, the
/// sweep-level ones (throughput_outlier) included, which need the whole sweep's records.
/// From the index entries scan_runs made or found: the records that load_sweep takes as
/// the sweep's runs (completed, diverged or stopped, and their run's own).
struct CompletedDetail {
  std::string text;    ///< "final eval loss 2.31; health: eval_rising"
  std::string health;  ///< "health: eval_rising", or "health: ok"
  bool flagged = false;
};
std::map<std::string, CompletedDetail> completed_details(const std::unordered_map<std::string, RunState>& runs,
                                                         const SweepIndex& index) {
  const FinishedRuns read = finished_runs(runs, index);
  const auto& done = read.done;
  const auto& outliers = read.outliers;
  std::map<std::string, CompletedDetail> out;
  for (size_t i = 0; i < done.size(); ++i) {
    const IndexedRecord& e = *done[i].second;
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.6g", e.objective);
    std::string flags = e.health;
    for (const auto& f : outliers[i]) flags += (flags.empty() ? "" : " ") + f.name;
    const std::string unverified = e.verified ? "" : "; unverified (schema version 1: no digest to check it by)";
    const std::string health = "health: " + (flags.empty() ? "ok" : flags);
    out[done[i].first] = {e.objective_name + buf + "; " + health + unverified, health, !flags.empty()};
  }
  return out;
}

int run_status(const StatusOptions& o) {
  if (!fs::is_directory(o.dir + "/runs")) throw ConfigError(o.dir + ": not a sweep directory (no runs/ in it)");
  const std::string holder = SweepLock::holder(o.dir);
  SweepIndex index = SweepIndex::load_saying(o.dir);
  auto runs = scan_runs(o.dir, &index);  // (which saves it)
  std::map<std::string, CompletedDetail> figures = completed_details(runs, index);
  size_t flagged = 0;
  auto points = read_points_file(o.dir);
  std::vector<std::pair<std::string, std::string>> rows = points;
  std::map<std::string, bool> listed;
  for (const auto& [id, v] : points) listed[id] = true;
  for (const auto& [id, st] : runs)
    if (!listed.count(id)) {
      // A run `sweep resume` or `sweep fork` started says where it came from.
      std::ifstream in(o.dir + "/runs/" + id + "/lineage");
      std::string from;
      std::getline(in, from);
      rows.emplace_back(id, from.empty() ? "(not in the last grid run here)" : "(" + printable(from) + ")");
    }
  std::map<std::string, int> counts;
  // Runs submitted to Slurm: one squeue says which still wait there (and why) or run,
  // whether or not a driver watches them.
  std::map<std::string, SlurmRunView> in_slurm;
  std::vector<std::string> running_ids;
  for (const auto& [id, st] : runs)
    if (st.state == RunStatus::running) running_ids.push_back(id);
  if (!running_ids.empty() && fs::exists(o.dir + "/slurm-jobs")) {
    try {
      SlurmCli cli;
      in_slurm = slurm_run_views(o.dir, running_ids, cli);
    } catch (const std::runtime_error&) {
      // No squeue here: the state files alone speak.
    }
  }
  std::string table;
  for (const auto& [id, values] : rows) {
    auto it = runs.find(id);
    RunState st = it == runs.end() ? RunState{} : it->second;
    // The word shown: the state's, or what a running run turns out to be.
    std::string shown = status_name(st.state);
    const auto slurm = st.state == RunStatus::running ? in_slurm.find(id) : in_slurm.end();
    if (slurm != in_slurm.end()) {
      st.detail = slurm->second.detail;
      if (slurm->second.queued)
        shown = "queued";
      else
        st.detail += "; " + running_detail(o.dir + "/runs/" + id, st);
    } else if (st.state == RunStatus::running && holder.empty()) {
      // "running" with no driver holding the lock: the driver died without cleaning up.
      shown = "orphaned";
    } else if (st.state == RunStatus::running) {
      st.detail = running_detail(o.dir + "/runs/" + id, st);
    }
    if (st.state == RunStatus::completed && figures.count(id)) {
      st.detail = figures[id].text;
      flagged += figures[id].flagged ? 1 : 0;
    } else if ((st.state == RunStatus::diverged || st.state == RunStatus::stopped) && figures.count(id)) {
      st.detail += (st.detail.empty() ? "" : "; ") + figures[id].health;  // the flags every reader names
    }
    ++counts[shown];
    // Escaped text may be longer than its column: padded, never cut.
    auto column = [](const std::string& s, size_t width) {
      std::string t = terminal_text(s);
      return t.size() < width ? t + std::string(width - t.size(), ' ') : t;
    };
    char rest[64];
    std::snprintf(rest, sizeof rest, "  %8d  %-11s  ", st.attempts,
                  st.failure == FailureClass::none ? "-" : failure_class_name(st.failure));
    table += "  " + column(id, 16) + "  " + column(shown, 11) + rest + terminal_text(values) +
             (st.detail.empty() ? "" : "  [" + terminal_text(st.detail) + "]") + "\n";
  }
  std::printf("sweep dir %s: %s\n", terminal_text(o.dir).c_str(),
              holder.empty() ? "no driver running" : ("driver running (" + terminal_text(holder) + ")").c_str());
  std::string summary;
  for (const char* s : {"completed", "running", "queued", "stopped", "failed", "interrupted", "diverged", "orphaned",
                        "stale", "damaged", "pending"})
    if (counts[s])
      summary += (summary.empty() ? "" : ", ") + std::to_string(counts[s]) + " " + s +
                 (std::string(s) == status_name(RunStatus::completed) && flagged
                      ? " (" + std::to_string(flagged) + " with health flags)"
                      : "");
  std::printf("%zu runs: %s\n", rows.size(), summary.empty() ? "none" : summary.c_str());
  std::printf("  %-16s  %-11s  %8s  %-11s  %s\n", "id", "state", "attempts", "failure", "values");
  std::fwrite(table.data(), 1, table.size(), stdout);
  for (const std::string& line : acceptance_lines(o.dir)) std::printf("%s\n", terminal_text(line).c_str());
  // Each run's newest `sweep diagnose` verdict, one line each.
  for (const auto& [id, st] : runs)
    if (const std::string d = newest_diagnosis(o.dir + "/runs/" + id); !d.empty())
      std::printf("  %s: %s\n", terminal_text(id).c_str(), terminal_text(d).c_str());
  return 0;
}

struct AcceptOptions {
  std::string dir;
  std::vector<std::string> files;
};

/// `sweep accept DIR --files F...`: the changes of F since the runs recorded it accepted
/// (accepted_changes.h); one line per acceptance.
int run_accept(const AcceptOptions& o) {
  for (const Acceptance& a : accept_changes(o.dir, o.files)) std::printf("%s\n", terminal_text(a.line()).c_str());
  return 0;
}

}  // namespace

std::vector<HealthFlag> sweep_level_flags(const std::string& dir, const std::string& run_id) {
  if (!fs::is_directory(dir + "/runs")) return {};
  SweepIndex index = SweepIndex::load(dir);
  const FinishedRuns read = finished_runs(scan_runs(dir, &index), index);
  for (size_t i = 0; i < read.done.size(); ++i)
    if (read.done[i].first == run_id) return read.outliers[i];
  return {};
}

// Text from disk (run directory names, points.tsv, state files, the lock) shown on a
// terminal: escaped with printable()'s rules, so no escape sequence reaches the terminal.
// Fed in pieces because printable() cuts its result near 200 characters; a piece never
// ends inside a UTF-8 sequence and is short enough never to be cut.
std::string terminal_text(const std::string& s) {
  std::string out;
  for (size_t at = 0; at < s.size();) {
    size_t n = std::min<size_t>(40, s.size() - at);
    while (at + n < s.size() && n > 1 && (static_cast<unsigned char>(s[at + n]) & 0xc0) == 0x80) --n;
    out += printable(s.substr(at, n));
    at += n;
  }
  return out;
}

void check_sweep_dir_target(const std::string& dir, const std::string& option) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec || !fs::exists(st)) return;  // a new directory: created when the first run starts
  const std::string name = option + terminal_text(dir);
  if (!fs::is_directory(st))
    throw ConfigError(name + ": exists and is not a directory; expected a sweep directory (new, empty or earlier)");
  for (const char* mark : {"points.tsv", "runs", "sweep.lock"})
    if (fs::exists(fs::path(dir) / mark, ec)) return;
  if (fs::is_empty(dir, ec) || ec) return;  // unreadable: the write itself says why
  throw ConfigError(name +
                    ": not a sweep directory (no points.tsv, runs/ or sweep.lock in it, but other files); "
                    "expected a new or empty directory, or one an earlier sweep wrote");
}

CliAction setup_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "run every point of a grid not yet completed, then write report.html");
  cmd->add_option("grid", o->grid, "grid file (YAML)")->required();
  cmd->add_option("overrides", o->overrides,
                  "key=value sets a base value; key=v1,v2 or key=range(start,stop,step) makes key an axis "
                  "(docs/grid.md, \"Command-line overrides\")");
  cmd->add_option("--name", o->name, "the sweep's name instead of the grid's (and so sweep-out/<name>)");
  cmd->add_option("--out", o->out, "sweep directory (default sweep-out/<name>)");
  cmd->add_option("--trainer", o->trainer,
                  "training program: sweep-train or one built on sweep::train_main (default: launch.trainer, else "
                  "sweep-train beside sweep)");
  cmd->add_option("--parallel", o->parallel, "runs at once (overrides launch.parallel)")->check(CLI::Range(1, 100000));
  cmd->add_option("--progress-every", o->progress_every_s, "seconds between progress lines when not on a terminal")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--report-every", o->report_every_s,
                  "seconds between rewrites of report.html while runs go on (default 30; 0 = only at the end)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_flag("--quiet", o->quiet, "no per-run lines");
  return [o, cmd]() { return cmd->parsed() ? run_run(*o) : -1; };
}

CliAction setup_plan(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand(
      "plan", "print the expanded grid and which runs are done; changes nothing but the sweep's index (records.index)");
  cmd->add_option("grid", o->grid, "grid file (YAML)")->required();
  cmd->add_option("overrides", o->overrides, "key=value or key=v1,v2 ..., as for run");
  cmd->add_option("--name", o->name, "the sweep's name instead of the grid's, as for run");
  cmd->add_option("--out", o->out, "sweep directory (default sweep-out/<name>)");
  cmd->add_option("--trainer", o->trainer, "training program whose model kinds the grid uses (as for run)");
  cmd->add_option("--parallel", o->parallel, "runs at once (overrides launch.parallel, as for run)")
      ->check(CLI::Range(1, 100000));
  cmd->add_flag("--slurm-script", o->slurm_script,
                "print the sbatch argv and batch script of the first job array `sweep run` would submit (launcher "
                "slurm); submits nothing");
  cmd->add_option("--show", o->show,
                  "print the config of the point with this run id (or a unique start of it) exactly as its run gets "
                  "it, and what a grid's program is handed");
  return [o, cmd]() { return cmd->parsed() ? run_plan(*o) : -1; };
}

CliAction setup_accept(CLI::App& app) {
  auto o = std::make_shared<AcceptOptions>();
  auto* cmd = app.add_subcommand("accept",
                                 "accept a cosmetic change of program files: the runs that recorded their older hash "
                                 "stay done (noted in DIR/accepted-changes, shown by plan and status)");
  cmd->add_option("dir", o->dir, "sweep directory")->required();
  cmd->add_option("--files", o->files,
                  "the changed source files: paths relative to the current directory, or the end of one path the "
                  "records name (train.py)")
      ->required();
  return [o, cmd]() { return cmd->parsed() ? run_accept(*o) : -1; };
}

CliAction setup_status(CLI::App& app) {
  auto o = std::make_shared<StatusOptions>();
  auto* cmd = app.add_subcommand(
      "status", "show each run's state in a sweep directory; changes nothing but its derived index (records.index)");
  cmd->add_option("dir", o->dir, "sweep directory")->required();
  return [o, cmd]() { return cmd->parsed() ? run_status(*o) : -1; };
}

namespace {

/// `sweep verify DIR`: every record read and its digest verified, whatever the index
/// says, and the index written anew from what was read. Exit 1 when a record is damaged
/// or stale (the next `sweep run` moves it aside and runs the point again).
int run_verify(const std::string& dir) {
  if (!fs::is_directory(dir + "/runs")) throw ConfigError(dir + ": not a sweep directory (no runs/ in it)");
  SweepIndex index = SweepIndex::empty(dir);
  const auto runs = scan_runs(dir, &index);
  std::vector<std::pair<std::string, const RunState*>> sorted;
  sorted.reserve(runs.size());
  for (const auto& [id, st] : runs) sorted.emplace_back(id, &st);
  std::sort(sorted.begin(), sorted.end());
  size_t good = 0, bad = 0;
  for (const auto& [id, st] : sorted) {
    if (next_action(*st) == NextAction::start_over) {
      ++bad;
      std::printf("%s  %s: %s\n", id.c_str(), status_name(st->state), terminal_text(st->detail).c_str());
    } else if (index.get(id)) {
      ++good;
    }
  }
  std::printf("%zu record%s read and verified, %zu damaged or stale; %s/%s written anew\n", good, good == 1 ? "" : "s",
              bad, dir.c_str(), kIndexFile);
  return bad ? 1 : 0;
}

}  // namespace

CliAction setup_verify(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "verify",
      "read every record of a sweep directory and verify its digest, whatever the index says; rebuild the index");
  cmd->add_option("dir", *dir, "sweep directory")->required();
  return [dir, cmd]() { return cmd->parsed() ? run_verify(*dir) : -1; };
}

}  // namespace sweep
