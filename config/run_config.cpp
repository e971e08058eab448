#include "run_config.h"

#include <sys/stat.h>
#include <xxhash.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <variant>

#include "model_schema.h"  // registered model kinds, canonical_real
#include "text.h"          // significant

namespace sweep {
namespace {

struct IntRange {
  int64_t min, max;
};
struct RealRange {
  double min, max;
  bool min_exclusive = false;
};
using Choices = std::vector<std::string>;
struct Text {
  size_t max_len;
};
/// model.kind of a registered kind: applied before the table is walked (it decides the
/// table), so visitors only list and spell it.
struct Kind {};

/// When a key has an effect, for the keys that do not always have one: `when` for
/// `sweep keys` and docs/config.md, `holds` per config, `why_not` the setting of `c` that
/// leaves the key idle, for the warning. A condition reads only keys listed before the
/// keys it governs, so resetting in table order sees settled values.
struct Applies {
  const char* when;
  bool (*holds)(const RunConfig&);
  std::string (*why_not)(const RunConfig&);
};

bool file_data(const RunConfig& c) { return c.data.kind == "tokens" || c.data.kind == "text" || c.data.kind == "hdf5"; }
std::string data_kind(const RunConfig& c) { return "data.kind " + c.data.kind; }

const Applies kSynthetic{"data.kind synthetic", [](const RunConfig& c) { return c.data.kind == "synthetic"; },
                         data_kind};
const Applies kFileData{"data.kind tokens, text or hdf5", file_data, data_kind};
const Applies kHdf5{"data.kind hdf5", [](const RunConfig& c) { return c.data.kind == "hdf5"; }, data_kind};
const Applies kMoe{"model.moe.experts > 0", [](const RunConfig& c) { return c.model.moe_experts > 0; },
                   [](const RunConfig&) { return std::string("model.moe.experts 0"); }};
const Applies kDecay{"train.schedule linear or cosine",
                     [](const RunConfig& c) { return c.train.schedule != "constant"; },
                     [](const RunConfig&) { return std::string("train.schedule constant"); }};
const Applies kFp16{"train.precision fp16", [](const RunConfig& c) { return c.train.precision == "fp16"; },
                    [](const RunConfig& c) { return "train.precision " + c.train.precision; }};
const Applies kCheckpoints{"train.checkpoint_every > 0",
                           [](const RunConfig& c) { return c.train.checkpoint_every > 0; },
                           [](const RunConfig&) { return std::string("train.checkpoint_every 0"); }};
// A program (data.kind program) holds out data of its own.
const Applies kEvaluates{
    "data.eval_fraction > 0, data.eval_path set or data.kind program",
    [](const RunConfig& c) { return c.evaluates() || c.data.kind == "program"; },
    [](const RunConfig&) { return std::string("no held-out data (data.eval_fraction 0, no data.eval_path)"); }};
const Applies kSpikePolicy{"train.spike_policy skip or rewind",
                           [](const RunConfig& c) { return c.train.spike_policy != "none"; },
                           [](const RunConfig&) { return std::string("train.spike_policy none"); }};
const Applies kForked{"train.fork_parent set", [](const RunConfig& c) { return !c.train.fork_parent.empty(); },
                      [](const RunConfig&) { return std::string("no train.fork_parent"); }};
const Applies kSpikeFactor{
    "train.spike_factor > 0",
    [](const RunConfig& c) { return c.train.spike_policy != "none" && c.train.spike_factor > 0; },
    [](const RunConfig&) { return std::string("train.spike_factor 0"); }};
const Applies kSpikeFault{"fault.spike_step > 0", [](const RunConfig& c) { return c.fault.spike_step > 0; },
                          [](const RunConfig&) { return std::string("fault.spike_step 0"); }};
const Applies kLrSwitch{"train.lr_switch_step > 0", [](const RunConfig& c) { return c.train.lr_switch_step > 0; },
                        [](const RunConfig&) { return std::string("train.lr_switch_step 0"); }};
const Applies kDesync{"fault.desync_step > 0", [](const RunConfig& c) { return c.fault.desync_step > 0; },
                      [](const RunConfig&) { return std::string("fault.desync_step 0"); }};
const Applies kKill{"fault.kill_step > 0", [](const RunConfig& c) { return c.fault.kill_step > 0; },
                    [](const RunConfig&) { return std::string("fault.kill_step 0"); }};
const Applies kHang{"fault.hang_step > 0", [](const RunConfig& c) { return c.fault.hang_step > 0; },
                    [](const RunConfig&) { return std::string("fault.hang_step 0"); }};
const Applies kNan{"fault.nan_step > 0", [](const RunConfig& c) { return c.fault.nan_step > 0; },
                   [](const RunConfig&) { return std::string("fault.nan_step 0"); }};
const Applies kNanSample{"fault.nan_sample_step > 0", [](const RunConfig& c) { return c.fault.nan_sample_step > 0; },
                         [](const RunConfig&) { return std::string("fault.nan_sample_step 0"); }};
const Applies kCorrupt{"fault.corrupt_from > 0", [](const RunConfig& c) { return c.fault.corrupt_from > 0; },
                       [](const RunConfig&) { return std::string("fault.corrupt_from 0"); }};
const Applies kTransient{"fault.transient_step > 0", [](const RunConfig& c) { return c.fault.transient_step > 0; },
                         [](const RunConfig&) { return std::string("fault.transient_step 0"); }};
const Applies kDeterministic{"train.deterministic true",
                             [](const RunConfig& c) { return c.train.deterministic == "true"; },
                             [](const RunConfig&) { return std::string("train.deterministic false"); }};
const Applies kSlow{"fault.slow_ms > 0", [](const RunConfig& c) { return c.fault.slow_ms > 0; },
                    [](const RunConfig&) { return std::string("fault.slow_ms 0"); }};

/// A key's line of help and when it has an effect (nullptr: always).
struct Doc {
  const char* help;
  const Applies* applies = nullptr;
};

constexpr IntRange kVocab{2, 1 << 20}, kSeqLen{2, 1 << 20};
// Built once: the table is walked for every point of a grid.
const Choices kDataKinds{"synthetic", "tokens", "text", "hdf5", "program"};
const Choices kSchedules{"constant", "linear", "cosine"};
const Choices kOnNan{"stop", "skip_step"};
const Choices kSpikePolicies{"none", "skip", "rewind"};
const Choices kPrecisions{"fp32", "bf16", "fp16"};
const Choices kReductions{"canonical", "native"};
const Choices kBools{"true", "false"};
const Choices kFindUnused{"zero", "error"};
const Choices kSlowIn{"compute", "exchange"};
const Doc kVocabDoc{"token ids are in [0, vocab)"};
const Doc kSeqLenDoc{"tokens per sequence (the model predicts seq_len of them)"};

/// The one table of keys: every visitor (apply, list, flatten, describe, reset) walks it
/// in this order, and each row carries the key's help line and when it has an effect
/// (`sweep keys`, docs/config.md, reset_idle_keys). The decoder's model keys come first as
/// they always did, without model.kind, so its canonical text and run ids are those of the
/// time before other kinds; a registered kind has model.kind, the shared vocab and
/// seq_len, then its own keys.
template <class Visitor>
// NOLINTNEXTLINE(readability-function-size): the one table of keys, a row per key, read as a table
void visit_fields(RunConfig& c, Visitor&& v) {
  if (c.model.kind == kDecoderKind) {
    v("model.layers", c.model.layers, IntRange{1, 256}, Doc{"transformer blocks"});
    v("model.d_model", c.model.d_model, IntRange{8, 65536}, Doc{"residual stream width"});
    v("model.heads", c.model.heads, IntRange{1, 1024},
      Doc{"attention heads; must divide model.d_model, and d_model / heads must be even (rotary positions)"});
    v("model.vocab", c.model.vocab, kVocab, kVocabDoc);
    v("model.seq_len", c.model.seq_len, kSeqLen, kSeqLenDoc);
    v("model.ffn_mult", c.model.ffn_mult, IntRange{1, 64},
      Doc{"SwiGLU hidden width = ffn_mult x d_model x 2 / 3, rounded to 8"});
    v("model.moe.experts", c.model.moe_experts, IntRange{0, 4096}, Doc{"routed experts per MoE layer; 0 = dense MLP"});
    v("model.moe.top_k", c.model.moe_top_k, IntRange{1, 64},
      Doc{"experts each token is routed to; at most model.moe.experts", &kMoe});
    v("model.moe.shared_experts", c.model.moe_shared_experts, IntRange{0, 64}, Doc{"always-on shared experts", &kMoe});
    v("model.moe.expert_hidden", c.model.moe_expert_hidden, IntRange{0, 1 << 20},
      Doc{"hidden width per expert; 0 = the dense ffn width / (top_k + shared_experts)", &kMoe});
  } else {
    const ModelSchema* schema = find_model_schema(c.model.kind);
    if (!schema || schema->keys.size() != c.model.values.size())
      throw ConfigError("model.kind '" + printable(c.model.kind) + "' is not registered in this process");
    const std::vector<std::string>& keys = model_schema_keys(c.model.kind);
    v(keys[0].c_str(), c.model.kind, Kind{}, Doc{schema->help.c_str()});
    v(keys[1].c_str(), c.model.vocab, kVocab, kVocabDoc);
    v(keys[2].c_str(), c.model.seq_len, kSeqLen, kSeqLenDoc);
    for (size_t i = 0; i < schema->keys.size(); ++i)
      v(keys[i + 3].c_str(), c.model.values[i].second, schema->keys[i], Doc{schema->keys[i].help.c_str()});
  }
  v("data.kind", c.data.kind, kDataKinds,
    Doc{"synthetic (a seeded Markov chain), tokens (a uint16 file), text (bytes), hdf5, or program (the training "
        "program's own data for its model kind)"});
  v("data.path", c.data.path, Text{4096}, Doc{"the data file; required for these kinds", &kFileData});
  v("data.dataset", c.data.dataset, Text{1024}, Doc{"name of the 1-D integer dataset in the file", &kHdf5});
  v("data.seed", c.data.seed, IntRange{0, INT64_MAX},
    Doc{"seeds the synthetic source itself (not the training order)", &kSynthetic});
  v("data.branching", c.data.branching, IntRange{1, 1 << 20},
    Doc{"successors per token (entropy floor = ln branching); at most model.vocab", &kSynthetic});
  // Each epoch's order is an int64 permutation of all samples: 2^28 of them is 2 GiB.
  v("data.samples", c.data.samples, IntRange{1, int64_t(1) << 28}, Doc{"sequences per epoch", &kSynthetic});
  v("data.workers", c.data.workers, IntRange{0, 64},
    Doc{"background prefetch threads; results are identical for any count"});
  v("data.eval_fraction", c.data.eval_fraction, RealRange{0, 0.5},
    Doc{"held-out share of the data for evaluation, 0 = none: a file's last sequences, synthetic sequences past "
        "data.samples, a program source's last sequences"});
  v("data.eval_path", c.data.eval_path, Text{4096},
    Doc{"a held-out file of the same kind, read whole; empty = none (not with data.eval_fraction)", &kFileData});
  v("train.steps", c.train.steps, IntRange{1, int64_t(1) << 40}, Doc{"optimizer steps"});
  v("train.micro_batch", c.train.micro_batch, IntRange{1, 1 << 20}, Doc{"sequences per micro-batch"});
  v("train.accum", c.train.accum, IntRange{1, 1 << 20},
    Doc{"micro-batches per rank per step (global batch = world_size x accum x micro_batch)"});
  v("train.leaf", c.train.leaf, IntRange{0, 1 << 20},
    Doc{"sequences per leaf of the canonical gradient tree; 0 = the micro-batch. With a leaf, micro_batch is "
        "layout: any world_size x accum x micro_batch of the same global batch gives the same bits"});
  v("train.lr", c.train.lr, RealRange{0, 10, true}, Doc{"peak learning rate"});
  v("train.lr_switch_step", c.train.lr_switch_step, IntRange{0, int64_t(1) << 40},
    Doc{"> 0: steps up to it follow the schedule of peak train.lr_before_switch, later ones train.lr's (a step "
        "change of the learning rate, as sweep fork --from-step trains); 0 = off"});
  v("train.lr_before_switch", c.train.lr_before_switch, RealRange{0, 10},
    Doc{"the peak learning rate up to train.lr_switch_step", &kLrSwitch});
  v("train.fork_parent", c.train.fork_parent, Text{64},
    Doc{"set by sweep fork: the parent run's id; with train.fork_step part of the run id, not of the math"});
  v("train.fork_step", c.train.fork_step, IntRange{0, int64_t(1) << 40},
    Doc{"set by sweep fork: the parent's step the fork starts after (its checkpoint)", &kForked});
  v("train.schedule", c.train.schedule, kSchedules, Doc{"learning-rate decay after warmup, to train.min_lr"});
  v("train.warmup", c.train.warmup, IntRange{0, int64_t(1) << 40},
    Doc{"linear warmup steps from 0 to train.lr; at most train.steps"});
  v("train.min_lr", c.train.min_lr, RealRange{0, 10},
    Doc{"floor of the linear or cosine decay; at most train.lr (or give train.min_lr_ratio)", &kDecay});
  v("train.beta1", c.train.beta1, RealRange{0, 0.999999}, Doc{"AdamW first-moment decay"});
  v("train.beta2", c.train.beta2, RealRange{0, 0.999999}, Doc{"AdamW second-moment decay"});
  v("train.eps", c.train.eps, RealRange{0, 1, true}, Doc{"AdamW denominator epsilon"});
  v("train.weight_decay", c.train.weight_decay, RealRange{0, 10}, Doc{"AdamW decoupled weight decay"});
  v("train.clip_norm", c.train.clip_norm, RealRange{0, 1e9}, Doc{"global gradient-norm clip; 0 = off"});
  v("train.on_nan", c.train.on_nan, kOnNan,
    Doc{"a non-finite loss or gradient (not an fp16 overflow): stop (status diverged) or skip_step (no update; "
        "counted)"});
  v("train.spike_policy", c.train.spike_policy, kSpikePolicies,
    Doc{"a loss spike (the loss_spike flag's rule, decided on every rank alike before the update): none (flagged "
        "only), skip (the step's update is not taken) or rewind (back to the last checkpoint, the global batches "
        "since then skipped; needs train.checkpoint_every, which then is part of the math). Recorded as decisions"});
  v("train.spike_limit", c.train.spike_limit, IntRange{1, 1000000},
    Doc{"spike decisions a run takes at most; later spikes are only flagged", &kSpikePolicy});
  v("train.spike_factor", c.train.spike_factor, RealRange{0, 1000},
    Doc{"> 1: a spike is a loss above this factor x the median of the last train.spike_window losses the policy "
        "kept (the steps it left out do not count); 0 = the loss_spike flag's rule",
        &kSpikePolicy});
  v("train.spike_window", c.train.spike_window, IntRange{2, 100000},
    Doc{"train.spike_factor: the losses the median is taken over; no decision before there are this many",
        &kSpikeFactor});
  v("train.spike_rewind_steps", c.train.spike_rewind_steps, IntRange{0, 100000},
    Doc{"rewind: > 0 keeps the states of the last N step boundaries in memory (and in checkpoints: N+1 states "
        "each) and goes back to the newest one from before the loss began to rise; 0 = back to the last "
        "checkpoint",
        &kSpikePolicy});
  v("train.spike_skip", c.train.spike_skip, IntRange{0, int64_t(1) << 40},
    Doc{"global batches of data left out after a decision's step (the sampler moves past them, on every layout "
        "alike)",
        &kSpikePolicy});
  v("train.seed", c.train.seed, IntRange{0, INT64_MAX}, Doc{"seeds init, sampling order and every RNG of the run"});
  v("train.threads", c.train.threads, IntRange{1, 1024}, Doc{"intra-op and BLAS threads per rank"});
  v("train.deterministic", c.train.deterministic, kBools,
    Doc{"true: the same bits for every run and layout (dist.reduction, deterministic algorithms; on CUDA cuDNN "
        "deterministic, no TF32). false: benchmark mode, to measure what determinism costs: the native reduction, "
        "nondeterministic algorithms allowed (on CUDA cuDNN autotuned, TF32); its bits are not promised"});
  v("train.precision", c.train.precision, kPrecisions,
    Doc{"fp32, bf16 (autocast) or fp16 (on CPU emulated) with a dynamic loss scale"});
  v("train.loss_scale_init", c.train.loss_scale_init, RealRange{1, 1e30}, Doc{"initial loss scale", &kFp16});
  v("train.loss_scale_interval", c.train.loss_scale_interval, IntRange{1, int64_t(1) << 40},
    Doc{"clean steps before the loss scale grows", &kFp16});
  v("train.loss_scale_growth", c.train.loss_scale_growth, RealRange{1, 1024},
    Doc{"factor the loss scale grows by", &kFp16});
  v("train.loss_scale_backoff", c.train.loss_scale_backoff, RealRange{0, 1, true},
    Doc{"factor on the loss scale after an overflow (the step is skipped)", &kFp16});
  v("train.log_every", c.train.log_every, IntRange{1, int64_t(1) << 40}, Doc{"a rank-0 log line every N steps"});
  v("train.checksum_every", c.train.checksum_every, IntRange{1, int64_t(1) << 40},
    Doc{"parameter checksums every N steps (ranks compare them)"});
  v("train.telemetry_every", c.train.telemetry_every, IntRange{0, int64_t(1) << 40},
    Doc{"gradient telemetry (each tensor's gradient norm, MoE routing) every N steps, at the last step and at any "
        "step whose loss or gradient norm spiked or went non-finite; 0 = only those"});
  v("train.checkpoint_every", c.train.checkpoint_every, IntRange{0, int64_t(1) << 40},
    Doc{"a checkpoint every N steps; 0 = never"});
  v("train.keep_checkpoints", c.train.keep_checkpoints, IntRange{1, 1000000},
    Doc{"complete checkpoints kept (older ones are deleted)", &kCheckpoints});
  v("train.eval_every", c.train.eval_every, IntRange{0, int64_t(1) << 40},
    Doc{"held-out evaluation every N steps and after the last; 0 = only after the last", &kEvaluates});
  v("train.eval_batches", c.train.eval_batches, IntRange{1, 1 << 20},
    Doc{"global batches (world_size x accum x micro_batch sequences) per evaluation", &kEvaluates});
  v("dist.world_size", c.dist.world_size, IntRange{1, 1 << 20}, Doc{"ranks; checked against the launched world"});
  v("dist.reduction", c.dist.reduction, kReductions,
    Doc{"canonical (the same bits for any layout of a global batch) or native (MPI_Allreduce: deterministic only "
        "for a fixed layout)",
        &kDeterministic});
  v("dist.zero_stage", c.dist.zero_stage, IntRange{0, 3},
    Doc{"0 replicates all; 1 shards optimizer state; 2 also gradients; 3 also parameters (world_size >= 2)"});
  v("dist.find_unused", c.dist.find_unused, kFindUnused, Doc{"parameters without a gradient: zero (counted) or error"});
  v("dist.timeout_s", c.dist.timeout_s, RealRange{0, 1e7},
    Doc{"a rank without progress for this many seconds ends the job"});
  v("dist.straggler_ratio", c.dist.straggler_ratio, RealRange{1, 1000, true},
    Doc{"a rank whose compute time over its peers' typical in the same step, median over the steps, exceeds this "
        "(and by 10 ms) is flagged straggler"});
  // `sweep diagnose` and tests only: see DistConfig.
  v("dist.diagnose_step", c.dist.diagnose_step, IntRange{0, int64_t(1) << 40},
    Doc{"diagnose only: for each step S it computes up to this one, the trainer writes evidence_step<S>.txt "
        "beside its record: the loss bits, a digest of each share's gradient (a micro-batch of the global batch) "
        "before the reduction and the rank that computed it, the reduced gradient's digest per tensor and the "
        "parameters' after the update; 0 = off"});
  v("dist.diagnose_rotate", c.dist.diagnose_rotate, IntRange{0, 1 << 20},
    Doc{"diagnose only: rank r computes the shares (micro-batches) rank (r + dist.diagnose_rotate) mod dist.world_size "
        "would; the bits stay the same (the canonical reduction sums the shares in their own order); 0 = off"});
  // Test-only, every fault.* key: see FaultConfig.
  v("fault.inf_grad_step", c.fault.inf_grad_step, IntRange{0, int64_t(1) << 40},
    Doc{"test only: makes the gradient of this step non-finite; 0 = off"});
  v("fault.desync_step", c.fault.desync_step, IntRange{0, int64_t(1) << 40},
    Doc{"test only: perturbs one parameter on rank fault.desync_rank after this step; 0 = off"});
  v("fault.desync_rank", c.fault.desync_rank, IntRange{0, 1 << 20},
    Doc{"test only: the rank fault.desync_step perturbs", &kDesync});
  v("fault.kill_step", c.fault.kill_step, IntRange{0, int64_t(1) << 40},
    Doc{"test only: rank fault.kill_rank sends itself SIGKILL at the start of this step; 0 = off"});
  v("fault.kill_rank", c.fault.kill_rank, IntRange{0, 1 << 20},
    Doc{"test only: the rank fault.kill_step kills", &kKill});
  v("fault.hang_step", c.fault.hang_step, IntRange{0, int64_t(1) << 40},
    Doc{"test only: rank fault.hang_rank stops making progress at the start of this step; 0 = off"});
  v("fault.hang_rank", c.fault.hang_rank, IntRange{0, 1 << 20},
    Doc{"test only: the rank fault.hang_step hangs", &kHang});
  v("fault.hang_once", c.fault.hang_once, IntRange{0, 1},
    Doc{"test only: 1 hangs only a process that does not continue an earlier attempt (--resume): a hang that does "
        "not repeat",
        &kHang});
  v("fault.nan_step", c.fault.nan_step, IntRange{0, int64_t(1) << 40},
    Doc{"test only: the loss of micro-batch fault.nan_micro_batch of rank fault.nan_rank becomes NaN at this step; "
        "0 = off"});
  v("fault.nan_rank", c.fault.nan_rank, IntRange{0, 1 << 20}, Doc{"test only: the rank fault.nan_step poisons", &kNan});
  v("fault.nan_micro_batch", c.fault.nan_micro_batch, IntRange{0, 1 << 20},
    Doc{"test only: the micro-batch (0-based, of the rank's train.accum) fault.nan_step poisons", &kNan});
  v("fault.spike_step", c.fault.spike_step, IntRange{0, int64_t(1) << 40},
    Doc{"test only: this step's update uses a learning rate of fault.spike_lr (one bad update: the loss spikes "
        "after it); 0 = off"});
  v("fault.spike_lr", c.fault.spike_lr, RealRange{0, 10, true},
    Doc{"test only: the learning rate of fault.spike_step's update", &kSpikeFault});
  v("fault.spike_steps", c.fault.spike_steps, IntRange{1, int64_t(1) << 40},
    Doc{"test only: updates from fault.spike_step on that use fault.spike_lr (a step change of the learning rate "
        "that lasts)",
        &kSpikeFault});
  v("fault.slow_ms", c.fault.slow_ms, IntRange{0, 600000},
    Doc{"test only: rank fault.slow_rank sleeps this long inside every step's compute (or every gradient exchange: "
        "fault.slow_in); 0 = off"});
  v("fault.slow_rank", c.fault.slow_rank, IntRange{0, 1 << 20}, Doc{"test only: the rank fault.slow_ms slows", &kSlow});
  v("fault.slow_in", c.fault.slow_in, kSlowIn,
    Doc{"test only: where fault.slow_ms sleeps: compute (every step's compute) or exchange (inside every gradient "
        "exchange, once the rank has entered it and before it has sent anything: a rank stuck inside a collective)",
        &kSlow});
  v("fault.crash_in_checkpoint_step", c.fault.crash_in_checkpoint_step, IntRange{0, int64_t(1) << 40},
    Doc{"test only: exits while writing this step's checkpoint, before its DONE marker; 0 = off"});
  v("fault.crash_in_record", c.fault.crash_in_record, IntRange{0, 1},
    Doc{"test only: 1 exits just before the finished record is renamed into place"});
  v("fault.nan_sample_step", c.fault.nan_sample_step, IntRange{0, int64_t(1) << 40},
    Doc{"test only: at this step the forward of the micro-batch holding sample fault.nan_sample goes non-finite "
        "(the decoder's embedding of that sample; the loss of other models), on whichever rank holds it: a data "
        "fault that follows the sample across layouts; 0 = off"});
  v("fault.nan_sample", c.fault.nan_sample, IntRange{0, int64_t(1) << 40},
    Doc{"test only: the sample (index into the data source) fault.nan_sample_step poisons", &kNanSample});
  v("fault.corrupt_from", c.fault.corrupt_from, IntRange{0, int64_t(1) << 40},
    Doc{"test only: from this step on, rank fault.corrupt_rank flips one bit of one element of its local gradient "
        "(before the reduction) every step: a bad device; 0 = off"});
  v("fault.corrupt_rank", c.fault.corrupt_rank, IntRange{0, 1 << 20},
    Doc{"test only: the rank fault.corrupt_from corrupts", &kCorrupt});
  v("fault.corrupt_host", c.fault.corrupt_host, Text{255},
    Doc{"test only: instead of fault.corrupt_rank, every rank on this host (its hostname) is corrupted by "
        "fault.corrupt_from: a bad node, whatever rank runs there; empty = fault.corrupt_rank decides",
        &kCorrupt});
  v("fault.transient_step", c.fault.transient_step, IntRange{0, int64_t(1) << 40},
    Doc{"test only: rank fault.transient_rank flips one bit of one element of its local gradient at this step, "
        "once: a process that continues an earlier attempt (--resume) does not repeat it; 0 = off"});
  v("fault.transient_rank", c.fault.transient_rank, IntRange{0, 1 << 20},
    Doc{"test only: the rank fault.transient_step strikes", &kTransient});
}

std::string format_int(int64_t x) { return std::to_string(x); }

/// Shortest text that reads back as the same double: "0.001", "1e-08", "3".
std::string format_real(double x) { return canonical_real(x); }

std::string at(const ConfigValue& v) { return v.where.empty() ? "" : v.where + ": "; }

[[noreturn]] void bad_value(const std::string& key, const ConfigValue& v, const std::string& expected) {
  throw ConfigError(at(v) + "key '" + printable(key) + "': expected " + expected + ", got '" + printable(v.text) + "'");
}

struct Applier {
  const FlatConfig& values;
  size_t used = 0;

  const ConfigValue* find(const char* key) {
    auto it = values.find(key);
    if (it == values.end()) return nullptr;
    ++used;
    if (!it->second.is_scalar) bad_value(key, it->second, "a single value, not a map or list");
    return &it->second;
  }
  static int64_t parse(const char* key, const ConfigValue& v, IntRange r) {
    const std::string& s = v.text;
    int64_t x = 0;
    auto res = std::from_chars(s.data(), s.data() + s.size(), x);
    std::string range = "an integer in [" + format_int(r.min) + ", " + format_int(r.max) + "]";
    if (s.empty() || res.ec != std::errc() || res.ptr != s.data() + s.size()) bad_value(key, v, range);
    if (x < r.min || x > r.max) bad_value(key, v, range);
    return x;
  }
  static double parse(const char* key, const ConfigValue& v, RealRange r) {
    const std::string& s = v.text;
    double x = 0;
    auto res = std::from_chars(s.data(), s.data() + s.size(), x);
    std::string range = std::string("a number in ") + (r.min_exclusive ? "(" : "[") + format_real(r.min) + ", " +
                        format_real(r.max) + "]";
    if (s.empty() || res.ec != std::errc() || res.ptr != s.data() + s.size() || !std::isfinite(x))
      bad_value(key, v, range);
    if (x < r.min || (r.min_exclusive && x == r.min) || x > r.max) bad_value(key, v, range);
    // -0 and 0 are the same setting; without this "-0" would get its own run id.
    return x == 0 ? 0.0 : x;
  }
  static const std::string& parse(const char* key, const ConfigValue& v, const Choices& choices) {
    if (std::find(choices.begin(), choices.end(), v.text) == choices.end())
      bad_value(key, v, "one of " + join(choices, " | "));
    return v.text;
  }
  void operator()(const char* key, int64_t& field, IntRange r, const Doc&) {
    if (const ConfigValue* v = find(key)) field = parse(key, *v, r);
  }
  void operator()(const char* key, double& field, RealRange r, const Doc&) {
    if (const ConfigValue* v = find(key)) field = parse(key, *v, r);
  }
  void operator()(const char* key, std::string& field, const Choices& choices, const Doc&) {
    if (const ConfigValue* v = find(key)) field = parse(key, *v, choices);
  }
  /// A registered kind's key: checked as a built-in key of its type, kept as canonical text.
  void operator()(const char* key, std::string& field, const ModelKey& k, const Doc&) {
    const ConfigValue* v = find(key);
    if (!v) return;
    switch (k.type) {
      case ModelKey::Type::integer:
        field = format_int(parse(key, *v, IntRange{k.int_min, k.int_max}));
        break;
      case ModelKey::Type::real:
        field = format_real(parse(key, *v, RealRange{k.real_min, k.real_max, k.min_exclusive}));
        break;
      case ModelKey::Type::choice:
        field = parse(key, *v, k.choices);
        break;
    }
  }
  void operator()(const char* key, std::string&, Kind, const Doc&) { (void)find(key); }  // applied before the walk
  void operator()(const char* key, std::string& field, Text t, const Doc&) {
    const ConfigValue* v = find(key);
    if (!v) return;
    if (v->text.size() > t.max_len) bad_value(key, *v, "at most " + std::to_string(t.max_len) + " characters");
    if (v->text.find('\0') != std::string::npos) bad_value(key, *v, "text without NUL characters");
    if (!valid_utf8(v->text)) bad_value(key, *v, "valid UTF-8 text");  // records store UTF-8 strings
    field = v->text;
  }
};

struct Lister {
  std::vector<std::string>* keys;
  template <class T, class S>
  void operator()(const char* key, T&, const S&, const Doc&) {
    keys->push_back(key);
  }
};

struct Flattener {
  std::vector<std::pair<std::string, std::string>>* out;
  void operator()(const char* key, int64_t& f, IntRange, const Doc&) { out->emplace_back(key, format_int(f)); }
  void operator()(const char* key, double& f, RealRange, const Doc&) { out->emplace_back(key, format_real(f)); }
  template <class S>
  void operator()(const char* key, std::string& f, const S&, const Doc&) {
    out->emplace_back(key, f);
  }
};

/// Double-quoted YAML scalar: any text (paths with ': ', '#', quotes) reads back unchanged.
std::string yaml_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += char(ch);
    } else if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    } else {
      out += char(ch);
    }
  }
  return out + "\"";
}

/// "file:line:col: " of the first of `keys` given in `values`, so a message about two
/// keys points at one of them.
std::string at_any(const FlatConfig& values, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = values.find(k);
    if (it != values.end()) return at(it->second);
  }
  return "";
}

std::string where_of(const std::string& source, const YAML::Node& n) {
  return source_location(source, n.Mark().line, n.Mark().column);
}

/// Nodes flatten_node may visit: far more than any real config has keys, but a bound,
/// because YAML aliases can nest one small mapping into exponentially many paths.
constexpr size_t kMaxConfigNodes = 10000;
/// Parts of the longest dotted key flattened; deeper mappings become one (unknown) key.
/// Run-config keys have at most 3 ("model.moe.experts"), and an alias can make a
/// mapping contain itself, which would otherwise recurse forever.
constexpr int kMaxKeyParts = 4;

void flatten_node(const YAML::Node& node, const std::string& prefix, const std::string& source, FlatConfig& out,
                  size_t& visited, int parts = 1) {
  for (const auto& kv : node) {
    std::string key = kv.first.Scalar();
    std::string full = prefix.empty() ? key : prefix + "." + key;
    const YAML::Node& v = kv.second;
    if (++visited > kMaxConfigNodes)
      throw ConfigError(where_of(source, kv.first) + ": more than " + std::to_string(kMaxConfigNodes) +
                        " keys and values; a run config has " + std::to_string(run_config_keys().size()) +
                        " (does a YAML alias repeat a mapping?)");
    // An empty value's mark is wherever the parser went next (often the next line), so
    // point at its key instead.
    auto m = v.IsNull() ? kv.first.Mark() : v.Mark();
    std::string where = source_location(source, m.line, m.column);
    if (v.IsMap() && parts < kMaxKeyParts) {
      flatten_node(v, full, source, out, visited, parts + 1);
    } else {
      ConfigValue cv;
      cv.where = where;
      cv.is_scalar = v.IsScalar() || v.IsNull();
      cv.text = v.IsScalar() ? v.Scalar() : "";
      if (!cv.is_scalar) cv.text = v.IsMap() ? "<map>" : "<list>";
      // yaml-cpp 0.7 keeps a mapping's repeated keys without a word: a repeated section
      // merges, a repeated key is an error here.
      if (!out.emplace(full, cv).second) throw ConfigError(where + ": key '" + printable(full) + "' is given twice");
    }
  }
}

}  // namespace

const std::vector<std::string>& run_config_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    RunConfig c;
    visit_fields(c, Lister{&k});
    return k;
  }();
  return keys;
}

namespace {

/// `m` becomes a model of `kind` with that kind's defaults for its own keys.
void select_kind(ModelConfig& m, const std::string& kind) {
  m.kind = kind;
  m.values.clear();
  if (const ModelSchema* s = find_model_schema(kind))
    for (const ModelKey& k : s->keys) m.values.emplace_back(k.name, k.default_value);
}

}  // namespace

const std::vector<std::string>& config_keys(const std::string& kind) {
  if (kind == kDecoderKind) return run_config_keys();
  static std::map<std::string, std::vector<std::string>> by_kind;  // kinds are registered at start-up
  auto it = by_kind.find(kind);
  if (it != by_kind.end()) return it->second;
  RunConfig c;
  select_kind(c.model, kind);
  std::vector<std::string> keys;
  visit_fields(c, Lister{&keys});  // throws for an unknown kind
  return by_kind.emplace(kind, std::move(keys)).first->second;
}

namespace {

/// Sets model.kind from `v`; another kind than base's starts from its own defaults.
void apply_kind(RunConfig& base, const ConfigValue& v) {
  if (!v.is_scalar) bad_value("model.kind", v, "a single value, not a map or list");
  if (v.text == base.model.kind) return;
  const std::vector<std::string> kinds = model_kinds();
  if (std::find(kinds.begin(), kinds.end(), v.text) == kinds.end())
    throw ConfigError(at(v) + "key 'model.kind': unknown model kind '" + printable(v.text) + "'" +
                      did_you_mean(v.text, kinds) + "; registered kinds: " + join(kinds) +
                      (kinds.size() == 1 ? " (a model of your own: name the program that registers it with "
                                           "launch.trainer or --trainer)"
                                         : ""));
  select_kind(base.model, v.text);
}

}  // namespace

namespace {

constexpr const char* kMinLrRatio = "train.min_lr_ratio";

/// ratio x lr to 15 significant digits, so 0.1 x 0.003 is 3e-4 as written by hand (the
/// product in binary is 3.0000000000000003e-4), and never above lr.
double scaled_lr(double ratio, double lr) {
  return std::min(std::strtod(significant(ratio * lr, 15).c_str(), nullptr), lr);
}

/// train.min_lr_ratio: remembered in `c`, so a later train.lr (a grid axis applied on top
/// of the base) moves min_lr with it; an explicit train.min_lr forgets it.
void apply_min_lr_ratio(RunConfig& c, const FlatConfig& values) {
  const auto ratio = values.find(kMinLrRatio);
  const auto min_lr = values.find("train.min_lr");
  if (ratio != values.end() && min_lr != values.end())
    throw ConfigError(at(ratio->second) + "key 'train.min_lr_ratio': give either train.min_lr" +
                      (min_lr->second.where.empty() ? "" : " (at " + min_lr->second.where + ")") +
                      " or train.min_lr_ratio, not both");
  if (ratio != values.end()) {
    if (!ratio->second.is_scalar) bad_value(kMinLrRatio, ratio->second, "a single value, not a map or list");
    c.train.min_lr_ratio = Applier::parse(kMinLrRatio, ratio->second, RealRange{0, 1});
  } else if (min_lr != values.end()) {
    c.train.min_lr_ratio = -1;
  }
  if (c.train.min_lr_ratio >= 0) c.train.min_lr = scaled_lr(c.train.min_lr_ratio, c.train.lr);
}

}  // namespace

const std::vector<std::string>& input_only_keys() {
  static const std::vector<std::string> keys = {kMinLrRatio};
  return keys;
}

RunConfig apply_run_values(RunConfig base, const FlatConfig& values) {
  if (auto it = values.find("model.kind"); it != values.end()) apply_kind(base, it->second);
  const auto& keys = config_keys(base.model.kind);
  for (const auto& [key, v] : values) {
    if (std::find(keys.begin(), keys.end(), key) != keys.end() || key == "model.kind" || key == kMinLrRatio) continue;
    std::string msg = at(v) + "unknown key '" + printable(key) + "'";
    if (base.model.kind != kDecoderKind && key.rfind("model.", 0) == 0) msg += " for model.kind " + base.model.kind;
    std::vector<std::string> known = keys;
    known.insert(known.end(), input_only_keys().begin(), input_only_keys().end());
    // What a training script calls them (argparse flags, nanoGPT's and HF's names).
    static const std::map<std::string, std::string> kAliases = {
        {"learning_rate", "train.lr"},         {"learningrate", "train.lr"},
        {"batch_size", "train.micro_batch"},   {"batchsize", "train.micro_batch"},
        {"max_iters", "train.steps"},          {"iters", "train.steps"},
        {"max_steps", "train.steps"},          {"num_steps", "train.steps"},
        {"grad_clip", "train.clip_norm"},      {"clip", "train.clip_norm"},
        {"max_grad_norm", "train.clip_norm"},  {"warmup_iters", "train.warmup"},
        {"warmup_steps", "train.warmup"},      {"gradient_accumulation_steps", "train.accum"},
        {"grad_accum", "train.accum"},         {"dtype", "train.precision"},
        {"min_learning_rate", "train.min_lr"}, {"world_size", "dist.world_size"}};
    std::string leaf = key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1);
    for (char& ch : leaf) ch = ch == '-' ? '_' : char(std::tolower(static_cast<unsigned char>(ch)));
    if (const auto alias = kAliases.find(leaf); alias != kAliases.end() && alias->second != key)
      throw ConfigError(msg + " (did you mean '" + alias->second + "'?)");
    throw ConfigError(msg + did_you_mean(key, known));
  }
  visit_fields(base, Applier{values});
  apply_min_lr_ratio(base, values);
  return base;
}

namespace {

/// An integer bound as a reader takes it in: "2^40" rather than 1099511627776.
std::string format_bound(int64_t x) {
  if (x == INT64_MAX) return "2^63 - 1";
  if (x >= (int64_t(1) << 20) && (x & (x - 1)) == 0) {
    int bits = 0;
    while ((int64_t(1) << bits) != x) ++bits;
    return "2^" + std::to_string(bits);
  }
  return format_int(x);
}

std::string int_range(int64_t min, int64_t max) { return "[" + format_bound(min) + ", " + format_bound(max) + "]"; }

std::string real_range(double min, double max, bool min_exclusive) {
  return std::string(min_exclusive ? "(" : "[") + format_real(min) + ", " + format_real(max) + "]";
}

/// The rows of the table for `sweep keys`: walked over a default config, so every field
/// holds its default.
struct Describer {
  std::vector<KeyDoc>* out;
  void add(const char* key, const char* type, std::string def, std::string range, const Doc& d) {
    out->push_back({key, type, std::move(def), std::move(range), d.applies ? d.applies->when : "", d.help});
  }
  void operator()(const char* key, int64_t& f, IntRange r, const Doc& d) {
    add(key, "integer", format_int(f), int_range(r.min, r.max), d);
  }
  void operator()(const char* key, double& f, RealRange r, const Doc& d) {
    add(key, "real", format_real(f), real_range(r.min, r.max, r.min_exclusive), d);
  }
  void operator()(const char* key, std::string& f, const Choices& choices, const Doc& d) {
    add(key, "choice", f, join(choices, ", "), d);
  }
  void operator()(const char* key, std::string& f, Text t, const Doc& d) {
    add(key, "text", f, "at most " + std::to_string(t.max_len) + " characters", d);
  }
  void operator()(const char* key, std::string& f, Kind, const Doc& d) {
    add(key, "choice", f, "decoder or a registered kind", d);
  }
  void operator()(const char* key, std::string& f, const ModelKey& k, const Doc& d) {
    switch (k.type) {
      case ModelKey::Type::integer:
        add(key, "integer", f, int_range(k.int_min, k.int_max), d);
        break;
      case ModelKey::Type::real:
        add(key, "real", f, real_range(k.real_min, k.real_max, k.min_exclusive), d);
        break;
      case ModelKey::Type::choice:
        add(key, "choice", f, join(k.choices, ", "), d);
        break;
    }
  }
};

/// The defaults of a kind's keys in table order: a default config walked.
using DefaultValue = std::variant<int64_t, double, std::string>;
struct DefaultsCollector {
  std::vector<DefaultValue>* out;
  template <class T, class S>
  void operator()(const char*, T& f, const S&, const Doc&) {
    out->emplace_back(f);
  }
};

const std::vector<DefaultValue>& defaults_of(const std::string& kind) {
  static std::map<std::string, std::vector<DefaultValue>> by_kind;  // kinds are registered at start-up
  auto it = by_kind.find(kind);
  if (it != by_kind.end()) return it->second;
  RunConfig d;
  select_kind(d.model, kind);
  std::vector<DefaultValue> values;
  visit_fields(d, DefaultsCollector{&values});
  return by_kind.emplace(kind, std::move(values)).first->second;
}

/// Puts each key whose Doc says it has no effect in `c` back to its default. Cheap for the
/// keys that always apply (one pointer test), since a grid resets every point.
struct IdleResetter {
  RunConfig& c;
  const std::vector<DefaultValue>& defaults;
  std::vector<IdleKey>* idle;
  size_t index = 0;
  template <class T, class S>
  void operator()(const char* key, T& field, const S&, const Doc& doc) {
    const size_t i = index++;
    if (!doc.applies || doc.applies->holds(c)) return;
    const T& d = std::get<T>(defaults[i]);
    if (field == d) return;
    idle->push_back({key, doc.applies->why_not(c)});
    field = d;
  }
};

}  // namespace

std::vector<KeyDoc> describe_keys(const std::string& kind) {
  RunConfig c;
  select_kind(c.model, kind);
  std::vector<KeyDoc> out;
  if (kind == kDecoderKind)  // the decoder's table has no model.kind: it is the default
    out.push_back({"model.kind", "choice", kDecoderKind, "decoder or a registered kind", "",
                   "the model: decoder (built in) or a kind a training program registers (launch.trainer, "
                   "program:); `sweep keys --trainer PROGRAM --model-kind KIND` lists its keys"});
  visit_fields(c, Describer{&out});  // throws for an unknown kind
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].key == "train.min_lr") {
      out.insert(out.begin() + long(i) + 1,
                 {kMinLrRatio, "real", "", "[0, 1]", kDecay.when,
                  "input only: train.min_lr = this x train.lr of each point (a grid over train.lr keeps the ratio); "
                  "not with train.min_lr; run ids hold min_lr"});
      break;
    }
  return out;
}

std::vector<IdleKey> reset_idle_keys(RunConfig& c) {
  std::vector<IdleKey> idle;
  visit_fields(c, IdleResetter{c, defaults_of(c.model.kind), &idle});
  for (const IdleKey& k : idle)
    if (k.key == "train.min_lr") c.train.min_lr_ratio = -1;  // the ratio goes with the min_lr it set
  return idle;
}

namespace {

/// Each rank holds the whole fp32 parameter vector and its gradient, and a micro-batch its
/// logits and attention scores: past 2^34 elements (64 GiB) any of them is not a run
/// this trainer can hold, however the ranges of the single keys allow it.
void check_sizes(const RunConfig& c, const FlatConfig& values) {
  const double limit = double(int64_t(1) << 34), d = double(c.model.d_model);
  const double ffn = double(c.model.ffn_mult) * d * 2 / 3;
  const double eh = c.model.moe_expert_hidden > 0 ? double(c.model.moe_expert_hidden)
                                                  : ffn / double(c.model.moe_top_k + c.model.moe_shared_experts);
  const double mlp = c.model.moe_experts > 0 ? 3 * d * eh * double(c.model.moe_experts + c.model.moe_shared_experts) +
                                                   d * double(c.model.moe_experts)
                                             : 3 * d * ffn;
  const double params = 2 * double(c.model.vocab) * d + double(c.model.layers) * (4 * d * d + mlp);
  const double B = double(c.train.micro_batch), L = double(c.model.seq_len);
  const auto fail = [&](std::initializer_list<const char*> keys, const std::string& what, double n) {
    throw ConfigError(at_any(values, keys) + "key '" + *keys.begin() + "': " + what + " would be " + significant(n, 3) +
                      ", more than 2^34; this is not a run one rank can hold");
  };
  // A registered kind's sizes are its own business: only the decoder's are known here.
  const bool decoder = c.model.kind == kDecoderKind;
  if (decoder && params > limit)
    fail({"model.d_model", "model.layers", "model.vocab", "model.moe.experts"}, "the parameter count", params);
  if (decoder && B * L * double(c.model.vocab) > limit)
    fail({"train.micro_batch", "model.seq_len", "model.vocab"},
         "one micro-batch's logits (micro_batch x seq_len x vocab)", B * L * double(c.model.vocab));
  if (decoder && B * double(c.model.heads) * L * L > limit)
    fail({"model.seq_len", "train.micro_batch", "model.heads"},
         "one micro-batch's attention scores (micro_batch x heads x seq_len^2)", B * double(c.model.heads) * L * L);
  // Token counts are int64 products in the trainer; 2^40 per step also keeps them exact.
  const double tokens = double(c.dist.world_size) * double(c.train.accum) * B * L;
  if (tokens > double(int64_t(1) << 40))
    throw ConfigError(
        at_any(values, {"train.accum", "dist.world_size", "train.micro_batch"}) +
        "key 'train.accum': a step of world_size x accum x micro_batch x seq_len tokens would be more than 2^40");
}

}  // namespace

void check_run_config(const RunConfig& c, const FlatConfig& values) {
  const bool decoder = c.model.kind == kDecoderKind;
  if (decoder && c.model.d_model % c.model.heads != 0)
    throw ConfigError(at_any(values, {"model.heads", "model.d_model"}) +
                      "key 'model.heads': must divide model.d_model (" + format_int(c.model.d_model) + "), got " +
                      format_int(c.model.heads));
  if (decoder && (c.model.d_model / c.model.heads) % 2 != 0)
    throw ConfigError(at_any(values, {"model.heads", "model.d_model"}) +
                      "key 'model.heads': model.d_model / model.heads must be even for rotary positions, got " +
                      format_int(c.model.d_model / c.model.heads));
  if (c.data.branching > c.model.vocab)
    throw ConfigError(at_any(values, {"data.branching", "model.vocab"}) +
                      "key 'data.branching': must be <= model.vocab (" + format_int(c.model.vocab) + ")");
  if (c.train.warmup > c.train.steps)
    throw ConfigError(at_any(values, {"train.warmup", "train.steps"}) + "key 'train.warmup': must be <= train.steps (" +
                      format_int(c.train.steps) + ")");
  if (c.train.lr_switch_step > c.train.steps)
    throw ConfigError(at_any(values, {"train.lr_switch_step", "train.steps"}) +
                      "key 'train.lr_switch_step': must be <= train.steps (" + format_int(c.train.steps) + ")");
  if (!c.train.fork_parent.empty() && c.train.fork_step >= c.train.steps)
    throw ConfigError(at_any(values, {"train.fork_step", "train.steps"}) +
                      "key 'train.fork_step': must be < train.steps (" + format_int(c.train.steps) +
                      "): a fork starts after step " + format_int(c.train.fork_step) +
                      " and has no step left to train");
  if (c.train.lr_switch_step > 0 && !(c.train.lr_before_switch > 0))
    throw ConfigError(at_any(values, {"train.lr_before_switch", "train.lr_switch_step"}) +
                      "key 'train.lr_before_switch': the peak learning rate up to train.lr_switch_step; must be > 0");
  if (c.train.lr_switch_step > 0 && c.train.min_lr > c.train.lr_before_switch)
    throw ConfigError(at_any(values, {"train.min_lr", "train.lr_before_switch"}) +
                      "key 'train.min_lr': must be <= train.lr_before_switch");
  if (c.train.spike_factor > 0 && !(c.train.spike_factor > 1))
    throw ConfigError(at_any(values, {"train.spike_factor"}) +
                      "key 'train.spike_factor': a spike is a loss above this factor x the median; must be > 1, "
                      "or 0 for the loss_spike rule");
  if (c.train.spike_policy == "rewind" && c.train.checkpoint_every == 0 && c.train.spike_rewind_steps == 0)
    throw ConfigError(at_any(values, {"train.spike_policy", "train.checkpoint_every"}) +
                      "key 'train.spike_policy': rewind goes back to the last checkpoint; set train.checkpoint_every "
                      "> 0 (or train.spike_rewind_steps > 0: states kept in memory)");
  if (c.train.min_lr > c.train.lr)
    throw ConfigError(at_any(values, {"train.min_lr", "train.lr"}) + "key 'train.min_lr': must be <= train.lr");
  if (c.dist.zero_stage == 3 && c.dist.world_size < 2)
    throw ConfigError(at_any(values, {"dist.zero_stage", "dist.world_size"}) +
                      "key 'dist.zero_stage': stage 3 shards parameters and needs dist.world_size >= 2");
  if (c.data.kind != "synthetic" && c.data.kind != "program" && c.data.path.empty())
    throw ConfigError(at_any(values, {"data.path", "data.kind"}) + "key 'data.path': required when data.kind is " +
                      c.data.kind);
  if (c.data.kind == "text" && c.model.vocab < 256)
    throw ConfigError(at_any(values, {"model.vocab", "data.kind"}) +
                      "key 'model.vocab': data.kind text needs vocab >= 256 (one token per byte), got " +
                      format_int(c.model.vocab));
  if (decoder && c.model.moe_experts > 0 && c.model.moe_top_k > c.model.moe_experts)
    throw ConfigError(at_any(values, {"model.moe.top_k", "model.moe.experts"}) +
                      "key 'model.moe.top_k': must be <= model.moe.experts (" + format_int(c.model.moe_experts) + ")");
  if (!c.data.eval_path.empty() && (c.data.kind == "synthetic" || c.data.kind == "program"))
    throw ConfigError(at_any(values, {"data.eval_path", "data.kind"}) + "key 'data.eval_path': data.kind " +
                      c.data.kind + " has no files; use data.eval_fraction to hold out part of its sequences");
  if (!c.data.eval_path.empty() && c.data.eval_fraction > 0)
    throw ConfigError(at_any(values, {"data.eval_fraction", "data.eval_path"}) +
                      "key 'data.eval_fraction': give either data.eval_fraction or data.eval_path, not both");
  if (c.train.eval_every > 0 && !c.evaluates() && c.data.kind != "program")  // a program holds out its own data
    throw ConfigError(at_any(values, {"train.eval_every"}) +
                      "key 'train.eval_every': there is no held-out data; set data.eval_fraction or data.eval_path");
  if (c.train.leaf > 0) {
    const int64_t global = c.dist.world_size * c.train.accum * c.train.micro_batch;
    if (c.train.leaf > global)
      throw ConfigError(at_any(values, {"train.leaf", "train.micro_batch", "train.accum", "dist.world_size"}) +
                        "key 'train.leaf': a leaf of " + format_int(c.train.leaf) +
                        " sequences is larger than the global batch of " + format_int(global) +
                        " (world_size x accum x micro_batch = " + format_int(c.dist.world_size) + " x " +
                        format_int(c.train.accum) + " x " + format_int(c.train.micro_batch) + ")");
    if (c.train.micro_batch % c.train.leaf != 0)
      throw ConfigError(at_any(values, {"train.micro_batch", "train.leaf"}) + "key 'train.micro_batch': " +
                        format_int(c.train.micro_batch) + " is not a multiple of train.leaf (" +
                        format_int(c.train.leaf) + "); a micro-batch holds whole leaves");
  }
  check_sizes(c, values);
  const int64_t crash = c.fault.crash_in_checkpoint_step;
  if (crash > 0 && (c.train.checkpoint_every == 0 || crash % c.train.checkpoint_every != 0 || crash >= c.train.steps))
    throw ConfigError(at_any(values, {"fault.crash_in_checkpoint_step"}) +
                      "key 'fault.crash_in_checkpoint_step': must be a step that writes a checkpoint (a multiple of "
                      "train.checkpoint_every, before train.steps)");
}

RunConfig apply_run_config(RunConfig base, const FlatConfig& values) {
  base = apply_run_values(std::move(base), values);
  check_run_config(base, values);
  (void)reset_idle_keys(base);
  return base;
}

FlatConfig flatten_yaml(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source_location(source, e.mark.line, e.mark.column) + ": invalid YAML: " + e.msg);
  }
  if (root.IsNull()) return {};
  if (!root.IsMap()) throw ConfigError(source + ": expected a mapping of config sections at the top level");
  return flatten_yaml_node(root, source);
}

FlatConfig flatten_yaml_node(const YAML::Node& map, const std::string& source) {
  FlatConfig out;
  size_t visited = 0;
  flatten_node(map, "", source, out, visited);
  return out;
}

RunConfig load_run_config(const std::string& path) {
  // Look before opening: a FIFO would block the open, a directory would read as empty.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw ConfigError(path + ": cannot open the run config file: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw ConfigError(path + ": is a directory, expected a run config file (YAML)");
  if (!S_ISREG(st.st_mode)) throw ConfigError(path + ": not a regular file, expected a run config file (YAML)");
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open the run config file: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) throw ConfigError(path + ": cannot read the run config file");
  // An empty file is a mistake (a truncated copy, the wrong path), not "all defaults":
  // an explicit `{}` asks for those.
  if (YAML::Node root =
          [&] {
            try {
              return YAML::Load(ss.str());
            } catch (const YAML::Exception&) {
              return YAML::Node(YAML::NodeType::Map);  // flatten_yaml reports the syntax error with its line
            }
          }();
      root.IsNull())
    throw ConfigError(path +
                      ": the run config is empty; expected a mapping with sections model, data, train, dist "
                      "(write {} for all defaults)");
  return apply_run_config(RunConfig{}, flatten_yaml(ss.str(), path));
}

namespace {

/// Keys added after run ids were first published: at their default they are left out of
/// the canonical text, so the run ids of configs that do not use them stay as they were.
bool omitted_at_default(const std::string& key, const std::string& value) {
  static const std::map<std::string, std::string> defaults = [] {
    std::vector<std::pair<std::string, std::string>> all;
    RunConfig probe;
    visit_fields(probe, Flattener{&all});
    std::map<std::string, std::string> out;
    // Keys added after run ids were first given: left out at their default, so that every
    // earlier config keeps its run id.
    for (const char* k :
         {"data.eval_fraction", "data.eval_path",       "train.eval_every",         "train.eval_batches",
          "train.leaf",         "train.deterministic",  "fault.nan_rank",           "fault.nan_micro_batch",
          "fault.spike_step",   "dist.straggler_ratio", "train.telemetry_every",    "train.spike_policy",
          "train.spike_limit",  "train.lr_switch_step", "train.lr_before_switch",   "train.fork_parent",
          "train.fork_step",    "fault.hang_once",      "fault.nan_sample_step",    "fault.nan_sample",
          "fault.corrupt_from", "fault.corrupt_rank",   "fault.transient_step",     "fault.transient_rank",
          "train.spike_factor", "train.spike_window",   "train.spike_rewind_steps", "train.spike_skip",
          "fault.spike_lr",     "fault.spike_steps",    "dist.diagnose_step",       "dist.diagnose_rotate",
          "fault.slow_in",      "fault.corrupt_host"})
      for (const auto& [key, v] : all)
        if (key == k) out[key] = v;
    return out;
  }();
  const auto it = defaults.find(key);
  return it != defaults.end() && it->second == value;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> to_flat(const RunConfig& c) {
  std::vector<std::pair<std::string, std::string>> all, out;
  RunConfig copy = c;
  visit_fields(copy, Flattener{&all});
  for (auto& kv : all)
    if (!omitted_at_default(kv.first, kv.second)) out.push_back(std::move(kv));
  return out;
}

std::vector<std::string> canonical_pieces(const RunConfig& c) {
  // Keys come grouped by section in canonical order; within a section, keys with a
  // further dot ("moe.experts") are written as flow-free nested maps. Text fields are
  // always double-quoted so any path reads back unchanged. A header goes with the first
  // key of its section in the table, present or not, so no piece depends on another key.
  static const std::vector<std::string> text_keys = [] {
    std::vector<std::string> k;
    RunConfig probe;
    visit_fields(probe, [&](const char* key, auto&, const auto& spec, const Doc&) {
      if constexpr (std::is_same_v<std::decay_t<decltype(spec)>, Text>) k.push_back(key);
    });
    return k;
  }();
  std::vector<std::pair<std::string, std::string>> all;
  RunConfig copy = c;
  visit_fields(copy, Flattener{&all});
  std::vector<std::string> out;
  out.reserve(all.size());
  std::string section, sub, written_section, written_sub;
  for (const auto& [key, raw] : all) {
    const auto dot = key.find('.');
    const std::string sec = key.substr(0, dot), rest = key.substr(dot + 1);
    const auto dot2 = rest.find('.');
    const std::string s = dot2 == std::string::npos ? "" : rest.substr(0, dot2);
    std::string piece;
    if (sec != section) piece += sec + ":\n";
    if (!s.empty() && (sec != section || s != sub)) piece += "  " + s + ":\n";
    if (!c.given.empty()) {
      // A program's text: only what it is given, each section's header before its first.
      if (!c.writes(key)) {
        out.emplace_back();
        continue;
      }
      piece.clear();
      if (sec != written_section) piece += sec + ":\n", written_sub.clear();
      if (!s.empty() && (sec != written_section || s != written_sub)) piece += "  " + s + ":\n";
      written_section = sec, written_sub = s;
    }
    section = sec, sub = s;
    if (!c.given.empty() || !omitted_at_default(key, raw)) {
      const bool text = std::find(text_keys.begin(), text_keys.end(), key) != text_keys.end();
      const std::string value = text ? yaml_quote(raw) : raw;
      piece += s.empty() ? "  " + rest + ": " + value + "\n" : "    " + rest.substr(dot2 + 1) + ": " + value + "\n";
    }
    out.push_back(std::move(piece));
  }
  return out;
}

bool RunConfig::writes(const std::string& key) const {
  return given.empty() || std::binary_search(given.begin(), given.end(), key);
}

std::string to_yaml(const RunConfig& c) {
  std::string out;
  for (const std::string& piece : canonical_pieces(c)) out += piece;
  return out;
}

RunConfig math_config(const RunConfig& c) {
  RunConfig m = c;
  const RunConfig defaults;
  m.train.accum = c.dist.world_size * c.train.accum;
  if (c.train.leaf > 0) {  // with a leaf the micro-batch is layout too: one leaf per micro-batch
    m.train.accum = c.dist.world_size * c.train.accum * c.train.micro_batch / c.train.leaf;
    m.train.micro_batch = c.train.leaf;
  }
  m.dist.world_size = 1;
  m.dist.zero_stage = 0;
  m.dist.timeout_s = defaults.dist.timeout_s;
  m.dist.straggler_ratio = defaults.dist.straggler_ratio;
  m.data.workers = 0;
  m.train.log_every = defaults.train.log_every;
  m.train.checksum_every = defaults.train.checksum_every;
  m.train.telemetry_every = defaults.train.telemetry_every;
  // A rewind lands on the last checkpoint: then where checkpoints are is math.
  if (c.train.spike_policy != "rewind" || c.train.spike_rewind_steps > 0)
    m.train.checkpoint_every = defaults.train.checkpoint_every;
  m.train.keep_checkpoints = defaults.train.keep_checkpoints;
  m.train.fork_parent.clear(), m.train.fork_step = 0;  // where it started, not what it computes
  m.fault.kill_step = 0, m.fault.kill_rank = 0, m.fault.hang_step = 0, m.fault.hang_rank = 0, m.fault.hang_once = 0;
  m.fault.slow_ms = 0, m.fault.slow_rank = 0, m.fault.slow_in = defaults.fault.slow_in,
  m.fault.crash_in_checkpoint_step = 0, m.fault.crash_in_record = 0;
  m.dist.diagnose_step = 0, m.dist.diagnose_rotate = 0;  // evidence and who computes which share: the same bits
  return m;
}

std::string math_id(const RunConfig& c) { return run_id(math_config(c)); }

std::vector<std::string> math_differences(const RunConfig& was, const RunConfig& now) {
  std::vector<std::string> out;
  const auto global = [](const RunConfig& c) { return c.dist.world_size * c.train.accum * c.train.micro_batch; };
  if (global(was) != global(now))
    out.push_back("the global batch (dist.world_size x train.accum x train.micro_batch): " +
                  std::to_string(global(was)) + " there, " + std::to_string(global(now)) + " here");
  std::vector<std::pair<std::string, std::string>> a, b;
  RunConfig ma = math_config(was), mb = math_config(now);
  visit_fields(ma, Flattener{&a});
  visit_fields(mb, Flattener{&b});
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const std::string& key = a[i].first;
    // The accumulation count is layout once the global batch is named; with a leaf, so
    // is the micro-batch (train.leaf says the math).
    if (key == "train.accum" || (key == "train.micro_batch" && was.train.leaf > 0 && now.train.leaf > 0)) continue;
    if (a[i].second != b[i].second) out.push_back(key + ": " + a[i].second + " there, " + b[i].second + " here");
  }
  return out;
}

std::string run_id(const RunConfig& c) {
  std::string text = to_yaml(c);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(XXH3_64bits(text.data(), text.size())));
  return buf;
}

}  // namespace sweep
