// Per-step recording of a run: the rows of metrics, checksums and per-rank times every
// rank keeps (checkpoints carry them), the record rank 0 writes (buffered, flushed every
// two seconds), the log line, and the summary at the end (stragglers, skipped steps, the
// run's health flags).
// LibTorch-free: the loop hands it numbers.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "record.h"  // RecordWriter, StepMetrics, ChecksumRow, RankMemory

namespace sweep {

/// Seconds on the steady clock from `t0` to now: the step, compute and evaluation times.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class StepRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  /// `straggler_ratio`: the run's dist.straggler_ratio (judge_stragglers).
  StepRecorder(int world, bool quiet, int64_t log_every, int64_t steps, double straggler_ratio)
      : world_(world), quiet_(quiet), log_every_(log_every), steps_(steps), straggler_ratio_(straggler_ratio) {}

  /// Rank 0: creates the record (record.h5.partial) with `header`.
  void open(const std::string& path, const RecordHeader& header);
  bool writing() const { return record_.has_value(); }
  RecordWriter* record() { return record_ ? &*record_ : nullptr; }

  /// Each rank's host, in rank order: stragglers are named with their host.
  void set_hosts(std::vector<std::string> hosts) { hosts_ = std::move(hosts); }

  /// The checksum of the initial parameters (a run that starts at step 0).
  void initial(ChecksumRow row);
  /// A resumed run's history from its checkpoint, into the rows and the new record.
  void restore(std::vector<StepMetrics> metrics, std::vector<ChecksumRow> checksums, std::vector<EvalRow> evals);

  /// Every rank's step time, compute (forward + backward) time and run-queue wait (the
  /// seconds its stepping thread was ready but waited for a CPU; NaN where unknown) of the
  /// step just taken.
  /// `grad_norms`: each rank's own gradient norm before the reduction (/ranks/grad_norm).
  void rank_times(std::vector<double> step_s, std::vector<double> compute_s, std::vector<double> waited_s,
                  std::vector<double> grad_norms);
  /// The step's metrics and, when they were taken, its checksum row and its gradient
  /// telemetry (grad_telemetry.h). `r0` is when recording began (before the checksum): the
  /// record_time_s of `s`. Prints the log line.
  void step(StepMetrics s, std::optional<ChecksumRow> row, std::optional<TelemetryRow> telemetry, Clock::time_point r0,
            bool root);

  /// A held-out evaluation after a step: kept, recorded and logged (rank 0's `root`).
  void eval(const EvalRow& e, bool root);

  const std::vector<StepMetrics>& rows() const { return rows_; }
  const std::vector<EvalRow>& evals() const { return evals_; }
  const std::vector<ChecksumRow>& checksums() const { return checks_; }
  /// Updates applied so far (steps not skipped).
  int64_t updates() const;
  /// An fp16 overflow the loss scaler skipped at `step`, first seen at `where`
  /// (locate_nonfinite); the summary keeps the first kKeptOverflows.
  void note_fp16_overflow(int64_t step, const std::string& where);
  /// A step `train.on_nan: skip_step` skipped, its non-finite `what` ("loss", "gradient")
  /// first seen at `where` (locate_nonfinite): logged, and the summary keeps the first
  /// kKeptOverflows as `nonfinite_skips` ("4: non-finite loss (rank 1, ...)").
  void note_nonfinite_skip(int64_t step, const std::string& what, const std::string& where);
  static constexpr size_t kKeptOverflows = 8;

  /// At the end: memory figures and the summary attributes (stragglers, per-rank median
  /// compute time and median ratio to its peers, each rank's share of the step time spent waiting for a CPU, non-finite
  /// steps skipped, the health flags of results/analysis/run_health.h, which it also prints). `scaler` says whether a
  /// loss scale ran; `diverged` is the failure of a run train.on_nan stopped ("" otherwise),
  /// which its flags name.
  /// `spikes`: train.spike_policy's summary attributes (SpikePolicy::summary), written
  /// with the others and read by the flags (spike_skipped_steps).
  void summarize(const RankMemory& mem, bool scaler, const std::string& diverged,
                 const std::vector<std::pair<std::string, std::string>>& spikes);
  /// The record is complete: renames it into place with `status` ("completed", "diverged").
  void finish(const std::string& status, const std::string& failure, bool crash_before_rename);
  /// The record is marked failed with `why`; later writes are no-ops.
  void abandon(const std::string& why);

 private:
  const int world_;
  const bool quiet_;
  const int64_t log_every_, steps_;
  const double straggler_ratio_;
  std::optional<RecordWriter> record_;
  std::map<std::string, std::string> config_;  // the header's, for the health flags
  std::vector<std::string> hosts_;             // rank r's host at r
  std::vector<StepMetrics> rows_;
  std::vector<ChecksumRow> checks_;
  std::vector<EvalRow> evals_;
  std::vector<std::vector<double>> rank_times_;     // [step][rank]
  std::vector<std::vector<double>> compute_times_;  // [step][rank]: forward+backward only, for stragglers
  std::vector<std::vector<double>> waited_;         // [step][rank]: run-queue wait, for shared cores
  std::vector<double> rank_grad_norms_;             // this step's, each rank's own gradient norm
  std::vector<std::string> fp16_overflows_;         // "STEP: where", the first kKeptOverflows
  std::vector<std::string> nonfinite_skips_;        // the same of train.on_nan: skip_step
  std::vector<TelemetryRow> telemetry_;             // the rows taken so far, for the health flags
  std::vector<ParamInfo> params_;                   // the header's, for the health flags
  int64_t moe_layers_ = 0, moe_experts_ = 0;        // the header's
  Clock::time_point last_flush_ = Clock::now();
};

}  // namespace sweep
