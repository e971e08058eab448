#include "train.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "canonical_reduce.h"  // TreeAccumulator, canonical_sum
#include "checkpoint.h"        // save_checkpoint, load_latest_checkpoint
#include "checksum.h"          // flat_checksum, tensor_checksum
#include "data_source.h"       // open_token_source, Sampler
#include "environment.h"       // set_up_determinism, collect_environment
#include "model.h"             // Transformer
#include "optimizer.h"         // adamw, learning_rate, clipping, LossScaler
#include "prefetcher.h"        // Prefetcher
#include "record.h"            // RecordWriter
#include "torch_compat.h"      // AutocastGuard, RNG state

namespace sweep {
namespace {

/// All parameters live in one flat fp32 buffer (and gradients in another) in the
/// model's canonical order, so reductions, optimizer and checksums see one vector.
struct FlatParams {
  torch::Tensor params, grads;
  std::vector<ParamInfo> table;
};

FlatParams flatten(torch::nn::Module& model) {
  FlatParams f;
  int64_t total = 0;
  auto named = model.named_parameters(/*recurse=*/true);
  for (const auto& item : named) {
    f.table.push_back({item.key(), item.value().sizes().vec(), total, item.value().numel()});
    total += item.value().numel();
  }
  f.params = torch::empty({total}, torch::kFloat);
  f.grads = torch::zeros({total}, torch::kFloat);
  size_t i = 0;
  for (auto& item : named) {
    const ParamInfo& p = f.table[i++];
    torch::Tensor param = item.value();
    auto view = f.params.narrow(0, p.offset, p.numel).view(p.shape);
    view.copy_(param.detach());
    param.set_data(view);
    // A defined grad that is a view of the flat buffer: autograd accumulates into it in
    // place, and a parameter that gets no gradient (an idle expert) stays zero.
    param.mutable_grad() = f.grads.narrow(0, p.offset, p.numel).view(p.shape);
  }
  return f;
}

std::string format_double(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

ChecksumRow checksum_row(int64_t step, const float* params, const std::vector<ParamInfo>& table) {
  ChecksumRow row{step, flat_checksum(params, size_t(table.empty() ? 0 : table.back().offset + table.back().numel)), {}};
  for (const auto& p : table) row.tensors.push_back(tensor_checksum(params + p.offset, size_t(p.numel)));
  return row;
}

RunStatus train_run(const RunConfig& cfg, const TrainOptions& opt) {
  // Everything that can reject the config happens before anything is written.
  std::unique_ptr<TokenSource> source = open_token_source(cfg);
  const std::string id = run_id(cfg);
  std::optional<TrainState> resumed;
  if (opt.resume) resumed = load_latest_checkpoint(opt.out_dir, id);

  set_up_determinism(cfg);
  torch::NoGradGuard outer_no_grad;  // gradients only where a micro-batch asks for them
  const bool fp16 = cfg.train.precision == "fp16", bf16 = cfg.train.precision == "bf16";
  Transformer model(cfg.model, fp16 ? MatmulPrecision::fp16_emulated : MatmulPrecision::fp32);
  FlatParams flat = flatten(*model);
  const size_t n = size_t(flat.params.numel());
  float* params = flat.params.data_ptr<float>();
  float* grads = flat.grads.data_ptr<float>();
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  LossScaler scaler = LossScaler::from(cfg.train);

  const int64_t world = cfg.dist.world_size, rank = 0, A = cfg.train.accum, M = world * A;
  const int64_t B = cfg.train.micro_batch, L = cfg.model.seq_len;
  const int64_t tokens_per_step = M * B * L;

  RecordHeader header;
  header.run_id = id;
  header.sweep_id = opt.sweep_id;
  header.config_yaml = to_yaml(cfg);
  header.config = to_flat(cfg);
  header.environment = collect_environment(cfg);
  header.environment.emplace_back("data.source", source->describe());
  header.environment.emplace_back("data.entropy_floor", format_double(source->entropy_floor()));
  header.environment.emplace_back("precision.cpu", fp16 ? "fp16 emulated: fp16-rounded matmul inputs, fp32 accumulation"
                                                   : bf16 ? "bf16 autocast"
                                                          : "fp32");
  header.params = flat.table;
  std::filesystem::create_directories(opt.out_dir);
  RecordWriter record(opt.out_dir + "/record.h5", header);

  std::vector<StepMetrics> rows;
  std::vector<ChecksumRow> checks;
  int64_t start = 0, updates = 0;
  if (resumed) {
    if (resumed->params.size() != n) throw std::runtime_error("checkpoint has a different parameter count");
    std::memcpy(params, resumed->params.data(), n * sizeof(float));
    m = std::move(resumed->m);
    v = std::move(resumed->v);
    scaler.scale = resumed->loss_scale;
    scaler.clean_steps = resumed->clean_steps;
    compat::set_cpu_rng_state(resumed->rng);
    rows = std::move(resumed->metrics);
    checks = std::move(resumed->checksums);
    for (const auto& r : rows) record.append_step(r), updates += r.skipped ? 0 : 1;
    for (const auto& c : checks) record.append_checksum(c);
    start = resumed->step;
  } else {
    // Step 0: the initial parameters, so the first update of every tensor is visible
    // (an expert that got no token keeps its step-0 hash).
    checks.push_back(checksum_row(0, params, flat.table));
    record.append_checksum(checks.back());
  }
  if (!opt.quiet) {
    std::printf("run %s: %zu parameters, %lld tokens/step, %s, %s\n", id.c_str(), n, (long long)tokens_per_step,
                cfg.train.precision.c_str(), source->describe().c_str());
    if (resumed) std::printf("resumed from the checkpoint after step %lld\n", (long long)start);
  }

  Sampler sampler(cfg, *source);
  Prefetcher prefetch(sampler, cfg.data.workers, start, cfg.train.steps, rank, A, M, size_t(B * (L + 1)));
  TreeAccumulator tree(n);
  std::vector<double> leaf_losses(M);
  RunStatus status = RunStatus::completed;
  std::string failure;
  auto last_flush = std::chrono::steady_clock::now();

  try {
    for (int64_t step = start + 1; step <= cfg.train.steps; ++step) {
      auto t0 = std::chrono::steady_clock::now();
      const double scale_used = scaler.scale;
      for (int64_t k = 0; k < A; ++k) {
        const int64_t j = rank * A + k;
        torch::Tensor batch = torch::from_blob(const_cast<int64_t*>(prefetch.next()), {B, L + 1}, torch::kLong);
        flat.grads.zero_();
        torch::AutoGradMode grad_on(true);
        std::optional<compat::AutocastGuard> autocast;
        if (bf16) autocast.emplace(torch::kCPU, at::kBFloat16, true);
        // Token-weighted: each micro-batch's summed loss over the whole global batch's
        // token count, so the leaves add up to the global mean.
        torch::Tensor loss = model->loss_sum(batch) / double(tokens_per_step);
        leaf_losses[size_t(j)] = loss.item<double>();
        (scaler.enabled ? loss * scale_used : loss).backward();
        tree.push(grads);
      }
      tree.finish(grads);
      if (step == cfg.fault.inf_grad_step) grads[0] = std::numeric_limits<float>::infinity();

      StepMetrics s;
      s.step = step;
      s.loss = canonical_sum(leaf_losses);
      s.lr = learning_rate(cfg.train, step);
      s.loss_scale = scale_used;
      s.tokens = tokens_per_step;
      const bool finite = all_finite(grads, n);
      if (finite && scaler.enabled) scale(grads, n, float(1.0 / scale_used));  // a power of two: exact
      s.grad_norm = std::sqrt(sum_of_squares(grads, n));
      s.clip_coef = clip_coefficient(s.grad_norm, cfg.train.clip_norm);
      if (!std::isfinite(s.loss) || (!finite && !scaler.enabled)) {
        status = RunStatus::diverged;
        failure = "non-finite " + std::string(std::isfinite(s.loss) ? "gradient" : "loss") + " at step " + std::to_string(step);
        s.skipped = 1;
      } else if (!finite) {
        s.skipped = 1;  // fp16 overflow: skip the update, back the scale off
      } else {
        if (s.clip_coef != 1.0) scale(grads, n, float(s.clip_coef));
        adamw(params, grads, m.data(), v.data(), n, AdamWStep::at(cfg.train, s.lr, ++updates));
      }
      scaler.update(finite, cfg.train);
      s.step_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      s.tokens_per_s = s.step_time_s > 0 ? double(tokens_per_step) / s.step_time_s : 0;

      record.append_step(s);
      rows.push_back(s);
      if (step % cfg.train.checksum_every == 0 || step == cfg.train.steps) {
        checks.push_back(checksum_row(step, params, flat.table));
        record.append_checksum(checks.back());
      }
      if (!opt.quiet && (step % cfg.train.log_every == 0 || step == 1 || step == cfg.train.steps))
        std::printf("step %6lld  loss %.6f  lr %.3e  grad_norm %.4f  scale %g%s  tok/s %.0f\n", (long long)step, s.loss,
                    s.lr, s.grad_norm, s.loss_scale, s.skipped ? " (skipped)" : "", s.tokens_per_s);
      if (status == RunStatus::diverged) break;
      if (cfg.train.checkpoint_every > 0 && step % cfg.train.checkpoint_every == 0 && step < cfg.train.steps) {
        TrainState st{id, step, std::vector<float>(params, params + n), m, v, scaler.scale, scaler.clean_steps,
                      compat::cpu_rng_state(), rows, checks};
        save_checkpoint(opt.out_dir, st, int(cfg.train.keep_checkpoints));
      }
      if (std::chrono::steady_clock::now() - last_flush > std::chrono::seconds(2)) {
        record.flush();
        last_flush = std::chrono::steady_clock::now();
      }
    }
  } catch (const c10::Error& e) {
    record.abandon(e.what_without_backtrace());
    throw;
  } catch (const std::exception& e) {
    record.abandon(e.what());
    throw;
  }
  std::fflush(stdout);
  record.finish(status == RunStatus::completed ? "completed" : "diverged", failure);
  return status;
}

}  // namespace

RunStatus train(const RunConfig& cfg, const TrainOptions& opt) {
  try {
    return train_run(cfg, opt);
  } catch (const c10::Error& e) {
    // LibTorch's what() carries a C++ backtrace; the record and the user get the sentence.
    throw std::runtime_error(e.what_without_backtrace());
  }
}

}  // namespace sweep
