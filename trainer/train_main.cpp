// train_main: sweep-train's command line over a program's models (sweep/trainer.h).
// Exit codes: 0 completed (or stopped at a search rung: <out>/stop_at), 1 failed or diverged, 2 bad config or usage,
// 3 refused (a completed record is already in the output directory, another process is
//   writing it, or one of its entries is a symbolic link or special file),
// 4 a rank made no progress for dist.timeout_s (a peer died or hung).
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>

#include "model_schema.h"  // register_model_schema, describe_models_yaml
#include "mpi_communicator.h"
#include "record.h"
#include "run_config.h"
#include "run_files.h"  // RunLock
#include "solo_communicator.h"
#include "sweep/trainer.h"
#include "train.h"
#include "watchdog.h"  // StartupGuard

namespace sweep {
namespace {

/// The step a halving search's rung stops this run after: the decimal integer in
/// <out>/stop_at, written by the sweep driver (a file, so that every launcher and
/// container carries it alike); 0 when there is no such file.
int64_t read_stop_at(const std::string& out_dir) {
  const std::string path = out_dir + "/stop_at";
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return 0;
  if (!S_ISREG(st.st_mode)) throw ConfigError(path + ": not a regular file; expected the step to stop after");
  std::FILE* f = std::fopen(path.c_str(), "r");
  long long v = -1;
  char extra = 0;
  const int got = f ? std::fscanf(f, "%lld %c", &v, &extra) : 0;
  if (f) std::fclose(f);
  if (got != 1 || v < 1) throw ConfigError(path + ": expected one step number >= 1 (the rung to stop after)");
  return v;
}

/// Reads the command line into `opt`; the exit code where that ends the program (--help,
/// a bad option).
std::optional<int> parse_command_line(int argc, char** argv, const std::string& name, sweep::TrainOptions* opt,
                                      std::string* config_path, bool* describe) {
  CLI::App app{name + ": one deterministic training run, recorded to <out>/record.h5"};
  app.add_option("--config", *config_path, "run config (YAML)");
  app.add_option("--out", opt->out_dir, "run directory for record.h5");
  app.add_flag("--describe-models", *describe,
               "print the model kinds this program offers, with their config keys (YAML), and exit");
  app.add_option("--sweep-id", opt->sweep_id, "sweep this run belongs to (recorded)");
  app.add_flag("--quiet", opt->quiet, "no per-step log lines");
  app.add_flag("--resume", opt->resume, "continue from the newest complete checkpoint in --out");
  app.add_option("--resume-from", opt->resume_from,
                 "continue from this checkpoint (a run directory or its checkpoints/step_N), written by any layout "
                 "of the same math: world size and accum at the same global batch, ZeRO stage, workers");
  app.add_option("--fork-from", opt->fork_from,
                 "start from this checkpoint of another run whose math may differ (a run directory or its "
                 "checkpoints/step_N; the model must be the same): `sweep fork`; the record names it as parent")
      ->excludes("--resume-from");
  app.add_option("--device", opt->device, "where forward and backward run (recorded; not part of the run id)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

/// Rank 0 takes the run's lock (held until the process exits) and reads the rung to stop
/// at; 0, or the exit code why the run cannot start here, said in `refused`.
int64_t claim_run_directory(const std::string& out_dir, std::optional<sweep::RunLock>* lock, std::string* refused,
                            int64_t* stop_at) {
  try {
    const auto parent = std::filesystem::path(out_dir).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    lock->emplace(out_dir);
    struct stat st;
    if (::lstat((out_dir + "/record.h5").c_str(), &st) == 0) {
      *refused = out_dir + "/record.h5: a completed record is already there; it is never overwritten";
      return 3;
    }
    *stop_at = read_stop_at(out_dir);
  } catch (const sweep::RunRefused& e) {
    *refused = e.what();
    return 3;
  } catch (const sweep::ConfigError& e) {  // a stop_at file that is not a step
    *refused = e.what();
    return 2;
  } catch (const std::exception& e) {  // RecordError, filesystem_error: ENOSPC, EACCES, ...
    *refused = e.what();
    return 1;
  }
  return 0;
}

}  // namespace

int train_main(int argc, char** argv, const Models& models) {
  // Line by line into the rank's log (a file), so `tail -f` follows a run as it trains.
  std::setvbuf(stdout, nullptr, _IOLBF, 1 << 16);
  // Keep freed tensor memory in the heap instead of handing it back to the kernel after
  // every step: otherwise each step's activations arrive as fresh zero-filled pages
  // (measured: 2.6x the page faults of this setting and ~10% more CPU time per run).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const std::string name = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "sweep-train";
  std::string config_path;
  sweep::TrainOptions opt;
  bool describe = false;
  if (const auto code = parse_command_line(argc, argv, name, &opt, &config_path, &describe)) return *code;
  // The registered kinds' keys, so that configs of them parse (the decoder is built in).
  ModelsDescription offered;
  try {
    for (const ModelSpec& s : models.specs()) {
      offered.offers.push_back(s.schema.kind);
      if (s.schema.kind != kDecoderKind) register_model_schema(s.schema), offered.models.push_back(s.schema);
    }
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.what());
    return 2;
  }
  if (describe) {
    std::fputs(describe_models_yaml(offered).c_str(), stdout);
    return 0;
  }
  if (config_path.empty() || opt.out_dir.empty()) {
    std::fprintf(stderr, "%s: error: --config and --out are required (or --describe-models); see --help\n",
                 name.c_str());
    return 2;
  }
  // The launchers' names for this rank's index on its node (Open MPI, Slurm, MPICH).
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const char* r = std::getenv(v); r && *r) {
      opt.local_rank = std::atoi(r);
      break;
    }
  // MPI start-up is collective: ranks that cannot reach each other hang in it, before the
  // run's watchdog exists. The config says how long they may (read again below, where a
  // bad one is reported once by rank 0).
  double startup_timeout_s = 0;
  try {
    startup_timeout_s = sweep::load_run_config(config_path).dist.timeout_s;
  } catch (const std::exception&) {
    // Reported below, once MPI is up.
  }
  // A step's budget is too short for start-up on a loaded machine (a test's timeout_s of 3
  // failed a healthy run whose ranks took longer to start): at least a minute.
  std::optional<sweep::StartupGuard> startup(std::in_place, sweep::startup_timeout_s(startup_timeout_s));
  // One process that no launcher started needs no MPI (solo_communicator.h).
  std::unique_ptr<sweep::Communicator> comm_owner;
  if (sweep::started_as_mpi_rank())
    comm_owner = std::make_unique<sweep::MpiCommunicator>(&argc, &argv);
  else
    comm_owner = std::make_unique<sweep::SoloCommunicator>();
  sweep::Communicator& comm = *comm_owner;
  const bool root = comm.rank() == 0;
  bool out_created = false;  // this process made --out: a bad config leaves nothing behind
  try {
    sweep::RunConfig cfg = sweep::load_run_config(config_path);
    // One writer per run directory: rank 0, the only rank that writes the record and
    // checkpoints, holds the run's lock from before it opens any file of the run until it
    // exits; every rank learns whether it got it.
    std::optional<sweep::RunLock> lock;
    std::string refused;
    int64_t code = 0, stop_at = 0;
    struct stat before;
    out_created = ::lstat(opt.out_dir.c_str(), &before) != 0;
    if (root) code = claim_run_directory(opt.out_dir, &lock, &refused, &stop_at);
    int64_t shared[2] = {code, stop_at};  // every rank stops at the step rank 0 read
    if (comm.size() > 1) comm.allreduce_sum_i64(shared, 2);
    code = shared[0], opt.stop_at = shared[1];
    startup.reset();  // from here on the run's watchdog keeps the time
    if (code != 0) {
      if (root) std::fprintf(stderr, "%s: %s\n", name.c_str(), refused.c_str());
      return int(code);
    }
    const sweep::RunStatus status = sweep::train(cfg, opt, comm, models);
    return status == sweep::RunStatus::completed || status == sweep::RunStatus::stopped ? 0 : 1;
  } catch (const sweep::ConfigError& e) {
    // Every rank reads the same config and fails the same way: one line, from rank 0.
    // Errors found while parsing already start with the file; the rest get it here.
    const std::string msg = e.what();
    const bool named = msg.rfind(config_path, 0) == 0;
    if (root)
      std::fprintf(stderr, "%s: error: %s%s\n", name.c_str(), named ? "" : (config_path + ": ").c_str(), msg.c_str());
    // Found after the run's lock was taken (the data file, the world size): bad input
    // writes nothing, so take back the lock file and the directory made for it.
    if (root && out_created) {
      ::unlink((opt.out_dir + "/run.lock").c_str());
      ::rmdir(opt.out_dir.c_str());  // only when empty
    }
    return 2;
  } catch (const std::bad_alloc&) {
    const std::string why = "out of memory on rank " + std::to_string(comm.rank()) +
                            " (a smaller micro_batch, or ZeRO 2-3 to shard the state)";
    if (comm.size() > 1) comm.abort(1, "run failed: " + why);
    std::fprintf(stderr, "%s: run failed: %s\n", name.c_str(), why.c_str());
    return 1;
  } catch (const std::exception& e) {
    if (comm.size() > 1) comm.abort(1, std::string("run failed: ") + e.what());
    std::fprintf(stderr, "%s: run failed: %s\n", name.c_str(), e.what());
    return 1;
  }
}

}  // namespace sweep
