// The run config: every knob of one training run, its defaults, its valid ranges, and
// its canonical text (whose hash is the run id). Free of LibTorch so the harness can
// validate a grid without linking the trainer.
// The comments on fields are for readers of the code; what users read (`sweep keys`,
// docs/config.md) is each key's help line in the key table, run_config.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "config_error.h"  // ConfigError
#include "text.h"          // printable, closest_key: the messages of every config error

namespace YAML {
class Node;
}

namespace sweep {

/// The model: which kind (model_schema.h), the keys every kind has (vocab, seq_len: the
/// data pipeline reads them), and its own keys. The built-in decoder-only transformer
/// (RMSNorm, rotary positions, SwiGLU or MoE) keeps its keys in fields; a registered
/// kind's keys are canonical text in `values`.
struct ModelConfig {
  std::string kind = "decoder";  ///< model.kind: decoder (built in) or a registered kind
  /// A registered kind's own keys, (name, canonical text), in its schema's order; empty
  /// for the decoder.
  std::vector<std::pair<std::string, std::string>> values;
  int64_t layers = 2;              ///< transformer blocks
  int64_t d_model = 64;            ///< residual stream width
  int64_t heads = 4;               ///< attention heads; must divide d_model
  int64_t vocab = 256;             ///< token ids are in [0, vocab)
  int64_t seq_len = 32;            ///< tokens per sequence (the model predicts seq_len of them)
  int64_t ffn_mult = 4;            ///< SwiGLU hidden width = ffn_mult * d_model * 2 / 3, rounded to 8
  int64_t moe_experts = 0;         ///< routed experts per MoE layer; 0 = dense MLP (key model.moe.experts)
  int64_t moe_top_k = 2;           ///< experts each token is routed to (model.moe.top_k)
  int64_t moe_shared_experts = 1;  ///< always-on shared experts (model.moe.shared_experts)
  int64_t moe_expert_hidden =
      0;  ///< hidden width per expert; 0 = ffn width / (top_k + shared) (model.moe.expert_hidden)
};

/// Where tokens come from.
struct DataConfig {
  /// synthetic (seeded Markov chain) | tokens (uint16 file) | text (bytes) | hdf5 | program
  /// (the training program's own DataSource for its model kind, sweep/trainer.h)
  std::string kind = "synthetic";
  std::string path;                ///< tokens/text/hdf5: the data file
  std::string dataset = "tokens";  ///< hdf5: name of the 1-D integer dataset
  int64_t seed = 0;                ///< seeds the synthetic source itself (not the training order)
  int64_t branching = 4;           ///< synthetic: successors per token (entropy floor = ln branching)
  int64_t samples = 65536;         ///< synthetic: sequences per epoch
  int64_t workers = 0;             ///< background prefetch threads; results identical for any count
  /// Held-out share of the data for evaluation, 0 = none. A file's last sequences (the
  /// training windows stop one window short, so no token is in both); synthetic data
  /// holds out sequences past data.samples (training is unchanged); program data its
  /// source's last sequences.
  double eval_fraction = 0.0;
  std::string eval_path;  ///< tokens/text/hdf5: a held-out file of the same kind, read whole; "" = none
};

/// Optimisation and everything that changes the math of a step.
struct TrainConfig {
  int64_t steps = 100;      ///< optimizer steps
  int64_t micro_batch = 4;  ///< sequences per micro-batch
  int64_t accum = 1;        ///< micro-batches per rank per step
  /// Sequences per leaf of the canonical gradient tree; 0 = the micro-batch is the leaf.
  /// With a leaf, micro_batch is layout like accum and world_size: every
  /// world_size x accum x micro_batch of the same global batch gives the same bits.
  int64_t leaf = 0;
  double lr = 1e-3;  ///< peak learning rate
  /// > 0: steps 1 to lr_switch_step follow the schedule of peak lr_before_switch, later
  /// ones train.lr's: a step change of the learning rate, what `sweep fork --from-step S
  /// train.lr=B` trains from a run of another lr. 0: off.
  int64_t lr_switch_step = 0;
  double lr_before_switch = 0;  ///< the peak learning rate up to lr_switch_step
  /// Set by `sweep fork` alone: the parent run's id and the step of the checkpoint the fork
  /// starts from. Part of the run id (a fork is never a grid point, and two forks of one
  /// change from different parents or steps are two runs), not of the math.
  std::string fork_parent;
  int64_t fork_step = 0;
  std::string schedule = "cosine";  ///< constant | linear | cosine (after warmup)
  int64_t warmup = 0;               ///< linear warmup steps from 0 to lr
  double min_lr = 0.0;              ///< floor of the linear/cosine decay
  double beta1 = 0.9;               ///< AdamW first-moment decay
  double beta2 = 0.95;              ///< AdamW second-moment decay
  double eps = 1e-8;                ///< AdamW denominator epsilon
  double weight_decay = 0.0;        ///< AdamW decoupled weight decay
  double clip_norm = 0.0;           ///< global gradient-norm clip; 0 = off
  std::string on_nan = "stop";      ///< non-finite loss or gradient (not an fp16 overflow): stop (status diverged) |
                                    ///< skip_step (no update; counted)
  /// A loss spike (the loss_spike rule of run_health.h against the steps before): none
  /// (flagged only) | skip (the step's update is not taken) | rewind (back to the last
  /// checkpoint, the global batches since then skipped). Decisions are recorded.
  std::string spike_policy = "none";
  int64_t spike_limit = 3;  ///< decisions a run takes at most; later spikes are only flagged
  /// > 1: a spike is a loss above spike_factor x the median of the last spike_window losses
  /// the policy kept (steps it left out do not count); 0: the loss_spike rule.
  double spike_factor = 0;
  int64_t spike_window = 10;  ///< spike_factor: the losses (at least this many) the median is taken over
  /// rewind: > 0 keeps the states of the last N step boundaries in memory (and in
  /// checkpoints) and goes back to the newest one from before the loss began to rise;
  /// 0: back to the last checkpoint.
  int64_t spike_rewind_steps = 0;
  int64_t spike_skip = 0;  ///< global batches of data left out after a decision's step (the sampler moves past them)
  int64_t seed = 0;        ///< seeds init, sampling order and every RNG of the run
  int64_t threads = 1;     ///< intra-op and BLAS threads per rank
  /// "true": every run and layout gives the same bits; "false": benchmark mode (native
  /// reduction, nondeterministic algorithms allowed; on CUDA cuDNN autotuned and TF32).
  std::string deterministic = "true";
  std::string precision = "fp32";      ///< fp32 | bf16 (autocast) | fp16 (CPU: emulated) with a dynamic loss scale
  double loss_scale_init = 65536;      ///< fp16: initial loss scale
  int64_t loss_scale_interval = 2000;  ///< fp16: clean steps before the scale grows
  double loss_scale_growth = 2.0;      ///< fp16: growth factor
  double loss_scale_backoff = 0.5;     ///< fp16: factor on overflow (the step is skipped)
  int64_t log_every = 10;              ///< rank-0 log line every N steps
  int64_t checksum_every = 1;          ///< parameter checksums every N steps
  /// Gradient telemetry (per-tensor norms, MoE routing) every N steps, plus the last step
  /// and any step whose loss or gradient norm spiked or went non-finite; 0 = those only.
  int64_t telemetry_every = 10;
  int64_t checkpoint_every = 0;  ///< checkpoint every N steps; 0 = never
  int64_t keep_checkpoints = 2;  ///< complete checkpoints kept (older ones are deleted)
  /// Held-out evaluation every N steps and after the last; 0 = only after the last step
  /// (when there is held-out data: data.eval_fraction or data.eval_path).
  int64_t eval_every = 0;
  int64_t eval_batches = 4;  ///< global batches (world_size x accum x micro_batch sequences) per evaluation
  /// Input only (train.min_lr_ratio): when >= 0, min_lr = min_lr_ratio x lr, recomputed
  /// whenever lr is applied; never in the canonical text (min_lr is). -1 = not given.
  double min_lr_ratio = -1;
};

/// Test-only fault injection; never set these in a real sweep. Every field is off at its
/// default; tests/e2e/{mpi,fault}_e2e_test.cpp show what each one must lead to.
struct FaultConfig {
  int64_t inf_grad_step = 0;  ///< makes the gradient of this step non-finite (fp16 scaler tests); 0 = off
  int64_t desync_step = 0;    ///< perturbs one parameter on rank desync_rank after this step; 0 = off
  int64_t desync_rank = 1;    ///< the rank desync_step perturbs
  int64_t kill_step = 0;      ///< rank kill_rank sends itself SIGKILL at the start of this step; 0 = off
  int64_t kill_rank = 0;      ///< the rank kill_step kills
  int64_t hang_step = 0;      ///< rank hang_rank stops making progress at the start of this step; 0 = off
  int64_t hang_rank = 0;      ///< the rank hang_step hangs
  int64_t hang_once = 0;      ///< 1: hang_step hangs only a process that does not resume (a hang that does not repeat)
  int64_t nan_step = 0;  ///< micro-batch nan_micro_batch of rank nan_rank: its loss becomes NaN at this step; 0 = off
  int64_t nan_rank = 0;  ///< the rank nan_step poisons
  int64_t nan_micro_batch = 0;  ///< its micro-batch (0-based, of train.accum) that nan_step poisons
  int64_t spike_step = 0;       ///< this step's update uses a learning rate of spike_lr (loss-spike tests); 0 = off
  double spike_lr = 1;          ///< the learning rate of spike_step's update (and the spike_steps - 1 after it)
  int64_t spike_steps = 1;      ///< updates from spike_step on that use spike_lr: a step change of the lr that lasts
  int64_t slow_ms = 0;    ///< rank slow_rank sleeps this long inside every step's compute (straggler tests); 0 = off
  int64_t slow_rank = 0;  ///< the rank slow_ms slows
  /// Where slow_ms sleeps: compute (every step's compute) | exchange (inside every
  /// gradient exchange, once the rank has entered it and before it has posted anything:
  /// a rank stuck inside a collective)
  std::string slow_in = "compute";
  int64_t crash_in_checkpoint_step =
      0;  ///< _exit while writing this step's checkpoint, before DONE; skipped under --resume; 0 = off
  int64_t crash_in_record = 0;  ///< 1: _exit just before the finished record.h5.partial is renamed to record.h5
  /// The micro-batch that holds sample nan_sample at step nan_sample_step: the model's
  /// embedding output of that sample's row becomes NaN (the loss where the model has no
  /// such hook), on whichever rank holds it: a data fault that follows the sample across
  /// layouts; 0 = off.
  int64_t nan_sample_step = 0;
  int64_t nan_sample = 0;    ///< the sample (index into the data source) nan_sample_step poisons
  int64_t corrupt_from = 0;  ///< from this step on, rank corrupt_rank flips a bit of its local gradient; 0 = off
  int64_t corrupt_rank = 1;  ///< the rank corrupt_from corrupts: a bad device
  /// Instead of corrupt_rank, every rank whose host (its hostname) is this one: a bad node,
  /// which follows the host whatever rank runs there; "" = corrupt_rank decides.
  std::string corrupt_host;
  int64_t transient_step =
      0;  ///< rank transient_rank flips a bit of its local gradient at this step, unless resumed; 0 = off
  int64_t transient_rank = 0;  ///< the rank transient_step strikes
};

/// How a step is spread over ranks.
struct DistConfig {
  int64_t world_size = 1;               ///< ranks; checked against the launched world
  std::string reduction = "canonical";  ///< canonical (layout-invariant) | native
  int64_t zero_stage = 0;               ///< 0 replicate all; 1 shard optimizer state; 2 + gradients; 3 + parameters
  std::string find_unused = "zero";     ///< parameters without a gradient: zero (count them) | error
  double timeout_s = 300;               ///< a rank without progress for this long ends the job
  /// A rank whose compute time, step by step, is this many times its peers' typical (the
  /// median over the steps) is a straggler (results/analysis/run_health.h).
  double straggler_ratio = 1.2;
  /// `sweep diagnose` and tests only: neither changes a bit of a healthy run, so neither is
  /// part of its math (docs/design.md, "sweep diagnose").
  int64_t diagnose_step = 0;  ///< write <out>/evidence_step<S>.txt for each step up to this (shares, digests); 0 = off
  int64_t diagnose_rotate = 0;  ///< rank r computes the shares of rank (r + this) mod world_size; 0 = its own
};

/// One training run, fully resolved.
struct RunConfig {
  /// Whether the run promises its bits (train.deterministic true).
  bool deterministic() const { return train.deterministic == "true"; }
  /// Whether gradients are reduced by the library's all-reduce: dist.reduction native, or
  /// benchmark mode (train.deterministic false).
  bool native_reduction() const { return dist.reduction == "native" || !deterministic(); }
  /// Whether the run evaluates held-out data (data.eval_fraction or data.eval_path set).
  bool evaluates() const { return data.eval_fraction > 0 || !data.eval_path.empty(); }
  /// Whether to_yaml writes `key`: every key unless `given` names some.
  bool writes(const std::string& key) const;
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  DistConfig dist;
  FaultConfig fault;
  /// A program's run (a grid's `program:`): the dotted keys its config text holds, sorted;
  /// empty for sweep-train, whose text holds every key. A program keeps its own default for
  /// a key its grid does not set, so the text (and the run id, its hash) holds only model.kind,
  /// the program's own model.* keys, dist.world_size and train.threads (which sweep applies
  /// itself), train.checksum_every and train.telemetry_every (its record writer's) and the
  /// keys the grid sets. Not a key itself: the text says which keys it holds.
  std::vector<std::string> given;
};

/// One scalar of a config as written: its text and where it came from (for messages).
struct ConfigValue {
  std::string text;       ///< the scalar as spelled in YAML
  std::string where;      ///< "file:line:col" or a description such as "grid point 3"
  bool is_scalar = true;  ///< false when the YAML node was a map or a list
};

/// Dotted key ("train.lr") -> value. Keys are validated by parse_run_config.
using FlatConfig = std::map<std::string, ConfigValue>;

/// Every dotted key the run config of the built-in decoder knows, in canonical order.
const std::vector<std::string>& run_config_keys();

/// Keys accepted in a config but never in its canonical text: train.min_lr_ratio (it sets
/// train.min_lr from train.lr).
const std::vector<std::string>& input_only_keys();

/// One key of the table, described for `sweep keys` and docs/config.md.
struct KeyDoc {
  std::string key;            ///< dotted key
  std::string type;           ///< integer | real | choice | text
  std::string default_value;  ///< canonical text of the default; "" for empty text
  std::string range;          ///< "[1, 256]", "(0, 10]", "fp32, bf16, fp16", "at most 4096 characters"
  std::string applies;        ///< when the key has an effect ("data.kind synthetic"); "" = always
  std::string help;           ///< one line
};

/// Every key of a config of model kind `kind`, in canonical order, with model.kind first
/// and each input-only key after the key it sets. Throws ConfigError for an unknown kind.
std::vector<KeyDoc> describe_keys(const std::string& kind);

/// A key set to a value that has no effect with the rest of its config.
struct IdleKey {
  std::string key;     ///< dotted key
  std::string reason;  ///< the setting that makes it idle: "data.kind text"
};

/// Resets every key that has no effect in `c` (data.seed unless data.kind is synthetic,
/// train.loss_scale_* unless fp16, ...: describe_keys().applies) to its default, so such a
/// key neither splits run ids nor reaches the run. Returns the keys that held another
/// value; empty when `c` was already canonical.
std::vector<IdleKey> reset_idle_keys(RunConfig& c);

/// Every dotted key of a run config of model kind `kind`, in canonical order (the
/// decoder's: run_config_keys()). Throws ConfigError for a kind this process does not know.
const std::vector<std::string>& config_keys(const std::string& kind);

/// Applies `values` on top of `base`; `model.kind`, when given, first (another kind starts
/// from that kind's defaults for its own keys). Throws ConfigError naming the key for an unknown
/// key (with a did-you-mean), a wrong type or an out-of-range value, and checks the
/// constraints between keys; then resets the keys without effect (reset_idle_keys).
RunConfig apply_run_config(RunConfig base, const FlatConfig& values);

/// apply_run_config without the constraints between keys and without resetting idle keys:
/// a grid checks each value on its own, and the rest only once the axes of a point are
/// combined. train.min_lr_ratio sets train.min_lr from the resulting train.lr; giving it
/// and train.min_lr in one `values` is a ConfigError.
RunConfig apply_run_values(RunConfig base, const FlatConfig& values);

/// Throws ConfigError when keys contradict each other (heads must divide d_model,
/// warmup <= steps, ...); the message takes file:line from `values` when given there.
void check_run_config(const RunConfig& c, const FlatConfig& values = {});

/// Reads a nested YAML run config (as written by to_yaml) from a file.
RunConfig load_run_config(const std::string& path);

/// Flattens a nested YAML document's mapping into dotted keys; `source` names the file.
FlatConfig flatten_yaml(const std::string& text, const std::string& source);

/// Flattens one YAML mapping node into dotted keys.
FlatConfig flatten_yaml_node(const YAML::Node& map, const std::string& source);

/// Canonical text values of every key, in canonical order (numbers spelled one way).
std::vector<std::pair<std::string, std::string>> to_flat(const RunConfig& c);

/// Canonical nested YAML text; equal configs give equal text.
std::string to_yaml(const RunConfig& c);

/// to_yaml(c) cut into one piece per key of config_keys(c.model.kind), in that order: the
/// key's line after any section headers that open before it, or only those headers for a
/// key left out at its default. The pieces joined are to_yaml(c), and each depends on its
/// own key's value alone, so a grid hashes a point from the pieces of the keys it changed.
/// A program's config (c.given) writes only its given keys, each section's header with the
/// first of them: its pieces depend on which keys are given, and a grid hashes its whole text.
std::vector<std::string> canonical_pieces(const RunConfig& c);

/// Run id: 16 hex digits of XXH3-64 over to_yaml(c).
std::string run_id(const RunConfig& c);

/// The id of a run's math alone: run_id of `c` with its layout set to one canonical
/// form: one rank with accum = world_size x accum (the same global batch; with train.leaf,
/// also micro_batch = leaf and accum = the global batch's leaves), ZeRO 0, no
/// data workers, and default logging, checkpoint and watchdog settings; the fault keys
/// that only stop a process (kill, hang, slow, crash) off. Two configs with the same
/// math id train the same bits, so a checkpoint of one resumes the other.
std::string math_id(const RunConfig& c);

/// `c` with its layout in the canonical form math_id hashes.
RunConfig math_config(const RunConfig& c);

/// Why `was` and `now` have different math ids, one entry per difference: "the global
/// batch (dist.world_size x train.accum x train.micro_batch): 16 there, 8 here" when it
/// differs, then "KEY: A there, B here" for every other key that is math (not layout) and
/// differs. Empty when their math ids are equal.
std::vector<std::string> math_differences(const RunConfig& was, const RunConfig& now);

}  // namespace sweep
