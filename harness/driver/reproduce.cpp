#include "reproduce.h"

#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include "blas_kernel.h"      // find_blas_kernel, missing_cpu_flags
#include "container_image.h"  // container_difference, container_image_digest
#include "data_file.h"        // sweep_cache_dir
#include "model_schema.h"     // kDecoderKind
#include "process.h"          // executable_dir
#include "program.h"          // program_given_keys
#include "record.h"           // read_record
#include "run_files.h"        // checkpoint_dir, complete_checkpoints, check_real_directory
#include "run_status.h"       // status_is
#include "sweep_dir.h"        // program_declared, declared_program
#include "sweep_records.h"    // read_run_record
#include "trainer_models.h"   // load_trainer_models

namespace fs = std::filesystem;

namespace sweep {
namespace {

std::string layout_text(int64_t world, int64_t accum, int64_t micro) {
  return "world " + std::to_string(world) + " x accum " + std::to_string(accum) + " x micro-batch " +
         std::to_string(micro);
}

/// What `sweep run` bound for the run in `run_dir`: its sweep directory when the run is
/// one (<sweep>/runs/<id>), else the run directory itself.
std::string bound_dir(const std::string& run_dir) {
  const fs::path run = fs::absolute(run_dir).lexically_normal();
  return run.parent_path().filename() == "runs" ? run.parent_path().parent_path().string() : run.string();
}

}  // namespace

// The canonical tree makes the bits independent of the layout while the global batch is
// the same (docs/design.md): without a leaf the micro-batch is the tree's leaf and stays
// as recorded; with one, any micro-batch that holds whole leaves.
void change_layout(RunConfig& c, int64_t world, int64_t accum, int64_t micro, const std::string& verb) {
  const int64_t w0 = c.dist.world_size, a0 = c.train.accum, b0 = c.train.micro_batch, g = w0 * a0 * b0;
  if (world < 0 || accum < 0 || micro < 0)
    throw ConfigError("--world-size, --accum and --micro-batch must be positive");
  if (!world && !accum && !micro) return;  // layout unchanged
  const std::string recorded =
      "the recorded global batch is " + std::to_string(g) + " sequences (" + layout_text(w0, a0, b0) + ")";
  if (micro && micro != b0 && c.train.leaf == 0)
    throw ConfigError("cannot " + verb + " with micro-batch " + std::to_string(micro) +
                      ": the recorded run has no train.leaf, so its micro-batch of " + std::to_string(b0) +
                      " sequences is the leaf of the canonical tree and another one sums in another order (a run "
                      "with train.leaf can change it)");
  if (micro && c.train.leaf > 0 && micro % c.train.leaf != 0)
    throw ConfigError("cannot " + verb + " with micro-batch " + std::to_string(micro) +
                      ": it is not a multiple of the recorded train.leaf (" + std::to_string(c.train.leaf) + ")");
  const int64_t b = micro ? micro : b0;
  if (g % b != 0)
    throw ConfigError("cannot " + verb + " with micro-batch " + std::to_string(b) + ": " + recorded +
                      ", which is not a multiple of " + std::to_string(b));
  const int64_t m = g / b;  // micro-batches per step
  if (!world && !accum) world = m % w0 == 0 ? w0 : 0, accum = world ? m / world : 0;
  if (!world && !accum)
    throw ConfigError("cannot " + verb + " with micro-batch " + std::to_string(b) + " on the recorded " +
                      std::to_string(w0) + " ranks: " + recorded + "; give --world-size or --accum");
  if (world && accum && world * accum * b != g)
    throw ConfigError("cannot " + verb + " with " + layout_text(world, accum, b) + " = " +
                      std::to_string(world * accum * b) + " sequences: " + recorded +
                      ", and only the same global batch can give the same bits");
  if (world && !accum) {
    if (m % world != 0)
      throw ConfigError("cannot " + verb + " on " + std::to_string(world) + " ranks: " + recorded + ", whose " +
                        std::to_string(m) + " micro-batches of " + std::to_string(b) +
                        " sequences do not split evenly over " + std::to_string(world) + " ranks");
    accum = m / world;
  }
  if (accum && !world) {
    if (m % accum != 0)
      throw ConfigError("cannot " + verb + " with accum " + std::to_string(accum) + ": " + recorded + ", whose " +
                        std::to_string(m) + " micro-batches of " + std::to_string(b) +
                        " sequences are not a multiple of " + std::to_string(accum));
    world = m / accum;
  }
  c.dist.world_size = world;
  c.train.accum = accum;
  c.train.micro_batch = b;
}

std::string launch_as_recorded(const Record& original, LocalLaunch& launch) {
  // The OpenBLAS kernel the record ran: each kernel has its own bits, so the re-run gets
  // the same one: as the original set it (env.OPENBLAS_CORETYPE), or pinned when this
  // machine's OpenBLAS would choose another; named as the likely cause when this CPU
  // cannot run it.
  std::string blas_note;
  if (const BlasKernel* k = find_blas_kernel(original.env("blas.kernel"))) {
    const std::set<std::string> flags = parse_cpu_flags(read_cpuinfo());
    const std::vector<std::string> missing = flags.empty() ? std::vector<std::string>{} : missing_cpu_flags(*k, flags);
    std::string native;
    if (missing.empty() && original.env("env.OPENBLAS_CORETYPE").empty()) {
      try {
        native = run_blas_probe(blas_settings_from_environment(), "", /*identify=*/true).core;
      } catch (const std::runtime_error&) {
        // No probe (an installation without it): pin the kernel to be sure.
      }
    }
    const char* user = std::getenv("OPENBLAS_CORETYPE");
    if (!missing.empty()) {
      blas_note = "BLAS kernel: the record ran " + k->name + ", which this CPU cannot run (it lacks " + join(missing) +
                  "); the re-run used OpenBLAS's own choice, so the kernel alone can make the bits differ";
    } else if (!original.env("env.OPENBLAS_CORETYPE").empty() || strcasecmp(native.c_str(), k->name.c_str()) != 0 ||
               (user && *user && strcasecmp(user, k->name.c_str()) != 0)) {
      launch.env.push_back("OPENBLAS_CORETYPE=" + k->name);
      if (original.env("env.OPENBLAS_CORETYPE").empty())
        blas_note = "BLAS kernel " + k->name + " as recorded" +
                    (user && *user ? ", not OPENBLAS_CORETYPE=" + printable(user) + " from the environment"
                                   : ", not this machine's own choice " + (native.empty() ? "(unknown)" : native));
    }
  }
  // oneDNN as the original had it (the trainer's SWEEP_ONEDNN; on unless it says off).
  if (original.env("onednn").rfind("off", 0) == 0) launch.env.push_back("SWEEP_ONEDNN=0");
  // On the kind of device the original ran on (the environment says which).
  if (original.env("device").rfind("cuda", 0) == 0) launch.device = "cuda";
  return blas_note;
}

FlatConfig config_changes(const std::vector<std::string>& items, const std::string& origin,
                          const std::string& example) {
  FlatConfig out;
  for (const auto& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError(origin + " '" + printable(item) + "': expected KEY=VALUE, e.g. " + example);
    out[item.substr(0, eq)] = ConfigValue{item.substr(eq + 1), origin + " " + item};
  }
  return out;
}

std::string checkpoint_from_step(const std::string& run_dir, int64_t step) {
  std::string dir = checkpoint_dir(run_dir, step);
  if (fs::exists(dir + "/DONE")) return dir;
  std::vector<std::string> kept;
  for (const auto& [s, d] : complete_checkpoints(run_dir)) kept.push_back(fs::path(d).filename().string());
  throw ConfigError("--from-step " + std::to_string(step) + ": " + dir +
                    " is not a complete checkpoint (complete ones kept: " + (kept.empty() ? "none" : join(kept, ", ")) +
                    ")");
}

std::string resolve_record_path(const std::string& source) {
  std::error_code ec;
  if (fs::is_directory(source, ec)) return (fs::path(source) / "record.h5").string();
  return source;
}

RunConfig reproduce_config(const Record& original, int64_t world_size, int64_t accum, int64_t micro_batch,
                           const std::vector<std::string>& set) {
  const FlatConfig recorded = flatten_yaml(original.config_yaml, original.path + " (/config/yaml)");
  RunConfig c = apply_run_config(RunConfig{}, recorded);
  change_layout(c, world_size, accum, micro_batch, "reproduce");
  const FlatConfig overrides = config_changes(set, "--set", "--set train.threads=2");
  if (!overrides.empty()) c = apply_run_config(c, overrides);
  if (!original.env("program").empty()) {
    // A grid's program is given what its config text held, and what the re-run changes:
    // the rest stays the script's own default.
    std::set<std::string> set;
    for (const FlatConfig* values : {&recorded, &overrides})
      for (const auto& [key, value] : *values) set.insert(key);
    if (accum > 0) set.insert("train.accum");
    if (micro_batch > 0) set.insert("train.micro_batch");
    const std::set<std::string> given = program_given_keys(std::move(set));
    c.given.assign(given.begin(), given.end());
  }
  return c;
}

std::string next_reproduce_dir(const std::string& run_dir) {
  const fs::path base = fs::path(run_dir) / "reproduce";
  check_real_directory(base.string());  // never through a link the run's program planted
  fs::create_directories(base);
  // create_directory is atomic: two reproductions started together get different n.
  for (int n = 1;; ++n) {
    const fs::path dir = base / std::to_string(n);
    if (fs::create_directory(dir)) return dir.string();
  }
}

namespace {

/// How the re-run starts, and what it says beside its verdict.
struct RerunLaunch {
  LocalLaunch launch;
  std::string program_line;    ///< the command a record's program re-ran
  std::string changed_note;    ///< a program or data file that changed since the run: why bits may differ
  std::string blas_note;       ///< the BLAS kernel, where the re-run's is not the record's
  std::string container_note;  ///< the container image, against the record's
};

/// The notes that explain why bits may differ: the BLAS kernel, the container, a changed
/// file, the program that ran.
void say_notes(std::vector<std::string>& lines, const RerunLaunch& how, bool blas) {
  if (blas && !how.blas_note.empty()) lines.push_back(how.blas_note);
  if (!how.container_note.empty()) lines.push_back(how.container_note);
  if (!how.changed_note.empty()) lines.push_back("changed since the run: " + how.changed_note);
  if (!how.program_line.empty()) lines.push_back(how.program_line);
}

/// The record's program (run as its grid declared it, never as the record says: the
/// program wrote its record) or a trainer of the user's own (its program knows its keys),
/// else sweep-train; refused when no grid in the record's sweep directory declared it.
RerunLaunch rerun_launch(const ReproduceOptions& opt, const Record& original, const std::string& original_path) {
  RerunLaunch r{opt.launch, "", "", "", ""};
  // A command is run again unasked only when a grid run in the record's own sweep
  // directory declared it: a record can be written by anyone to name any command.
  const fs::path runs = fs::absolute(original_path).parent_path().parent_path();
  const std::string sweep_dir = runs.filename() == "runs" ? runs.parent_path().string() : "";
  auto undeclared = [&](const std::string& command) {
    return ConfigError(original_path + ": the record names the program " + printable(command) +
                       ", which no grid run in " +
                       (sweep_dir.empty() ? std::string("a sweep directory holding the record")
                                          : "the sweep directory " + printable(sweep_dir)) +
                       " declared (a record from elsewhere, or one that names another command); check the "
                       "command, then pass --allow-program to run it");
  };
  auto check_declared = [&](const std::string& line, const std::string& command) {
    if (opt.allow_program || (!sweep_dir.empty() && program_declared(sweep_dir, line))) return;
    throw undeclared(command);
  };
  const auto kind = original.config.find("model.kind");
  const auto program = original.environment.find("program");
  if (program != original.environment.end() && !program->second.empty()) {
    // A grid's program: the record names its command and the keys it was given.
    if (opt.trainer_given)
      throw ConfigError(original_path + ": the record was made by the program " + program->second +
                        "; --trainer cannot replace it");
    // How it runs (confinement, directory, arguments) is what the grid declared, never
    // what the record says: the program wrote its record.
    DeclaredProgram how{program->second, original.env("program.writes"), original.env("program.cwd"),
                        original.env("program.pass_args")};
    std::string how_note = how.writes == "off" ? " (unconfined, as the record says: --allow-program)" : "";
    if (!opt.allow_program) {
      const std::vector<DeclaredProgram> declared =
          sweep_dir.empty() ? std::vector<DeclaredProgram>{} : declared_program(sweep_dir, program->second);
      if (declared.empty()) throw undeclared(program->second);
      auto same = std::find_if(declared.begin(), declared.end(), [&](const DeclaredProgram& d) {
        return d.writes == how.writes && d.cwd == how.cwd && d.pass_args == how.pass_args;
      });
      if (same != declared.end()) {
        how_note = how.writes == "off" ? " (unconfined, as its grid declared)" : "";
      } else {
        how_note = " (run as its grid declared" + std::string(declared.back().writes == "off" ? ", unconfined" : "") +
                   "; the record says program.writes '" + printable(how.writes) + "', program.cwd '" +
                   printable(how.cwd) + "', program.pass_args '" + printable(how.pass_args) + "')";
        how = declared.back();
      }
    }
    r.launch.program = recorded_program(program->second, original.env("program.keys"), how.writes,
                                        original_path + ": environment 'program'", original.env("program.files"),
                                        original.env("program.data"), how.cwd, how.pass_args);
    // The timing metrics its grid declared, passed again, so the re-run's record says what the original's does.
    for (const std::string& name : split(original.env("program.timing_metrics"), ' '))
      if (!name.empty()) r.launch.program.timing_metrics.push_back(name);
    // How it names its batch and steps, as its grid said: the re-run is handed the same values.
    for (const std::string& item : split(original.env("program.conventions"), ' ')) {
      const auto eq = item.find('=');
      const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
      if (key == "accum" && (value == "per_rank" || value == "global")) r.launch.program.accum = value;
      if (key == "steps" && (value == "count" || value == "plus_one")) r.launch.program.steps = value;
      if (key == "rank_env") r.launch.program.single_rank_env = value == "always";
    }
    // A program or data file that changed since the run is why bits may differ: named first.
    r.changed_note = data_changed(original);
    r.program_line = "program: " + printable(join(r.launch.program.argv, " ")) + how_note;
    r.launch.confine = executable_dir() + "/sweep-confine";
  } else if (kind != original.config.end() && kind->second != kDecoderKind) {
    if (!opt.trainer_given) {
      const auto t = original.environment.find("trainer");
      if (t == original.environment.end() || t->second.empty())
        throw ConfigError(original_path + ": model.kind " + kind->second +
                          " comes from a program of its own, and the record does not name it; pass --trainer");
      check_declared(declared_trainer(t->second), t->second);
      r.launch.train_binary = t->second;
      r.program_line = "program: " + printable(t->second);
    }
    load_trainer_models(r.launch.train_binary,
                        "trainer '" + r.launch.train_binary + "' (model.kind " + kind->second +
                            (opt.trainer_given ? ", --trainer)" : ", as recorded; or pass --trainer)"));
  }
  return r;
}

/// A forked run's first steps are its parent's: the re-run forks from the same checkpoint,
/// which must still be there. "" for a run that was not forked, or with --from-step.
std::string fork_checkpoint(const Record& original, const std::string& original_path, int64_t from_step) {
  std::string fork_from;
  if (original.lineage.kind == "forked" && from_step == 0) {
    const fs::path parent = fs::absolute(original_path).parent_path().parent_path() / original.lineage.parent_run_id;
    fork_from = checkpoint_dir(parent.lexically_normal().string(), original.lineage.parent_step);
    if (!fs::exists(fork_from + "/DONE"))
      throw ConfigError(original_path + ": the run was forked from run " + original.lineage.parent_run_id +
                        " at step " + std::to_string(original.lineage.parent_step) + ", whose checkpoint " + fork_from +
                        " is gone: its steps 1-" + std::to_string(original.lineage.parent_step) +
                        " are the parent's, and only that checkpoint re-runs the rest (--from-step S re-runs from "
                        "one of this run's own checkpoints)");
  }
  return fork_from;
}

/// The re-run's command line and the log its launcher writes, as `sweep run` starts the
/// run: sweep-train or the program, each rank behind sweep-rank, in the container if asked.
RunCommand rerun_command(LocalLaunch launch, const ReproduceOptions& opt, const RunConfig& config,
                         const Record& original, const std::string& original_path, const std::string& out_dir) {
  RunCommand c;
  c.log = out_dir + "/logs/rank0.log";
  // The run's directory as the re-run sees it: absolute, since a program starts in its
  // own working directory (program.cwd), not in ours.
  const std::string run_dir = fs::absolute(out_dir).lexically_normal().string();
  const int world = int(config.dist.world_size);
  if (!launch.program.empty())
    launch.rendezvous = {"127.0.0.1", free_port(), world}, launch.sweep_id = original.sweep_id;
  const bool on_hosts = world > 1 && !opt.hosts.empty();
  if (opt.container.runtime.empty() && (launch.program.empty() || world == 1) && !on_hosts) {
    c.argv = train_argv(launch, world, run_dir, original.sweep_id, /*resume=*/false);
  } else if (opt.container.runtime.empty()) {
    // A program's ranks, or ranks on other hosts, as `sweep run` starts them: each behind
    // sweep-rank, which gives a program torch.distributed's RANK and WORLD_SIZE (and
    // writes rank<r>.log, under logs/<host>/ for ranks on other hosts).
    LaunchSpec spec;
    spec.device = launch.device;
    if (on_hosts) spec.launcher = "mpirun", spec.hosts = opt.hosts, spec.mpi_args = opt.mpi_args;
    c = local_run_command(spec, launch, world, fs::path(run_dir).parent_path().parent_path().string(), run_dir,
                          original.sweep_id, /*resume=*/false);
  } else {
    // Each rank in the image, as `sweep run` starts them (sweep-rank writes rank<r>.log);
    // the container's own confinement applies, as there (sweep-confine is not in the image).
    launch.confine.clear();
    LaunchSpec spec;
    spec.container = opt.container;
    spec.device = launch.device;
    c = local_run_command(spec, launch, int(config.dist.world_size),
                          bound_dir(fs::path(original_path).parent_path().string()), out_dir, original.sweep_id,
                          /*resume=*/false);
  }
  return c;
}

/// The verdict and what it rests on: the comparison, the steps the re-run computed, and the
/// notes that explain a difference.
void say_verdict(ReproduceResult& res, const ReproduceOptions& opt, const RerunLaunch& how, const RunConfig& config,
                 const Record& original, const Record& again, const std::string& fork_from, bool stopped) {
  const RecordComparison& c = res.comparison;
  // Which steps the re-run computed: a resume or fork starts from a checkpoint, whose rows
  // before it are copied, not recomputed.
  const int64_t copied = opt.from_step > 0 ? opt.from_step : fork_from.empty() ? 0 : original.lineage.parent_step;
  const int64_t last = again.steps.empty() ? 0 : again.steps.back().step;
  const std::string rerun = copied <= 0 || last <= copied
                                ? std::string()
                                : std::to_string(last - copied) + " re-run: steps " + std::to_string(copied + 1) + "-" +
                                      std::to_string(last) + "; steps 1-" + std::to_string(copied) +
                                      " are the checkpoint's rows";
  if (c.bitwise())
    res.lines.push_back("reproduced bit-for-bit: " + std::to_string(c.steps_compared) + " steps" +
                        (rerun.empty() ? "" : " (" + rerun + ")") + ", " + std::to_string(c.checksums_compared) +
                        " checksums");
  else
    res.lines.push_back(verdict_line(c) + (rerun.empty() ? "" : " (steps " + rerun + ")"));
  if (opt.from_step > 0)
    res.lines.push_back("resumed from the original's checkpoint after step " + std::to_string(opt.from_step) + " on " +
                        std::to_string(config.dist.world_size) + " rank(s), ZeRO " +
                        std::to_string(config.dist.zero_stage) + ": steps 1-" + std::to_string(opt.from_step) +
                        " are the checkpoint's rows, the rest were recomputed");
  if (!fork_from.empty())
    res.lines.push_back("forked from run " + original.lineage.parent_run_id + " at step " +
                        std::to_string(original.lineage.parent_step) +
                        " as the original was: the re-run started from " +
                        (opt.fork_from.empty() ? "that checkpoint" : "the re-run of the parent, " + fork_from));
  // Config and environment differences matter even when the bits agree: they are what held.
  const auto details = detail_lines(c);
  res.lines.insert(res.lines.end(), details.begin(), details.end());
  say_notes(res.lines, how, /*blas=*/true);
  if (!config.deterministic())
    res.lines.push_back(
        "the run trained in benchmark mode (train.deterministic false): its bits are not promised, "
        "so a difference here is not a fault");
  if (stopped && opt.stop_at <= 0)
    res.lines.push_back("the original was stopped by a search after step " +
                        std::to_string(original.steps.back().step) + ": the re-run stopped there too");
  if (!original.verified)
    res.lines.push_back("the original is unverified (schema version " + std::to_string(original.schema_version) +
                        ": no digest): its bits are compared as they stand, with nothing to show they are what its "
                        "run wrote");
  if (!status_is(again.status, RunStatus::completed) &&
      !((stopped || opt.stop_at > 0) && status_is(again.status, RunStatus::stopped)))
    res.lines.push_back("re-run status: " + again.status + (again.failure.empty() ? "" : " (" + again.failure + ")"));
}

}  // namespace

ReproduceResult reproduce(const ReproduceOptions& opt, ProcessRunner& runner) {
  const std::string original_path = resolve_record_path(opt.source);
  const Record original = read_run_record(original_path);
  RerunLaunch how = rerun_launch(opt, original, original_path);
  LocalLaunch& launch = how.launch;
  how.blas_note = launch_as_recorded(original, launch);
  // The container: the re-run's image by its contents, against the record's.
  std::string digest;
  if (!opt.container.runtime.empty()) {
    digest = container_image_digest(opt.container, sweep_cache_dir());
    const auto env = container_run_env(opt.container, digest);
    launch.env.insert(launch.env.end(), env.begin(), env.end());
  }
  how.container_note = container_difference(
      {original.env("container.runtime"), original.env("container.image"), original.env("container.digest")},
      opt.container, digest);
  const RunConfig config = reproduce_config(original, opt.world_size, opt.accum, opt.micro_batch, opt.set);
  launch.threads = config.train.threads;
  launch.run_id = run_id(config);
  if (launch.program.empty() && opt.container.runtime.empty() && !fs::exists(launch.train_binary))
    throw ConfigError("trainer '" + launch.train_binary + "' not found (build it, or pass --trainer)");
  if (config.dist.world_size > 1 && !fs::exists(opt.launch.mpiexec))
    throw ConfigError("mpiexec '" + opt.launch.mpiexec + "' not found; a re-run on " +
                      std::to_string(config.dist.world_size) + " ranks needs it (pass --mpiexec)");

  // --from-step: the original's checkpoint after that step, complete; checked before
  // anything is created.
  const std::string checkpoint =
      opt.from_step > 0 ? checkpoint_from_step(fs::path(original_path).parent_path().string(), opt.from_step) : "";
  const std::string fork_from = !opt.fork_from.empty() && original.lineage.kind == "forked"
                                    ? opt.fork_from
                                    : fork_checkpoint(original, original_path, opt.from_step);
  ReproduceResult res;
  res.out_dir = opt.out_dir.empty() ? next_reproduce_dir(fs::path(original_path).parent_path().string()) : opt.out_dir;
  fs::create_directories(res.out_dir + "/logs");
  const std::string config_path = res.out_dir + "/config.yaml";
  {
    std::ofstream out(config_path, std::ios::binary);
    out << to_yaml(config);
    if (!out.flush()) throw std::runtime_error(config_path + ": cannot write");
  }
  // A run a halving search stopped at a rung is reproduced as far as it went.
  const bool stopped = status_is(original.status, RunStatus::stopped) && !original.steps.empty();
  if (stopped || opt.stop_at > 0) {
    std::ofstream out(res.out_dir + "/stop_at", std::ios::binary);
    out << (opt.stop_at > 0 ? opt.stop_at : original.steps.back().step) << "\n";
    if (!out.flush()) throw std::runtime_error(res.out_dir + "/stop_at: cannot write");
  }
  RunCommand cmd = rerun_command(launch, opt, config, original, original_path, res.out_dir);
  std::vector<std::string>& argv = cmd.argv;
  const std::string& run_log = cmd.log;
  if (opt.from_step > 0) argv.insert(argv.end(), {"--resume-from", checkpoint});
  if (!fork_from.empty()) argv.insert(argv.end(), {"--fork-from", fork_from});
  const ExitStatus st = runner.run(argv, run_log);

  const std::string new_path = res.out_dir + "/record.h5";
  if (!fs::exists(new_path)) {
    // No record: nothing to compare, and the log says why.
    res.lines.push_back("re-run failed (" + st.describe() + ") without a record; log: " + run_log);
    std::string tail = read_file_tail(run_log, 2000);
    if (!tail.empty()) res.lines.push_back(tail);
    say_notes(res.lines, how, /*blas=*/false);
    return res;
  }
  const Record again = read_record(new_path);
  res.ran = true;
  // Stopped early on purpose: compared with the original as it stood there.
  const bool cut = opt.stop_at > 0 && !original.steps.empty() && original.steps.back().step > opt.stop_at;
  res.comparison = compare_records(cut ? truncate_record(original, opt.stop_at) : original, again);
  say_verdict(res, opt, how, config, original, again, fork_from, stopped);
  res.lines.push_back("original: " + original_path);
  res.lines.push_back("re-run:   " + new_path);
  return res;
}

}  // namespace sweep
