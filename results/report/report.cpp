// Sweep reports: reading a sweep directory and computing every figure the report shows.
// The writers (report_html.cpp, report_text.cpp) only format what build_report computed.
#include "report.h"

#include <sys/stat.h>  // file times for the wall time

#include <algorithm>     // sort, min, max
#include <cstdio>        // snprintf
#include <cstdlib>       // strtod
#include <exception>     // std::exception for damaged records
#include <filesystem>    // listing runs/
#include <fstream>       // log tails
#include <map>           // grouping
#include <set>           // union of config keys
#include <system_error>  // error_code for non-throwing listing

#include "compare.h"      // compare_records for the first difference of a layout set
#include "run_figures.h"  // g4
#include "run_files.h"    // RunLock::holder (is a running record still being written), rank_log_path
#include "run_status.h"   // status_is

namespace sweep {
namespace {

namespace fs = std::filesystem;

bool values_less(const std::vector<std::pair<std::string, std::string>>& a,
                 const std::vector<std::pair<std::string, std::string>>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (value_less(a[i].second, b[i].second)) return true;
    if (value_less(b[i].second, a[i].second)) return false;
  }
  return a.size() < b.size();
}

int64_t config_int(const Record& r, const char* key, int64_t fallback) {
  auto it = r.config.find(key);
  if (it == r.config.end()) return fallback;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  return *end == '\0' ? v : fallback;
}

}  // namespace

ObjectiveSpread objective_spread(const std::vector<ReportRun>& figs, const std::vector<size_t>& runs) {
  ObjectiveSpread s;
  double sum = 0;
  for (size_t i : runs)
    if (std::isfinite(figs[i].objective)) sum += figs[i].objective, ++s.n;
  if (s.n == 0) return s;
  s.mean = sum / double(s.n);
  double ss = 0;
  for (size_t i : runs)
    if (std::isfinite(figs[i].objective)) ss += (figs[i].objective - s.mean) * (figs[i].objective - s.mean);
  if (s.n > 1) s.std = std::sqrt(ss / double(s.n - 1));
  return s;
}

namespace {

void group_figures(const std::vector<Record>& runs, const std::vector<ReportRun>& figs, RunGroup& g) {
  double tps = 0;
  size_t tps_n = 0;
  std::map<std::string, size_t> statuses;
  for (size_t i : g.runs) {
    const ReportRun& f = figs[i];
    if (g.objective_name.empty()) g.objective_name = f.objective_name;
    if (g.objective_name != f.objective_name) g.objective_name = "mixed";
    if (std::isfinite(f.best_loss) && !(f.best_loss >= g.best_loss)) g.best_loss = f.best_loss;
    if (std::isfinite(f.best_eval_loss) && !(f.best_eval_loss >= g.best_eval_loss)) g.best_eval_loss = f.best_eval_loss;
    if (std::isfinite(f.tokens_per_s_median)) tps += f.tokens_per_s_median, ++tps_n;
    g.memory_bytes = std::max(g.memory_bytes, f.memory_bytes);
    g.flagged += f.health.empty() ? 0 : 1;
    ++statuses[runs[i].status];
  }
  const ObjectiveSpread spread = objective_spread(figs, g.runs);
  g.finite_objectives = spread.n;
  if (spread.n) g.objective_mean = spread.mean, g.objective_std = spread.n > 1 ? spread.std : 0;
  if (tps_n) g.tokens_per_s = tps / double(tps_n);
  for (const auto& [s, n] : statuses) g.status += (g.status.empty() ? "" : ", ") + std::to_string(n) + " " + s;
  const Curve c = group_curve(runs, g.runs, &StepMetrics::loss);
  g.curve_steps = c.steps, g.curve_loss = c.mean, g.curve_lo = c.lo, g.curve_hi = c.hi;
}

std::vector<EquivalenceClass> equivalence_classes(const std::vector<Record>& runs, std::vector<ReportRun>& figs) {
  std::vector<EquivalenceClass> out;
  std::map<std::vector<std::pair<int64_t, uint64_t>>, size_t> index;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::pair<int64_t, uint64_t>> traj;
    for (const auto& c : runs[i].checksums) traj.emplace_back(c.step, c.params);
    // No checksums: nothing proves it equal to anything, so it stands alone.
    auto it = traj.empty() ? index.end() : index.find(traj);
    if (it == index.end()) {
      out.push_back({"C" + std::to_string(out.size() + 1), {}});
      if (!traj.empty()) index.emplace(std::move(traj), out.size() - 1);
      it = index.end();
    }
    const size_t cls = it == index.end() ? out.size() - 1 : it->second;
    out[cls].runs.push_back(i);
    figs[i].equivalence = cls;
  }
  return out;
}

// Whether a run was trained in benchmark mode (train.deterministic false): it promises no
// bits, not even against a run of its own layout.
bool benchmark_mode(const Record& r) { return report_value(r, "train.deterministic") == "false"; }

// Whether a run's layout promises the canonical bits: every layout of a global batch does
// (a rank whose leaves are not one subtree sends the subtrees that cover them), but the
// native all-reduce is deterministic only for a fixed layout (docs/design.md).
bool layout_promises_bits(const Record& r) { return report_value(r, "dist.reduction") != "native"; }

// The bits a run is held to: one class for every run whose layout promises them, one per
// world size x accumulation x micro-batch for the others, and one per run in benchmark mode.
std::string promise_class(const Record& r) {
  if (benchmark_mode(r)) return "benchmark " + r.run_id;
  if (layout_promises_bits(r)) return "canonical";
  return std::to_string(config_int(r, "dist.world_size", 1)) + "x" + std::to_string(config_int(r, "train.accum", 1)) +
         "x" + std::to_string(config_int(r, "train.micro_batch", 1)) + " " + report_value(r, "dist.reduction");
}

// A config without the keys `drop`, with the pair `add`, as one string that orders as the
// map of those pairs would ("k\0v\0" per pair, keys in order): a cheap key for grouping
// runs whose configs agree but for `drop`.
std::string config_key(const std::map<std::string, std::string>& config, const std::vector<std::string>& drop,
                       const std::pair<std::string, std::string>& add = {}) {
  std::string out;
  bool added = add.first.empty();
  const auto append = [&out](const std::string& k, const std::string& v) {
    out.append(k).push_back('\0');
    out.append(v).push_back('\0');
  };
  for (const auto& [k, v] : config) {
    if (!added && add.first <= k) {
      append(add.first, add.second), added = true;
      if (add.first == k) continue;  // (replaced, as map assignment would)
    }
    if (std::find(drop.begin(), drop.end(), k) == drop.end()) append(k, v);
  }
  if (!added) append(add.first, add.second);
  return out;
}

std::vector<LayoutSet> layout_sets(const std::vector<Record>& runs, const std::vector<ReportRun>& figs) {
  std::map<std::string, std::vector<size_t>> sets;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::string> drop = layout_keys();
    drop.push_back("dist.reduction");
    // With a leaf the micro-batch is layout too; without one it is the tree's leaf.
    if (config_int(runs[i], "train.leaf", 0) > 0) drop.push_back("train.micro_batch");
    const int64_t w = config_int(runs[i], "dist.world_size", 1), a = config_int(runs[i], "train.accum", 1);
    const std::string global = std::to_string(w * a * config_int(runs[i], "train.micro_batch", 1));
    sets[config_key(runs[i].config, drop, {"(global batch)", global})].push_back(i);
  }
  std::vector<LayoutSet> out;
  for (auto& [key, members] : sets) {
    if (members.size() < 2) continue;
    LayoutSet s;
    s.runs = members;
    // Held to identity within each promise class; the first run is the reference.
    std::map<std::string, size_t> first_of;
    const std::string ref_class = promise_class(runs[members[0]]);
    for (size_t i : members) {
      const std::string cls = promise_class(runs[i]);
      if (cls != ref_class) s.by_design.push_back(i);
      auto [it, fresh] = first_of.emplace(cls, i);
      if (fresh || !s.identical || figs[i].equivalence == figs[it->second].equivalence) continue;
      s.identical = false;
      s.first_difference = runs[i].run_id + " vs " + runs[it->second].run_id + ": " +
                           verdict_line(compare_records(runs[it->second], runs[i]));
    }
    for (size_t i : s.by_design) {
      const RecordComparison c = compare_records(runs[members[0]], runs[i]);
      if (!(c.max_rel <= s.by_design_max_rel)) {
        s.by_design_max_rel = c.max_rel;
        s.by_design_note = runs[i].run_id + " (" + promise_class(runs[i]) + ") vs " + runs[members[0]].run_id +
                           ": largest relative loss difference " + g4(c.max_rel) +
                           (c.max_rel_step == kNoStep ? std::string() : " at step " + std::to_string(c.max_rel_step));
      }
    }
    out.push_back(std::move(s));
  }
  // The flagged sets are the news; identical ones confirm the promise.
  std::stable_partition(out.begin(), out.end(), [](const LayoutSet& s) { return !s.identical; });
  return out;
}

// Runs that differ only in train.deterministic (benchmark runs have dist.reduction at its
// default: the key is idle there), paired one to one in the order of the runs.
std::vector<DeterminismCost> determinism_costs(const std::vector<Record>& runs, const std::vector<ReportRun>& figs) {
  std::map<std::string, std::vector<size_t>> deterministic, benchmark;
  for (size_t i = 0; i < runs.size(); ++i)
    (benchmark_mode(runs[i]) ? benchmark : deterministic)[config_key(runs[i].config, {"train.deterministic"})]
        .push_back(i);
  std::vector<DeterminismCost> out;
  for (const auto& [key, det] : deterministic) {
    auto it = benchmark.find(key);
    if (it == benchmark.end()) continue;
    for (size_t k = 0; k < std::min(det.size(), it->second.size()); ++k) {
      DeterminismCost c;
      c.deterministic = det[k], c.benchmark = it->second[k];
      c.deterministic_tokens_per_s = figs[c.deterministic].tokens_per_s_median;
      c.benchmark_tokens_per_s = figs[c.benchmark].tokens_per_s_median;
      // Throughput measured while other processes shared the cores says how busy the
      // machine was, not what determinism costs: no ratio of such a pair.
      std::string shared;
      for (size_t i : {c.deterministic, c.benchmark})
        if (figs[i].shared_cores()) shared += (shared.empty() ? "" : ", ") + runs[i].run_id;
      if (!shared.empty())
        c.refused = "measured on shared cores (" + shared + ")";
      else if (c.deterministic_tokens_per_s > 0 && c.benchmark_tokens_per_s > 0)
        c.cost = c.benchmark_tokens_per_s / c.deterministic_tokens_per_s;
      out.push_back(c);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const DeterminismCost& a, const DeterminismCost& b) { return a.deterministic < b.deterministic; });
  return out;
}

// The diagnostics of one run the report summarises: clipping, skipped steps, the slowest rank.
void run_diagnostics(const Record& r, ReportRun& f) {
  size_t applied = 0, clipped = 0;
  for (const auto& s : r.steps) {
    if (s.skipped) {
      ++f.skipped_steps;
      continue;
    }
    ++applied;
    clipped += s.clip_coef < 1 ? 1 : 0;
  }
  if (applied) f.clipped_share = double(clipped) / double(applied);
  // The trainer's judgement of each rank against its peers in the same steps (summary
  // `rank_compute_ratio`, from compute times: wall step times are equal on every rank).
  const std::vector<double> ratio = summary_numbers(r, "rank_compute_ratio");
  if (!ratio.empty() && ratio.size() == size_t(r.world_size)) {
    f.slowest_rank = int(std::max_element(ratio.begin(), ratio.end()) - ratio.begin());
    f.slowest_rank_ratio = ratio[size_t(f.slowest_rank)];
    return;
  }
  if (r.rank_step_time_s.empty() || r.world_size < 1) return;
  std::vector<double> medians;
  for (size_t rank = 0; rank < size_t(r.world_size); ++rank) {
    std::vector<double> t;
    for (const auto& row : r.rank_step_time_s)
      if (rank < row.size() && std::isfinite(row[rank])) t.push_back(row[rank]);
    if (t.empty()) return;
    std::nth_element(t.begin(), t.begin() + std::ptrdiff_t(t.size() / 2), t.end());
    medians.push_back(t[t.size() / 2]);
  }
  std::vector<double> sorted = medians;
  std::sort(sorted.begin(), sorted.end());
  const double typical = sorted[sorted.size() / 2];
  f.slowest_rank = int(std::max_element(medians.begin(), medians.end()) - medians.begin());
  f.slowest_rank_ratio = typical > 0 ? medians[size_t(f.slowest_rank)] / typical : NAN;
}

// Marks the runs no other run beats in both objective (lower) and tokens/s (higher).
void pareto_front(std::vector<ReportRun>& figs) {
  for (auto& a : figs) {
    if (!std::isfinite(a.objective) || !std::isfinite(a.tokens_per_s_median)) continue;
    a.pareto = std::none_of(figs.begin(), figs.end(), [&](const ReportRun& b) {
      return std::isfinite(b.objective) && std::isfinite(b.tokens_per_s_median) && b.objective <= a.objective &&
             b.tokens_per_s_median >= a.tokens_per_s_median &&
             (b.objective < a.objective || b.tokens_per_s_median > a.tokens_per_s_median);
    });
  }
}

// Each group against its partner at the baseline value, run by run paired by seed.
void baseline_differences(const std::vector<Record>& runs, ReportModel& m) {
  const std::string& key = m.baseline_key;
  auto partner_values = [&](const RunGroup& g) {
    auto v = g.values;
    for (auto& kv : v)
      if (kv.first == key) kv.second = m.baseline_value;
    return v;
  };
  std::map<std::vector<std::pair<std::string, std::string>>, size_t> index;
  for (size_t g = 0; g < m.groups.size(); ++g) index.emplace(m.groups[g].values, g);
  for (size_t g = 0; g < m.groups.size(); ++g) {
    const RunGroup& grp = m.groups[g];
    if (report_value(runs[grp.runs[0]], key) == m.baseline_value) continue;
    const auto it = index.find(partner_values(grp));
    if (it == index.end()) {
      m.baseline_unpaired.push_back(values_text(grp));
      continue;
    }
    BaselineDiff d;
    d.group = g, d.baseline = it->second;
    std::map<std::string, size_t> base_by_seed;
    for (size_t i : m.groups[d.baseline].runs) base_by_seed.emplace(report_value(runs[i], "train.seed"), i);
    std::vector<size_t> members = grp.runs;  // in seed order
    std::sort(members.begin(), members.end(), [&](size_t a, size_t b) {
      return value_less(report_value(runs[a], "train.seed"), report_value(runs[b], "train.seed"));
    });
    std::vector<std::pair<size_t, size_t>> pairs;
    for (size_t i : members) {
      const std::string seed = report_value(runs[i], "train.seed");
      auto b = base_by_seed.find(seed);
      if (b == base_by_seed.end()) continue;
      pairs.emplace_back(i, b->second);
      d.seeds.push_back(seed);
    }
    if (pairs.empty()) {
      m.baseline_unpaired.push_back(values_text(grp) + " (no seed in common)");
      continue;
    }
    double sum = 0;
    size_t n = 0;
    for (const auto& [i, b] : pairs) {
      const double diff = m.runs[i].objective - m.runs[b].objective;
      d.objective_diffs.push_back(diff);
      if (!std::isfinite(diff)) continue;
      sum += diff, ++n;
      d.objective_lo = std::isnan(d.objective_lo) ? diff : std::min(d.objective_lo, diff);
      d.objective_hi = std::isnan(d.objective_hi) ? diff : std::max(d.objective_hi, diff);
    }
    if (n) d.objective_mean = sum / double(n);
    // Steps both sides of every pair have a finite loss at.
    std::map<int64_t, std::vector<double>> by_step;
    for (const auto& [i, b] : pairs) {
      std::map<int64_t, double> base;
      for (const auto& s : runs[b].steps)
        if (std::isfinite(s.loss)) base[s.step] = s.loss;
      for (const auto& s : runs[i].steps) {
        auto at = base.find(s.step);
        if (std::isfinite(s.loss) && at != base.end()) by_step[s.step].push_back(s.loss - at->second);
      }
    }
    for (const auto& [step, diffs] : by_step) {
      if (diffs.size() != pairs.size()) continue;
      double total = 0;
      for (double x : diffs) total += x;
      d.steps.push_back(step);
      d.mean.push_back(total / double(diffs.size()));
      d.lo.push_back(*std::min_element(diffs.begin(), diffs.end()));
      d.hi.push_back(*std::max_element(diffs.begin(), diffs.end()));
    }
    m.baseline_diffs.push_back(std::move(d));
  }
}

std::vector<EnvironmentEntry> environment_summary(const std::vector<Record>& runs) {
  std::set<std::string> keys;
  for (const auto& r : runs)
    for (const auto& kv : r.environment) keys.insert(kv.first);
  std::vector<EnvironmentEntry> out;
  for (const auto& k : keys) {
    std::map<std::string, size_t> counts;
    for (const auto& r : runs) {
      auto it = r.environment.find(k);
      ++counts[it == r.environment.end() ? "(unset)" : it->second];
    }
    // A key no run has a value for (a program's record leaves what only it could know
    // empty) says nothing: left out.
    if (std::all_of(counts.begin(), counts.end(),
                    [](const auto& kv) { return kv.first.empty() || kv.first == "(unset)"; }))
      continue;
    EnvironmentEntry e{k, {counts.begin(), counts.end()}};
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

namespace {

/// Values by step over several runs: each step's mean and its smallest and largest value.
class StepBands {
 public:
  void add(int64_t step, double v) {
    Acc& a = by_step_[step];
    a.sum += v, ++a.n, a.lo = std::min(a.lo, v), a.hi = std::max(a.hi, v);
  }
  Curve curve() const {
    Curve c;
    for (const auto& [step, a] : by_step_) {
      c.steps.push_back(step), c.mean.push_back(a.sum / double(a.n));
      c.lo.push_back(a.lo), c.hi.push_back(a.hi);
    }
    return c;
  }

 private:
  struct Acc {
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    size_t n = 0;
  };
  std::map<int64_t, Acc> by_step_;
};

}  // namespace

Curve group_curve(const std::vector<Record>& runs, const std::vector<size_t>& members, double StepMetrics::*field) {
  // The runs of a group share their steps unless one ended early.
  StepBands bands;
  for (size_t i : members)
    for (const auto& s : runs[i].steps)
      if (std::isfinite(s.*field)) bands.add(s.step, s.*field);
  return bands.curve();
}

std::vector<std::string> metric_curves(const std::vector<Record>& runs) {
  std::set<std::string> step, eval;
  bool evaluated = false;
  for (const Record& r : runs) {
    evaluated |= !r.evals.empty();
    for (const auto& kv : r.step_extra) step.insert(kv.first);
    for (const auto& kv : r.eval_extra) eval.insert(kv.first);
  }
  std::vector<std::string> out;
  if (evaluated) out.push_back("eval_loss");
  out.insert(out.end(), step.begin(), step.end());
  for (const auto& n : eval) out.push_back("eval_" + n);
  return out;
}

std::vector<std::pair<int64_t, double>> metric_points(const Record& r, const std::string& name) {
  std::vector<std::pair<int64_t, double>> out;
  const auto keep = [&](int64_t step, double v) {
    if (std::isfinite(v)) out.emplace_back(step, v);
  };
  if (name == "eval_loss") {
    for (const auto& e : r.evals) keep(e.step, e.loss);
  } else if (const auto s = r.step_extra.find(name); s != r.step_extra.end()) {
    for (size_t i = 0; i < r.steps.size() && i < s->second.size(); ++i) keep(r.steps[i].step, s->second[i]);
  } else if (name.rfind("eval_", 0) == 0) {
    if (const auto e = r.eval_extra.find(name.substr(5)); e != r.eval_extra.end())
      for (size_t i = 0; i < r.evals.size() && i < e->second.size(); ++i) keep(r.evals[i].step, e->second[i]);
  }
  return out;
}

Curve metric_curve(const std::vector<Record>& runs, const std::vector<size_t>& members, const std::string& name) {
  StepBands bands;
  for (size_t i : members)
    for (const auto& [step, v] : metric_points(runs[i], name)) bands.add(step, v);
  return bands.curve();
}

// Numbers compare as numbers (1e-3 before 0.01), everything else as text.
bool value_less(const std::string& a, const std::string& b) {
  char *ea = nullptr, *eb = nullptr;
  double x = std::strtod(a.c_str(), &ea), y = std::strtod(b.c_str(), &eb);
  const bool na = !a.empty() && *ea == '\0', nb = !b.empty() && *eb == '\0';
  if (na && nb && x != y) return x < y;
  if (na != nb) return na;  // numbers first
  return a < b;
}

std::string report_value(const Record& r, const std::string& key) {
  auto it = r.config.find(key);
  return it == r.config.end() ? "unset" : it->second;
}

const std::vector<std::string>& layout_keys() {
  static const std::vector<std::string> keys = {"dist.world_size", "train.accum", "dist.zero_stage", "data.workers"};
  return keys;
}

void VaryingKeys::add(const std::map<std::string, std::string>& config) {
  if (!any_) {
    any_ = true, first_ = config, differs_.assign(first_.size(), 0);
    return;
  }
  // This config walked beside the first one (both sorted by key): a key varies when some
  // run lacks it or gives it another value than the first run does.
  auto a = first_.begin();
  auto b = config.begin();
  for (size_t k = 0; a != first_.end() || b != config.end();) {
    if (b == config.end() || (a != first_.end() && a->first < b->first)) {
      differs_[k++] = 1, ++a;  // this run lacks it
    } else if (a == first_.end() || b->first < a->first) {
      only_some_.insert(b->first), ++b;
    } else {
      if (a->second != b->second) differs_[k] = 1;
      ++k, ++a, ++b;
    }
  }
}

std::vector<std::string> VaryingKeys::keys() const {
  std::vector<std::string> out;
  size_t k = 0;
  for (const auto& kv : first_)
    if (differs_[k++]) out.push_back(kv.first);
  out.insert(out.end(), only_some_.begin(), only_some_.end());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> varying_keys(const std::vector<Record>& runs) {
  VaryingKeys v;
  for (const Record& r : runs) v.add(r.config);
  return v.keys();
}

namespace {

// ReportModel::html_runs.
std::vector<size_t> html_runs(const ReportModel& m) {
  std::vector<size_t> out(m.runs.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = i;
  if (out.size() <= kHtmlRuns) return out;
  std::vector<size_t> by_objective = out;
  std::stable_sort(by_objective.begin(), by_objective.end(), [&](size_t a, size_t b) {
    const double x = m.runs[a].objective, y = m.runs[b].objective;
    if (std::isfinite(x) != std::isfinite(y)) return std::isfinite(x);
    return std::isfinite(x) && x < y;
  });
  std::vector<char> shown(m.runs.size(), 0);
  for (size_t k = 0; k < kHtmlRuns; ++k) shown[by_objective[k]] = 1;
  for (size_t i = 0; i < m.runs.size(); ++i)
    if (!m.runs[i].health.empty() || m.runs[i].pareto) shown[i] = 1;
  out.clear();
  for (size_t i = 0; i < shown.size(); ++i)
    if (shown[i]) out.push_back(i);
  return out;
}

/// The runs without a finished record, by the word readers use: running, failed,
/// interrupted, missing or damaged.
void count_unfinished(const SweepRecords& sweep, ReportModel& m) {
  for (const auto& f : sweep.failed) {
    if (f.problem.empty() && !status_is(f.status, RunStatus::running))
      continue;  // a readable record: counted by its status above
    ++m.total;
    if (status_is(f.status, RunStatus::running))
      ++m.running;
    else if (status_is(f.status, RunStatus::failed))
      ++m.failed;
    else if (status_is(f.status, RunStatus::interrupted))
      ++m.interrupted;
    else if (f.status == "missing")
      ++m.missing;
    else
      ++m.damaged;  // damaged, unreadable, or a status no finished record has
  }
}

}  // namespace

ReportModel build_report(const std::string& title, const SweepRecords& sweep, const ReportOptions& opt) {
  ReportModel m;
  m.title = title;
  m.group_by = opt.group_by;
  const auto& runs = sweep.runs;
  m.varying = varying_keys(runs);
  // Seeds are averaged over, unless the reader asked to see them apart.
  for (const auto& k : m.varying)
    if (k != "train.seed" || opt.group_by == "train.seed") m.columns.push_back(k);

  std::vector<RunFigures> figs;
  figs.reserve(runs.size());
  for (const auto& r : runs) figs.push_back(run_figures(r));
  const std::vector<std::vector<HealthFlag>> health = sweep_health(runs, figs);
  for (size_t i = 0; i < runs.size(); ++i) {
    ReportRun rr;
    static_cast<RunFigures&>(rr) = figs[i];
    rr.health = health[i];
    rr.runqueue_share = runqueue_share(runs[i]);
    m.runs.push_back(std::move(rr));
    m.train_time_s += figs[i].train_time_s;
    if (status_is(runs[i].status, RunStatus::completed)) ++m.completed;
    if (status_is(runs[i].status, RunStatus::diverged)) ++m.diverged;
    if (status_is(runs[i].status, RunStatus::stopped)) ++m.stopped;
    if (!health[i].empty()) ++m.flagged;
    if (!runs[i].verified) ++m.unverified;
  }
  m.total = runs.size();
  count_unfinished(sweep, m);
  m.pending = sweep.pending.size();
  m.total += m.pending;
  m.wall_time_s = sweep.wall_time_s;

  std::map<std::vector<std::pair<std::string, std::string>>, size_t> group_of;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::pair<std::string, std::string>> values;
    for (const auto& k : m.columns) values.emplace_back(k, report_value(runs[i], k));
    auto [it, fresh] = group_of.emplace(values, m.groups.size());
    if (fresh) {
      m.groups.emplace_back();
      m.groups.back().values = values;
    }
    m.groups[it->second].runs.push_back(i);
  }
  for (auto& g : m.groups) group_figures(runs, m.runs, g);
  // Best objective first; groups a search stopped at a rung after those that ran to the
  // end (their figures are of fewer steps); groups without one last; ties in the grid's
  // order of values.
  const auto stopped = [&](const RunGroup& g) {
    return std::all_of(g.runs.begin(), g.runs.end(),
                       [&](size_t i) { return status_is(runs[i].status, RunStatus::stopped); });
  };
  std::sort(m.groups.begin(), m.groups.end(), [&](const RunGroup& a, const RunGroup& b) {
    const bool fa = std::isfinite(a.objective_mean), fb = std::isfinite(b.objective_mean);
    if (fa != fb) return fa;
    if (stopped(a) != stopped(b)) return stopped(b);
    if (fa && a.objective_mean != b.objective_mean) return a.objective_mean < b.objective_mean;
    return values_less(a.values, b.values);
  });

  for (size_t i = 0; i < runs.size(); ++i) run_diagnostics(runs[i], m.runs[i]);
  if (!sweep.search_log.empty()) m.search = search_progress(sweep.search_log, runs, m.runs);
  pareto_front(m.runs);
  m.baseline_key = opt.baseline_key, m.baseline_value = opt.baseline_value;
  if (!m.baseline_key.empty() && !m.groups.empty()) baseline_differences(runs, m);

  m.classes = equivalence_classes(runs, m.runs);
  m.layout_sets = layout_sets(runs, m.runs);
  m.determinism_costs = determinism_costs(runs, m.runs);
  const bool sampled = m.search.kind == "random" || m.search.kind == "tpe";
  m.effects = axis_effects(runs, m.runs, m.varying, sampled, &m.rank_importance);
  // One knob at a time: each point against the base, and no share of variance (a search's
  // draws are never one knob at a time, whatever they happen to look like).
  if (m.search.kind.empty()) m.base_deltas = base_deltas(runs, m.runs, m.varying);
  if (m.base_deltas.one_knob()) {
    for (auto& e : m.effects) e.importance = NAN;
    m.rank_importance = false;
  }
  m.environment = environment_summary(runs);
  m.classes_matter = !m.layout_sets.empty() ||
                     std::any_of(m.classes.begin(), m.classes.end(), [](const auto& c) { return c.runs.size() > 1; });
  for (const auto& k : m.varying)
    if (throughput_key(k)) m.throughput_varies_with.push_back(k);
  for (const auto& e : m.environment)  // a BLAS kernel or a device of its own is a design too
    if ((e.key == "blas.kernel" || e.key == "device") && e.values.size() > 1)
      m.throughput_varies_with.push_back("environment " + e.key);

  m.html_runs = html_runs(m);
  m.short_columns = short_key_names(m.columns);
  m.long_values = long_values(m);
  std::vector<size_t> all(m.groups.size());
  for (size_t g = 0; g < all.size(); ++g) all[g] = g;
  m.group_labels = legend_labels(m, all);
  m.facet_by = opt.group_by.empty() ? facet_key(m) : "";
  const std::string split = opt.group_by.empty() ? m.facet_by : opt.group_by;
  if (split.empty()) {
    if (!all.empty()) m.charts.push_back({"all runs", all, m.group_labels});
  } else {
    std::map<std::string, std::vector<size_t>> by_value;
    for (size_t g = 0; g < m.groups.size(); ++g) by_value[report_value(runs[m.groups[g].runs[0]], split)].push_back(g);
    std::vector<std::string> values;
    values.reserve(by_value.size());
    for (const auto& kv : by_value) values.push_back(kv.first);
    std::sort(values.begin(), values.end(), value_less);
    for (const auto& v : values) m.charts.push_back({split + " = " + v, by_value[v], legend_labels(m, by_value[v])});
  }
  return m;
}

bool parse_report_format(const std::string& name, ReportFormat* out) {
  static const std::pair<const char*, ReportFormat> kNames[] = {{"html", ReportFormat::html},
                                                                {"md", ReportFormat::markdown},
                                                                {"markdown", ReportFormat::markdown},
                                                                {"csv", ReportFormat::csv},
                                                                {"json", ReportFormat::json}};
  for (const auto& [n, f] : kNames)
    if (name == n) return *out = f, true;
  return false;
}

bool looks_like_report(const std::string& head, ReportFormat format) {
  const auto starts = [&](const std::string& p) { return head.compare(0, p.size(), p) == 0; };
  const size_t eol = head.find('\n');
  const std::string first = head.substr(0, eol);
  switch (format) {
    case ReportFormat::markdown: {
      if (!starts("# ") || eol == std::string::npos) return false;
      const size_t eol2 = head.find('\n', eol + 1);
      return eol2 != std::string::npos && head.substr(eol + 1, eol2 - eol - 1) == kMarkdownReportMark;
    }
    case ReportFormat::csv: {
      // The header row: the fixed first columns, the varying keys, the fixed last ones.
      static const std::string kTail = ",layout_set,layout_set_identical,cause,log_tail\r";
      return starts("run_id,status,") && eol != std::string::npos && first.size() >= kTail.size() &&
             first.compare(first.size() - kTail.size(), kTail.size(), kTail) == 0;
    }
    case ReportFormat::json:
      return starts(kJsonReportStart);
    case ReportFormat::html:
      break;
  }
  return starts(kHtmlReportStart);
}

std::string render_report(const SweepRecords& sweep, const ReportModel& model, ReportFormat format) {
  switch (format) {
    case ReportFormat::markdown:
      return render_markdown(sweep, model);
    case ReportFormat::csv:
      return render_csv(sweep, model);
    case ReportFormat::json:
      return render_json(sweep, model);
    case ReportFormat::html:
      break;
  }
  return render_html(sweep, model);
}

std::string render_html(const std::string& title, const SweepRecords& sweep) {
  return render_html(sweep, build_report(title, sweep));
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace sweep
