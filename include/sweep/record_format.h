// The record format a program writes (results/SCHEMA.md): a step's metrics, held-out
// evaluations, parameter checksums, what is known when a run starts, and the writer. Part
// of the installed API (sweep/record_writer.h includes it); free of HDF5 and LibTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sweep {

/// One optimizer step, as recorded in /metrics.
struct StepMetrics {
  int64_t step = 0;           ///< 1-based optimizer step
  double loss = 0;            ///< global token-mean loss of the step
  double lr = 0;              ///< learning rate applied at this step
  double grad_norm = 0;       ///< global gradient L2 norm before clipping
  double clip_coef = 1;       ///< factor the gradient was scaled by (1 = not clipped)
  double loss_scale = 1;      ///< fp16 loss scale in force (1 for fp32/bf16)
  int64_t skipped = 0;        ///< 1 when the update was skipped (fp16 overflow)
  int64_t tokens = 0;         ///< target tokens in the global batch
  int64_t unused_params = 0;  ///< parameter tensors that got no gradient on any rank this step
  double step_time_s = 0;     ///< wall time of the step on rank 0
  double tokens_per_s = 0;    ///< tokens / step_time_s
  double record_time_s = 0;   ///< time spent on checksums and record writes after the step
};

/// A program's own figures for one step or one evaluation (accuracy, MFU, ...), by name:
/// /metrics/extra/<name> and /eval/extra/<name> (schema version 4). A name is 1-64 of
/// A-Z a-z 0-9 _ . - ; a row that lacks a metric another row has stores NaN there.
using ExtraMetrics = std::vector<std::pair<std::string, double>>;

/// Whether `name` may name an extra metric (see ExtraMetrics).
bool valid_metric_name(const std::string& name);

/// One held-out evaluation, as recorded in /eval (schema version 3).
struct EvalRow {
  int64_t step = 0;    ///< evaluated after this step's update
  double loss = 0;     ///< token-mean loss over train.eval_batches global batches of held-out sequences
  int64_t tokens = 0;  ///< target tokens evaluated
  double time_s = 0;   ///< wall time of the evaluation (not part of any step's time)
};

/// One parameter tensor's place in the flat parameter vector.
struct ParamInfo {
  std::string name;            ///< registration name, e.g. "layers.0.attn.wq"
  std::vector<int64_t> shape;  ///< tensor shape
  int64_t offset = 0;          ///< first element in the flat vector
  int64_t numel = 0;           ///< element count
};

/// Parameter hashes at one step.
struct ChecksumRow {
  int64_t step = 0;               ///< step after whose update the hash was taken
  uint64_t params = 0;            ///< layout-independent hash of all parameters
  std::vector<uint64_t> tensors;  ///< one hash per ParamInfo, same order
};

/// Gradient telemetry of one step (/telemetry, schema version 5). sweep's trainer takes a
/// row every train.telemetry_every steps, at the last step, and at any step whose loss or
/// gradient norm spiked or went non-finite; a program's own C++ writer may append rows too.
struct TelemetryRow {
  int64_t step = 0;  ///< the step whose gradient was measured
  /// Why the row was taken: "every", "last", "spike", "nonfinite", comma-separated when several.
  std::string why;
  /// One per ParamInfo, same order: the L2 norm of the tensor's gradient as the optimizer
  /// reads it (reduced over the global batch, unscaled, before clipping).
  std::vector<double> tensor_grad_norm;
  /// Mixture-of-experts models: tokens the router sent to each expert of each MoE layer in
  /// the step's global batch, layer-major (layers x experts, see RecordHeader::moe_layers
  /// and moe_experts); empty for a model without routing.
  std::vector<int64_t> routed_tokens;
};

struct Record;

/// The /summary health attributes ("health", "health.<flag>") to store for a finished
/// record, judged from the record as read back (results/analysis/run_health.h:
/// judge_health_attributes).
using HealthJudge = std::vector<std::pair<std::string, std::string>> (*)(const Record&);

/// Where a run's first steps came from when it started from another run's checkpoint
/// (`sweep resume` onto another layout, `sweep fork`). Empty kind: the run trained from
/// step 0, or resumed its own checkpoint without another parent.
struct RecordLineage {
  std::string kind;           ///< "", "resumed" (the same math on another layout) or "forked" (changed keys)
  std::string parent_run_id;  ///< the run whose checkpoint it started from
  int64_t parent_step = 0;    ///< that checkpoint's step: steps 1..parent_step are the parent's rows
};

/// What is known when a run starts.
struct RecordHeader {
  std::string run_id;
  std::string sweep_id;                                     ///< may be empty for a lone run
  std::string config_yaml;                                  ///< resolved config, canonical YAML
  std::vector<std::pair<std::string, std::string>> config;  ///< dotted key -> canonical value
  std::vector<std::pair<std::string, std::string>> environment;
  std::vector<ParamInfo> params;
  int64_t world_size = 1;  ///< ranks; columns of /ranks datasets
  RecordLineage lineage;   ///< root attributes lineage, parent_run_id, parent_step (version 6) when kind is set
  bool eval = false;       ///< the run evaluates held-out data: the record gets /eval
  /// A mixture-of-experts model's routing layers and experts per layer: the shape of
  /// TelemetryRow::routed_tokens (0 x 0 without routing).
  int64_t moe_layers = 0, moe_experts = 0;
  /// > 0: append_step flushes the rows to disk when this many seconds passed since the
  /// last flush (and at the first step), so `sweep status` follows a program that never
  /// calls flush(). 0: only flush() and finish() do (sweep-train flushes on its own).
  double flush_every_s = 0;
  /// For a writer that stores no health flags of its own (a program's): finish() stores
  /// what this judges of a completed or diverged record. Null: none are stored, and every
  /// reader judges them (as it does for the Python writer's records). The record layer
  /// does not judge records itself: judging is the analysis side's.
  HealthJudge health_judge = nullptr;
};

/// Memory per rank (one entry per rank): what it holds between steps, measured from its
/// buffers (ZeRO shards them), and what it needed during the steps.
struct RankMemory {
  std::vector<int64_t> params, grads, optimizer;
  /// Peak bytes alive during any step: LibTorch CPU tensors at their high-water mark plus
  /// the rank's own flat buffers (shards, AdamW moments, reduction workspace); -1 where
  /// not measured (tensors on a GPU). Empty in records from before it was kept.
  std::vector<int64_t> step_peak;
  /// The process's peak resident set (the kernel's VmHWM) at the end of training, -1
  /// where unknown. Empty in records from before it was kept.
  std::vector<int64_t> peak_rss;
};

/// Suffix of a record still being written.
inline constexpr const char* kPartialSuffix = ".partial";

/// True when `path` names a record still being written (it ends in kPartialSuffix).
inline bool is_partial_path(const std::string& path) {
  const std::string suffix = kPartialSuffix;
  return path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Writes one record. Steps and checksums are buffered and written on flush().
class RecordWriter {
 public:
  /// Creates `path` + ".partial" (replacing a stale partial); refuses when `path` exists.
  RecordWriter(const std::string& path, const RecordHeader& header);
  /// Flushes and closes; an unfinished record stays `.partial`.
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  /// One step's row, with the program's own figures; throws RecordError for a bad metric
  /// name or one given twice.
  void append_step(const StepMetrics& m, const ExtraMetrics& extra = {});
  void append_checksum(const ChecksumRow& c);
  /// One held-out evaluation, with the program's own figures; the header must have said
  /// `eval`, and evaluations come in step order (RecordError otherwise).
  void append_eval(const EvalRow& e, const ExtraMetrics& extra = {});
  /// Step time of every rank for one step (world_size values).
  void append_rank_times(const std::vector<double>& seconds);
  /// Each rank's own gradient norm for one step (world_size values): /ranks/grad_norm, a
  /// row per /metrics row from the first call on (rows before it hold NaN). Version 5.
  void append_rank_grad_norms(const std::vector<double>& norms);
  /// One row of gradient telemetry (/telemetry, version 5); rows come in step order, with
  /// one norm per parameter tensor and, for an MoE header, layers x experts token counts.
  void append_telemetry(const TelemetryRow& row);
  /// Per-rank memory; written once, any time before finish().
  void set_memory(const RankMemory& m);
  /// A run-level fact for /summary (e.g. "comm.canonical_busbw_GBps"); written at flush.
  void set_summary(const std::string& key, const std::string& value);
  /// Declares the program's own metric `name` (append_step's and append_eval's) a timing
  /// metric: one it derives from the clock (MFU, its own throughput), whose bits no two
  /// runs share. `sweep compare` and `reproduce` leave it out of their bitwise verdict
  /// and show its means apart. Stored in /summary `timing_metrics` (names, space-separated);
  /// the record's own columns (loss, lr, ...) are compared whatever it says. Throws
  /// RecordError for a name that is not a metric's (valid_metric_name).
  void declare_timing_metric(const std::string& name);
  /// Writes buffered rows and flushes the file to disk.
  void flush();
  /// Sets the final status ("completed", "failed", "diverged") and renames to `path`.
  /// `test_crash_before_rename` (fault.crash_in_record, test-only) _exits just before it.
  void finish(const std::string& status, const std::string& failure = "", bool test_crash_before_rename = false);
  /// Marks the run failed with `failure`, flushes and closes, and leaves the file
  /// `.partial`: a failed run never yields a completed record.
  void abandon(const std::string& failure);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The run checksum of a flat fp32 vector (the /checksums `params` column): XXH3-64 of the
/// XXH3-64 hashes of its 65536-element blocks, so it does not depend on how the vector is
/// sharded or laid out.
uint64_t flat_checksum(const float* data, size_t n);

/// XXH3-64 of one tensor's bytes, used for the per-parameter table.
uint64_t tensor_checksum(const float* data, size_t n);

}  // namespace sweep
