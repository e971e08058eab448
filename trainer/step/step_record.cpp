#include "step_record.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "run_health.h"  // compute_health, health_attributes
#include "text.h"        // join

namespace sweep {
namespace {

/// `values` to `digits` significant digits, comma-separated ("0.012,0.015").
std::string numbers(const std::vector<double>& values, int digits) {
  std::string out;
  for (double v : values) out += (out.empty() ? "" : ",") + significant(v, digits);
  return out;
}

/// Each rank's median over the steps of `times` ([step][rank]).
std::vector<double> rank_medians(const std::vector<std::vector<double>>& times, int world) {
  std::vector<double> med(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    std::vector<double> col;
    col.reserve(times.size());
    for (const auto& row : times) col.push_back(row[size_t(r)]);
    med[size_t(r)] = lower_median(col);
  }
  return med;
}

/// Each rank's run-queue wait over its step time, summed over the steps this process took
/// ("0.02,0.47"), or "" when a rank's wait is unknown (no schedstat) or no step was taken.
std::string runqueue_shares(const std::vector<std::vector<double>>& times,
                            const std::vector<std::vector<double>>& waited, int world) {
  if (times.empty() || times.size() != waited.size()) return "";
  std::string out;
  for (size_t r = 0; r < size_t(world); ++r) {
    double wait = 0, total = 0;
    for (size_t i = 0; i < times.size(); ++i) wait += waited[i][r], total += times[i][r];
    if (!std::isfinite(wait) || !(total > 0)) return "";
    out += (out.empty() ? "" : ",") + significant(std::clamp(wait / total, 0.0, 1.0), 3);
  }
  return out;
}

}  // namespace

void StepRecorder::open(const std::string& path, const RecordHeader& header) {
  record_.emplace(path, header);
  config_ = {header.config.begin(), header.config.end()};
  params_ = header.params;
  moe_layers_ = header.moe_layers, moe_experts_ = header.moe_experts;
}

void StepRecorder::initial(ChecksumRow row) {
  checks_.push_back(std::move(row));
  if (record_) record_->append_checksum(checks_.back());
}

void StepRecorder::restore(std::vector<StepMetrics> metrics, std::vector<ChecksumRow> checksums,
                           std::vector<EvalRow> evals) {
  rows_ = std::move(metrics);
  checks_ = std::move(checksums);
  evals_ = std::move(evals);
  if (!record_) return;
  for (const auto& r : rows_)
    record_->append_step(r), record_->append_rank_times(std::vector<double>(size_t(world_), r.step_time_s));
  for (const auto& c : checks_) record_->append_checksum(c);
  for (const auto& e : evals_) record_->append_eval(e);
}

void StepRecorder::eval(const EvalRow& e, bool root) {
  evals_.push_back(e);
  if (record_) record_->append_eval(e);
  if (root && !quiet_)
    std::printf("eval at step %lld  loss %.6f  (%lld tokens, %.3f s)\n", (long long)e.step, e.loss, (long long)e.tokens,
                e.time_s);
}

int64_t StepRecorder::updates() const {
  int64_t n = 0;
  for (const auto& r : rows_) n += r.skipped ? 0 : 1;
  return n;
}

void StepRecorder::rank_times(std::vector<double> step_s, std::vector<double> compute_s, std::vector<double> waited_s,
                              std::vector<double> grad_norms) {
  rank_times_.push_back(std::move(step_s));
  compute_times_.push_back(std::move(compute_s));
  waited_.push_back(std::move(waited_s));
  rank_grad_norms_ = std::move(grad_norms);
}

void StepRecorder::step(StepMetrics s, std::optional<ChecksumRow> row, std::optional<TelemetryRow> telemetry,
                        Clock::time_point r0, bool root) {
  if (row) checks_.push_back(std::move(*row));
  if (record_ && r0 - last_flush_ > std::chrono::seconds(2)) {
    record_->flush();
    last_flush_ = Clock::now();
  }
  s.record_time_s = std::chrono::duration<double>(Clock::now() - r0).count();
  if (record_) {
    record_->append_step(s);
    record_->append_rank_times(rank_times_.back());
    if (!rank_grad_norms_.empty()) record_->append_rank_grad_norms(rank_grad_norms_);
    if (row) record_->append_checksum(checks_.back());
    if (telemetry) record_->append_telemetry(*telemetry);
  }
  if (telemetry && record_) telemetry_.push_back(std::move(*telemetry));
  rows_.push_back(s);
  if (root && !quiet_ && (s.step % log_every_ == 0 || s.step == 1 || s.step == steps_))
    std::printf("step %6lld  loss %.6f  lr %.3e  grad_norm %.4f  scale %g%s  tok/s %.0f\n", (long long)s.step, s.loss,
                s.lr, s.grad_norm, s.loss_scale, s.skipped ? " (skipped)" : "", s.tokens_per_s);
}

namespace {
void keep_first(std::vector<std::string>& kept, int64_t step, const std::string& where) {
  if (kept.size() < StepRecorder::kKeptOverflows) kept.push_back(std::to_string(step) + ": " + where);
}
}  // namespace

void StepRecorder::note_fp16_overflow(int64_t step, const std::string& where) {
  keep_first(fp16_overflows_, step, where);
}

void StepRecorder::note_nonfinite_skip(int64_t step, const std::string& what, const std::string& where) {
  keep_first(nonfinite_skips_, step, "non-finite " + what + " (" + where + ")");
  std::printf("step %lld: non-finite %s (%s); update skipped (train.on_nan: skip_step)\n", (long long)step,
              what.c_str(), where.c_str());
}

void StepRecorder::summarize(const RankMemory& mem, bool scaler, const std::string& diverged,
                             const std::vector<std::pair<std::string, std::string>>& spikes) {
  if (!record_) return;
  for (const auto& [k, v] : spikes) record_->set_summary(k, v);
  record_->set_memory(mem);
  std::string list;
  // Wall step times are equal on every rank (each waits for the slowest in the
  // collectives), so stragglers show only in the time before the first collective.
  const std::string medians = numbers(rank_medians(compute_times_, world_), 4);
  // Each rank against its peers in the same steps (judge_stragglers).
  const StragglerJudgement judged = judge_stragglers(compute_times_, straggler_ratio_);
  std::string named;  // "1 (node-b)": the rank and its host
  for (int r : judged.ranks) {
    list += (list.empty() ? "" : ",") + std::to_string(r);
    named += (named.empty() ? "" : ", ") + std::to_string(r) +
             (size_t(r) < hosts_.size() ? " (" + hosts_[size_t(r)] + ")" : std::string());
  }
  record_->set_summary("stragglers", list);
  record_->set_summary("rank_compute_median_s", medians);
  const std::string ratios = numbers(judged.ratio, 3);
  if (!ratios.empty()) record_->set_summary("rank_compute_ratio", ratios);
  const std::string shares = runqueue_shares(rank_times_, waited_, world_);
  if (!shares.empty()) record_->set_summary("rank_runqueue_share", shares);
  if (!list.empty() && !quiet_)
    std::printf("straggler rank(s): %s (median compute time per rank: %s s)\n", named.c_str(), medians.c_str());
  int64_t nan_skipped = 0;  // from the rows, so a resumed run counts the steps before it too
  // A step train.spike_policy skipped has a finite loss and gradient norm.
  for (const auto& r : rows_)
    nan_skipped += r.skipped && (!std::isfinite(r.loss) || (!scaler && !std::isfinite(r.grad_norm)));
  record_->set_summary("nonfinite_steps_skipped", std::to_string(nan_skipped));
  if (!nonfinite_skips_.empty()) record_->set_summary("nonfinite_skips", join(nonfinite_skips_, " | "));
  if (scaler) {  // the loss scaler's skips (finite loss, non-finite gradient), and where the first were
    int64_t overflows = 0;
    for (const auto& r : rows_) overflows += r.skipped && std::isfinite(r.loss) && !std::isfinite(r.grad_norm);
    record_->set_summary("loss_scale_skips", std::to_string(overflows));
    if (!fp16_overflows_.empty()) record_->set_summary("fp16_overflows", join(fp16_overflows_, " | "));
  }
  if (!evals_.empty()) {  // what held-out evaluation cost, apart from the steps' times
    double eval_s = 0, step_s = 0;
    for (const auto& e : evals_) eval_s += e.time_s;
    for (const auto& r : rows_) step_s += r.step_time_s;
    record_->set_summary("eval_time_s", significant(eval_s, 6));
    record_->set_summary("eval_time_fraction", significant(step_s > 0 ? eval_s / step_s : 0.0, 6));
  }
  // The flags readers show, judged once by the results library from what the record holds.
  Record r;
  r.config = config_;
  if (!diverged.empty()) r.status = "diverged", r.failure = diverged;  // the flags name where
  r.steps = rows_;
  r.evals = evals_;
  r.world_size = world_;
  r.params = params_;
  r.telemetry = telemetry_;
  r.moe_layers = moe_layers_, r.moe_experts = moe_experts_;
  r.environment["rank_hosts"] = join(hosts_, ",");
  r.summary = {{"stragglers", list}, {"rank_compute_median_s", medians}};
  if (!ratios.empty()) r.summary["rank_compute_ratio"] = ratios;
  if (!shares.empty()) r.summary["rank_runqueue_share"] = shares;
  if (!fp16_overflows_.empty()) r.summary["fp16_overflows"] = join(fp16_overflows_, " | ");
  if (!nonfinite_skips_.empty()) r.summary["nonfinite_skips"] = join(nonfinite_skips_, " | ");
  for (const auto& [k, v] : spikes) r.summary[k] = v;
  const std::vector<HealthFlag> flags = compute_health(r);
  for (const auto& [key, value] : health_attributes(flags)) record_->set_summary(key, value);
  if (quiet_) return;
  std::printf("%s\n", figures_text(run_figures(r)).c_str());
  std::printf("health: %s\n", flags.empty() ? "ok" : health_names(flags).c_str());
  for (const auto& f : flags) std::printf("  %s: %s\n", f.name.c_str(), f.detail.c_str());
}

void StepRecorder::finish(const std::string& status, const std::string& failure, bool crash_before_rename) {
  if (record_) record_->finish(status, failure, crash_before_rename);
}

void StepRecorder::abandon(const std::string& why) {
  if (record_) record_->abandon(why);
}

}  // namespace sweep
