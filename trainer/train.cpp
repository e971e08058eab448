#include "train.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "canonical_allreduce.h"  // canonical_allreduce, shard_layout, allgather_shards
#include "canonical_reduce.h"     // TreeAccumulator, canonical_sum
#include "checkpoint.h"           // save_checkpoint, load_latest_checkpoint
#include "checksum.h"             // flat_checksum, tensor_checksum
#include "comm_selftest.h"        // comm_self_test
#include "data_source.h"          // open_token_source, Sampler
#include "environment.h"          // set_up_determinism, collect_environment
#include "memory_meter.h"         // TensorMemoryMeter
#include "model.h"                // Transformer
#include "optimizer.h"            // adamw, learning_rate, clipping, LossScaler
#include "prefetcher.h"           // Prefetcher
#include "record.h"               // RecordWriter
#include "torch_compat.h"         // AutocastGuard, RNG state
#include "watchdog.h"             // Watchdog, WatchedCommunicator

namespace sweep {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// All parameters live in one flat fp32 buffer (and gradients in another) in the
/// model's canonical order, so reductions, optimizer and checksums see one vector. The
/// parameter tensors are views into the buffers; ZeRO 2/3 drop and rebind the buffers
/// between steps.
struct FlatParams {
  torch::Tensor params, grads;  // full-size, on the host; undefined while released (ZeRO 2/3)
  std::vector<ParamInfo> table;
  std::vector<torch::Tensor> handles;  // the module's parameter tensors, table order
  int64_t n = 0;
  // Off the CPU, the module's tensors are views of these device buffers instead; each
  // step copies the host parameters in, and each micro-batch's gradient out.
  torch::Device device{torch::kCPU};
  torch::Tensor dev_params, dev_grads;

  bool on_host() const { return device.is_cpu(); }
  void bind_params() {
    const torch::Tensor& src = on_host() ? params : dev_params;
    for (size_t i = 0; i < handles.size(); ++i)
      handles[i].set_data(src.defined() ? src.narrow(0, table[i].offset, table[i].numel).view(table[i].shape)
                                        : torch::empty({0}, torch::kFloat));
  }
  void bind_grads() {
    // A defined grad that is a view of the flat buffer: autograd accumulates into it in
    // place, and a parameter that gets no gradient (an idle expert) stays zero.
    const torch::Tensor& dst = on_host() ? grads : dev_grads;
    for (size_t i = 0; i < handles.size(); ++i)
      handles[i].mutable_grad() =
          dst.defined() ? dst.narrow(0, table[i].offset, table[i].numel).view(table[i].shape) : torch::Tensor();
  }
  /// Before forward: the device gets the host parameters (a no-op on the CPU).
  void push_params() {
    if (!on_host()) dev_params.copy_(params);
  }
  /// Before a micro-batch's backward: the gradient buffer it accumulates into is zero.
  void zero_grads() { (on_host() ? grads : dev_grads).zero_(); }
  /// After it: the host buffer holds that gradient (a no-op on the CPU).
  void pull_grads() {
    if (!on_host()) grads.copy_(dev_grads);
  }
};

FlatParams flatten(torch::nn::Module& model, torch::Device device) {
  FlatParams f;
  f.device = device;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    f.table.push_back({item.key(), item.value().sizes().vec(), f.n, item.value().numel()});
    f.handles.push_back(item.value());
    f.n += item.value().numel();
  }
  f.params = torch::empty({f.n}, torch::kFloat);
  for (size_t i = 0; i < f.handles.size(); ++i)
    f.params.narrow(0, f.table[i].offset, f.table[i].numel).copy_(f.handles[i].detach().reshape({-1}));
  f.grads = torch::zeros({f.n}, torch::kFloat);
  if (!f.on_host()) {
    f.dev_params = f.params.to(device);
    f.dev_grads = torch::zeros({f.n}, torch::TensorOptions().dtype(torch::kFloat).device(device));
  }
  f.bind_params();
  f.bind_grads();
  return f;
}

/// The device forward and backward run on. CUDA: GPU local_rank modulo the GPU count,
/// with deterministic math; cuBLAS reads its workspace setting when it starts.
torch::Device compute_device(const TrainOptions& opt) {
  if (opt.device == "cpu") return torch::Device(torch::kCPU);
  if (opt.device != "cuda") throw ConfigError("--device: expected cpu or cuda, got '" + opt.device + "'");
  if (!torch::cuda::is_available())
    throw ConfigError("--device cuda: no CUDA device is visible, or this LibTorch is built without CUDA");
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  compat::set_cuda_determinism();
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(opt.local_rank % int(torch::cuda::device_count())));
}

std::string format_double(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

ChecksumRow checksum_row(int64_t step, const float* params, const FlatParams& flat) {
  ChecksumRow row{step, flat_checksum(params, size_t(flat.n)), {}};
  for (const auto& p : flat.table) row.tensors.push_back(tensor_checksum(params + p.offset, size_t(p.numel)));
  return row;
}

/// The lower median: of two ranks the typical one is the faster, or no rank of two
/// could ever exceed it.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[(v.size() - 1) / 2];
}

/// Each rank's median over the steps of `times` ([step][rank]).
std::vector<double> rank_medians(const std::vector<std::vector<double>>& times, int world) {
  std::vector<double> med(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    std::vector<double> col;
    col.reserve(times.size());
    for (const auto& row : times) col.push_back(row[size_t(r)]);
    med[size_t(r)] = median(col);
  }
  return med;
}

/// Ranks whose median exceeds the typical rank's by 20% and by kStragglerMinS: below
/// that, scheduling noise on a busy host flags a rank of a small model at random.
constexpr double kStragglerMinS = 0.01;
std::vector<int> stragglers(const std::vector<double>& med) {
  const double typical = median(med);
  std::vector<int> out;
  for (size_t r = 0; r < med.size(); ++r)
    if (med.size() > 1 && med[r] > 1.2 * typical && med[r] - typical > kStragglerMinS) out.push_back(int(r));
  return out;
}

class Trainer {
 public:
  Trainer(const RunConfig& cfg, const TrainOptions& opt, Communicator& comm, Watchdog& dog)
      : cfg_(cfg), opt_(opt), comm_(comm), dog_(dog), rank_(comm.rank()), world_(comm.size()) {}
  ~Trainer() { dog_.on_stop(nullptr); }  // the hook reaches into this object
  RunStatus run();

 private:
  void restore(TrainState& st);
  void step_once(int64_t step, StepMetrics& s);
  void check_replicas(int64_t step, const ChecksumRow& mine);
  TrainState snapshot(int64_t step);
  RankMemory measure_memory();
  bool is_root() const { return rank_ == 0; }

  const RunConfig& cfg_;
  const TrainOptions& opt_;
  Communicator& comm_;
  Watchdog& dog_;
  const int rank_, world_;
  std::string id_;

  std::unique_ptr<TokenSource> source_;
  std::optional<Transformer> model_;
  FlatParams flat_;
  ShardLayout layout_;
  size_t s0_ = 0, ns_ = 0;              // this rank's shard
  std::vector<float> m_, v_;            // AdamW moments: whole vector (ZeRO 0) or shard
  std::vector<float> gshard_, pshard_;  // reduced gradient shard (ZeRO 2/3), parameter shard (ZeRO 3)
  std::vector<float> reduce_ws_;
  int64_t step_peak_tensors_ = 0;  // most bytes of LibTorch CPU tensors alive during a step
  std::unique_ptr<TreeAccumulator> tree_;
  LossScaler scaler_;
  int64_t updates_ = 0;
  std::vector<uint8_t> used_;  // per parameter tensor: got a gradient this step
  torch::Device device_{torch::kCPU};
  torch::Tensor pinned_batch_;  // host staging for the device's batches
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Prefetcher> prefetch_;
  std::optional<RecordWriter> record_;
  std::vector<StepMetrics> rows_;
  std::vector<ChecksumRow> checks_;
  std::vector<std::vector<double>> rank_times_;
  std::vector<std::vector<double>> compute_times_;  // [step][rank]: forward+backward only, for stragglers
};

RunStatus Trainer::run() {
  // Everything that can reject the config happens before anything is written.
  if (cfg_.dist.world_size != world_)
    throw ConfigError("key 'dist.world_size': the config says " + std::to_string(cfg_.dist.world_size) +
                      " ranks, but the job was launched with " + std::to_string(world_));
  source_ = open_token_source(cfg_);
  id_ = run_id(cfg_);
  std::optional<TrainState> resumed;
  if (!opt_.resume_from.empty())
    resumed = load_checkpoint_at(opt_.resume_from, id_, math_id(cfg_));  // elastic: any layout of the same math
  else if (opt_.resume)
    resumed = load_latest_checkpoint(opt_.out_dir, id_, math_id(cfg_));

  device_ = compute_device(opt_);
  set_up_determinism(cfg_);
  torch::NoGradGuard outer_no_grad;  // gradients only where a micro-batch asks for them
  const bool fp16 = cfg_.train.precision == "fp16", bf16 = cfg_.train.precision == "bf16";
  // fp16 on the CPU is emulated in the model; on CUDA it is autocast, like bf16.
  model_.emplace(cfg_.model, fp16 && device_.is_cpu() ? MatmulPrecision::fp16_emulated : MatmulPrecision::fp32);
  (*model_)->to(device_);  // the same initial values: they were drawn on the CPU
  flat_ = flatten(**model_, device_);
  const size_t n = size_t(flat_.n);
  const int64_t stage = cfg_.dist.zero_stage;
  layout_ = shard_layout(n, world_);
  s0_ = layout_.begin(rank_), ns_ = layout_.size(rank_);
  m_.assign(stage >= 1 ? ns_ : n, 0.0f);
  v_.assign(m_.size(), 0.0f);
  if (stage >= 2) gshard_.assign(ns_, 0.0f);
  tree_ = std::make_unique<TreeAccumulator>(n);
  scaler_ = LossScaler::from(cfg_.train);
  used_.assign(flat_.handles.size(), 0);
  for (size_t i = 0; i < flat_.handles.size(); ++i)
    flat_.handles[i].register_hook([this, i](const torch::Tensor&) { used_[i] = 1; });

  auto self_test = world_ > 1 ? comm_self_test(comm_, n) : std::vector<std::pair<std::string, std::string>>{};

  const int64_t A = cfg_.train.accum, M = world_ * A, B = cfg_.train.micro_batch, L = cfg_.model.seq_len;
  if (!device_.is_cpu()) pinned_batch_ = torch::empty({B, L + 1}, torch::kLong).pin_memory();
  if (is_root()) {
    RecordHeader header;
    header.run_id = id_;
    header.sweep_id = opt_.sweep_id;
    header.config_yaml = to_yaml(cfg_);
    header.config = to_flat(cfg_);
    header.environment = collect_environment(cfg_);
    header.environment.emplace_back("world_size", std::to_string(world_));
    if (!device_.is_cpu()) {
      for (auto& [k, v] : header.environment)
        if (k == "device")
          v = device_.str() + " (of " + std::to_string(torch::cuda::device_count()) +
              "; cuDNN deterministic, TF32 off, CUBLAS_WORKSPACE_CONFIG " + std::getenv("CUBLAS_WORKSPACE_CONFIG") +
              ")";
        else if (k == "cuda")
          v = "available";
    }
    header.environment.emplace_back("data.source", source_->describe());
    header.environment.emplace_back("data.entropy_floor", format_double(source_->entropy_floor()));
    if (device_.is_cpu())
      header.environment.emplace_back("precision.cpu",
                                      fp16   ? "fp16 emulated: fp16-rounded matmul inputs, fp32 accumulation"
                                      : bf16 ? "bf16 autocast"
                                             : "fp32");
    else
      header.environment.emplace_back("precision.cuda", fp16   ? "fp16 autocast"
                                                        : bf16 ? "bf16 autocast"
                                                               : "fp32, TF32 off");
    header.params = flat_.table;
    header.world_size = world_;
    std::filesystem::create_directories(opt_.out_dir);
    record_.emplace(opt_.out_dir + "/record.h5", header);
    for (const auto& [k, v] : self_test) record_->set_summary(k, v);
  }

  int64_t start = 0;
  if (resumed) {
    restore(*resumed);
    start = resumed->step;
  } else {
    checks_.push_back(checksum_row(0, flat_.params.data_ptr<float>(), flat_));  // the initial parameters
    if (record_) record_->append_checksum(checks_.back());
  }
  if (stage == 3) {  // from here on each rank keeps only its shard of the parameters
    pshard_.assign(flat_.params.data_ptr<float>() + s0_, flat_.params.data_ptr<float>() + s0_ + ns_);
    flat_.params = torch::Tensor();
    flat_.bind_params();
  }
  if (stage >= 2) {
    flat_.grads = torch::Tensor();
    flat_.bind_grads();
  }
  if (is_root() && !opt_.quiet) {
    std::printf("run %s: %zu parameters, %d rank(s), %lld tokens/step, %s, zero %lld, %s reduction, %s\n", id_.c_str(),
                n, world_, static_cast<long long>(M) * B * L, cfg_.train.precision.c_str(), (long long)stage,
                cfg_.dist.reduction.c_str(), source_->describe().c_str());
    if (resumed) std::printf("resumed from the checkpoint after step %lld\n", (long long)start);
  }

  sampler_ = std::make_unique<Sampler>(cfg_, *source_);
  prefetch_ = std::make_unique<Prefetcher>(*sampler_, cfg_.data.workers, start, cfg_.train.steps, rank_, A, M,
                                           size_t(B * (L + 1)));
  // A timeout or the launcher's SIGTERM ends the process from the watchdog thread;
  // before it does, the record says why (RecordWriter serialises with this thread).
  dog_.on_stop([this](const std::string& why) {
    if (record_) record_->abandon(why);
  });
  dog_.arm();
  RunStatus status = RunStatus::completed;
  std::string failure;
  auto last_flush = Clock::now();
  try {
    for (int64_t step = start + 1; step <= cfg_.train.steps; ++step) {
      dog_.beat(step);
      StepMetrics s;
      TensorMemoryMeter::instance().start_window();
      step_once(step, s);
      step_peak_tensors_ = std::max(step_peak_tensors_, TensorMemoryMeter::instance().window_peak());
      // fp16 overflow is the scaler's business; anything else non-finite is train.on_nan's.
      const bool nonfinite = !std::isfinite(s.loss) || (s.skipped && !scaler_.enabled);
      if (nonfinite && cfg_.train.on_nan == "stop") {
        status = RunStatus::diverged;
        failure = "non-finite " + std::string(std::isfinite(s.loss) ? "gradient" : "loss") + " at step " +
                  std::to_string(step);
        if (is_root()) std::printf("diverged: %s (train.on_nan: stop)\n", failure.c_str());
      } else if (nonfinite && is_root()) {
        std::printf("step %lld: non-finite loss or gradient; update skipped (train.on_nan: skip_step)\n",
                    (long long)step);
      }
      // Recording cost of this step: checksums plus any periodic flush to disk (the
      // appends themselves only buffer in memory).
      auto r0 = Clock::now();
      const bool checksum_now = step % cfg_.train.checksum_every == 0 || step == cfg_.train.steps;
      if (checksum_now) {
        std::vector<float> gathered;
        const float* params = flat_.params.defined() ? flat_.params.data_ptr<float>() : nullptr;
        if (stage == 3) {  // checksums need the whole vector: gather it for the moment
          gathered.resize(n);
          std::copy(pshard_.begin(), pshard_.end(), gathered.begin() + long(s0_));
          allgather_shards(comm_, gathered.data(), layout_);
          params = gathered.data();
        }
        ChecksumRow row = checksum_row(step, params, flat_);
        check_replicas(step, row);
        checks_.push_back(std::move(row));
      }
      if (record_ && r0 - last_flush > std::chrono::seconds(2)) {
        record_->flush();
        last_flush = Clock::now();
      }
      s.record_time_s = seconds_since(r0);
      if (record_) {
        record_->append_step(s);
        record_->append_rank_times(rank_times_.back());
        if (checksum_now) record_->append_checksum(checks_.back());
      }
      rows_.push_back(s);
      if (is_root() && !opt_.quiet && (step % cfg_.train.log_every == 0 || step == 1 || step == cfg_.train.steps))
        std::printf("step %6lld  loss %.6f  lr %.3e  grad_norm %.4f  scale %g%s  tok/s %.0f\n", (long long)step, s.loss,
                    s.lr, s.grad_norm, s.loss_scale, s.skipped ? " (skipped)" : "", s.tokens_per_s);
      if (status == RunStatus::diverged) break;
      if (cfg_.train.checkpoint_every > 0 && step % cfg_.train.checkpoint_every == 0 && step < cfg_.train.steps) {
        TrainState st = snapshot(step);
        // Test-only fault; a resumed process skips it, or it would crash at the same step again.
        const bool crash = step == cfg_.fault.crash_in_checkpoint_step && !opt_.resume;
        if (is_root()) save_checkpoint(opt_.out_dir, st, int(cfg_.train.keep_checkpoints), crash);
      }
    }
    RankMemory mem = measure_memory();
    if (record_) {
      record_->set_memory(mem);
      std::string list;
      // Wall step times are equal on every rank (each waits for the slowest in the
      // collectives), so stragglers show only in the time before the first collective.
      const std::vector<double> med = rank_medians(compute_times_, world_);
      std::string medians;
      for (double m : med) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4g", m);
        medians += (medians.empty() ? "" : ",") + std::string(buf);
      }
      for (int r : stragglers(med)) list += (list.empty() ? "" : ",") + std::to_string(r);
      record_->set_summary("stragglers", list);
      record_->set_summary("rank_compute_median_s", medians);
      if (!list.empty() && !opt_.quiet)
        std::printf("straggler rank(s): %s (median compute time per rank: %s s)\n", list.c_str(), medians.c_str());
      int64_t nan_skipped = 0;  // from the rows, so a resumed run counts the steps before it too
      for (const auto& r : rows_) nan_skipped += r.skipped && (!std::isfinite(r.loss) || !scaler_.enabled);
      record_->set_summary("nonfinite_steps_skipped", std::to_string(nan_skipped));
    }
  } catch (const c10::Error& e) {
    if (record_) record_->abandon(e.what_without_backtrace());
    throw;
  } catch (const std::exception& e) {
    if (record_) record_->abandon(e.what());
    throw;
  }
  std::fflush(stdout);
  if (record_)
    record_->finish(status == RunStatus::completed ? "completed" : "diverged", failure,
                    cfg_.fault.crash_in_record != 0);
  return status;
}

void Trainer::step_once(int64_t step, StepMetrics& s) {
  const auto t0 = Clock::now();
  if (step == cfg_.fault.kill_step && rank_ == cfg_.fault.kill_rank) std::raise(SIGKILL);  // test-only
  if (step == cfg_.fault.hang_step && rank_ == cfg_.fault.hang_rank)
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));  // test-only: the watchdog ends it
  const size_t n = size_t(flat_.n);
  const int64_t stage = cfg_.dist.zero_stage, A = cfg_.train.accum, M = world_ * A;
  const int64_t B = cfg_.train.micro_batch, L = cfg_.model.seq_len, tokens = M * B * L;
  const bool bf16 = cfg_.train.precision == "bf16", fp16 = cfg_.train.precision == "fp16";
  if (stage >= 2) {
    flat_.grads = torch::zeros({flat_.n}, torch::kFloat);
    flat_.bind_grads();
  }
  if (stage == 3) {  // gather the parameters for forward and backward
    flat_.params = torch::empty({flat_.n}, torch::kFloat);
    std::copy(pshard_.begin(), pshard_.end(), flat_.params.data_ptr<float>() + s0_);
    allgather_shards(comm_, flat_.params.data_ptr<float>(), layout_);
    flat_.bind_params();
  }
  flat_.push_params();
  float* grads = flat_.grads.data_ptr<float>();

  std::fill(used_.begin(), used_.end(), 0);
  std::vector<double> local_losses(static_cast<size_t>(A)), leaf_losses(static_cast<size_t>(M));
  const double scale_used = scaler_.scale;
  const auto c0 = Clock::now();
  if (rank_ == cfg_.fault.slow_rank && cfg_.fault.slow_ms > 0)  // test-only: a slow device or host
    std::this_thread::sleep_for(std::chrono::milliseconds(cfg_.fault.slow_ms));
  for (int64_t k = 0; k < A; ++k) {
    torch::Tensor batch = torch::from_blob(const_cast<int64_t*>(prefetch_->next()), {B, L + 1}, torch::kLong);
    if (!device_.is_cpu()) {
      // Through a pinned buffer, so the copy can overlap; the loss's item() waits for it.
      pinned_batch_.copy_(batch);
      batch = pinned_batch_.to(device_, /*non_blocking=*/true);
    }
    flat_.zero_grads();
    torch::AutoGradMode grad_on(true);
    std::optional<compat::AutocastGuard> autocast;
    if (bf16) autocast.emplace(device_.type(), at::kBFloat16, true);
    if (fp16 && !device_.is_cpu()) autocast.emplace(device_.type(), at::kHalf, true);
    // Token-weighted: each micro-batch's summed loss over the whole global batch's token
    // count, so the leaves add up to the global mean.
    torch::Tensor loss = (*model_)->loss_sum(batch) / double(tokens);
    if (step == cfg_.fault.nan_step && rank_ == 0 && k == 0)  // test-only: NaN loss, hence NaN gradients
      loss = loss * std::numeric_limits<double>::quiet_NaN();
    local_losses[size_t(k)] = loss.item<double>();
    (scaler_.enabled ? loss * scale_used : loss).backward();
    flat_.pull_grads();
    if (k + 1 < A) tree_->push(grads);  // the last leaf stays where it is
  }
  tree_->finish_with_last(grads);
  const double compute_s = seconds_since(c0);

  // Parameters no micro-batch on any rank reached.
  std::vector<int64_t> used(used_.begin(), used_.end());
  comm_.allreduce_sum_i64(used.data(), used.size());
  std::string unused_names;
  for (size_t i = 0; i < used.size(); ++i)
    if (!used[i]) ++s.unused_params, unused_names += (unused_names.empty() ? "" : ", ") + flat_.table[i].name;
  if (s.unused_params && cfg_.dist.find_unused == "error")
    throw std::runtime_error("step " + std::to_string(step) + ": parameters without a gradient on every rank: " +
                             unused_names + " (dist.find_unused: error; use zero to train them as zero-gradient)");

  comm_.allgather(local_losses.data(), size_t(A) * sizeof(double), leaf_losses.data());
  if (cfg_.dist.reduction == "native") {
    comm_.allreduce_sum_native(grads, n);
  } else {
    canonical_allreduce(comm_, grads, grads, n, layout_, /*gather=*/stage < 2, &reduce_ws_);
  }
  if (step == cfg_.fault.inf_grad_step && s0_ == 0 && ns_ > 0) grads[0] = std::numeric_limits<float>::infinity();

  // The gradient this rank's optimizer reads: all of it (ZeRO 0/1) or its shard (2/3).
  float* g = grads;
  size_t gn = n;
  if (stage >= 2) {
    std::copy(grads + s0_, grads + s0_ + ns_, gshard_.begin());
    flat_.grads = torch::Tensor();
    flat_.bind_grads();
    g = gshard_.data(), gn = ns_;
  }
  // Without a loss scale, the squared norm also tells whether every element is finite
  // (squares of floats summed in double cannot overflow): one pass instead of two.
  double sumsq = -1;
  int64_t bad = 0;
  if (!scaler_.enabled && stage < 2) {
    sumsq = sum_of_squares(g, gn);
    bad = std::isfinite(sumsq) ? 0 : 1;
  } else {
    bad = all_finite(g, gn) ? 0 : 1;
    if (stage >= 2) comm_.allreduce_sum_i64(&bad, 1);
  }
  const bool finite = bad == 0;

  s.step = step;
  s.loss = canonical_sum(leaf_losses);
  s.lr = learning_rate(cfg_.train, step);
  s.loss_scale = scale_used;
  s.tokens = tokens;
  if (finite && scaler_.enabled) scale(g, gn, float(1.0 / scale_used));  // a power of two: exact
  if (sumsq < 0) sumsq = stage >= 2 ? shard_sum_of_squares(comm_, g, layout_) : sum_of_squares(g, gn);
  s.grad_norm = std::sqrt(sumsq);
  s.clip_coef = clip_coefficient(s.grad_norm, cfg_.train.clip_norm);
  if (!finite || !std::isfinite(s.loss)) {
    s.skipped = 1;  // fp16: overflow, back the scale off; otherwise the run has diverged
  } else {
    AdamWStep hp = AdamWStep::at(cfg_.train, s.lr, ++updates_);
    hp.grad_scale = float(s.clip_coef);  // clipping inside the update: no pass of its own
    if (stage == 0) {
      adamw(flat_.params.data_ptr<float>(), g, m_.data(), v_.data(), n, hp);
    } else if (stage < 3) {
      float* p = flat_.params.data_ptr<float>();
      adamw(p + s0_, g + (stage == 1 ? s0_ : 0), m_.data(), v_.data(), ns_, hp);
      allgather_shards(comm_, p, layout_);
    } else {
      adamw(pshard_.data(), g, m_.data(), v_.data(), ns_, hp);
    }
  }
  scaler_.update(finite, cfg_.train);
  if (step == cfg_.fault.desync_step && rank_ == cfg_.fault.desync_rank && flat_.params.defined()) {
    float* p = flat_.params.data_ptr<float>() + flat_.n / 2;  // test-only: one bit of one replica
    *p = std::nextafter(*p, INFINITY);
  }
  if (stage == 3) {
    flat_.params = torch::Tensor();
    flat_.bind_params();
  }
  const double mine[2] = {seconds_since(t0), compute_s};
  std::vector<double> both(2 * static_cast<size_t>(world_)), times, compute;
  comm_.allgather(mine, sizeof mine, both.data());
  for (size_t r = 0; r < both.size(); r += 2) times.push_back(both[r]), compute.push_back(both[r + 1]);
  rank_times_.push_back(times);
  compute_times_.push_back(compute);
  s.step_time_s = *std::max_element(times.begin(), times.end());  // the step ends with its slowest rank
  s.tokens_per_s = s.step_time_s > 0 ? double(tokens) / s.step_time_s : 0;
}

void Trainer::check_replicas(int64_t step, const ChecksumRow& mine) {
  if (world_ == 1) return;
  std::vector<uint64_t> all(static_cast<size_t>(world_));
  comm_.allgather(&mine.params, sizeof(uint64_t), all.data());
  int other = -1;
  for (int r = 1; r < world_; ++r)
    if (all[size_t(r)] != all[0]) other = r;
  if (other < 0) return;
  const size_t P = mine.tensors.size();
  std::vector<uint64_t> tensors(P * size_t(world_));
  comm_.allgather(mine.tensors.data(), P * sizeof(uint64_t), tensors.data());
  std::string name = "?";
  for (size_t t = 0; t < P; ++t)
    if (tensors[t] != tensors[size_t(other) * P + t]) {
      name = flat_.table[t].name;
      break;
    }
  throw std::runtime_error("desync at step " + std::to_string(step) + ": rank 0 and rank " + std::to_string(other) +
                           " hold different parameters; first differing parameter: " + name);
}

TrainState Trainer::snapshot(int64_t step) {
  // Checkpoints hold whole vectors, whatever the ZeRO stage, so a run can resume on any
  // layout. Collective: every rank helps gather, rank 0 writes.
  const size_t n = size_t(flat_.n);
  const int64_t stage = cfg_.dist.zero_stage;
  TrainState st;
  st.run_id = id_;
  st.math_id = math_id(cfg_);
  st.step = step;
  st.params.resize(n);
  if (stage == 3) {
    std::copy(pshard_.begin(), pshard_.end(), st.params.begin() + long(s0_));
    allgather_shards(comm_, st.params.data(), layout_);
  } else {
    std::memcpy(st.params.data(), flat_.params.data_ptr<float>(), n * sizeof(float));
  }
  for (auto [src, dst] : {std::pair{&m_, &st.m}, {&v_, &st.v}}) {
    if (stage == 0) {
      *dst = *src;
    } else {
      dst->assign(n, 0.0f);
      std::copy(src->begin(), src->end(), dst->begin() + long(s0_));
      allgather_shards(comm_, dst->data(), layout_);
    }
  }
  st.loss_scale = scaler_.scale;
  st.clean_steps = scaler_.clean_steps;
  st.rng = compat::cpu_rng_state();
  st.metrics = rows_;
  st.checksums = checks_;
  return st;
}

void Trainer::restore(TrainState& st) {
  const size_t n = size_t(flat_.n);
  if (st.params.size() != n || st.m.size() != n || st.v.size() != n)
    throw std::runtime_error("checkpoint has " + std::to_string(st.params.size()) + " parameters, the model " +
                             std::to_string(n));
  std::memcpy(flat_.params.data_ptr<float>(), st.params.data(), n * sizeof(float));
  const long lo = cfg_.dist.zero_stage >= 1 ? long(s0_) : 0;
  m_.assign(st.m.begin() + lo, st.m.begin() + lo + long(m_.size()));
  v_.assign(st.v.begin() + lo, st.v.begin() + lo + long(v_.size()));
  scaler_.scale = st.loss_scale;
  scaler_.clean_steps = st.clean_steps;
  compat::set_cpu_rng_state(st.rng);
  rows_ = std::move(st.metrics);
  checks_ = std::move(st.checksums);
  for (const auto& r : rows_) updates_ += r.skipped ? 0 : 1;
  if (record_) {
    for (const auto& r : rows_)
      record_->append_step(r), record_->append_rank_times(std::vector<double>(size_t(world_), r.step_time_s));
    for (const auto& c : checks_) record_->append_checksum(c);
  }
}

RankMemory Trainer::measure_memory() {
  // What this rank holds between steps, from the buffers themselves; what it needed
  // during the steps: the tensors' high-water mark plus its own flat buffers (those do not
  // change size within a step).
  auto bytes = [](const torch::Tensor& t) { return t.defined() ? int64_t(t.numel()) * 4 : 0; };
  const int64_t own =
      int64_t(m_.capacity() + v_.capacity() + gshard_.capacity() + pshard_.capacity() + reduce_ws_.capacity()) *
      int64_t(sizeof(float));
  constexpr int kFigures = 5;
  int64_t mine[kFigures] = {
      bytes(flat_.params) + int64_t(pshard_.size()) * 4, bytes(flat_.grads) + int64_t(gshard_.size()) * 4,
      int64_t(m_.size() + v_.size()) * 4,
      device_.is_cpu() && TensorMemoryMeter::instance().installed() ? step_peak_tensors_ + own : -1,
      peak_resident_bytes()};
  std::vector<int64_t> all(static_cast<size_t>(kFigures * world_));
  comm_.allgather(mine, sizeof mine, all.data());
  RankMemory m;
  for (int r = 0; r < world_; ++r) {
    const int64_t* f = all.data() + size_t(kFigures * r);
    m.params.push_back(f[0]);
    m.grads.push_back(f[1]);
    m.optimizer.push_back(f[2]);
    m.step_peak.push_back(f[3]);
    m.peak_rss.push_back(f[4]);
  }
  return m;
}

}  // namespace

RunStatus train(const RunConfig& cfg, const TrainOptions& opt, Communicator& comm) {
  TensorMemoryMeter::instance();  // before the first tensor of the run, so all are counted
  Watchdog dog(cfg.dist.timeout_s, comm.rank(), opt.out_dir);
  WatchedCommunicator watched(comm, dog);
  try {
    return Trainer(cfg, opt, watched, dog).run();
  } catch (const ConfigError&) {
    throw;
  } catch (const c10::Error& e) {
    // LibTorch's what() carries a C++ backtrace; the record and the user get the sentence.
    if (comm.rank() != 0) dog.leave_note("rank " + std::to_string(comm.rank()) + ": " + e.what_without_backtrace());
    throw std::runtime_error(e.what_without_backtrace());
  } catch (const std::exception& e) {
    // Rank 0 writes the record; it reads this when the launcher stops it.
    if (comm.rank() != 0) dog.leave_note("rank " + std::to_string(comm.rank()) + ": " + e.what());
    throw;
  }
}

}  // namespace sweep
