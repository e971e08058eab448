// sweep-train: trains one run from its config file and writes its record. Start it
// directly (one rank) or under mpirun / srun (dist.world_size ranks).
// Exit codes: 0 completed, 1 failed or diverged, 2 bad config or usage,
// 3 refused (a completed record is already in the output directory),
// 4 a rank made no progress for dist.timeout_s (a peer died or hung).
#include <CLI/CLI.hpp>

#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "mpi_communicator.h"
#include "record.h"
#include "run_config.h"
#include "train.h"

int main(int argc, char** argv) {
  // Keep freed tensor memory in the heap instead of handing it back to the kernel after
  // every step: otherwise each step's activations arrive as fresh zero-filled pages
  // (measured: 2.6x the page faults of this setting and ~10% more CPU time per run).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"sweep-train: one deterministic training run, recorded to <out>/record.h5"};
  std::string config_path;
  sweep::TrainOptions opt;
  app.add_option("--config", config_path, "run config (YAML)")->required();
  app.add_option("--out", opt.out_dir, "run directory for record.h5")->required();
  app.add_option("--sweep-id", opt.sweep_id, "sweep this run belongs to (recorded)");
  app.add_flag("--quiet", opt.quiet, "no per-step log lines");
  app.add_flag("--resume", opt.resume, "continue from the newest complete checkpoint in --out");
  app.add_option("--device", opt.device, "where forward and backward run (recorded; not part of the run id)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  // The launchers' names for this rank's index on its node (Open MPI, Slurm, MPICH).
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const char* r = std::getenv(v); r && *r) {
      opt.local_rank = std::atoi(r);
      break;
    }
  sweep::MpiCommunicator comm(&argc, &argv);
  const bool root = comm.rank() == 0;
  try {
    sweep::RunConfig cfg = sweep::load_run_config(config_path);
    if (std::filesystem::exists(opt.out_dir + "/record.h5")) {
      if (root)
        std::fprintf(stderr, "sweep-train: %s/record.h5: a completed record is already there; it is never overwritten\n",
                     opt.out_dir.c_str());
      return 3;
    }
    return sweep::train(cfg, opt, comm) == sweep::RunStatus::completed ? 0 : 1;
  } catch (const sweep::ConfigError& e) {
    // Every rank reads the same config and fails the same way: one line, from rank 0.
    // Errors found while parsing already start with the file; the rest get it here.
    const std::string msg = e.what();
    const bool named = msg.rfind(config_path, 0) == 0;
    if (root) std::fprintf(stderr, "sweep-train: error: %s%s\n", named ? "" : (config_path + ": ").c_str(), msg.c_str());
    return 2;
  } catch (const std::exception& e) {
    if (comm.size() > 1) comm.abort(1, std::string("run failed: ") + e.what());
    std::fprintf(stderr, "sweep-train: run failed: %s\n", e.what());
    return 1;
  }
}
