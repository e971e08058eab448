#include "train.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "canonical_reduce.h"  // TreeAccumulator, canonical_sum
#include "checksum.h"          // flat_checksum, tensor_checksum
#include "environment.h"       // set_up_determinism, collect_environment
#include "model.h"             // Transformer
#include "optimizer.h"         // adamw, learning_rate, clipping
#include "record.h"            // RecordWriter
#include "synthetic_data.h"    // MarkovSource, epoch_permutation

namespace sweep {
namespace {

/// All parameters live in one flat fp32 buffer (and gradients in another) in
/// registration order, so reductions, optimizer and checksums see one vector.
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
    // A defined grad that is a view of the flat buffer: autograd accumulates into it in place.
    param.mutable_grad() = f.grads.narrow(0, p.offset, p.numel).view(p.shape);
  }
  return f;
}

/// Maps a step's global micro-batches to samples, independent of how they are split.
class Sampler {
 public:
  Sampler(const RunConfig& cfg) : cfg_(cfg), source_(cfg.data.seed, cfg.model.vocab, cfg.data.branching) {}

  /// Fills `out` [B, L+1] with global micro-batch `j` of 0-based step `step`.
  void fill(int64_t step, int64_t j, int64_t micro_batches, torch::Tensor& out) {
    const int64_t B = cfg_.train.micro_batch, len = cfg_.model.seq_len + 1, n = cfg_.data.samples;
    int64_t* data = out.data_ptr<int64_t>();
    for (int64_t b = 0; b < B; ++b) {
      int64_t g = (step * micro_batches + j) * B + b;  // global sample position
      int64_t epoch = g / n;
      if (epoch != epoch_) perm_ = epoch_permutation(uint64_t(cfg_.train.seed), uint64_t(epoch), n), epoch_ = epoch;
      source_.sequence(uint64_t(perm_[g % n]), len, data + b * len);
    }
  }
  double entropy_floor() const { return source_.entropy_floor(); }

 private:
  const RunConfig& cfg_;
  MarkovSource source_;
  int64_t epoch_ = -1;
  std::vector<int64_t> perm_;
};

std::string format_loss(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

RunStatus train_run(const RunConfig& cfg, const TrainOptions& opt);

}  // namespace

RunStatus train(const RunConfig& cfg, const TrainOptions& opt) {
  try {
    return train_run(cfg, opt);
  } catch (const c10::Error& e) {
    // LibTorch's what() carries a C++ backtrace; the record and the user get the sentence.
    throw std::runtime_error(e.what_without_backtrace());
  }
}

namespace {

RunStatus train_run(const RunConfig& cfg, const TrainOptions& opt) {
  set_up_determinism(cfg);
  torch::NoGradGuard outer_no_grad;  // grads only where a micro-batch asks for them
  Transformer model(cfg.model);
  FlatParams flat = flatten(*model);
  const size_t n = size_t(flat.params.numel());
  float* params = flat.params.data_ptr<float>();
  float* grads = flat.grads.data_ptr<float>();
  std::vector<float> m(n, 0.0f), v(n, 0.0f);

  Sampler sampler(cfg);
  const int64_t world = cfg.dist.world_size, rank = 0, A = cfg.train.accum, M = world * A;
  const int64_t B = cfg.train.micro_batch, L = cfg.model.seq_len;
  const int64_t tokens_per_step = M * B * L;

  RecordHeader header;
  header.run_id = run_id(cfg);
  header.sweep_id = opt.sweep_id;
  header.config_yaml = to_yaml(cfg);
  header.config = to_flat(cfg);
  header.environment = collect_environment(cfg);
  header.environment.emplace_back("data.entropy_floor", format_loss(sampler.entropy_floor()));
  header.params = flat.table;
  std::filesystem::create_directories(opt.out_dir);
  RecordWriter record(opt.out_dir + "/record.h5", header);

  if (!opt.quiet)
    std::printf("run %s: %zu parameters, %lld tokens/step, entropy floor %.4f nats, ln(vocab) %.4f\n",
                header.run_id.c_str(), n, (long long)tokens_per_step, sampler.entropy_floor(),
                std::log(double(cfg.model.vocab)));

  TreeAccumulator tree(n);
  torch::Tensor batch = torch::empty({B, L + 1}, torch::kLong);
  std::vector<double> leaf_losses(M);
  RunStatus status = RunStatus::completed;
  std::string failure;
  auto last_flush = std::chrono::steady_clock::now();

  try {
  for (int64_t step = 1; step <= cfg.train.steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t k = 0; k < A; ++k) {
      const int64_t j = rank * A + k;
      sampler.fill(step - 1, j, M, batch);
      flat.grads.zero_();
      torch::Tensor loss;
      {
        torch::AutoGradMode grad_on(true);
        // Token-weighted: each micro-batch's sum over the whole global batch's token count.
        loss = model->loss_sum(batch) / double(tokens_per_step);
        loss.backward();
      }
      leaf_losses[j] = loss.item<double>();
      tree.push(grads);
    }
    tree.finish(grads);
    const double loss = canonical_sum(leaf_losses);
    const double norm = std::sqrt(sum_of_squares(grads, n));
    const double coef = clip_coefficient(norm, cfg.train.clip_norm);
    if (coef != 1.0) scale(grads, n, float(coef));
    const double lr = learning_rate(cfg.train, step);
    if (!std::isfinite(loss)) {
      status = RunStatus::diverged;
      failure = "loss is " + format_loss(loss) + " at step " + std::to_string(step);
    } else {
      adamw(params, grads, m.data(), v.data(), n, AdamWStep::at(cfg.train, lr, step));
    }
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    StepMetrics s;
    s.step = step, s.loss = loss, s.lr = lr, s.grad_norm = norm, s.clip_coef = coef;
    s.tokens = tokens_per_step, s.step_time_s = dt, s.tokens_per_s = dt > 0 ? double(tokens_per_step) / dt : 0;
    record.append_step(s);
    if (step % cfg.train.checksum_every == 0 || step == cfg.train.steps) {
      ChecksumRow row{step, flat_checksum(params, n), {}};
      for (const auto& p : flat.table) row.tensors.push_back(tensor_checksum(params + p.offset, size_t(p.numel)));
      record.append_checksum(row);
    }
    if (!opt.quiet && (step % cfg.train.log_every == 0 || step == 1 || step == cfg.train.steps))
      std::printf("step %6lld  loss %.6f  lr %.3e  grad_norm %.4f  scale %g  tok/s %.0f\n", (long long)step, loss, lr,
                  norm, s.loss_scale, s.tokens_per_s);
    if (std::chrono::steady_clock::now() - last_flush > std::chrono::seconds(2)) {
      record.flush();
      last_flush = std::chrono::steady_clock::now();
    }
    if (status == RunStatus::diverged) break;
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
}  // namespace sweep
