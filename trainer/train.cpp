// The training loop: one run from its config to its record, on every rank. The model comes
// through the registry (sweep/trainer.h); its parameters live in flat buffers
// (flat_params.h); test faults strike through faults.h; each step's rows go through
// step_record.h.
#include "train.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

#include "canonical_allreduce.h"  // canonical_allreduce, shard_layout, allgather_shards
#include "canonical_reduce.h"     // TreeAccumulator, NodeAccumulator, canonical_cover, canonical_sum
#include "checkpoint.h"           // save_checkpoint, load_latest_checkpoint
#include "checksum.h"             // flat_checksum, tensor_checksum
#include "comm_selftest.h"        // comm_self_test, rank_hosts
#include "data_source.h"          // open_token_source, Sampler
#include "environment.h"          // set_up_determinism, collect_environment
#include "faults.h"               // FaultInjector
#include "flat_params.h"          // FlatParams, flatten
#include "leaf_scope.h"           // LeafScope, LeafScopeGuard
#include "memory_meter.h"         // TensorMemoryMeter
#include "model_schema.h"         // kDecoderKind
#include "optimizer.h"            // adamw, learning_rate, clipping, LossScaler
#include "prefetcher.h"           // Prefetcher
#include "step_record.h"          // StepRecorder
#include "sweep/trainer.h"        // Models, Model, ModelArgs, LossSum
#include "torch_compat.h"         // AutocastGuard, RNG state
#include "watchdog.h"             // Watchdog, WatchedCommunicator

namespace sweep {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// The device forward and backward run on. CUDA: GPU local_rank modulo the GPU count,
/// with deterministic math unless in benchmark mode; cuBLAS reads its workspace setting
/// when it starts.
torch::Device compute_device(const TrainOptions& opt, bool deterministic) {
  if (opt.device == "cpu") return torch::Device(torch::kCPU);
  if (opt.device != "cuda") throw ConfigError("--device: expected cpu or cuda, got '" + opt.device + "'");
  if (!torch::cuda::is_available())
    throw ConfigError("--device cuda: no CUDA device is visible, or this LibTorch is built without CUDA");
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  compat::set_cuda_determinism(deterministic);
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

/// This program's path, for the record: `sweep reproduce` starts it again.
std::string self_path() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

/// A program's DataSource (sweep/trainer.h) as a TokenSource; every token is checked
/// against the vocabulary, since a model's embedding would read out of range.
class ProgramSource : public TokenSource {
 public:
  ProgramSource(std::unique_ptr<DataSource> d, const RunConfig& cfg)
      : d_(std::move(d)), kind_(cfg.model.kind), vocab_(cfg.model.vocab) {
    if (!d_) throw std::runtime_error("model '" + kind_ + "': its data factory returned no source");
    if (d_->samples() < 1)
      throw std::runtime_error("model '" + kind_ + "': its data source has " + std::to_string(d_->samples()) +
                               " samples; expected at least 1");
  }
  int64_t samples() const override { return d_->samples(); }
  void sequence(int64_t sample, int64_t len, int64_t* out) const override {
    d_->sequence(sample, len, out);
    for (int64_t i = 0; i < len; ++i)
      if (out[i] < 0 || out[i] >= vocab_)
        throw std::runtime_error("model '" + kind_ + "': its data source gave token " + std::to_string(out[i]) +
                                 " at position " + std::to_string(i) + " of sample " + std::to_string(sample) +
                                 ", outside [0, model.vocab = " + std::to_string(vocab_) + ")");
  }
  std::string describe() const override { return "program: " + d_->describe(); }

 private:
  std::unique_ptr<DataSource> d_;
  std::string kind_;
  int64_t vocab_;
};

class Trainer {
 public:
  Trainer(const RunConfig& cfg, const TrainOptions& opt, Communicator& comm, Watchdog& dog, const Models& models)
      : cfg_(cfg),
        opt_(opt),
        comm_(comm),
        dog_(dog),
        models_(models),
        rank_(comm.rank()),
        world_(comm.size()),
        rec_(comm.size(), opt.quiet, cfg.train.log_every, cfg.train.steps) {}
  ~Trainer() { dog_.on_stop(nullptr); }  // the hook reaches into this object
  RunStatus run();

 private:
  const ModelSpec& find_spec() const;
  void build_model();
  void open_record(const std::vector<std::pair<std::string, std::string>>& self_test);
  void restore(TrainState& st);
  void step_once(int64_t step, StepMetrics& s);
  /// ZeRO 3: the whole parameter vector, for a forward pass, and back to the shard.
  void gather_params();
  void release_params();
  /// The held-out loss after `step`: a forward pass over train.eval_batches global batches
  /// of held-out sequences, summed leaf by leaf in the canonical order like the training loss.
  EvalRow evaluate(int64_t step);
  /// Checks what a model's loss() returned for a micro-batch.
  void check_loss(const LossSum& ls) const;
  /// A micro-batch of host tokens (micro_batch rows of seq_len + 1) as the model's input,
  /// on the compute device.
  torch::Tensor batch_on_device(const int64_t* tokens);
  /// Autocast as the run's precision asks (bf16; fp16 on CUDA) for as long as `guard` lives.
  void autocast(std::optional<compat::AutocastGuard>& guard) const;
  /// The micro-batches of this rank: forward and backward into the gradient tree; returns
  /// this rank's target count.
  int64_t compute(int64_t step, std::vector<double>& local_losses, double scale_used, int64_t tokens);
  /// The same for a run with leaves or a rank whose leaves are not one subtree: the rank's
  /// subtree sums end in nodes_.
  int64_t compute_leaves(int64_t step, std::vector<double>& local_losses, double scale_used, int64_t tokens);
  /// One forward and backward of `batch` (one or more leaves) with autocast and the
  /// checks; `losses` gets each leaf's loss over `tokens`. Returns the targets.
  int64_t forward_backward(int64_t step, int64_t k, const torch::Tensor& batch, double scale_used, int64_t tokens,
                           double* losses);
  /// Sets up leaves, the path (fused or split) and the reduction's subtrees.
  void plan_leaves();
  /// A leaf-aware model's per-leaf losses [K_]; throws naming the model when it gave none.
  torch::Tensor per_leaf(const LossSum& ls) const;
  /// Throws naming the model when its parameters are not the ones flattened.
  void check_params_unchanged(int64_t step) const;
  std::optional<ChecksumRow> checksum_if_due(int64_t step);
  void check_replicas(int64_t step, const ChecksumRow& mine);
  TrainState snapshot(int64_t step);
  RankMemory measure_memory();
  /// "model 'KIND': " + what, for the errors about a model.
  std::string model_error(const std::string& what) const { return "model '" + cfg_.model.kind + "': " + what; }
  bool is_root() const { return rank_ == 0; }

  const RunConfig& cfg_;
  const TrainOptions& opt_;
  Communicator& comm_;
  Watchdog& dog_;
  const Models& models_;
  const int rank_, world_;
  std::string id_;
  std::vector<std::string> hosts_;  // rank r's host name at r

  std::shared_ptr<const TokenSource> source_;       // what the run trains on
  std::shared_ptr<const TokenSource> eval_source_;  // held-out sequences; null when the run does not evaluate
  const ModelSpec* spec_ = nullptr;
  std::unique_ptr<Model> model_;
  std::unique_ptr<FaultInjector> faults_;  // null unless a fault.* key is on
  FlatParams flat_;
  ShardLayout layout_;
  size_t s0_ = 0, ns_ = 0;              // this rank's shard
  std::vector<float> m_, v_;            // AdamW moments: whole vector (ZeRO 0) or shard
  std::vector<float> gshard_, pshard_;  // reduced gradient shard (ZeRO 2/3), parameter shard (ZeRO 3)
  std::vector<float> reduce_ws_;
  int64_t step_peak_tensors_ = 0;  // most bytes of LibTorch CPU tensors alive during a step
  std::unique_ptr<TreeAccumulator> tree_;
  // Leaves (docs/design.md): K per micro-batch (train.leaf; else the micro-batch is one
  // leaf), N per step. `general_`: the rank's leaves are not one subtree of the tree, or
  // a micro-batch holds several leaves: subtree sums go into nodes_, and the reduction
  // takes every rank's cover (rank_nodes_).
  int64_t K_ = 1, N_ = 1;
  bool general_ = false, fused_ = false;
  std::unique_ptr<NodeAccumulator> nodes_;
  std::vector<std::vector<TreeNode>> rank_nodes_;
  LeafScope scope_;                            // the fused path's micro-batch (sweep/leaf.h)
  std::vector<std::vector<float>> node_bufs_;  // its subtree sums past the first (that one is the gradient buffer)
  std::vector<int64_t> plain_;                 // per parameter tensor: autograd gave it a gradient this micro-batch
  LossScaler scaler_;
  int64_t updates_ = 0;
  std::vector<int64_t> used_;  // per parameter tensor: got a gradient this step; then the target count
  torch::Device device_{torch::kCPU};
  torch::Tensor pinned_batch_;  // host staging for the device's batches
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Prefetcher> prefetch_;
  StepRecorder rec_;
};

const ModelSpec& Trainer::find_spec() const {
  if (const ModelSpec* spec = models_.find(cfg_.model.kind)) return *spec;
  std::vector<std::string> kinds;
  for (const auto& s : models_.specs()) kinds.push_back(s.schema.kind);
  throw ConfigError("key 'model.kind': this program does not offer model '" + cfg_.model.kind +
                    "'; it offers: " + join(kinds));
}

void Trainer::build_model() {
  // fp16 on the CPU is emulated in the model; on CUDA it is autocast, like bf16.
  const bool fp16_emulated = cfg_.train.precision == "fp16" && device_.is_cpu();
  try {
    model_ = spec_->make(ModelArgs(cfg_, fp16_emulated));
  } catch (const std::invalid_argument& e) {  // the factory rejects its keys' values
    throw ConfigError(model_error(e.what()));
  }
  if (!model_) throw std::runtime_error(model_error("its factory returned no model"));
  model_->module().to(device_);  // the same initial values: they were drawn on the CPU
  try {
    flat_ = flatten(model_->module(), device_);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(model_error(e.what()));
  }
  if (flat_.n == 0) throw std::runtime_error(model_error("it has no parameters to train"));
}

RunStatus Trainer::run() {
  // Everything that can reject the config happens before anything is written.
  if (cfg_.dist.world_size != world_)
    throw ConfigError("key 'dist.world_size': the config says " + std::to_string(cfg_.dist.world_size) +
                      " ranks, but the job was launched with " + std::to_string(world_));
  spec_ = &find_spec();  // before the data opens: an unknown kind is a config error
  if (cfg_.data.kind != "program") {
    source_ = open_token_source(cfg_);
  } else if (spec_->data) {
    source_ = std::make_shared<ProgramSource>(spec_->data(ModelArgs(cfg_, false)), cfg_);
  } else {
    throw ConfigError("key 'data.kind': program, but model '" + cfg_.model.kind +
                      "' supplies no data source of its own (ModelSpec::data); use synthetic, tokens, text or hdf5");
  }
  {
    DataSplit split = split_held_out(std::move(source_), cfg_);
    source_ = std::move(split.train), eval_source_ = std::move(split.eval);
  }
  if (eval_source_) {
    const int64_t per_batch = cfg_.dist.world_size * cfg_.train.accum * cfg_.train.micro_batch;
    const int64_t need = cfg_.train.eval_batches * per_batch;
    if (eval_source_->samples() < need)
      throw ConfigError("key 'train.eval_batches': " + std::to_string(cfg_.train.eval_batches) +
                        " evaluation batches of " + std::to_string(per_batch) +
                        " sequences (world_size x accum x micro_batch) need " + std::to_string(need) +
                        " held-out sequences; the held-out data has " + std::to_string(eval_source_->samples()) + " (" +
                        eval_source_->describe() + ")");
  }
  id_ = run_id(cfg_);
  std::optional<TrainState> resumed;
  if (!opt_.resume_from.empty())
    resumed = load_checkpoint_at(opt_.resume_from, id_, math_id(cfg_));  // elastic: any layout of the same math
  else if (opt_.resume)
    resumed = load_latest_checkpoint(opt_.out_dir, id_, math_id(cfg_));
  faults_ = FaultInjector::make(cfg_.fault, rank_, opt_.resume);

  device_ = compute_device(opt_, cfg_.deterministic());
  set_up_determinism(cfg_);
  torch::NoGradGuard outer_no_grad;  // gradients only where a micro-batch asks for them
  build_model();
  const size_t n = size_t(flat_.n);
  const int64_t stage = cfg_.dist.zero_stage;
  layout_ = shard_layout(n, world_);
  s0_ = layout_.begin(rank_), ns_ = layout_.size(rank_);
  m_.assign(stage >= 1 ? ns_ : n, 0.0f);
  v_.assign(m_.size(), 0.0f);
  if (stage >= 2) gshard_.assign(ns_, 0.0f);
  tree_ = std::make_unique<TreeAccumulator>(n);
  scaler_ = LossScaler::from(cfg_.train);
  used_.assign(flat_.handles.size() + 1, 0);
  plain_.assign(flat_.handles.size(), 0);
  for (size_t i = 0; i < flat_.handles.size(); ++i)
    flat_.handles[i].register_hook([this, i](const torch::Tensor&) { used_[i] = 1, plain_[i] = 1; });
  plan_leaves();

  // From the first collective on, a rank that waits dist.timeout_s for its peers ends the
  // run: ranks that cannot reach each other (a transport that does not connect two hosts)
  // hang right here, before any step.
  dog_.arm();
  // Which host each rank runs on: the record names them, and the self-test times the link
  // between two hosts when the ranks span more than one.
  hosts_ = rank_hosts(comm_);
  rec_.set_hosts(hosts_);
  dog_.set_hosts(hosts_);
  auto self_test =
      world_ > 1 ? comm_self_test(comm_, n, 3, hosts_) : std::vector<std::pair<std::string, std::string>>{};

  const int64_t A = cfg_.train.accum, M = world_ * A, B = cfg_.train.micro_batch, L = cfg_.model.seq_len;
  if (!device_.is_cpu()) pinned_batch_ = torch::empty({B, L + 1}, torch::kLong).pin_memory();
  if (is_root()) open_record(self_test);

  int64_t start = 0;
  if (resumed) {
    restore(*resumed);
    start = resumed->step;
  } else {
    rec_.initial(checksum_row(0, flat_.params.data_ptr<float>(), flat_));  // the initial parameters
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
    std::printf("run %s: %s model, %zu parameters, %d rank(s), %lld tokens/step, %s, zero %lld, %s reduction, %s\n",
                id_.c_str(), cfg_.model.kind.c_str(), n, world_, static_cast<long long>(M) * B * L,
                cfg_.train.precision.c_str(), (long long)stage, cfg_.native_reduction() ? "native" : "canonical",
                source_->describe().c_str());
    if (resumed) std::printf("resumed from the checkpoint after step %lld\n", (long long)start);
  }

  sampler_ = std::make_unique<Sampler>(cfg_, *source_);
  prefetch_ = std::make_unique<Prefetcher>(*sampler_, cfg_.data.workers, start, cfg_.train.steps, rank_, A, M,
                                           size_t(B * (L + 1)));
  // A timeout or the launcher's SIGTERM ends the process from the watchdog thread;
  // before it does, the record says why (RecordWriter serialises with this thread).
  dog_.on_stop([this](const std::string& why) { rec_.abandon(why); });
  dog_.beat(start);  // the clock of the steps starts now
  RunStatus status = RunStatus::completed;
  std::string failure;
  // A rung's stop: the run ends after step `stop`, with a checkpoint there to go on from
  // (resumed at or past it, from a checkpoint written after it, it stops where it is).
  const int64_t stop = opt_.stop_at > 0 && opt_.stop_at < cfg_.train.steps ? opt_.stop_at : 0;
  try {
    for (int64_t step = start + 1; step <= (stop > 0 ? stop : cfg_.train.steps); ++step) {
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
      const auto r0 = Clock::now();
      rec_.step(s, checksum_if_due(step), r0, is_root());
      if (status == RunStatus::diverged) break;
      // Before the checkpoint, which carries the evaluations so far.
      if (eval_source_ &&
          ((cfg_.train.eval_every > 0 && step % cfg_.train.eval_every == 0) || step == cfg_.train.steps))
        rec_.eval(evaluate(step), is_root());
      if ((cfg_.train.checkpoint_every > 0 && step % cfg_.train.checkpoint_every == 0 && step < cfg_.train.steps) ||
          step == stop) {
        TrainState st = snapshot(step);
        const bool crash = faults_ && faults_->crash_in_checkpoint(step);  // test-only
        if (is_root()) save_checkpoint(opt_.out_dir, st, int(cfg_.train.keep_checkpoints), crash);
      }
    }
    if (stop > 0 && status == RunStatus::completed) {
      status = RunStatus::stopped;
      failure = "stopped by the search at step " + std::to_string(std::max(start, stop)) + " of " +
                std::to_string(cfg_.train.steps);
      if (is_root() && !opt_.quiet && start < stop)
        std::printf("%s (a rung; the checkpoint is kept)\n", failure.c_str());
    }
    const RankMemory mem = measure_memory();
    rec_.summarize(mem, scaler_.enabled);
  } catch (const c10::Error& e) {
    rec_.abandon(e.what_without_backtrace());
    throw;
  } catch (const std::exception& e) {
    rec_.abandon(e.what());
    throw;
  }
  std::fflush(stdout);
  rec_.finish(status == RunStatus::completed ? "completed"
              : status == RunStatus::stopped ? "stopped"
                                             : "diverged",
              failure, cfg_.fault.crash_in_record != 0);
  return status;
}

void Trainer::open_record(const std::vector<std::pair<std::string, std::string>>& self_test) {
  const bool fp16 = cfg_.train.precision == "fp16", bf16 = cfg_.train.precision == "bf16";
  const bool decoder = cfg_.model.kind == kDecoderKind;
  RecordHeader header;
  header.run_id = id_;
  header.sweep_id = opt_.sweep_id;
  header.config_yaml = to_yaml(cfg_);
  header.config = to_flat(cfg_);
  header.environment = collect_environment(cfg_);
  header.environment.emplace_back("world_size", std::to_string(world_));
  // hosts: each host once, in the order of its first rank; rank_hosts: rank r's host at r.
  std::vector<std::string> distinct;
  for (const auto& h : hosts_)
    if (std::find(distinct.begin(), distinct.end(), h) == distinct.end()) distinct.push_back(h);
  for (auto& [k, v] : header.environment)
    if (k == "hosts")
      v = join(distinct, ",");
    else if (k == "rank_hosts")
      v = join(hosts_, ",");
  if (!device_.is_cpu()) {
    for (auto& [k, v] : header.environment)
      if (k == "device")
        v = device_.str() + " (of " + std::to_string(torch::cuda::device_count()) +
            (cfg_.deterministic() ? "; cuDNN deterministic, TF32 off, CUBLAS_WORKSPACE_CONFIG " +
                                        std::string(std::getenv("CUBLAS_WORKSPACE_CONFIG")) + ")"
                                  : "; benchmark mode: cuDNN autotuned, TF32 on)");
      else if (k == "cuda")
        v = "available";
  }
  header.environment.emplace_back("data.source", source_->describe());
  header.environment.emplace_back("data.entropy_floor", format_double(source_->entropy_floor()));
  if (eval_source_) header.environment.emplace_back("data.eval_source", eval_source_->describe());
  header.eval = eval_source_ != nullptr;
  if (device_.is_cpu())
    header.environment.emplace_back("precision.cpu",
                                    fp16   ? (decoder ? "fp16 emulated: fp16-rounded matmul inputs, fp32 accumulation"
                                                      : "fp16: dynamic loss scale; fp16 rounding is the model's own")
                                    : bf16 ? "bf16 autocast"
                                           : "fp32");
  else
    header.environment.emplace_back("precision.cuda", fp16                   ? "fp16 autocast"
                                                      : bf16                 ? "bf16 autocast"
                                                      : cfg_.deterministic() ? "fp32, TF32 off"
                                                                             : "fp32, TF32 on");
  // Which program trained it: `sweep reproduce` starts a model of its own again.
  header.environment.emplace_back("trainer", self_path());
  std::vector<std::string> kinds;
  for (const auto& s : models_.specs()) kinds.push_back(s.schema.kind);
  header.environment.emplace_back("trainer.models", join(kinds));
  if (cfg_.train.leaf > 0)
    header.environment.emplace_back(
        "leaf.path", fused_ ? "fused: one forward and backward per micro-batch, through the leaf-aware layers"
                            : std::string("split: one forward and backward per leaf (") +
                                  (model_->leaf_aware() ? "leaf-aware layers run on the host only"
                                                        : "the model is not built from the leaf-aware layers") +
                                  ")");
  if (general_) {
    // What the reduction moves beyond one partial per rank: each extra subtree of a rank
    // goes to every other rank's shard.
    size_t most = 0;
    int64_t extra = 0;
    for (int s = 0; s < world_; ++s) {
      most = std::max(most, rank_nodes_[size_t(s)].size());
      extra += int64_t(rank_nodes_[size_t(s)].size() - 1) * int64_t(flat_.n - int64_t(layout_.size(s))) * 4;
    }
    header.environment.emplace_back("reduction.subtrees", std::to_string(most) + " at most per rank; " +
                                                              std::to_string(extra) +
                                                              " bytes per step beyond one partial sum per rank");
  }
  header.params = flat_.table;
  header.world_size = world_;
  std::filesystem::create_directories(opt_.out_dir);
  rec_.open(opt_.out_dir + "/record.h5", header);
  for (const auto& [k, v] : self_test) rec_.record()->set_summary(k, v);
}

int64_t Trainer::compute(int64_t step, std::vector<double>& local_losses, double scale_used, int64_t tokens) {
  const int64_t A = cfg_.train.accum;
  float* grads = flat_.grads.data_ptr<float>();
  int64_t targets = 0;
  for (int64_t k = 0; k < A; ++k) {
    const torch::Tensor batch = batch_on_device(prefetch_->next());
    flat_.zero_grads();
    targets += forward_backward(step, k, batch, scale_used, tokens, &local_losses[size_t(k)]);
    flat_.pull_grads();
    if (k + 1 < A) tree_->push(grads);  // the last leaf stays where it is
  }
  tree_->finish_with_last(grads);
  check_params_unchanged(step);
  return targets;
}

torch::Tensor Trainer::per_leaf(const LossSum& ls) const {
  if (!ls.per_leaf.defined() || ls.per_leaf.dim() != 1 || ls.per_leaf.size(0) != K_)
    throw std::runtime_error(model_error(
        "it is leaf-aware, but loss() returned " +
        (ls.per_leaf.defined() ? "per_leaf of shape " + c10::str(ls.per_leaf.sizes()) : std::string("no per_leaf")) +
        "; expected [" + std::to_string(K_) + "] (sweep::leaf::sum_per_leaf)"));
  return ls.per_leaf;
}

void Trainer::check_params_unchanged(int64_t step) const {
  // A parameter registered or replaced after construction is not in the flat buffer: it
  // would train outside every guarantee.
  if (const std::string what = flat_.changed(model_->module()); !what.empty())
    throw std::runtime_error(model_error("its parameters changed during step " + std::to_string(step) + ": " + what));
}

void Trainer::plan_leaves() {
  const int64_t A = cfg_.train.accum, leaf = cfg_.train.leaf;
  K_ = leaf > 0 ? cfg_.train.micro_batch / leaf : 1;
  N_ = int64_t(world_) * A * K_;
  rank_nodes_.clear();
  bool one_subtree = true;
  for (int s = 0; s < world_; ++s) {
    rank_nodes_.push_back(canonical_cover(N_, s * A * K_, (s + 1) * A * K_));
    one_subtree = one_subtree && rank_nodes_.back().size() == 1;
  }
  // Without a leaf and with each rank's micro-batches one subtree (a power-of-two
  // accumulation), the original path: its bits and its copies are the same as ever.
  general_ = leaf > 0 || !one_subtree;
  if (!general_) return;
  nodes_ = std::make_unique<NodeAccumulator>(size_t(flat_.n), N_);
  // One pass per micro-batch through the leaf-aware layers, on the host; a model of plain
  // layers (or a device) gets one pass per leaf.
  fused_ = leaf > 0 && model_->leaf_aware() && device_.is_cpu();
  if (!fused_) return;
  scope_.leaves = K_;
  for (const auto& p : flat_.table) scope_.offsets.push_back(p.offset), scope_.numels.push_back(p.numel);
  scope_.n = flat_.n;
  scope_.used = &used_;
}

int64_t Trainer::forward_backward(int64_t step, int64_t k, const torch::Tensor& batch, double scale_used,
                                  int64_t tokens, double* losses) {
  torch::AutoGradMode grad_on(true);
  std::optional<compat::AutocastGuard> guard;
  autocast(guard);
  LossSum ls = model_->loss(batch);
  check_loss(ls);
  if (!ls.sum.requires_grad())
    throw std::runtime_error(model_error("loss() returned a tensor that depends on no parameter"));
  // Token-weighted: each leaf's summed loss over the whole global batch's token count, so
  // the leaves add up to the global mean (rescaled after the reduction when the model's
  // targets are not all the tokens).
  torch::Tensor loss = ls.sum / double(tokens);
  if (faults_ && faults_->nan_loss(step, k)) loss = loss * std::numeric_limits<double>::quiet_NaN();  // test-only
  if (fused_) {
    // Each leaf's loss over the step's tokens, like the whole micro-batch's (the NaN of a
    // test fault reaches all of them).
    torch::Tensor per = per_leaf(ls) / double(tokens);
    if (faults_ && faults_->nan_loss(step, k)) per = per * std::numeric_limits<double>::quiet_NaN();
    std::copy_n(per.to(torch::kDouble).cpu().contiguous().data_ptr<double>(), K_, losses);
  } else {
    losses[0] = loss.item<double>();
  }
  (scaler_.enabled ? loss * scale_used : loss).backward();
  return ls.targets;
}

int64_t Trainer::compute_leaves(int64_t step, std::vector<double>& local_losses, double scale_used, int64_t tokens) {
  const int64_t A = cfg_.train.accum, first = int64_t(rank_) * A * K_, leaf = cfg_.train.leaf;
  float* grads = flat_.grads.data_ptr<float>();
  const size_t n = size_t(flat_.n);
  nodes_->clear();
  int64_t targets = 0;
  for (int64_t k = 0; k < A; ++k) {
    const torch::Tensor batch = batch_on_device(prefetch_->next());
    const int64_t lo = first + k * K_;
    if (!fused_) {  // one forward and backward per leaf, each gradient a leaf of the tree
      for (int64_t l = 0; l < K_; ++l) {
        flat_.zero_grads();
        const torch::Tensor chunk = K_ == 1 ? batch : batch.narrow(0, l * leaf, leaf);
        targets += forward_backward(step, k, chunk, scale_used, tokens, &local_losses[size_t(k * K_ + l)]);
        flat_.pull_grads();
        nodes_->push({lo + l, 1}, grads);
      }
      continue;
    }
    // One pass: the leaf-aware layers fold each leaf's gradient into the sums of the
    // micro-batch's subtrees, the first in the gradient buffer, the others beside it.
    scope_.nodes = canonical_cover(N_, lo, lo + K_);
    if (node_bufs_.size() + 1 < scope_.nodes.size()) node_bufs_.resize(scope_.nodes.size() - 1);
    scope_.bufs = {grads};
    for (size_t j = 1; j < scope_.nodes.size(); ++j) {
      node_bufs_[j - 1].assign(n, 0.0f);
      scope_.bufs.push_back(node_bufs_[j - 1].data());
    }
    for (auto& node : scope_.nodes) node.lo -= lo;
    scope_.params = flat_.params.data_ptr<float>();
    scope_.written.assign(flat_.table.size(), 0);
    std::fill(plain_.begin(), plain_.end(), 0);
    flat_.zero_grads();
    {
      LeafScopeGuard on(&scope_);
      targets += forward_backward(step, k, batch, scale_used, tokens, &local_losses[size_t(k * K_)]);
    }
    for (size_t i = 0; i < plain_.size(); ++i)
      if (plain_[i])
        throw std::runtime_error(model_error(
            "parameter '" + flat_.table[i].name +
            "' got its gradient from a plain LibTorch op, but the model says it is leaf-aware; build it from the "
            "layers of sweep/leaf.h, or let leaf_aware() return false"));
    for (size_t j = 0; j < scope_.nodes.size(); ++j)
      nodes_->push({lo + scope_.nodes[j].lo, scope_.nodes[j].count}, scope_.bufs[j]);
  }
  check_params_unchanged(step);
  return targets;
}

void Trainer::check_loss(const LossSum& ls) const {
  if (!ls.sum.defined() || ls.sum.dim() != 0 || !ls.sum.is_floating_point())
    throw std::runtime_error(model_error("loss() returned " +
                                         (ls.sum.defined() ? "a " + std::string(c10::toString(ls.sum.scalar_type())) +
                                                                 " tensor of shape " + c10::str(ls.sum.sizes())
                                                           : std::string("no tensor")) +
                                         "; expected the summed loss as a floating-point scalar (0-dim) tensor"));
  if (ls.targets < 1)
    throw std::runtime_error(model_error("loss() reported " + std::to_string(ls.targets) +
                                         " targets for a micro-batch; expected at least 1"));
}

torch::Tensor Trainer::batch_on_device(const int64_t* tokens) {
  torch::Tensor batch =
      torch::from_blob(const_cast<int64_t*>(tokens), {cfg_.train.micro_batch, cfg_.model.seq_len + 1}, torch::kLong);
  if (device_.is_cpu()) return batch;
  // Through a pinned buffer, so the copy can overlap; the loss's item() waits for it.
  pinned_batch_.copy_(batch);
  return pinned_batch_.to(device_, /*non_blocking=*/true);
}

void Trainer::autocast(std::optional<compat::AutocastGuard>& guard) const {
  const std::string& p = cfg_.train.precision;
  if (p == "bf16") guard.emplace(device_.type(), at::kBFloat16, true);
  if (p == "fp16" && !device_.is_cpu()) guard.emplace(device_.type(), at::kHalf, true);
}

void Trainer::gather_params() {
  if (cfg_.dist.zero_stage != 3) return;
  flat_.params = torch::empty({flat_.n}, torch::kFloat);
  std::copy(pshard_.begin(), pshard_.end(), flat_.params.data_ptr<float>() + s0_);
  allgather_shards(comm_, flat_.params.data_ptr<float>(), layout_);
  flat_.bind_params();
}

void Trainer::release_params() {
  if (cfg_.dist.zero_stage != 3) return;
  flat_.params = torch::Tensor();
  flat_.bind_params();
}

EvalRow Trainer::evaluate(int64_t step) {
  const auto t0 = Clock::now();
  const int64_t A = cfg_.train.accum, M = world_ * A, B = cfg_.train.micro_batch, L = cfg_.model.seq_len;
  const int64_t leaf = cfg_.train.leaf;
  gather_params();
  flat_.push_params();
  model_->module().eval();
  std::vector<int64_t> tokens(static_cast<size_t>(B * (L + 1)));
  std::vector<double> local(static_cast<size_t>(A * K_)), leaves(static_cast<size_t>(N_));
  double total = 0;  // the batches' canonical sums, added in batch order
  int64_t targets = 0;
  for (int64_t e = 0; e < cfg_.train.eval_batches; ++e) {
    dog_.beat(step);
    for (int64_t k = 0; k < A; ++k) {
      fill_eval(*eval_source_, cfg_, e, rank_ * A + k, M, tokens.data());
      const torch::Tensor batch = batch_on_device(tokens.data());
      std::optional<compat::AutocastGuard> guard;
      autocast(guard);
      if (fused_) {  // one pass, the loss of each leaf
        LeafScopeGuard on(&scope_);
        const LossSum ls = model_->loss(batch);
        check_loss(ls);
        std::copy_n(per_leaf(ls).to(torch::kDouble).cpu().contiguous().data_ptr<double>(), K_, &local[size_t(k * K_)]);
        targets += ls.targets;
        continue;
      }
      for (int64_t l = 0; l < K_; ++l) {  // one pass per leaf (the micro-batch is one without a leaf)
        const LossSum ls = model_->loss(K_ == 1 ? batch : batch.narrow(0, l * leaf, leaf));
        check_loss(ls);
        local[size_t(k * K_ + l)] = ls.sum.item<double>();
        targets += ls.targets;
      }
    }
    comm_.allgather(local.data(), local.size() * sizeof(double), leaves.data());
    total += canonical_sum(leaves);
  }
  model_->module().train();
  release_params();
  comm_.allreduce_sum_i64(&targets, 1);
  return EvalRow{step, total / double(targets), targets, seconds_since(t0)};
}

void Trainer::step_once(int64_t step, StepMetrics& s) {
  const auto t0 = Clock::now();
  if (faults_) faults_->step_start(step);  // test-only: kill or hang
  const size_t n = size_t(flat_.n);
  const int64_t stage = cfg_.dist.zero_stage, A = cfg_.train.accum, M = world_ * A;
  const int64_t B = cfg_.train.micro_batch, L = cfg_.model.seq_len, tokens = M * B * L;
  if (stage >= 2) {
    flat_.grads = torch::zeros({flat_.n}, torch::kFloat);
    flat_.bind_grads();
  }
  gather_params();
  flat_.push_params();
  float* grads = flat_.grads.data_ptr<float>();

  std::fill(used_.begin(), used_.end(), 0);
  std::vector<double> local_losses(static_cast<size_t>(A * K_)), leaf_losses(static_cast<size_t>(N_));
  const double scale_used = scaler_.scale;
  const auto c0 = Clock::now();
  if (faults_) faults_->compute();  // test-only: a slow device or host
  used_.back() = general_ ? compute_leaves(step, local_losses, scale_used, tokens)
                          : compute(step, local_losses, scale_used, tokens);
  const double compute_s = seconds_since(c0);

  // Parameters no micro-batch on any rank reached, and the step's target count (one
  // collective for both; the next step zeroes the flags again).
  comm_.allreduce_sum_i64(used_.data(), used_.size());
  const int64_t targets = used_.back();
  std::string unused_names;
  for (size_t i = 0; i + 1 < used_.size(); ++i)
    if (!used_[i]) ++s.unused_params, unused_names += (unused_names.empty() ? "" : ", ") + flat_.table[i].name;
  if (s.unused_params && cfg_.dist.find_unused == "error")
    throw std::runtime_error("step " + std::to_string(step) + ": parameters without a gradient on every rank: " +
                             unused_names + " (dist.find_unused: error; use zero to train them as zero-gradient)");

  comm_.allgather(local_losses.data(), local_losses.size() * sizeof(double), leaf_losses.data());
  if (general_) {
    std::vector<const float*> partials;
    for (size_t i = 0; i < nodes_->size(); ++i) partials.push_back(nodes_->sum(i));
    if (cfg_.native_reduction()) {  // this rank's subtrees added in order, then the library's sum
      std::memcpy(grads, partials[0], n * sizeof(float));
      for (size_t i = 1; i < partials.size(); ++i)
        for (size_t e = 0; e < n; ++e) grads[e] += partials[i][e];
      comm_.allreduce_sum_native(grads, n);
    } else {
      canonical_allreduce(comm_, partials, rank_nodes_, N_, grads, n, layout_, /*gather=*/stage < 2, &reduce_ws_);
    }
  } else if (cfg_.native_reduction()) {
    comm_.allreduce_sum_native(grads, n);
  } else {
    canonical_allreduce(comm_, grads, grads, n, layout_, /*gather=*/stage < 2, &reduce_ws_);
  }
  if (faults_) faults_->gradient(step, grads, s0_, ns_);  // test-only: a non-finite gradient

  // The gradient this rank's optimizer reads: all of it (ZeRO 0/1) or its shard (2/3).
  float* g = grads;
  size_t gn = n;
  if (stage >= 2) {
    std::copy(grads + s0_, grads + s0_ + ns_, gshard_.begin());
    flat_.grads = torch::Tensor();
    flat_.bind_grads();
    g = gshard_.data(), gn = ns_;
  }
  // The leaves were divided by the step's token count; a model whose targets are fewer
  // (masked or padded positions) gets the mean over its targets: one factor, applied to the
  // reduced gradient, the same on every layout. The decoder's targets are its tokens.
  const double per_target = targets == tokens ? 1.0 : double(tokens) / double(targets);
  if (per_target != 1.0) scale(g, gn, float(per_target));
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
  s.loss = per_target == 1.0 ? canonical_sum(leaf_losses) : canonical_sum(leaf_losses) * per_target;
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
  if (faults_ && flat_.params.defined())  // test-only: one bit of one replica
    faults_->parameters(step, flat_.params.data_ptr<float>(), flat_.n);
  release_params();
  const double mine[2] = {seconds_since(t0), compute_s};
  std::vector<double> both(2 * static_cast<size_t>(world_)), times, compute;
  comm_.allgather(mine, sizeof mine, both.data());
  for (size_t r = 0; r < both.size(); r += 2) times.push_back(both[r]), compute.push_back(both[r + 1]);
  s.step_time_s = *std::max_element(times.begin(), times.end());  // the step ends with its slowest rank
  s.tokens_per_s = s.step_time_s > 0 ? double(tokens) / s.step_time_s : 0;
  rec_.rank_times(std::move(times), std::move(compute));
}

std::optional<ChecksumRow> Trainer::checksum_if_due(int64_t step) {
  if (step % cfg_.train.checksum_every != 0 && step != cfg_.train.steps) return std::nullopt;
  std::vector<float> gathered;
  const float* params = flat_.params.defined() ? flat_.params.data_ptr<float>() : nullptr;
  if (cfg_.dist.zero_stage == 3) {  // checksums need the whole vector: gather it for the moment
    gathered.resize(size_t(flat_.n));
    std::copy(pshard_.begin(), pshard_.end(), gathered.begin() + long(s0_));
    allgather_shards(comm_, gathered.data(), layout_);
    params = gathered.data();
  }
  ChecksumRow row = checksum_row(step, params, flat_);
  check_replicas(step, row);
  return row;
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
  st.metrics = rec_.rows();
  st.checksums = rec_.checksums();
  st.evals = rec_.evals();
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
  rec_.restore(std::move(st.metrics), std::move(st.checksums), std::move(st.evals));
  updates_ = rec_.updates();
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

RunStatus train(const RunConfig& cfg, const TrainOptions& opt, Communicator& comm, const Models& models) {
  TensorMemoryMeter::instance();  // before the first tensor of the run, so all are counted
  Watchdog dog(cfg.dist.timeout_s, comm.rank(), opt.out_dir);
  WatchedCommunicator watched(comm, dog);
  try {
    return Trainer(cfg, opt, watched, dog, models).run();
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
