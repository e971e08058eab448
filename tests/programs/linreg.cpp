// linreg: a training program that does not use sweep's trainer (no LibTorch): linear
// regression by mini-batch SGD on seeded synthetic data, written against the C++ record
// writer alone (include/sweep/record_writer.h). A grid runs it through its `program:`
// section, declaring its keys there:
//
//   program:
//     argv: [PATH/linreg]
//     kind: linreg
//     keys:
//       features: {type: int, default: 16, min: 1, max: 4096}
//       noise: {type: real, default: 0.1, min: 0, max: 10}
//
//   linreg --config RUN.yaml --out DIR [--sweep-id S] [--resume] [--span]
//
// --span: once the record is complete, DIR/span holds the run's start and end in ns of the
// machine's clock (which every test node shares): the Slurm tests count how many ran at once.
//
// Exit codes as sweep-train's: 0 completed, 1 failed, 2 bad config or usage, 3 a record is
// already there. Deterministic: every number is computed in one fixed order. `--resume`
// starts over (it keeps no checkpoints). The test key model.flaw (0 = none) perturbs the
// seed handling from that step on, for tests of `sweep reproduce`'s verdict.
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sweep/record_writer.h"

namespace {

struct Fail {
  int code;
  std::string why;
};

/// The canonical config sweep writes: sections at column 0, keys at column 2.
std::vector<std::pair<std::string, std::string>> read_config(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) throw Fail{2, "a line without ':': " + line};
    if (line[0] != ' ') {
      section = line.substr(0, colon);
      continue;
    }
    size_t indent = line.find_first_not_of(' ');
    std::string key = line.substr(indent, colon - indent);
    std::string value = colon + 1 < line.size() ? line.substr(colon + 2) : "";
    if (indent > 2) continue;  // sub-maps (model.moe.*) are not this program's
    out.emplace_back(section + "." + key, value);
  }
  return out;
}

/// splitmix64: the data and the initial weights are pure functions of (seed, index).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
double uniform(uint64_t seed, uint64_t a, uint64_t b) {  // in [-1, 1)
  return double(mix(mix(seed ^ mix(a)) ^ b) >> 11) / double(1ull << 52) - 1.0;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int run(int argc, char** argv) {
  const int64_t started = now_ns();
  std::string config_path, out, sweep_id;
  bool span = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) {
      config_path = argv[++i];
    } else if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--sweep-id" && i + 1 < argc) {
      sweep_id = argv[++i];
    } else if (a == "--resume") {
      // No checkpoints: a resumed run starts over.
    } else if (a == "--span") {
      span = true;
    } else {
      throw Fail{2, "unknown argument '" + a + "'; usage: linreg --config RUN.yaml --out DIR [--sweep-id S] [--span]"};
    }
  }
  if (config_path.empty() || out.empty()) throw Fail{2, "--config and --out are required"};
  std::ifstream in(config_path, std::ios::binary);
  if (!in) throw Fail{2, config_path + ": cannot read"};
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto pairs = read_config(text);
  std::map<std::string, std::string> cfg(pairs.begin(), pairs.end());
  // A grid gives a program only the keys it sets; the others are the program's own
  // defaults, recorded beside the given ones so the record says what ran.
  const std::map<std::string, std::string> own = {{"train.steps", "100"}, {"train.micro_batch", "4"},
                                                  {"train.accum", "1"},   {"train.lr", "0.001"},
                                                  {"train.seed", "0"},    {"data.seed", "0"}};
  std::vector<std::pair<std::string, std::string>> ran = pairs;
  auto get = [&](const std::string& key) {
    auto it = cfg.find(key);
    if (it != cfg.end()) return it->second;
    const auto d = own.find(key);
    if (d == own.end()) throw Fail{2, config_path + ": key '" + key + "' is missing"};
    ran.emplace_back(key, d->second);
    return cfg[key] = d->second;
  };
  auto get_int = [&](const std::string& key) { return std::stoll(get(key)); };
  auto get_real = [&](const std::string& key) { return std::stod(get(key)); };
  if (get("model.kind") != "linreg")
    throw Fail{2, config_path + ": model.kind '" + get("model.kind") + "': not linreg"};
  if (get_int("dist.world_size") != 1)
    throw Fail{2, config_path + ": dist.world_size: this program runs on one process"};
  const int64_t features = get_int("model.features"), steps = get_int("train.steps");
  const int64_t batch = get_int("train.micro_batch") * get_int("train.accum");
  const int64_t every = get_int("train.checksum_every"), flaw = cfg.count("model.flaw") ? get_int("model.flaw") : 0;
  const double noise = get_real("model.noise"), lr = get_real("train.lr");
  const uint64_t seed = uint64_t(get_int("train.seed")), data_seed = uint64_t(get_int("data.seed"));
  struct stat st {};
  if (::lstat((out + "/record.h5").c_str(), &st) == 0) throw Fail{3, out + "/record.h5: a completed record is there"};

  sweep::RecordHeader h;
  h.run_id = sweep::run_id_of_text(text);
  h.sweep_id = sweep_id;
  h.config_yaml = text;
  h.config = ran;
  h.environment = sweep::program_environment_defaults();
  for (auto& [key, value] : h.environment) {
    if (key == "device") value = "cpu";
    if (key == "trainer.models") value = "linreg";
    if (key == "compiler") value = std::string("gcc ") + __VERSION__;
  }
  h.params = {{"w", {features}, 0, features}};
  h.health_judge = sweep::judge_health_attributes;
  h.eval = true;        // held-out rows, as sweep-train's
  h.flush_every_s = 2;  // sweep status follows it without a flush() of its own
  sweep::RecordWriter rec(out + "/record.h5", h);

  std::vector<float> truth(static_cast<size_t>(features)), w(static_cast<size_t>(features));
  for (int64_t f = 0; f < features; ++f) truth[size_t(f)] = float(uniform(data_seed, 0, uint64_t(f)));
  for (int64_t f = 0; f < features; ++f) w[size_t(f)] = float(0.1 * uniform(seed, 1, uint64_t(f)));
  auto checksum = [&](int64_t step) {
    rec.append_checksum({step, sweep::flat_checksum(w.data(), w.size()), {sweep::tensor_checksum(w.data(), w.size())}});
  };
  checksum(0);
  double last = 0;
  std::vector<double> x(static_cast<size_t>(features)), grad(static_cast<size_t>(features));
  std::vector<double> times;
  double eval_time = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    std::fill(grad.begin(), grad.end(), 0.0);
    double loss = 0;
    const uint64_t stream = step >= flaw && flaw > 0 ? data_seed + 1 : data_seed;  // the planted flaw
    for (int64_t j = 0; j < batch; ++j) {
      const uint64_t sample = uint64_t((step - 1) * batch + j) + 2;
      double y = noise * uniform(stream, sample, uint64_t(features)), pred = 0;
      for (int64_t f = 0; f < features; ++f) {
        x[size_t(f)] = uniform(stream, sample, uint64_t(f));
        y += x[size_t(f)] * truth[size_t(f)];
        pred += x[size_t(f)] * w[size_t(f)];
      }
      const double err = pred - y;
      loss += err * err;
      for (int64_t f = 0; f < features; ++f) grad[size_t(f)] += 2 * err * x[size_t(f)];
    }
    double norm = 0;
    for (int64_t f = 0; f < features; ++f)
      norm += (grad[size_t(f)] / double(batch)) * (grad[size_t(f)] / double(batch));
    for (int64_t f = 0; f < features; ++f) w[size_t(f)] -= float(lr * grad[size_t(f)] / double(batch));
    sweep::StepMetrics m;
    m.step = step, m.loss = loss / double(batch), m.lr = lr, m.grad_norm = std::sqrt(norm), m.tokens = batch;
    m.step_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    m.tokens_per_s = m.step_time_s > 0 ? double(batch) / m.step_time_s : 0;
    times.push_back(m.step_time_s);
    // A figure of its own: how far the weights are from the truth (/metrics/extra).
    double distance = 0;
    for (int64_t f = 0; f < features; ++f)
      distance += (double(w[size_t(f)]) - truth[size_t(f)]) * (double(w[size_t(f)]) - truth[size_t(f)]);
    rec.append_step(m, {{"weight_error", std::sqrt(distance)}});
    rec.append_rank_times({m.step_time_s});
    last = m.loss;
    if (!std::isfinite(m.loss)) {
      rec.finish("diverged", "non-finite loss at step " + std::to_string(step));
      return 1;
    }
    if (step % every == 0 || step == steps) {
      checksum(step);
      // Held-out: 16 samples past every training one, the same at every evaluation.
      const auto e0 = std::chrono::steady_clock::now();
      double held = 0, within = 0;
      for (int64_t j = 0; j < 16; ++j) {
        const uint64_t sample = uint64_t(1) << 40 | uint64_t(j);
        double y = noise * uniform(data_seed, sample, uint64_t(features)), pred = 0;
        for (int64_t f = 0; f < features; ++f) {
          const double xf = uniform(data_seed, sample, uint64_t(f));
          y += xf * truth[size_t(f)], pred += xf * w[size_t(f)];
        }
        held += (pred - y) * (pred - y);
        within += std::fabs(pred - y) < 0.1 ? 1 : 0;
      }
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
      eval_time += took;
      rec.append_eval({step, held / 16, 16, took}, {{"within_0.1", within / 16}});
    }
  }
  // The figures every record has (results/SCHEMA.md): one rank's memory and step times.
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  const int64_t bytes = features * int64_t(sizeof(float));
  rec.set_memory({{bytes}, {2 * bytes}, {0}, {-1}, {int64_t(ru.ru_maxrss) * 1024}});
  std::nth_element(times.begin(), times.begin() + ptrdiff_t(times.size() / 2), times.end());
  rec.set_summary("rank_compute_median_s", std::to_string(times.empty() ? 0.0 : times[times.size() / 2]));
  rec.set_summary("stragglers", "");
  rec.set_summary("nonfinite_steps_skipped", "0");
  // Records with /eval say what the evaluations took (results/SCHEMA.md, /summary).
  double train_time = 0;
  for (double t : times) train_time += t;
  rec.set_summary("eval_time_s", std::to_string(eval_time));
  rec.set_summary("eval_time_fraction", std::to_string(eval_time / std::max(1e-12, train_time + eval_time)));
  rec.finish("completed");
  std::printf("linreg: completed %lld steps, final loss %.6g\n", static_cast<long long>(steps), last);
  if (span) std::ofstream(out + "/span") << started << " " << now_ns() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Fail& f) {
    std::fprintf(stderr, "linreg: error: %s\n", f.why.c_str());
    return f.code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linreg: run failed: %s\n", e.what());
    return 1;
  }
}
