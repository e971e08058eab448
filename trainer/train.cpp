// The training loop: one run from its config to its record, on every rank. The loop and
// its glue live here; the parts it drives live beside it: the model on its device
// (device_model.h), the micro-batches of a step (micro_batches.h), the leaves
// (leaf_plan.h), the gradient reduction (gradient_reduction.h), ZeRO shards
// (zero_shards.h), evaluation (evaluation.h), checksums (replica_checksums.h), the
// record's header (record_header.h), checkpoint state (train_state.h); each step's rows go
// through step_record.h.
#include "train.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "canonical_allreduce.h"  // shard_sum_of_squares
#include "canonical_reduce.h"     // canonical_sum
#include "checkpoint.h"           // save_checkpoint, load_latest_checkpoint
#include "comm_selftest.h"        // comm_self_test, rank_hosts
#include "data_source.h"          // open_token_source, Sampler
#include "device_model.h"         // DeviceModel, compute_device
#include "environment.h"          // set_up_determinism
#include "evaluation.h"           // evaluate
#include "faults.h"               // FaultInjector, SlowExchangeCommunicator
#include "flat_params.h"          // FlatParams
#include "grad_telemetry.h"       // tensor_grad_norms, telemetry_reason
#include "gradient_reduction.h"   // reduce_gradients, local_sum_of_squares, count_unused_params
#include "leaf_plan.h"            // LeafPlan
#include "memory_meter.h"         // TensorMemoryMeter
#include "micro_batches.h"        // MicroBatchPasses
#include "nonfinite.h"            // locate_nonfinite
#include "optimizer.h"            // adamw, learning_rate, clipping, LossScaler
#include "prefetcher.h"           // Prefetcher
#include "record_header.h"        // record_header
#include "replica_checksums.h"    // checksum_row, checksum_if_due
#include "run_queue.h"            // RunQueueClock
#include "spike_policy.h"         // SpikePolicy
#include "step_evidence.h"        // StepEvidence, write_step_evidence (dist.diagnose_step)
#include "step_record.h"          // StepRecorder, seconds_since
#include "sweep/trainer.h"        // Models, ModelArgs
#include "text.h"                 // join
#include "train_state.h"          // snapshot_state, restore_state, rewind_state
#include "watchdog.h"             // Watchdog, WatchedCommunicator
#include "zero_shards.h"          // ZeroShards

namespace sweep {
namespace {

using Clock = std::chrono::steady_clock;

/// The kinds of model `models` offers, in its order.
std::vector<std::string> model_kinds(const Models& models) {
  std::vector<std::string> kinds;
  for (const auto& s : models.specs()) kinds.push_back(s.schema.kind);
  return kinds;
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
        rec_(comm.size(), opt.quiet, cfg.train.log_every, cfg.train.steps, cfg.dist.straggler_ratio),
        spike_(cfg.train) {}
  ~Trainer() { dog_.on_stop(nullptr); }  // the hook reaches into this object
  RunStatus run();

 private:
  const ModelSpec& find_spec() const;
  void open_data();
  void build_model();
  int64_t start_at(std::optional<TrainState>& resumed, int64_t sequences, int64_t tokens_per_sequence);
  RunStatus train_steps(int64_t start, int64_t stop, std::string* failure);
  void take_telemetry(const StepMetrics& s, const float* g, size_t gn, RoutedTokens&& routed, bool finite);
  void open_record(const std::vector<std::pair<std::string, std::string>>& self_test);
  void step_once(int64_t step, StepMetrics& s);
  void open_prefetch(int64_t first);
  /// dist.diagnose_rotate: `losses` (the allgather's, in rank order) into share order.
  void unrotate_losses(std::vector<double>& losses) const;
  /// dist.diagnose_step: the reduced gradient's digests (`g`, gn floats: all, or this rank's
  /// ZeRO 2/3 shard) and each share's losses and samples, into evidence_ (collective).
  void take_evidence(int64_t step, const float* g, size_t gn, const std::vector<double>& leaf_losses);
  bool is_root() const { return rank_ == 0; }

  const RunConfig& cfg_;
  const TrainOptions& opt_;
  Communicator& comm_;
  Watchdog& dog_;
  const Models& models_;
  const int rank_, world_;
  std::string run_id_;
  RecordLineage lineage_;           ///< the parent run and step when started from another run's checkpoint
  std::vector<std::string> hosts_;  // rank r's host name at r

  std::shared_ptr<const TokenSource> source_;       // what the run trains on
  std::shared_ptr<const TokenSource> eval_source_;  // held-out sequences; null when the run does not evaluate
  const ModelSpec* spec_ = nullptr;
  std::unique_ptr<DeviceModel> model_;
  std::unique_ptr<FaultInjector> faults_;  // null unless a fault.* key is on
  FlatParams flat_;
  ZeroShards zero_;
  LeafPlan leaves_;
  std::unique_ptr<MicroBatchPasses> passes_;
  LossScaler scaler_;
  int64_t updates_ = 0;                 // optimizer updates taken (skipped steps take none)
  int64_t step_peak_tensor_bytes_ = 0;  // most bytes of LibTorch CPU tensors alive during a step
  // Per parameter tensor: 1 once it got a gradient this step; the last element: this
  // rank's target count of the step. One vector, so one allreduce sums both.
  std::vector<int64_t> grad_flags_and_targets_;
  std::unique_ptr<Sampler> sampler_;
  std::string nonfinite_at_;  ///< where this step went non-finite (locate_nonfinite); "" when it did not
  std::unique_ptr<Prefetcher> prefetch_;
  RoutedTokens routing_;                   // the model's routing shape (MoE; 0 x 0 otherwise)
  std::optional<TelemetryRow> telemetry_;  // this step's gradient telemetry, when it takes a row
  RunQueueClock run_queue_;                // this (the stepping) thread's wait for a CPU: shared cores
  StepRecorder rec_;
  SpikePolicy spike_;     // train.spike_policy and its decisions
  bool spiked_ = false;   // this step's loss spiked and the policy took a decision (its update is not taken)
  bool rewound_ = false;  // the decision was a rewind: a checkpoint follows, the state to go back to next
  std::optional<StepEvidence> evidence_;  // dist.diagnose_step's, written once its checksums are known
};

const ModelSpec& Trainer::find_spec() const {
  if (const ModelSpec* spec = models_.find(cfg_.model.kind)) return *spec;
  throw ConfigError("key 'model.kind': this program does not offer model '" + cfg_.model.kind +
                    "'; it offers: " + join(model_kinds(models_)));
}

/// The model's spec and the data it trains on and evaluates on, checked against the config:
/// everything that can reject the config happens before anything is written.
void Trainer::open_data() {
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
}

/// The model on its device, its flat parameters, ZeRO's shards, the leaf plan and the
/// micro-batch passes.
void Trainer::build_model() {
  model_ = std::make_unique<DeviceModel>(cfg_, compute_device(opt_, cfg_.deterministic()));
  set_up_determinism(cfg_);
  flat_ = model_->build(*spec_);
  zero_.plan(size_t(flat_.n), world_, rank_, cfg_.dist.zero_stage);
  scaler_ = LossScaler::from(cfg_.train);
  grad_flags_and_targets_.assign(flat_.handles.size() + 1, 0);
  const bool fusable = cfg_.train.leaf > 0 && model_->model().leaf_aware() && model_->on_host();
  leaves_.plan(cfg_, world_, flat_.table, flat_.n, fusable, &grad_flags_and_targets_);
  for (size_t i = 0; i < flat_.handles.size(); ++i)
    flat_.handles[i].register_hook(
        [this, i](const torch::Tensor&) { grad_flags_and_targets_[i] = 1, leaves_.autograd_grads[i] = 1; });
  routing_ = model_->model().take_routed_tokens();  // its shape; the counts start at 0
  if (routing_.counts.size() != size_t(std::max<int64_t>(0, routing_.layers) * std::max<int64_t>(0, routing_.experts)))
    throw std::runtime_error("model '" + cfg_.model.kind + "': take_routed_tokens gave " +
                             std::to_string(routing_.counts.size()) + " counts for " + std::to_string(routing_.layers) +
                             " layers x " + std::to_string(routing_.experts) + " experts");
  passes_ = std::make_unique<MicroBatchPasses>(cfg_, rank_, *model_, flat_, leaves_, faults_.get(), scaler_.enabled);
}

/// Restores the checkpoint a resumed run starts from (or records the initial parameters),
/// shards the state, and says in the log what runs; the last step done before this process.
int64_t Trainer::start_at(std::optional<TrainState>& resumed, int64_t sequences, int64_t tokens_per_sequence) {
  int64_t start = 0;
  if (resumed) {
    updates_ = restore_state(*resumed, flat_, zero_, scaler_, rec_);
    start = resumed->step;
    spike_.resume(*resumed, updates_);
  } else {
    rec_.initial(checksum_row(0, flat_.params.data_ptr<float>(), flat_.table, flat_.n));  // the initial parameters
  }
  zero_.shard_buffers(flat_);   // from here on ZeRO 2/3 keep only their shards
  if (spike_.keeps_states()) {  // the state it starts from (a checkpoint carries its own)
    if (spike_.kept().empty() || spike_.kept().back().step != start)
      spike_.keep_step(keep_state(start, updates_, comm_, flat_, zero_, scaler_));
  } else if (!resumed && spike_.rewinds()) {  // before the first checkpoint a rewind goes back to the start
    spike_.keep_point(snapshot_state(0, run_id_, cfg_, comm_, flat_, zero_, scaler_, rec_), 0);
  }
  if (!opt_.quiet) {
    if (is_root())
      std::printf("run %s: %s model, %zu parameters, %d rank(s), %lld tokens/step, %s, zero %lld, %s reduction, %s\n",
                  run_id_.c_str(), cfg_.model.kind.c_str(), size_t(flat_.n), world_,
                  static_cast<long long>(sequences) * tokens_per_sequence, cfg_.train.precision.c_str(),
                  (long long)zero_.stage, cfg_.native_reduction() ? "native" : "canonical",
                  source_->describe().c_str());
    else  // every rank's log says which rank it is; the steps are rank 0's, its warnings and errors its own
      std::printf("run %s: rank %d of %d on %s (the steps are in rank 0's log; this rank's warnings and errors here)\n",
                  run_id_.c_str(), rank_, world_, hosts_.at(size_t(rank_)).c_str());
    if (resumed && is_root() && !lineage_.kind.empty())
      std::printf("%s from run %s at step %lld: steps 1-%lld are its rows\n", lineage_.kind.c_str(),
                  lineage_.parent_run_id.c_str(), (long long)lineage_.parent_step, (long long)lineage_.parent_step);
    if (resumed) std::printf("resumed from the checkpoint after step %lld\n", (long long)start);
  }

  return start;
}

/// Steps start+1 to the last (the rung's `stop`, or train.steps), with their evaluations and
/// checkpoints; diverged (why in `failure`) when train.on_nan stops the run, else completed.
RunStatus Trainer::train_steps(int64_t start, int64_t stop, std::string* failure) {
  RunStatus status = RunStatus::completed;
  for (int64_t step = start + 1; step <= (stop > 0 ? stop : cfg_.train.steps); ++step) {
    dog_.beat(step);
    StepMetrics s;
    TensorMemoryMeter::instance().start_window();
    step_once(step, s);
    step_peak_tensor_bytes_ = std::max(step_peak_tensor_bytes_, TensorMemoryMeter::instance().window_peak());
    // fp16 overflow is the scaler's business; anything else non-finite is train.on_nan's.
    const bool nonfinite = !std::isfinite(s.loss) || (s.skipped && !scaler_.enabled && !spiked_);
    if (nonfinite && cfg_.train.on_nan == "stop") {
      status = RunStatus::diverged;
      *failure = "non-finite " + std::string(std::isfinite(s.loss) ? "gradient" : "loss") + " at step " +
                 std::to_string(step) + (nonfinite_at_.empty() ? "" : ": " + nonfinite_at_);
      std::printf("diverged: %s (train.on_nan: stop)\n", failure->c_str());  // in every rank's log
    } else if (nonfinite) {                                                  // logged on every rank
      rec_.note_nonfinite_skip(step, std::string(std::isfinite(s.loss) ? "gradient" : "loss"), nonfinite_at_);
    }
    // Recording cost of this step: checksums plus any periodic flush to disk (the
    // appends themselves only buffer in memory).
    const auto r0 = Clock::now();
    const float* params = flat_.params.defined() ? flat_.params.data_ptr<float>() : nullptr;
    std::optional<ChecksumRow> sums = checksum_if_due(step, cfg_, comm_, params, flat_.table, zero_);
    if (evidence_ && sums && is_root()) {  // dist.diagnose_step: the step's evidence beside the record
      evidence_->loss = s.loss, evidence_->grad_norm = s.grad_norm, evidence_->params = sums->params;
      evidence_->nonfinite = nonfinite_at_;
      write_step_evidence(opt_.out_dir + "/evidence_step" + std::to_string(step) + ".txt", *evidence_, flat_.table);
    }
    evidence_.reset();
    rec_.step(s, std::move(sums), std::move(telemetry_), r0, is_root());
    telemetry_.reset();
    if (status == RunStatus::diverged) break;
    if (spike_.keeps_states()) spike_.keep_step(keep_state(step, updates_, comm_, flat_, zero_, scaler_));
    // Before the checkpoint, which carries the evaluations so far.
    if (eval_source_ && ((cfg_.train.eval_every > 0 && step % cfg_.train.eval_every == 0) || step == cfg_.train.steps))
      rec_.eval(evaluate(step, {cfg_, *eval_source_, comm_, dog_, zero_, flat_, *model_, leaves_}), is_root());
    if ((cfg_.train.checkpoint_every > 0 && step % cfg_.train.checkpoint_every == 0 && step < cfg_.train.steps) ||
        step == stop || (rewound_ && !spike_.keeps_states() && step < cfg_.train.steps)) {
      TrainState st = snapshot_state(step, run_id_, cfg_, comm_, flat_, zero_, scaler_, rec_);
      st.lineage = lineage_;  // a forked run resumed in place still names its parent
      st.decisions = spike_.decisions();
      st.kept = spike_.kept();
      if (spike_.rewinds() && !spike_.keeps_states()) spike_.keep_point(st, updates_);
      const bool crash = faults_ && faults_->crash_in_checkpoint(step);  // test-only
      if (is_root()) save_checkpoint(opt_.out_dir, st, int(cfg_.train.keep_checkpoints), crash);
    }
  }
  return status;
}

RunStatus Trainer::run() {
  // Everything that can reject the config happens before anything is written.
  if (cfg_.dist.world_size != world_)
    throw ConfigError("key 'dist.world_size': the config says " + std::to_string(cfg_.dist.world_size) +
                      " ranks, but the job was launched with " + std::to_string(world_));
  open_data();  // before the data opens: an unknown kind is a config error
  run_id_ = run_id(cfg_);
  std::optional<TrainState> resumed =
      load_resume_state(cfg_, opt_.resume_from, opt_.resume, opt_.out_dir, opt_.fork_from);
  if (resumed) lineage_ = resumed->lineage;
  // A process that continues an earlier attempt (in place, on another layout, or forked)
  // does not repeat the checkpoint crash.
  faults_ = FaultInjector::make(cfg_.fault, rank_, opt_.resume || !opt_.resume_from.empty() || !opt_.fork_from.empty());

  torch::NoGradGuard outer_no_grad;  // gradients only where a micro-batch asks for them
  build_model();
  const size_t n = size_t(flat_.n);
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
  model_->pin_batch_buffer();
  if (is_root()) open_record(self_test);

  const int64_t start = start_at(resumed, M, B * L);
  sampler_ = std::make_unique<Sampler>(cfg_, *source_);
  passes_->set_sampler(sampler_.get(), [this](int64_t step) { return spike_.data_batch(step); });
  open_prefetch(start + 1);
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
    status = train_steps(start, stop, &failure);
    if (stop > 0 && status == RunStatus::completed) {
      status = RunStatus::stopped;
      failure = "stopped by the search at step " + std::to_string(std::max(start, stop)) + " of " +
                std::to_string(cfg_.train.steps);
      if (is_root() && !opt_.quiet && start < stop)
        std::printf("%s (a rung; the checkpoint is kept)\n", failure.c_str());
    }
    const RankMemory mem = gather_rank_memory(comm_, flat_, zero_, model_->on_host() ? step_peak_tensor_bytes_ : -1);
    // The spike decisions, with the samples of the global batches they left out, before the
    // flags: the steps they left out count in no figure or flag.
    rec_.summarize(mem, scaler_.enabled, status == RunStatus::diverged ? failure : "",
                   spike_.summary([&](int64_t b) { return sampler_->batch_samples(b, M); }));
  } catch (const c10::Error& e) {
    rec_.abandon(e.what_without_backtrace());
    throw;
  } catch (const std::exception& e) {
    rec_.abandon(e.what());
    throw;
  }
  std::fflush(stdout);
  rec_.finish(status_name(status), failure, cfg_.fault.crash_in_record != 0);
  return status;
}

/// The micro-batches of steps `first` to train.steps: their global batches follow the
/// spike decisions' skipped data (SpikePolicy::data_batch).
void Trainer::open_prefetch(int64_t first) {
  const int64_t A = cfg_.train.accum, M = world_ * A, B = cfg_.train.micro_batch, L = cfg_.model.seq_len;
  prefetch_.reset();                              // its workers stop before the next one starts
  const int64_t from = spike_.data_batch(first);  // past the last step when the run is done
  // dist.diagnose_rotate: the micro-batches of the rank whose shares this one computes.
  prefetch_ = std::make_unique<Prefetcher>(*sampler_, cfg_.data.workers, from,
                                           std::max(from, spike_.data_batch(cfg_.train.steps) + 1),
                                           leaves_.data_rank(rank_), A, M, size_t(B * (L + 1)));
}

void Trainer::unrotate_losses(std::vector<double>& losses) const {
  const std::vector<double> by_rank = losses;
  const size_t per_rank = losses.size() / size_t(world_);
  for (int r = 0; r < world_; ++r)
    std::copy_n(by_rank.begin() + std::ptrdiff_t(size_t(r) * per_rank), per_rank,
                losses.begin() + std::ptrdiff_t(size_t(leaves_.data_rank(r)) * per_rank));
}

void Trainer::take_evidence(int64_t step, const float* g, size_t gn, const std::vector<double>& leaf_losses) {
  const int64_t A = cfg_.train.accum, M = world_ * A, per = leaves_.leaves_per_micro_batch;
  std::vector<float> whole;
  if (zero_.stage >= 2) whole = zero_.gather_whole(comm_, std::vector<float>(g, g + gn)), g = whole.data();
  evidence_->reduced = reduced_digests(g, flat_.table);
  evidence_->step = step, evidence_->world = world_, evidence_->accum = int(A), evidence_->rotate = leaves_.rotate;
  for (int64_t j = 0; j < M; ++j) {
    evidence_->share_losses.emplace_back(leaf_losses.begin() + j * per, leaf_losses.begin() + (j + 1) * per);
    evidence_->share_samples.push_back(sampler_->samples(spike_.data_batch(step), j, M));
  }
}

void Trainer::open_record(const std::vector<std::pair<std::string, std::string>>& self_test) {
  RunFacts facts;
  facts.cfg = &cfg_;
  facts.opt = &opt_;
  facts.model_kinds = model_kinds(models_);
  facts.run_id = run_id_;
  facts.world_size = world_;
  facts.rank_hosts = hosts_;
  if (!model_->on_host())
    facts.device = model_->device().str(), facts.device_count = int64_t(torch::cuda::device_count());
  facts.source = source_.get();
  facts.eval_source = eval_source_.get();
  facts.model_leaf_aware = model_->model().leaf_aware();
  facts.leaves = &leaves_;
  facts.params = &flat_.table;
  facts.layout = &zero_.layout;
  facts.moe_layers = routing_.layers, facts.moe_experts = routing_.experts;
  RecordHeader header = record_header(facts);
  header.lineage = lineage_;
  std::filesystem::create_directories(opt_.out_dir);
  rec_.open(opt_.out_dir + "/record.h5", header);
  for (const auto& [k, v] : self_test) rec_.record()->set_summary(k, v);
}

/// Gradient telemetry on the steps that take it; every rank decides alike (the loss, and the
/// norm where the reduction gives every rank the same bits, are the same everywhere).
void Trainer::take_telemetry(const StepMetrics& s, const float* g, size_t gn, RoutedTokens&& routed, bool finite) {
  const int64_t stage = zero_.stage;
  const std::string why = telemetry_reason(s, rec_.rows(), cfg_.train.telemetry_every, cfg_.train.steps,
                                           !cfg_.native_reduction() || stage >= 2, finite || scaler_.enabled);
  if (!why.empty()) {
    TelemetryRow t{
        s.step, why, tensor_grad_norms(comm_, g, stage >= 2 ? zero_.shard_begin : 0, gn, flat_.table, stage >= 2), {}};
    if (!routed.counts.empty()) {
      comm_.allreduce_sum_i64(routed.counts.data(), routed.counts.size());
      t.routed_tokens = std::move(routed.counts);
    }
    telemetry_ = std::move(t);
  }
}

void Trainer::step_once(int64_t step, StepMetrics& s) {
  const auto t0 = Clock::now();
  const double waited0 = run_queue_.wait_s();
  if (faults_) faults_->step_start(step);  // test-only: kill or hang
  const size_t n = size_t(flat_.n);
  const int64_t stage = zero_.stage, A = cfg_.train.accum, M = world_ * A;
  const int64_t B = cfg_.train.micro_batch, L = cfg_.model.seq_len, tokens = M * B * L;
  zero_.allocate_grads(flat_);
  zero_.gather_params(comm_, flat_);
  flat_.push_params();
  float* grads = flat_.grads.data_ptr<float>();

  std::fill(grad_flags_and_targets_.begin(), grad_flags_and_targets_.end(), 0);
  std::vector<double> local_losses(static_cast<size_t>(A * leaves_.leaves_per_micro_batch));
  std::vector<double> leaf_losses(static_cast<size_t>(leaves_.leaves_per_step));
  const double scale_used = scaler_.scale;
  const auto c0 = Clock::now();
  if (faults_) faults_->compute();       // test-only: a slow device or host
  model_->model().take_routed_tokens();  // what anything but this step's micro-batches routed (evaluation)
  grad_flags_and_targets_.back() = passes_->compute(step, *prefetch_, local_losses, scale_used, tokens);
  RoutedTokens routed = passes_->take_routed_tokens();
  const double compute_s = seconds_since(c0);

  // Parameters no micro-batch on any rank reached, and the step's target count (one
  // collective for both; the next step zeroes the flags again).
  comm_.allreduce_sum_i64(grad_flags_and_targets_.data(), grad_flags_and_targets_.size());
  const int64_t targets = grad_flags_and_targets_.back();
  s.unused_params = count_unused_params(grad_flags_and_targets_, flat_.table, step, cfg_.dist.find_unused);

  comm_.allgather(local_losses.data(), local_losses.size() * sizeof(double), leaf_losses.data());
  if (leaves_.rotate) unrotate_losses(leaf_losses);
  if (step <= cfg_.dist.diagnose_step) {  // up to it: where a replay first departs
    evidence_.emplace();
    evidence_->shares = gather_share_digests(comm_, passes_->share_digests(), leaves_.rotate, &evidence_->share_ranks);
  }
  const double local_sumsq = local_sum_of_squares(leaves_, grads, n);  // this rank's own, before the reduction
  reduce_gradients(comm_, cfg_, leaves_, zero_, grads, n);
  if (faults_) faults_->gradient(step, grads, zero_.shard_begin, zero_.shard_size);  // test-only: a non-finite gradient

  // The gradient this rank's optimizer reads: all of it (ZeRO 0/1) or its shard (2/3).
  size_t gn = 0;
  float* g = zero_.optimizer_gradient(flat_, grads, gn);
  if (evidence_) take_evidence(step, g, gn, leaf_losses);
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
  // Where it went non-finite (every rank agrees that it did); an fp16 overflow with a
  // finite loss is the scaler's business.
  nonfinite_at_.clear();
  if (!std::isfinite(s.loss) || !finite) {  // an fp16 overflow too: where it was, for the record
    nonfinite_at_ =
        locate_nonfinite({&leaf_losses, A, leaves_.leaves_per_micro_batch,
                          [&](int64_t j) { return sampler_->samples(spike_.data_batch(step), j, M); }, g, gn,
                          stage >= 2 ? int64_t(zero_.shard_begin) : 0, &flat_.table, &passes_->nonfinite_module()},
                         comm_);
  }
  s.lr = learning_rate(cfg_.train, step);
  if (faults_) s.lr = faults_->lr(step, s.lr);  // test-only: one bad update (recorded as used)
  s.loss_scale = scale_used;
  s.tokens = tokens;
  if (finite && scaler_.enabled) scale(g, gn, float(1.0 / scale_used));  // a power of two: exact
  if (sumsq < 0) sumsq = stage >= 2 ? shard_sum_of_squares(comm_, g, zero_.layout) : sum_of_squares(g, gn);
  s.grad_norm = std::sqrt(sumsq);
  s.clip_coef = clip_coefficient(s.grad_norm, cfg_.train.clip_norm);
  take_telemetry(s, g, gn, std::move(routed), finite);
  // train.spike_policy judges a finite loss before the step's update, every rank alike; a
  // decision also covers a gradient that went non-finite with the spike.
  const std::optional<SpikeDecision> spike =
      std::isfinite(s.loss) ? spike_.decide(step, s.loss, rec_.rows(), updates_, is_root()) : std::nullopt;
  spiked_ = spike.has_value();
  if (!finite || !std::isfinite(s.loss) || spike) {
    s.skipped = 1;  // fp16: overflow, back the scale off; a spike: the policy; otherwise the run has diverged
  } else {
    AdamWStep hp = AdamWStep::at(cfg_.train, s.lr, ++updates_);
    hp.grad_scale = float(s.clip_coef);  // clipping inside the update: no pass of its own
    zero_.adamw_update(comm_, flat_, g, hp);
  }
  if (!finite && std::isfinite(s.loss) && scaler_.enabled) {
    rec_.note_fp16_overflow(step, nonfinite_at_);
    if (is_root())
      std::printf("step %lld: fp16 overflow (%s); update skipped, loss scale %g -> %g\n", (long long)step,
                  nonfinite_at_.c_str(), scale_used, scale_used * cfg_.train.loss_scale_backoff);
  }
  scaler_.update(finite, cfg_.train);
  if (faults_ && flat_.params.defined())  // test-only: one bit of one replica
    faults_->parameters(step, flat_.params.data_ptr<float>(), flat_.n);
  if (spike && spike->skip > 0) open_prefetch(step + 1);  // train.spike_skip: past the data left out
  rewound_ = spike && spike->action == "rewind";
  if (rewound_) rewind_state(spike_.point(), flat_, zero_, scaler_), updates_ -= spike->undone;
  zero_.release_params(flat_);
  // This rank's own gradient norm on the scale of grad_norm (per target, unscaled).
  const double local_norm = std::sqrt(local_sumsq) * per_target / scale_used;
  const double mine[4] = {seconds_since(t0), compute_s, run_queue_.wait_s() - waited0, local_norm};
  std::vector<double> all(4 * static_cast<size_t>(world_)), times, compute, waited, norms;
  comm_.allgather(mine, sizeof mine, all.data());
  for (size_t r = 0; r < all.size(); r += 4)
    times.push_back(all[r]), compute.push_back(all[r + 1]), waited.push_back(all[r + 2]), norms.push_back(all[r + 3]);
  s.step_time_s = *std::max_element(times.begin(), times.end());  // the step ends with its slowest rank
  s.tokens_per_s = s.step_time_s > 0 ? double(tokens) / s.step_time_s : 0;
  rec_.rank_times(std::move(times), std::move(compute), std::move(waited), std::move(norms));
}

}  // namespace

RunStatus train(const RunConfig& cfg, const TrainOptions& opt, Communicator& comm, const Models& models) {
  TensorMemoryMeter::instance();  // before the first tensor of the run, so all are counted
  Watchdog dog(cfg.dist.timeout_s, comm.rank(), opt.out_dir, comm.size());
  std::optional<SlowExchangeCommunicator> slow;  // a test fault: a rank stuck inside the exchange
  if (SlowExchangeCommunicator::wanted(cfg.fault)) slow.emplace(comm, cfg.fault);
  WatchedCommunicator watched(slow ? static_cast<Communicator&>(*slow) : comm, dog);
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
