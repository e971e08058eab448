// sweep-train: trains one run from its config file and writes its record.
// Exit codes: 0 completed, 1 failed or diverged, 2 bad config or usage,
// 3 refused (a completed record is already in the output directory).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>

#include "record.h"
#include "run_config.h"
#include "train.h"

int main(int argc, char** argv) {
  CLI::App app{"sweep-train: one deterministic training run, recorded to <out>/record.h5"};
  std::string config_path;
  sweep::TrainOptions opt;
  app.add_option("--config", config_path, "run config (YAML)")->required();
  app.add_option("--out", opt.out_dir, "run directory for record.h5")->required();
  app.add_option("--sweep-id", opt.sweep_id, "sweep this run belongs to (recorded)");
  app.add_flag("--quiet", opt.quiet, "no per-step log lines");
  app.add_flag("--resume", opt.resume, "continue from the newest complete checkpoint in --out");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    sweep::RunConfig cfg = sweep::load_run_config(config_path);
    if (std::filesystem::exists(opt.out_dir + "/record.h5")) {
      std::fprintf(stderr, "sweep-train: %s/record.h5: a completed record is already there; it is never overwritten\n",
                   opt.out_dir.c_str());
      return 3;
    }
    return sweep::train(cfg, opt) == sweep::RunStatus::completed ? 0 : 1;
  } catch (const sweep::ConfigError& e) {
    std::fprintf(stderr, "sweep-train: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sweep-train: run failed: %s\n", e.what());
    return 1;
  }
}
