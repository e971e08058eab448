#include "lineage_run.h"

#include <filesystem>
#include <system_error>

#include "atomic_file.h"     // write_file_atomically
#include "model_schema.h"    // kDecoderKind
#include "record.h"          // read_record_unverified, read_record_digest
#include "reproduce.h"       // change_layout, checkpoint_from_step, config_changes, launch_as_recorded
#include "run_config.h"      // load_run_config, run_id, math_id
#include "run_files.h"       // check_run_entries, complete_checkpoints
#include "sweep_dir.h"       // write_run_state, program_declared
#include "sweep_lock.h"      // SweepLock
#include "text.h"            // join, printable
#include "trainer_models.h"  // load_trainer_models

namespace fs = std::filesystem;

namespace sweep {
namespace {

/// The parent run: where it is, what it ran with, and how to start its trainer again.
struct Parent {
  std::string dir, sweep_dir, id, status;  // status: of record.h5 or its partial; "" without one
  std::string sweep_id;                    // the sweep the run belongs to (its record says)
  bool completed_record = false;           // record.h5 is there
  RunConfig config;
  LocalLaunch launch;
  std::string blas_note;  // launch_as_recorded's line about the kernel, "" when none
};

Parent read_parent(const LineageOptions& opt, const std::string& verb) {
  Parent p;
  fs::path run = fs::absolute(opt.run_dir).lexically_normal();
  if (run.filename().empty()) run = run.parent_path();
  std::error_code ec;
  if (!fs::is_directory(run, ec)) throw ConfigError(printable(opt.run_dir) + ": not a run directory");
  if (run.parent_path().filename() != "runs")
    throw ConfigError(printable(opt.run_dir) + ": expected a run directory of a sweep (<sweep dir>/runs/<id>): " +
                      verb + " puts the new run beside it");
  p.dir = run.string(), p.sweep_dir = run.parent_path().parent_path().string(), p.id = run.filename().string();
  const std::string config = p.dir + "/config.yaml";
  if (!fs::is_regular_file(config, ec)) throw ConfigError(config + ": missing; not a run directory of a sweep");
  // What the run ran with: its record, finished or not.
  Record rec;
  for (const char* name : {"/record.h5", "/record.h5.partial"}) {
    if (!fs::exists(p.dir + name, ec)) continue;
    try {
      rec = read_record_unverified(p.dir + name);
      p.status = rec.status, p.sweep_id = rec.sweep_id, p.completed_record = std::string(name) == "/record.h5";
    } catch (const RecordError&) {
      if (std::string(name) == "/record.h5") throw;  // a damaged record is named, never guessed over
    }
    break;
  }
  if (!rec.env("program").empty())
    throw ConfigError("run " + p.id + " was trained by the grid's program " + printable(rec.env("program")) +
                      ": sweep " + verb +
                      " starts sweep-train or a launch.trainer program; a script continues from its own "
                      "checkpoint (run.restore) when `sweep run` runs its point again");
  if (!rec.env("container.runtime").empty())
    throw ConfigError("run " + p.id + " ran in a container (" + rec.env("container.runtime") + " " +
                      printable(rec.env("container.image")) + "): sweep " + verb + " starts ranks on the host only");
  p.launch = opt.launch;
  const auto kind = rec.config.find("model.kind");
  if (kind != rec.config.end() && kind->second != kDecoderKind) {
    // A model of the user's own: the trainer that trained it knows its keys.
    if (!opt.trainer_given) {
      const std::string t = rec.env("trainer");
      if (t.empty())
        throw ConfigError("run " + p.id + ": model.kind " + kind->second +
                          " comes from a program of its own, and its record does not name it; pass --trainer");
      if (!program_declared(p.sweep_dir, declared_trainer(t)))
        throw ConfigError("run " + p.id + ": its record names the trainer " + printable(t) + ", which no grid run in " +
                          printable(p.sweep_dir) + " declared; pass --trainer");
      p.launch.train_binary = t;
    }
    load_trainer_models(p.launch.train_binary,
                        "trainer '" + p.launch.train_binary + "' (model.kind " + kind->second + ")");
  }
  p.config = load_run_config(config);
  if (p.sweep_id.empty()) p.sweep_id = fs::path(p.sweep_dir).filename().string();
  p.blas_note = launch_as_recorded(rec, p.launch);  // its BLAS kernel, oneDNN and device
  return p;
}

/// Trains `dir` (its config.yaml written) with `extra` arguments and reads how it ended;
/// the run's state file says what the driver would.
LineageResult train_run(const Parent& p, const RunConfig& cfg, const std::string& dir, bool resume,
                        const std::vector<std::string>& extra, ProcessRunner& runner) {
  LineageResult res;
  res.out_dir = dir;
  LocalLaunch launch = p.launch;
  launch.threads = cfg.train.threads;
  const int world = int(cfg.dist.world_size);
  if (world > 1 && !fs::exists(launch.mpiexec))
    throw ConfigError("mpiexec '" + launch.mpiexec + "' not found; a run on " + std::to_string(world) +
                      " ranks needs it (pass --mpiexec)");
  std::vector<std::string> argv = train_argv(launch, world, dir, p.sweep_id, resume);
  argv.insert(argv.end(), extra.begin(), extra.end());
  RunState state = read_run_state(dir);
  ++state.attempts, state.state = RunStatus::running, state.detail.clear(), state.digest.clear();
  write_run_state(dir, state);
  const ExitStatus st = runner.run(argv, dir + (world > 1 ? "/logs/launcher.log" : "/logs/rank0.log"));
  std::optional<RunStatus> status;
  try {
    status = status_or(read_record_status(dir + "/record.h5").status, RunStatus::failed);
  } catch (const RecordError&) {
    status.reset();
  }
  res.completed = status == RunStatus::completed;
  state.state = status == RunStatus::completed || status == RunStatus::diverged ? *status : RunStatus::failed;
  state.detail = st.ok() ? "" : st.describe();
  if (status && fs::exists(dir + "/record.h5")) state.digest = read_record_digest(dir + "/record.h5");
  write_run_state(dir, state);
  res.lines.push_back(std::string(status_name(state.state)) + ": " + dir + "/record.h5" +
                      (fs::exists(dir + "/record.h5") ? "" : ".partial") + (st.ok() ? "" : " (" + st.describe() + ")"));
  if (!p.blas_note.empty()) res.lines.push_back(p.blas_note);
  return res;
}

/// Creates the new run's directory (or takes the one an earlier try left) with its config.
void prepare(const std::string& dir, const RunConfig& cfg, const std::string& lineage) {
  check_run_entries(dir);
  std::error_code ec;
  fs::create_directories(dir + "/logs", ec);
  if (ec) throw std::runtime_error(dir + "/logs: cannot create: " + ec.message());
  write_file_atomically(dir + "/config.yaml", to_yaml(cfg));
  write_file_atomically(dir + "/lineage", lineage + "\n");
}

}  // namespace

LineageResult resume_run(const LineageOptions& opt, ProcessRunner& runner) {
  Parent p = read_parent(opt, "resume");
  if (p.completed_record)
    throw ConfigError("run " + p.id + " has finished (" + p.status + "): nothing to resume; `sweep fork " + p.dir +
                      " --from-step S KEY=VALUE` starts a new run from one of its checkpoints");
  const auto kept = complete_checkpoints(p.dir);
  if (kept.empty())
    throw ConfigError("run " + p.id + " has no complete checkpoint to resume from (" + p.dir +
                      "/checkpoints); `sweep run` trains its point again from step 0");
  const std::string from = fs::path(kept.back().second).filename().string();  // step_N, for the lines
  RunConfig cfg = p.config;
  change_layout(cfg, opt.world_size, opt.accum, opt.micro_batch, "resume");
  SweepLock lock(p.sweep_dir);  // no `sweep run` on the same directory meanwhile
  const std::string id = run_id(cfg);
  if (id == p.id) {
    LineageResult r = train_run(p, cfg, p.dir, /*resume=*/true, {}, runner);
    r.lines.insert(r.lines.begin(), "resumed run " + p.id + " in place from its " + from);
    return r;
  }
  const std::string dir = run_dir(p.sweep_dir, id);
  if (fs::exists(dir + "/record.h5"))
    throw ConfigError("run " + id + " (" + p.id + " on this layout) has finished already: " + dir + "/record.h5");
  const bool again = !complete_checkpoints(dir).empty();  // an earlier resume got that far
  const std::string layout = "world " + std::to_string(cfg.dist.world_size) + " x accum " +
                             std::to_string(cfg.train.accum) + " x micro-batch " +
                             std::to_string(cfg.train.micro_batch);
  prepare(dir, cfg, "resumed from run " + p.id + " at step " + std::to_string(kept.back().first) + " on " + layout);
  const std::vector<std::string> extra =
      again ? std::vector<std::string>{} : std::vector<std::string>{"--resume-from", kept.back().second};
  LineageResult r = train_run(p, cfg, dir, /*resume=*/again, extra, runner);
  r.lines.insert(r.lines.begin(),
                 "resumed run " + p.id + " from its " + from + " as run " + id + " on " + layout + " (the same math)");
  return r;
}

RunConfig fork_config(const RunConfig& parent, const std::string& parent_id, int64_t step, const FlatConfig& changes) {
  RunConfig cfg = apply_run_config(parent, changes);
  // What it trains, in its config: a new learning rate is a step change of the parent's
  // schedule at the fork's step (what a grid run of these keys trains bit for bit), and
  // the parent and step are part of its id, so a fork is never a grid point.
  if (cfg.train.lr != parent.train.lr) {
    const bool before_parents_switch = parent.train.lr_switch_step >= step;
    cfg.train.lr_before_switch = before_parents_switch ? parent.train.lr_before_switch : parent.train.lr;
    cfg.train.lr_switch_step = step;
  }
  cfg.train.fork_parent = parent_id, cfg.train.fork_step = step;
  return apply_run_config(cfg, {});  // checked as a whole, as a grid's run is
}

LineageResult fork_run(const LineageOptions& opt, ProcessRunner& runner) {
  if (opt.from_step < 1) throw ConfigError("--from-step: expected the step of one of the run's checkpoints (>= 1)");
  if (opt.set.empty())
    throw ConfigError("fork: give at least one KEY=VALUE to change (e.g. train.lr=1e-4); the same keys are the parent");
  Parent p = read_parent(opt, "fork");
  const std::string ckpt = checkpoint_from_step(p.dir, opt.from_step);
  const FlatConfig changes = config_changes(opt.set, "fork", "train.lr=1e-4");
  for (const auto& [key, value] : changes)
    if (key.rfind("model.", 0) == 0)
      throw ConfigError(printable(value.where) + ": a fork continues the parent's parameters, so the model keys (" +
                        key + ") cannot change");
  const RunConfig asked = apply_run_config(p.config, changes);
  RunConfig cfg = asked;
  if (run_id(cfg) == p.id)
    throw ConfigError("fork: " + join(opt.set, " ") + " leaves run " + p.id +
                      "'s config as it was; change a key to another value");
  if (opt.from_step >= cfg.train.steps)
    throw ConfigError("fork: --from-step " + std::to_string(opt.from_step) + " is not before the fork's last step (" +
                      "train.steps " + std::to_string(cfg.train.steps) +
                      "): nothing would be left to train; give train.steps=N with N > " +
                      std::to_string(opt.from_step) + " to train on");
  cfg = fork_config(p.config, p.id, opt.from_step, changes);
  const std::string id = run_id(cfg);
  SweepLock lock(p.sweep_dir);
  const std::string dir = run_dir(p.sweep_dir, id);
  if (fs::exists(dir + "/record.h5"))
    throw ConfigError("run " + id + " (this fork) has finished already: " + dir + "/record.h5");
  const bool again = !complete_checkpoints(dir).empty();                    // an earlier try of this fork got that far
  const std::vector<std::string> keys = math_differences(p.config, asked);  // the change, as asked
  const std::string what = keys.empty() ? join(opt.set, " ") : join(keys, "; ");
  prepare(dir, cfg, "forked from run " + p.id + " at step " + std::to_string(opt.from_step) + ": " + what);
  const std::vector<std::string> extra =
      again ? std::vector<std::string>{} : std::vector<std::string>{"--fork-from", ckpt};
  LineageResult r = train_run(p, cfg, dir, /*resume=*/again, extra, runner);
  r.lines.insert(r.lines.begin(),
                 "forked run " + p.id + " at step " + std::to_string(opt.from_step) + " as run " + id + ": " + what);
  return r;
}

}  // namespace sweep
