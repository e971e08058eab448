// Health flags of a run from its record, and the sweep-level throughput outlier.
#include "run_health.h"

#include <algorithm>  // sort, min
#include <cmath>      // isfinite, fabs
#include <cstdint>
#include <cstdio>   // snprintf
#include <cstdlib>  // strtod
#include <map>
#include <tuple>

#include "parallel_for.h"  // each run judged on its own
#include "run_figures.h"   // has_objective
#include "run_status.h"    // status_is
#include "text.h"          // split

namespace sweep {
namespace {

std::string percent(size_t part, size_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", whole ? 100.0 * double(part) / double(whole) : 0.0);
  return buf;
}

std::string config_value(const Record& r, const char* key) {
  auto it = r.config.find(key);
  return it == r.config.end() ? std::string() : it->second;
}

std::string summary_value(const Record& r, const std::string& key) {
  auto it = r.summary.find(key);
  return it == r.summary.end() ? std::string() : it->second;
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

void skipped_steps(const Record& r, std::vector<HealthFlag>& out) {
  const size_t n = r.steps.size();
  size_t skipped = 0;
  for (const auto& s : r.steps) skipped += s.skipped ? 1 : 0;
  if (n < kHealthMinSteps || double(skipped) < kSkippedShare * double(n)) return;
  std::string d = std::to_string(skipped) + " of " + std::to_string(n) + " steps (" + percent(skipped, n) +
                  ") skipped their update";
  if (config_value(r, "train.precision") == "fp16")
    d += " (fp16 loss scale " + g4(r.steps.back().loss_scale) + " at the last step)";
  out.push_back({kFlagSkippedSteps, d + "."});
}

// Where the trainer saw step `step` go non-finite, from a summary list of "STEP: where"
// items separated by " | " (fp16_overflows, nonfinite_skips); "" when it is not there.
std::string located(const Record& r, const std::string& key, int64_t step) {
  const std::string at = std::to_string(step) + ": ";
  for (std::string item : split(summary_value(r, key), '|')) {
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.rfind(at, 0) == 0) return item.substr(at.size());
  }
  return "";
}

void fp16_overflow(const Record& r, std::vector<HealthFlag>& out) {
  // A loss scaler ran: fp16, or a program's rows with a scale other than 1 (a GradScaler).
  const bool scaled =
      config_value(r, "train.precision") == "fp16" ||
      std::any_of(r.steps.begin(), r.steps.end(), [](const StepMetrics& s) { return s.loss_scale != 1; });
  if (!scaled) return;
  size_t overflows = 0, calibrating = 0, run = 0, longest = 0;
  const StepMetrics* first = nullptr;
  double backed_off_to = NAN;
  bool applied = false;  // an update was taken: the scale no longer calibrates
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const StepMetrics& s = r.steps[i];
    const bool scaler_skip = s.skipped && std::isfinite(s.loss) && !std::isfinite(s.grad_norm);
    if (!scaler_skip) {
      applied = applied || !s.skipped;
      run = 0;
      continue;
    }
    if (!applied) {
      ++calibrating;
      continue;
    }
    longest = std::max(longest, ++run);
    if (overflows++ == 0) {
      first = &s;
      if (i + 1 < r.steps.size()) backed_off_to = r.steps[i + 1].loss_scale;
    }
  }
  if (!first || (longest < 2 && double(overflows) <= kOverflowShare * double(r.steps.size()))) return;
  std::string d = std::to_string(overflows) + " of " + std::to_string(r.steps.size()) + " steps (" +
                  percent(overflows, r.steps.size()) + ") skipped by the fp16 loss scaler after it calibrated" +
                  (longest >= 2 ? ", " + std::to_string(longest) + " in a row" : std::string()) +
                  ", the first at step " + std::to_string(first->step) + " (scale " + g4(first->loss_scale) +
                  (std::isnan(backed_off_to) ? "" : " -> " + g4(backed_off_to)) + ")";
  const std::string where = located(r, "fp16_overflows", first->step);
  if (!where.empty()) d += ": " + where;
  if (calibrating) d += "; " + std::to_string(calibrating) + " more while it calibrated";
  out.push_back({kFlagFp16Overflow, d + "."});
}

void nonfinite_loss(const Record& r, std::vector<HealthFlag>& out) {
  size_t bad = 0;
  int64_t first = -1;
  for (const auto& s : r.steps)
    if (!std::isfinite(s.loss)) {
      if (bad++ == 0) first = s.step;
    }
  // A held-out loss too: the final one is the objective a sweep ranks by.
  size_t bad_evals = 0;
  int64_t first_eval = -1;
  for (const auto& e : r.evals)
    if (!std::isfinite(e.loss)) {
      if (bad_evals++ == 0) first_eval = e.step;
    }
  if (bad == 0 && bad_evals == 0) return;
  std::string d;
  if (bad) {
    d = std::to_string(bad) + " of " + std::to_string(r.steps.size()) +
        " steps had a non-finite loss, the first at step " + std::to_string(first);
    const std::string where = located(r, "nonfinite_skips", first);  // train.on_nan: skip_step's
    if (!where.empty())
      d += ": " + where;
    else if (status_is(r.status, RunStatus::diverged) && !r.failure.empty())  // train.on_nan: stop's, where it says
      d += " (" + r.failure + ")";
  }
  if (bad_evals)
    d += (d.empty() ? "" : "; ") + std::to_string(bad_evals) + " of " + std::to_string(r.evals.size()) +
         " evaluations had a non-finite held-out loss, the first at step " + std::to_string(first_eval);
  out.push_back({kFlagNonfiniteLoss, d + "."});
}

// A finite loss whose gradient was not (the reduced gradient's norm is infinite, or NaN
// on a step whose update was skipped): a fault the loss alone hides. fp16's overflows are
// its loss scaler's business (skipped_steps).
// Each /telemetry row's first tensor whose gradient norm is not finite, by step (rows
// with none left out; read once, not once per step): a program that logs no grad_norm (a
// PyTorch script's run.gradients()) is caught by its telemetry row alone.
std::map<int64_t, const std::string*> nonfinite_tensors(const Record& r) {
  std::map<int64_t, const std::string*> out;
  for (const auto& t : r.telemetry) {
    if (t.tensor_grad_norm.size() != r.params.size()) continue;
    for (size_t i = 0; i < r.params.size(); ++i)
      if (!std::isfinite(t.tensor_grad_norm[i])) {
        out.emplace(t.step, &r.params[i].name);
        break;
      }
  }
  return out;
}

void nonfinite_gradient(const Record& r, std::vector<HealthFlag>& out) {
  if (config_value(r, "train.precision") == "fp16") return;
  size_t bad = 0;
  int64_t first = -1;
  const std::string* tensor = nullptr;  // the first step's first non-finite tensor, from /telemetry
  const auto bad_rows = nonfinite_tensors(r);
  for (const auto& s : r.steps) {
    if (!std::isfinite(s.loss)) continue;
    const auto it = bad_rows.find(s.step);
    const std::string* t = it == bad_rows.end() ? nullptr : it->second;
    if (std::isinf(s.grad_norm) || (std::isnan(s.grad_norm) && s.skipped) || t != nullptr) {
      if (bad++ == 0) first = s.step, tensor = t;
    }
  }
  if (bad == 0) return;
  std::string d = std::to_string(bad) + " of " + std::to_string(r.steps.size()) +
                  " steps had a finite loss but a non-finite gradient, the first at step " + std::to_string(first);
  const std::string where = located(r, "nonfinite_skips", first);  // train.on_nan: skip_step's
  if (!where.empty())
    d += ": " + where;
  else if (tensor != nullptr && r.failure.find(*tensor) == std::string::npos)
    d += ", first in tensor " + *tensor + " (its /telemetry row)";
  if (!r.failure.empty()) d += " (" + r.failure + ")";
  out.push_back({kFlagNonfiniteGradient, d + "."});
}

void loss_rose(const Record& r, std::vector<HealthFlag>& out) {
  // Over the kept rows (what a spike decision left out is not the run's trend), and only
  // over kHealthMinSteps or more: two steps' losses are one batch each, noise.
  const std::vector<size_t> kept = kept_rows(r);
  const size_t n = kept.size(), k = std::min(kLossWindow, n / 2);
  if (n < kHealthMinSteps || k == 0) return;
  // The start is the lower of the first finite loss (the untrained model's) and the mean
  // of the first k: a run that blew up within its first steps (lr 10: from 4.1 to ~2900
  // by step 5) and came partway down under its schedule has a first-k mean far above
  // where it began.
  size_t first = 0;
  while (first < n && !std::isfinite(r.steps[kept[first]].loss)) ++first;
  if (first == n) return;
  const double initial = r.steps[kept[first]].loss, head = mean_finite_loss(r, kept, 0, k),
               end = mean_finite_loss(r, kept, n - k, n);
  if (!std::isfinite(end) || !(end > std::min(initial, head))) return;
  const size_t left_out = r.steps.size() - n;
  out.push_back({kFlagLossRose, "the training loss ended above its start: mean " + g4(end) + " over the last " +
                                    std::to_string(k) + " steps, against " + g4(initial) + " at step " +
                                    std::to_string(r.steps[kept[first]].step) + " and a mean of " + g4(head) +
                                    " over the first " + std::to_string(k) +
                                    (left_out ? " (" + std::to_string(left_out) +
                                                    " steps the spike policy left out "
                                                    "are not counted)"
                                              : std::string()) +
                                    "."});
}

}  // namespace

double lower_median(std::vector<double> v, double empty) {
  if (v.empty()) return empty;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

namespace {

// The median of v[0, n) by selection (reorders v): the same value median() gives by
// sorting a copy, without the copy or the sort.
double selected_median(double* v, size_t n) {
  const size_t h = n / 2;
  std::nth_element(v, v + h, v + n);
  return n % 2 ? v[h] : 0.5 * (*std::max_element(v, v + h) + v[h]);
}

}  // namespace

SpikeTest spike_test(const std::vector<double>& before, double value) {
  SpikeTest t;
  if (!std::isfinite(value)) return t;
  // (Fixed arrays and a selection instead of a sorted copy: a report judges every step of
  // every run with this. The median is the same value either way.)
  double window[kSpikeWindow], dev[kSpikeWindow];
  size_t n = 0;
  for (size_t i = before.size() > kSpikeWindow ? before.size() - kSpikeWindow : 0; i < before.size(); ++i)
    if (std::isfinite(before[i])) window[n++] = before[i];
  if (n < kSpikeMinHistory) return t;
  for (size_t i = 0; i < n; ++i) dev[i] = window[i];
  t.median = selected_median(dev, n);
  for (size_t i = 0; i < n; ++i) dev[i] = std::fabs(window[i] - t.median);
  const double sigma = 1.4826 * selected_median(dev, n);
  t.rise = value - t.median;
  t.sigmas = sigma > 0 ? t.rise / sigma : INFINITY;
  t.spike = t.rise > kSpikeSigmas * sigma && t.rise > kSpikeRise * std::fabs(t.median);
  return t;
}

std::vector<double> spike_window(const std::vector<StepMetrics>& rows, double StepMetrics::*field) {
  std::vector<double> v;
  for (size_t i = rows.size(); i-- > 0 && v.size() < kSpikeWindow;)
    if (std::isfinite(rows[i].*field)) v.push_back(rows[i].*field);
  return v;
}

std::vector<std::string> spike_decisions(const Record& r) {
  std::vector<std::string> out;
  const auto n = r.summary.find("spike_decisions");
  if (n == r.summary.end()) return out;
  for (int64_t k = 1;; ++k) {
    const auto d = r.summary.find("spike_decision." + std::to_string(k));
    if (d == r.summary.end()) break;
    out.push_back(d->second);
  }
  return out;
}

std::vector<SpikeMark> spike_marks(const Record& r) {
  std::vector<SpikeMark> out;
  const std::vector<std::string> decisions = spike_decisions(r);
  out.reserve(decisions.size());
  const std::vector<std::pair<int64_t, int64_t>> ranges = skipped_step_ranges(r);
  for (const std::string& d : decisions) {
    long long step = 0;
    int used = 0;
    if (std::sscanf(d.c_str(), "step %lld:%n", &step, &used) != 1 || used == 0) continue;
    SpikeMark m{step, step, d};
    // The range that ends at the decision's step: what it left out.
    for (const auto& [a, b] : ranges)
      if (b == step && a <= b) m.left_out_from = a;
    out.push_back(std::move(m));
  }
  return out;
}

std::string spike_leading_tensors(const Record& r, int64_t step, size_t most) {
  const auto at =
      std::find_if(r.telemetry.begin(), r.telemetry.end(), [step](const TelemetryRow& t) { return t.step == step; });
  if (at == r.telemetry.end() || at->tensor_grad_norm.size() != r.params.size() || r.params.empty()) return "";
  // Each tensor's norm over its median in the rows before (the last kSpikeWindow); with no
  // row before, the largest norms themselves.
  const auto from = at - std::min<std::ptrdiff_t>(at - r.telemetry.begin(), std::ptrdiff_t(kSpikeWindow));
  std::vector<std::pair<double, size_t>> score;  // (ratio or norm, tensor)
  for (size_t i = 0; i < r.params.size(); ++i) {
    const double now = at->tensor_grad_norm[i];
    std::vector<double> before;
    for (auto it = from; it != at; ++it)
      if (std::isfinite(it->tensor_grad_norm[i])) before.push_back(it->tensor_grad_norm[i]);
    const double m = before.empty() ? 0 : median(before);
    score.emplace_back(!std::isfinite(now) ? INFINITY
                       : before.empty()    ? now
                       : m > 0             ? now / m
                       : now > 0           ? INFINITY
                                           : 0,
                       i);
  }
  std::stable_sort(score.begin(), score.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const bool ratios = from != at;
  std::string out = ratios
                        ? "against their median over the " + std::to_string(at - from) + " telemetry rows before it: "
                        : "with no telemetry row before it, the largest: ";
  for (size_t k = 0; k < score.size() && k < most; ++k) {
    const auto [v, i] = score[k];
    const std::string what = !std::isfinite(at->tensor_grad_norm[i]) ? "non-finite"
                             : !ratios                               ? "norm " + g4(v)
                             : std::isfinite(v)                      ? g4(v) + "x"
                                                                     : "from 0";
    out += (k ? ", " : "") + r.params[i].name + " (" + what + ")";
  }
  return out;
}

namespace {

// Steps whose loss jumped above the running median of the losses before them (kSpikeWindow,
// kSpikeSigmas, kSpikeRise): the first, with its size, then how many and the largest.
void loss_spike(const Record& r, std::vector<HealthFlag>& out) {
  struct Spike {
    int64_t step = -1;
    double loss = 0, median = 0, rise = 0, sigmas = 0;  // rise: over |median|
  };
  std::vector<double> window;  // the finite losses before this step, at most kSpikeWindow
  size_t spikes = 0;
  Spike first, worst;
  size_t first_history = 0;  // finite losses before the first spike, at most kSpikeWindow
  // A spike rises more than kSpikeRise x |median| above the median: a step below that is
  // none, decided by one selection instead of spike_test's two (a report judges every step
  // of every run). Exactly spike_test's verdict: its median is the same value.
  const auto may_spike = [&window](double loss) {
    double v[kSpikeWindow];
    const size_t n = std::min(window.size(), kSpikeWindow);
    if (n < kSpikeMinHistory) return false;
    std::copy(window.end() - std::ptrdiff_t(n), window.end(), v);
    const double median = selected_median(v, n);
    return loss - median > kSpikeRise * std::fabs(median);
  };
  for (const auto& s : r.steps) {
    if (!std::isfinite(s.loss)) continue;
    if (!may_spike(s.loss)) {
      window.push_back(s.loss);
      if (window.size() > kSpikeWindow) window.erase(window.begin());
      continue;
    }
    if (const SpikeTest t = spike_test(window, s.loss); t.spike) {
      const Spike here{s.step, s.loss, t.median, t.rise / std::fabs(t.median), t.sigmas};
      if (spikes++ == 0) first = here, first_history = window.size();
      if (here.rise > worst.rise) worst = here;
    }
    window.push_back(s.loss);
    if (window.size() > kSpikeWindow) window.erase(window.begin());
  }
  if (spikes == 0) return;
  auto percent_rise = [](double rise) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "+%.0f%%", 100.0 * rise);
    return std::string(buf);
  };
  std::string d = "the loss spiked at step " + std::to_string(first.step) + ": " + g4(first.loss) +
                  " against a median of " + g4(first.median) + " over the " + std::to_string(first_history) +
                  " finite losses before it (" + percent_rise(first.rise) + ", " +
                  (std::isfinite(first.sigmas) ? g4(first.sigmas) : std::string("infinitely many")) +
                  " robust standard deviations)";
  if (const std::string lead = spike_leading_tensors(r, first.step); !lead.empty())
    d += "; the gradient norms that rose most at that step, " + lead;
  if (spikes > 1)
    d += "; " + std::to_string(spikes) +
         " steps in all were that far above their running median, the largest at step " + std::to_string(worst.step) +
         " (" + g4(worst.loss) + ", " + percent_rise(worst.rise) + ")";
  out.push_back({kFlagLossSpike, d + "."});
}

void clipping(const Record& r, std::vector<HealthFlag>& out) {
  const std::string norm = config_value(r, "train.clip_norm");
  // Without the key (another writer's record) the rows alone say whether clipping ran.
  if (!norm.empty() && !(std::strtod(norm.c_str(), nullptr) > 0)) return;
  size_t applied = 0, clipped = 0;
  for (const auto& s : r.steps) {
    if (s.skipped) continue;
    ++applied;
    clipped += s.clip_coef < 1 ? 1 : 0;
  }
  if (applied < kHealthMinSteps || double(clipped) < kClippedShare * double(applied)) return;
  out.push_back({kFlagClipping, std::to_string(clipped) + " of " + std::to_string(applied) + " applied steps (" +
                                    percent(clipped, applied) + ") were clipped" +
                                    (norm.empty() ? std::string() : " (train.clip_norm " + norm + ")") +
                                    ": the gradient norm nearly always exceeds the clip."});
}

// Mean of the finite training losses of the kLossWindow kept rows (kept_rows) up to and
// including `step`.
double train_loss_at(const Record& r, const std::vector<size_t>& kept, int64_t step) {
  size_t pos = 0;
  while (pos < kept.size() && r.steps[kept[pos]].step <= step) ++pos;
  return mean_finite_loss(r, kept, pos - std::min(pos, kLossWindow), pos);
}

void eval_rising(const Record& r, std::vector<HealthFlag>& out) {
  if (r.evals.size() < kEvalRisingMinEvals || r.steps.empty()) return;
  const RunFigures f = run_figures(r);
  if (f.best_eval_step < 0 || !std::isfinite(f.final_eval_loss)) return;
  if (!(f.final_eval_loss > f.best_eval_loss + kEvalRisingMargin * std::fabs(f.best_eval_loss))) return;
  const std::vector<size_t> kept = kept_rows(r);
  const double at_best = train_loss_at(r, kept, f.best_eval_step), at_end = train_loss_at(r, kept, r.steps.back().step);
  if (!(at_end < at_best)) return;
  out.push_back({kFlagEvalRising, "the held-out loss rose from " + g4(f.best_eval_loss) + " at step " +
                                      std::to_string(f.best_eval_step) + " to " + g4(f.final_eval_loss) + " at step " +
                                      std::to_string(r.evals.back().step) + " while the training loss fell from " +
                                      g4(at_best) + " to " + g4(at_end) + " (means of up to " +
                                      std::to_string(kLossWindow) + " steps): overfitting."});
}

/// "1" -> "1 (node-b)" for each rank of a comma list, when the record names each rank's
/// host (environment rank_hosts, comma-separated in rank order).
std::string ranks_with_hosts(const Record& r, const std::string& ranks) {
  const std::vector<std::string> hosts = split(r.env("rank_hosts"), ',');
  std::string out;
  for (const std::string& rank : split(ranks, ',')) {
    out += (out.empty() ? "" : ",") + rank;
    char* end = nullptr;
    const long i = std::strtol(rank.c_str(), &end, 10);
    if (end != rank.c_str() && *end == '\0' && i >= 0 && size_t(i) < hosts.size()) out += " (" + hosts[size_t(i)] + ")";
  }
  return out;
}

/// "45%" of a share.
std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * share);
  return buf;
}

void straggler(const Record& r, std::vector<HealthFlag>& out) {
  const std::string ranks = summary_value(r, "stragglers");
  if (ranks.empty()) return;
  const std::string medians = summary_value(r, "rank_compute_median_s");
  // "1.45x": how much longer than its peers each straggler computed, median over the steps.
  std::string ratios;
  const std::vector<double> ratio = summary_numbers(r, "rank_compute_ratio");
  for (const std::string& rank : split(ranks, ',')) {
    const long i = std::strtol(rank.c_str(), nullptr, 10);
    if (i < 0 || size_t(i) >= ratio.size()) continue;
    char buf[48];
    std::snprintf(buf, sizeof buf, "%s%.3gx", ratios.empty() ? "" : ", ", ratio[size_t(i)]);
    ratios += buf;
  }
  // A straggler that waited for a CPU far more than its peers was slowed by what shared
  // its cores, not by its share of the work: said, so the fault is looked for on the host.
  std::string why;
  const std::vector<double> shares = summary_numbers(r, "rank_runqueue_share");
  if (!shares.empty()) {
    const double typical = lower_median(shares);  // as for the times
    for (const std::string& rank : split(ranks, ',')) {
      const long i = std::strtol(rank.c_str(), nullptr, 10);
      if (i >= 0 && size_t(i) < shares.size() && shares[size_t(i)] >= typical + kContendedShare)
        why += std::string(why.empty() ? "; " : ", ") + "rank " + rank + " waited for a CPU " +
               percent(shares[size_t(i)]) + " of its step time against " + percent(typical) + " typical";
    }
    if (!why.empty()) why += ": other processes shared its cores";
  }
  out.push_back({kFlagStraggler,
                 std::string(ranks.find(',') == std::string::npos ? "rank " : "ranks ") + ranks_with_hosts(r, ranks) +
                     " computed more slowly than " +
                     (ratios.empty() ? "the typical rank"
                                     : std::string(ranks.find(',') == std::string::npos ? "its" : "their") +
                                           " peers in the same steps (" + ratios + ")") +
                     (medians.empty() ? std::string() : " (median compute s per rank: " + medians + ")") + why + "."});
}

}  // namespace

StragglerJudgement judge_stragglers(const std::vector<std::vector<double>>& compute, double ratio) {
  StragglerJudgement out;
  const size_t world = compute.empty() ? 0 : compute.front().size();
  if (world < 2) return out;
  std::vector<std::vector<double>> ratios(world), excess(world);
  for (const auto& row : compute) {
    if (row.size() != world ||
        !std::all_of(row.begin(), row.end(), [](double t) { return std::isfinite(t) && t >= 0; }))
      continue;
    const double typical = lower_median(row);
    if (!(typical > 0)) continue;
    for (size_t r = 0; r < world; ++r) ratios[r].push_back(row[r] / typical), excess[r].push_back(row[r] - typical);
  }
  if (ratios[0].empty()) return out;
  for (size_t r = 0; r < world; ++r) {
    out.ratio.push_back(lower_median(ratios[r]));
    if (out.ratio.back() > ratio && lower_median(excess[r]) > kStragglerMinS) out.ranks.push_back(int(r));
  }
  return out;
}

std::vector<int> straggler_ranks(const Record& r) {
  std::vector<int> out;
  for (const std::string& rank : split(summary_value(r, "stragglers"), ',')) {
    char* end = nullptr;
    const long i = std::strtol(rank.c_str(), &end, 10);
    if (end != rank.c_str() && *end == '\0' && i >= 0 && i <= INT32_MAX) out.push_back(int(i));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<double> summary_numbers(const Record& r, const std::string& key) {
  std::vector<double> out;
  for (const std::string& v : split(summary_value(r, key), ',')) {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0' || !std::isfinite(x)) return {};
    out.push_back(x);
  }
  return out;
}

double runqueue_share(const Record& r) {
  const std::vector<double> shares = summary_numbers(r, "rank_runqueue_share");
  return shares.empty() ? NAN : *std::max_element(shares.begin(), shares.end());
}

std::vector<HealthFlag> compute_health(const Record& r) {
  std::vector<HealthFlag> out;
  skipped_steps(r, out);
  nonfinite_loss(r, out);
  nonfinite_gradient(r, out);
  fp16_overflow(r, out);
  loss_rose(r, out);
  loss_spike(r, out);
  clipping(r, out);
  eval_rising(r, out);
  straggler(r, out);
  return out;
}

bool health_stored(const Record& r) { return r.summary.count("health") != 0; }

std::vector<HealthFlag> run_health(const Record& r) {
  if (!health_stored(r)) return compute_health(r);
  std::vector<HealthFlag> out;
  const std::string names = summary_value(r, "health");
  for (size_t at = 0; at < names.size();) {
    const size_t end = std::min(names.find(' ', at), names.size());
    if (end > at) {
      const std::string name = names.substr(at, end - at);
      out.push_back({name, summary_value(r, "health." + name)});
    }
    at = end + 1;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> health_attributes(const std::vector<HealthFlag>& flags) {
  std::vector<std::pair<std::string, std::string>> out = {{"health", health_names(flags)}};
  for (const auto& f : flags) out.emplace_back("health." + f.name, f.detail);
  return out;
}

std::string health_names(const std::vector<HealthFlag>& flags) {
  std::string s;
  for (const auto& f : flags) s += (s.empty() ? "" : " ") + f.name;
  return s;
}

ThroughputPeer throughput_peer(const Record& r, const RunFigures& f) {
  ThroughputPeer p;
  // A run without steps, or whose figures are partial (diverged, failed: no objective), is
  // left out (tokens_per_s_median NaN): its few steps are no measure of its speed.
  if (r.steps.empty() || !has_objective(r.status)) return p;
  int64_t params = 0;
  for (const auto& t : r.params) params += t.numel;
  p.group = std::to_string(params) + " parameters, " + std::to_string(r.steps.front().tokens) +
            " tokens per step, world size " + std::to_string(r.world_size);
  // The keys that change the speed by design (a program's record may hold none of them).
  for (const char* key : {"train.accum", "train.micro_batch", "train.leaf", "dist.zero_stage", "train.precision",
                          "train.deterministic", "dist.reduction", "train.threads"})
    if (const std::string v = config_value(r, key); !v.empty()) p.group += ", " + std::string(key) + " " + v;
  for (const char* key : {"device", "blas.kernel", "aten.isa"})
    if (const std::string v = r.env(key); !v.empty()) p.group += ", " + std::string(key) + " " + v;
  p.tokens_per_s_median = f.tokens_per_s_median;
  p.shared_cores = runqueue_share(r) >= kContendedShare;
  return p;
}

std::vector<std::vector<HealthFlag>> throughput_outliers(const std::vector<Record>& runs,
                                                         const std::vector<RunFigures>& figs) {
  std::vector<ThroughputPeer> peers;
  peers.reserve(runs.size());
  for (size_t i = 0; i < runs.size(); ++i)
    peers.push_back(i < figs.size() ? throughput_peer(runs[i], figs[i]) : ThroughputPeer{});
  return throughput_outliers(peers);
}

std::vector<std::vector<HealthFlag>> throughput_outliers(const std::vector<ThroughputPeer>& runs) {
  std::vector<std::vector<HealthFlag>> out(runs.size());
  // Runs compare only with runs that should run as fast, measured on cores of their own.
  std::map<std::string, std::vector<size_t>> peers;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!std::isfinite(runs[i].tokens_per_s_median) || runs[i].shared_cores) continue;
    peers[runs[i].group].push_back(i);
  }
  for (const auto& [group, members] : peers) {
    if (members.size() < kThroughputMinRuns) continue;
    std::vector<double> rates;
    for (size_t i : members) rates.push_back(runs[i].tokens_per_s_median);
    const double typical = median(rates);
    for (size_t i : members)
      if (runs[i].tokens_per_s_median < kThroughputShare * typical)
        out[i].push_back({kFlagThroughputOutlier,
                          "median " + g4(runs[i].tokens_per_s_median) + " tokens/s, below half the median " +
                              g4(typical) + " of the " + std::to_string(members.size()) +
                              " runs of this sweep that should run as fast, on cores of their own (" + group + ")."});
  }
  return out;
}

std::vector<std::vector<HealthFlag>> sweep_health(const std::vector<Record>& runs,
                                                  const std::vector<RunFigures>& figs) {
  std::vector<std::vector<HealthFlag>> out = throughput_outliers(runs, figs);
  parallel_for(runs.size(), [&](size_t i) {
    std::vector<HealthFlag> all = run_health(runs[i]);
    all.insert(all.end(), out[i].begin(), out[i].end());
    out[i] = std::move(all);
  });
  return out;
}

}  // namespace sweep
