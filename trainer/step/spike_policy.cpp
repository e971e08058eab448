// train.spike_policy (spike_policy.h).
#include "spike_policy.h"

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
  if (rewinds()) keep_point(st, updates);
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
  const SpikeTest t = spike_test(spike_window(history, &StepMetrics::loss), loss);
  if (!t.spike) return std::nullopt;
  if (int64_t(decisions_.size()) >= limit_) {
    if (root && !told_limit_)
      std::printf(
          "step %lld: the loss spiked (%s against a median of %s); train.spike_limit (%lld decisions) is "
          "reached, so it is only flagged\n",
          (long long)step, g4(loss).c_str(), g4(t.median).c_str(), (long long)limit_);
    told_limit_ = true;
    return std::nullopt;
  }
  SpikeDecision d;
  d.step = step, d.action = policy_, d.loss = loss, d.median = t.median;
  d.back_to = step - 1;
  if (rewinds()) d.back_to = point_.step, d.undone = updates - point_updates_;
  decisions_.push_back(d);
  if (root) std::printf("%s (train.spike_policy: %s)\n", describe(d).c_str(), policy_.c_str());
  return d;
}

std::string SpikePolicy::describe(const SpikeDecision& d) {
  std::string s = "step " + std::to_string(d.step) + ": the loss spiked to " + g4(d.loss) + " against a median of " +
                  g4(d.median) + "; ";
  if (d.action == "rewind")
    return s + "rewound to the checkpoint after step " + std::to_string(d.back_to) +
           ", skipping the global batches of steps " + skipped_range(d) + " (" + std::to_string(d.undone) +
           " updates undone)";
  return s + "its update skipped";
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
      const std::vector<int64_t> batch = samples(s);
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
