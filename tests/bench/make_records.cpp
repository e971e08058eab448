// make_records: writes a sweep directory of synthetic run records with RecordWriter, fast,
// without training anything; for the report and compare benchmarks and the report
// rendering test. Runs walk a fixed grid, fastest axis first:
//   layout (world 1 x accum 2 | world 2 x accum 1), train.lr (5), train.clip_norm (5), train.seed.
// Losses and checksums depend on every key except the layout ones, so each pair of runs
// that differ only in layout is bit-identical, as the real trainer promises.
//
//   make_records --out DIR [--runs 1000] [--steps 100] [--params 8] [--checksum-every 1]
//                [--set-first KEY=VALUE] [--mismatch-step S] [--diverged N] [--failed N]
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "record.h"
#include "run_config.h"

namespace fs = std::filesystem;

namespace {

struct Options {
  std::string out;
  int runs = 1000;
  int64_t steps = 100;
  int params = 8;  // parameter tensors per record
  int64_t checksum_every = 1;
  std::vector<std::string> set_first;  // KEY=VALUE applied to run 0 only (e.g. a hostile string)
  int64_t mismatch_step = 0;           // run 3 leaves its layout twin (run 2) from this step on; 0 = never
  int diverged = 0;                    // the last N completed runs end diverged (NaN loss)
  int failed = 0;                      // N more runs are abandoned as .partial with a log
};

uint64_t mix(uint64_t x) {  // splitmix64: cheap, well spread, deterministic
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t hash_text(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return mix(h);
}

sweep::RunConfig config_of(int i) {
  static const double kLr[] = {1e-3, 2e-3, 3e-3, 5e-3, 1e-2};
  static const double kClip[] = {0.0, 0.5, 1.0, 2.0, 4.0};
  sweep::RunConfig c;
  const bool two_ranks = i % 2;
  c.dist.world_size = two_ranks ? 2 : 1;
  c.train.accum = two_ranks ? 1 : 2;
  c.train.lr = kLr[(i / 2) % 5];
  c.train.clip_norm = kClip[(i / 10) % 5];
  c.train.seed = i / 50;
  return c;
}

// What the math of a run depends on: its config without the layout keys.
uint64_t trajectory_key(const sweep::RunConfig& c) {
  std::string text;
  for (const auto& [k, v] : sweep::to_flat(c))
    if (k != "dist.world_size" && k != "train.accum" && k != "dist.zero_stage" && k != "data.workers")
      text += k + "=" + v + "\n";
  return hash_text(text);
}

void write_run(const Options& o, int i, const std::string& mode) {
  sweep::RunConfig c = config_of(i);
  c.train.steps = o.steps;  // (a record with steps beyond its config's train.steps is damaged)
  if (i == 0)
    for (const auto& kv : o.set_first) {
      const size_t eq = kv.find('=');
      c = sweep::apply_run_values(c, {{kv.substr(0, eq), sweep::ConfigValue{kv.substr(eq + 1), "--set-first"}}});
    }
  const uint64_t key = trajectory_key(c);
  const std::string id = sweep::run_id(c);
  const fs::path dir = fs::path(o.out) / "runs" / id;
  fs::create_directories(dir / "logs");
  std::ofstream(dir / "config.yaml") << sweep::to_yaml(c);
  std::ofstream log(dir / "logs" / "rank0.log");
  log << "run " << id << ": synthetic record from make_records\n";

  sweep::RecordHeader h;
  h.run_id = id;
  h.sweep_id = "bench";
  h.config_yaml = sweep::to_yaml(c);
  h.config = sweep::to_flat(c);
  h.environment = {{"sweep_version", "bench"},
                   {"hosts", "bench-host"},
                   {"blas", "OpenBLAS (synthetic)"},
                   {"device", "cpu"},
                   {"env.OMP_NUM_THREADS", ""}};
  for (int p = 0; p < o.params; ++p)
    h.params.push_back({"layer" + std::to_string(p / 4) + ".w" + std::to_string(p % 4), {32, 32}, p * 1024, 1024});
  h.world_size = c.dist.world_size;
  sweep::RecordWriter w((dir / "record.h5").string(), h);

  auto checksum = [&](int64_t step, uint64_t salt) {
    sweep::ChecksumRow row{step, 0, {}};
    for (int p = 0; p < o.params; ++p) row.tensors.push_back(mix(key ^ salt ^ mix(uint64_t(step) * 131 + uint64_t(p))));
    row.params = mix(row.tensors.empty() ? key ^ uint64_t(step) : row.tensors.back() ^ row.tensors.front() ^ salt);
    return row;
  };
  w.append_checksum(checksum(0, 0));
  const double rate = c.train.lr * 300 / double(std::max<int64_t>(o.steps, 1)) * 100;
  for (int64_t s = 1; s <= o.steps; ++s) {
    // Run 3, not 1: run 0 may carry --set-first values, so it has no twin.
    const bool off = i == 3 && o.mismatch_step > 0 && s >= o.mismatch_step;
    const uint64_t salt = off ? 0x5eed : 0;
    sweep::StepMetrics m;
    m.step = s;
    const double noise = double(mix(key ^ salt ^ uint64_t(s)) >> 11) * 0x1.0p-53 - 0.5;
    m.loss = 1.39 + 4.2 * std::exp(-rate * double(s) / 100.0) + 0.02 * noise + 0.01 * c.train.clip_norm;
    if (mode == "diverged" && s == o.steps) m.loss = NAN;
    m.lr = c.train.lr;
    m.grad_norm = 1.0 + 0.1 * noise;
    m.tokens = 512;
    m.step_time_s = 0.010 + 0.001 * double(i % 7);
    m.tokens_per_s = double(m.tokens) / m.step_time_s;
    w.append_step(m);
    w.append_rank_times(std::vector<double>(size_t(c.dist.world_size), m.step_time_s));
    if (s % o.checksum_every == 0 || s == o.steps) w.append_checksum(checksum(s, salt));
    if (mode == "failed" && s == o.steps / 2) {
      log << "step " << s << ": simulated failure\nrun failed: simulated failure at step " << s << "\n";
      w.abandon("simulated failure at step " + std::to_string(s));
      return;
    }
  }
  const int64_t per_rank = int64_t(o.params) * 1024 * 4;
  const size_t world = size_t(c.dist.world_size);
  w.set_memory({std::vector<int64_t>(world, per_rank),
                std::vector<int64_t>(world, per_rank),
                std::vector<int64_t>(world, 2 * per_rank),
                {},
                {}});  // no peaks
  if (mode == "diverged") {
    log << "non-finite loss at step " << o.steps << "\n";
    w.finish("diverged", "non-finite loss at step " + std::to_string(o.steps));
  } else {
    w.finish("completed");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"make_records: a sweep directory of synthetic run records for benchmarks and tests"};
  Options o;
  app.add_option("--out", o.out, "sweep directory to create (must not hold runs yet)")->required();
  app.add_option("--runs", o.runs, "completed (or diverged) runs");
  app.add_option("--steps", o.steps, "steps per run");
  app.add_option("--params", o.params, "parameter tensors per run");
  app.add_option("--checksum-every", o.checksum_every, "checksum rows every N steps");
  app.add_option("--set-first", o.set_first, "KEY=VALUE for run 0 only (repeatable)");
  app.add_option("--mismatch-step", o.mismatch_step, "run 3 differs from its layout twin (run 2) from this step on");
  app.add_option("--diverged", o.diverged, "the last N runs end diverged");
  app.add_option("--failed", o.failed, "N extra runs abandoned as .partial records");
  CLI11_PARSE(app, argc, argv);
  try {
    for (int i = 0; i < o.runs + o.failed; ++i)
      write_run(o, i, i >= o.runs ? "failed" : i >= o.runs - o.diverged ? "diverged" : "completed");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_records: %s\n", e.what());
    return 1;
  }
  std::printf("make_records: %d runs of %lld steps in %s\n", o.runs + o.failed, (long long)o.steps, o.out.c_str());
  return 0;
}
