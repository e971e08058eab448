// Micro-benchmarks (Google Benchmark) of the pieces every step or every run pays for:
// the canonical tree, the gradient norm, AdamW, parameter checksums, the record's
// append and its verified read, a rank's heartbeat, and grid expansion. Whole programs are
// compared side by side by the scripts beside this file; these say where time goes inside
// them.
//
//   build/bin/micro_bench                         # full run, figures in tests/bench/README.md
//   build/bin/micro_bench --benchmark_min_time=0.01   # what ctest runs (label bench): a smoke run
#include <benchmark/benchmark.h>
#include <stdlib.h>  // mkdtemp

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "canonical_reduce.h"  // TreeAccumulator
#include "checksum.h"          // flat_checksum
#include "grid.h"              // parse_grid, expand_grid
#include "heartbeat.h"         // HeartbeatWriter
#include "optimizer.h"         // sum_of_squares, adamw
#include "record.h"            // RecordWriter, read_record
#include "record_parse.h"      // isolate_record_parsing

namespace {

namespace fs = std::filesystem;

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

/// Bytes moved per iteration, so Google Benchmark prints GB/s.
void set_bytes(benchmark::State& state, size_t bytes) {
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
}

// M micro-batch gradients of n floats folded by the canonical pairwise tree.
void BM_CanonicalTree(benchmark::State& state) {
  const size_t n = size_t(state.range(0)), leaves = size_t(state.range(1));
  std::vector<std::vector<float>> g;
  for (size_t i = 0; i < leaves; ++i) g.push_back(random_floats(n, unsigned(i)));
  std::vector<float> out(n);
  // One accumulator for the whole run, as the trainer keeps it: its buffers are
  // recycled, so the steady state allocates nothing.
  sweep::TreeAccumulator tree(n);
  for (auto _ : state) {
    for (const auto& leaf : g) tree.push(leaf.data());
    tree.finish(out.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, n * leaves * sizeof(float));
}
BENCHMARK(BM_CanonicalTree)->Args({1 << 20, 8})->Args({4 << 20, 4})->Unit(benchmark::kMillisecond);

void BM_GradNorm(benchmark::State& state) {
  const auto g = random_floats(size_t(state.range(0)), 1);
  for (auto _ : state) benchmark::DoNotOptimize(sweep::sum_of_squares(g.data(), g.size()));
  set_bytes(state, g.size() * sizeof(float));
}
BENCHMARK(BM_GradNorm)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMicrosecond);

void BM_AdamW(benchmark::State& state) {
  const size_t n = size_t(state.range(0));
  auto p = random_floats(n, 1), g = random_floats(n, 2), m = random_floats(n, 3), v = random_floats(n, 4);
  for (auto& x : v) x = x * x;
  sweep::AdamWStep s{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f, 1.0f};
  for (auto _ : state) {
    sweep::adamw(p.data(), g.data(), m.data(), v.data(), n, s);
    benchmark::DoNotOptimize(p.data());
  }
  set_bytes(state, n * sizeof(float) * 4);
}
BENCHMARK(BM_AdamW)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMicrosecond);

void BM_FlatChecksum(benchmark::State& state) {
  const auto p = random_floats(size_t(state.range(0)), 5);
  for (auto _ : state) benchmark::DoNotOptimize(sweep::flat_checksum(p.data(), p.size()));
  set_bytes(state, p.size() * sizeof(float));
}
BENCHMARK(BM_FlatChecksum)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMicrosecond);

/// A scratch directory, removed at the end of the benchmark.
struct Scratch {
  fs::path dir;
  Scratch() {
    char tmpl[] = "/tmp/micro_bench.XXXXXX";
    dir = mkdtemp(tmpl);
  }
  ~Scratch() { fs::remove_all(dir); }
};

sweep::RecordHeader header(size_t tensors) {
  sweep::RecordHeader h;
  h.run_id = "00000000000000bb";
  h.config_yaml = "train:\n  steps: 1000\n";
  h.config = {{"train.steps", "1000"}};
  for (size_t i = 0; i < tensors; ++i) h.params.push_back({"t" + std::to_string(i), {64, 64}, int64_t(i * 4096), 4096});
  return h;
}

/// Writes a completed record of `steps` steps with a checksum row per step.
void write_record(const std::string& path, int64_t steps, size_t tensors) {
  sweep::RecordWriter w(path, header(tensors));
  for (int64_t s = 1; s <= steps; ++s) {
    sweep::StepMetrics m;
    m.step = s;
    m.loss = 1.0 / double(s);
    w.append_step(m);
    w.append_rank_times({0.01});
    w.append_checksum({s, uint64_t(s), std::vector<uint64_t>(tensors, uint64_t(s))});
  }
  w.finish("completed");
}

// A whole run's record: create, append 1,000 steps (with checksums of 20 tensors),
// complete (close, read back, digest, sync, link).
void BM_RecordWriteAndComplete(benchmark::State& state) {
  Scratch scratch;
  int i = 0;
  for (auto _ : state) write_record((scratch.dir / ("r" + std::to_string(i++) + ".h5")).string(), 1000, 20);
}
BENCHMARK(BM_RecordWriteAndComplete)->Unit(benchmark::kMillisecond);

// What `sweep run` pays per completed point it skips: read the record, verify its digest.
void BM_RecordReadVerified(benchmark::State& state) {
  Scratch scratch;
  const std::string path = (scratch.dir / "r.h5").string();
  write_record(path, 1000, 20);
  for (auto _ : state) benchmark::DoNotOptimize(sweep::read_record(path).verified);
  set_bytes(state, size_t(fs::file_size(path)));
}
BENCHMARK(BM_RecordReadVerified)->Unit(benchmark::kMillisecond);

// The same read as sweep's commands do it: parsed in the helper process
// (results/record/record_parse.h), the record sent back encoded. The difference to
// BM_RecordReadVerified is what isolating HDF5 costs a cold read (the helper is started
// once, before the timed loop).
void BM_RecordReadVerifiedIsolated(benchmark::State& state) {
  Scratch scratch;
  const std::string path = (scratch.dir / "r.h5").string();
  write_record(path, 1000, 20);
  sweep::isolate_record_parsing(true);
  benchmark::DoNotOptimize(sweep::read_record(path).verified);  // the helper's start, untimed
  for (auto _ : state) benchmark::DoNotOptimize(sweep::read_record(path).verified);
  sweep::isolate_record_parsing(false);
  set_bytes(state, size_t(fs::file_size(path)));
}
BENCHMARK(BM_RecordReadVerifiedIsolated)->Unit(benchmark::kMillisecond);

// A rank's heartbeat (results/record/heartbeat.h): what entering or leaving one collective
// adds to it in a run of several ranks, one line rewritten in place in the page cache.
void BM_HeartbeatPublish(benchmark::State& state) {
  char tmpl[] = "/tmp/sweep_bench_heartbeat.XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  {
    sweep::HeartbeatWriter w(dir, 0);
    long long seq = 0;
    for (auto _ : state) {
      ++seq;
      w.publish(seq, seq, seq / 8, (seq & 1) != 0, -1, "allreduce");
    }
  }
  fs::remove_all(dir);
}
BENCHMARK(BM_HeartbeatPublish)->Unit(benchmark::kMicrosecond);

// Parse, validate and expand a grid of 10 x 10 x 10 = 1,000 points.
void BM_GridExpand(benchmark::State& state) {
  std::string grid =
      "name: bench\n"
      "base:\n"
      "  train: {steps: 10}\n"
      "grid:\n";
  for (const char* key : {"train.lr", "train.warmup", "train.seed"}) {
    grid += std::string("  ") + key + ": [";
    for (int v = 0; v < 10; ++v) grid += (v ? ", " : "") + std::to_string(std::string(key) == "train.lr" ? v + 1 : v);
    grid += "]\n";
  }
  for (auto _ : state)
    benchmark::DoNotOptimize(sweep::expand_grid(sweep::parse_grid(grid, "bench.yaml")).points.size());
  state.SetItemsProcessed(int64_t(state.iterations()) * 1000);
}
BENCHMARK(BM_GridExpand)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
