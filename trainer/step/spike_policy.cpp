// train.spike_policy (spike_policy.h).
#include "spike_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "run_figures.h"  // g4
#include "run_health.h"   // spike_test, spike_window

namespace sweep {
namespace {

// "13-15" or "20": the steps a decision left out.
std::string skipped_range(const SpikeDecision& d) {
  const int64_t first = d.back_to + 1;
  return first == d.step ? std::to_string(d.step) : std::to_string(first) + "-" + std::to_string(d.step);
}

// At most this many sample indices are listed; the rest are counted.
constexpr size_t kListedSamples = 2048;

}  // namespace

void SpikePolicy::resume(const TrainState& st, int64_t updates) {
  decisions_ = st.decisions;
  kept_ = st.kept;
  if (rewinds() && !keeps_states()) keep_point(st, updates);
}

void SpikePolicy::keep_step(KeptState k) {
  const int64_t oldest = k.step - ring_steps_;
  kept_.push_back(std::move(k));
  kept_.erase(kept_.begin(),
              std::find_if(kept_.begin(), kept_.end(), [&](const KeptState& s) { return s.step >= oldest; }));
}

int64_t SpikePolicy::data_batch(int64_t step) const {
  int64_t b = step - 1;
  for (const auto& d : decisions_)
    if (d.step < step) b += d.skip;
  return b;
}

std::vector<StepMetrics> SpikePolicy::kept_rows(const std::vector<StepMetrics>& history) const {
  std::vector<StepMetrics> out;
  for (const auto& r : history) {
    bool left_out = r.skipped != 0 || !std::isfinite(r.loss);
    for (const auto& d : decisions_) left_out = left_out || (r.step > d.back_to && r.step <= d.step);
    if (!left_out) out.push_back(r);
  }
  return out;
}

bool SpikePolicy::spiked(double loss, const std::vector<StepMetrics>& rows, const std::vector<StepMetrics>& history,
                         double* median) const {
  if (factor_ <= 0) {  // the loss_spike flag's rule, over the rows as recorded
    const SpikeTest t = spike_test(spike_window(history, &StepMetrics::loss), loss);
    *median = t.median;
    return t.spike;
  }
  if (int64_t(rows.size()) < window_) return false;
  std::vector<double> w;
  for (size_t i = rows.size() - size_t(window_); i < rows.size(); ++i) w.push_back(rows[i].loss);
  std::sort(w.begin(), w.end());
  const size_t n = w.size();
  *median = n % 2 ? w[n / 2] : (w[n / 2 - 1] + w[n / 2]) / 2;
  return loss > factor_ * *median;
}

void SpikePolicy::take_kept(const std::vector<StepMetrics>& rows, int64_t step, double loss, int64_t updates,
                            SpikeDecision& d) {
  // The climb that ended in the spike: the losses kept, each above the one before. Its
  // foot, the lowest of them, was the loss of the weights after the step before it; every
  // later state took an update that led up the climb.
  std::vector<std::pair<int64_t, double>> seq;
  seq.reserve(rows.size() + 1);
  for (const auto& r : rows) seq.emplace_back(r.step, r.loss);
  seq.emplace_back(step, loss);
  size_t foot = seq.size() - 1;
  while (foot > 0 && seq[foot].second > seq[foot - 1].second) --foot;
  d.rise = foot + 1 < seq.size() ? seq[foot + 1].first : step;
  const int64_t want = seq[foot].first - 1;
  // The newest state from before the climb; the oldest kept when the climb began earlier
  // than train.spike_rewind_steps reach.
  auto at = std::find_if(kept_.rbegin(), kept_.rend(), [&](const KeptState& k) { return k.step <= want; });
  const KeptState& k = at == kept_.rend() ? kept_.front() : *at;
  point_.step = k.step;
  point_.params = k.params, point_.m = k.m, point_.v = k.v;
  point_.loss_scale = k.loss_scale, point_.clean_steps = k.clean_steps;
  point_.rng = k.rng;
  point_updates_ = k.updates;
  d.back_to = k.step, d.undone = updates - k.updates;
  // The states after it took the climb's updates: none is a state to go back to again.
  const int64_t back_to = k.step;
  kept_.erase(std::find_if(kept_.begin(), kept_.end(), [&](const KeptState& s) { return s.step > back_to; }),
              kept_.end());
}

void SpikePolicy::keep_point(const TrainState& st, int64_t updates) {
  point_.step = st.step;
  point_.params = st.params, point_.m = st.m, point_.v = st.v;
  point_.loss_scale = st.loss_scale, point_.clean_steps = st.clean_steps;
  point_.rng = st.rng;
  point_updates_ = updates;
}

int64_t SpikePolicy::undone_total(const std::vector<SpikeDecision>& ds) {
  int64_t n = 0;
  for (const auto& d : ds) n += d.undone;
  return n;
}

std::optional<SpikeDecision> SpikePolicy::decide(int64_t step, double loss, const std::vector<StepMetrics>& history,
                                                 int64_t updates, bool root) {
  if (policy_ == "none") return std::nullopt;
  const std::vector<StepMetrics> rows = factor_ > 0 || keeps_states() ? kept_rows(history) : history;
  double median = 0;
  if (!spiked(loss, rows, history, &median)) return std::nullopt;
  if (int64_t(decisions_.size()) >= limit_) {
    if (root && !told_limit_)
      std::printf(
          "step %lld: the loss spiked (%s against a median of %s); train.spike_limit (%lld decisions) is "
          "reached, so it is only flagged\n",
          (long long)step, g4(loss).c_str(), g4(median).c_str(), (long long)limit_);
    told_limit_ = true;
    return std::nullopt;
  }
  SpikeDecision d;
  d.step = step, d.action = policy_, d.loss = loss, d.median = median;
  d.back_to = step - 1, d.skip = skip_;
  if (keeps_states() && !kept_.empty())
    take_kept(rows, step, loss, updates, d);
  else if (rewinds())
    d.back_to = point_.step, d.undone = updates - point_updates_;
  decisions_.push_back(d);
  if (root) std::printf("%s (train.spike_policy: %s)\n", describe(d).c_str(), policy_.c_str());
  return d;
}

std::string SpikePolicy::describe(const SpikeDecision& d) {
  std::string s = "step " + std::to_string(d.step) + ": the loss spiked to " + g4(d.loss) + " against a median of " +
                  g4(d.median) + "; ";
  if (d.action == "rewind" && d.rise > 0)
    s += "rewound to the state after step " + std::to_string(d.back_to) + ", before the rise from step " +
         std::to_string(d.rise) + ", skipping the global batches of steps " + skipped_range(d) + " (" +
         std::to_string(d.undone) + " updates undone)";
  else if (d.action == "rewind")
    s += "rewound to the checkpoint after step " + std::to_string(d.back_to) +
         ", skipping the global batches of steps " + skipped_range(d) + " (" + std::to_string(d.undone) +
         " updates undone)";
  else
    s += "its update skipped";
  if (d.skip > 0) s += "; the next " + std::to_string(d.skip) + " global batches of data skipped";
  return s;
}

std::vector<std::pair<std::string, std::string>> SpikePolicy::summary(
    const std::function<std::vector<int64_t>(int64_t)>& samples) const {
  std::vector<std::pair<std::string, std::string>> out;
  if (decisions_.empty()) return out;
  out.emplace_back("spike_decisions", std::to_string(decisions_.size()));
  std::string steps, listed;
  size_t count = 0;
  for (size_t k = 0; k < decisions_.size(); ++k) {
    const SpikeDecision& d = decisions_[k];
    out.emplace_back("spike_decision." + std::to_string(k + 1), describe(d));
    steps += (steps.empty() ? "" : " ") + skipped_range(d);
    for (int64_t s = d.back_to + 1; s <= d.step; ++s) {
      const std::vector<int64_t> batch = samples(data_batch(s));
      if (count < kListedSamples) {
        listed += (listed.empty() ? "" : "; ") + std::to_string(s) + ":";
        for (size_t i = 0; i < batch.size() && count + i < kListedSamples; ++i)
          listed += " " + std::to_string(batch[i]);
      }
      count += batch.size();
    }
  }
  if (count > kListedSamples) listed += "; ... (" + std::to_string(count) + " samples in all)";
  out.emplace_back("spike_skipped_steps", steps);
  out.emplace_back("spike_skipped_samples", listed);
  return out;
}

}  // namespace sweep
