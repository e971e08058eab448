#include "tpe_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "atomic_file.h"    // write_file_atomically
#include "motpe.h"          // motpe_propose
#include "record.h"         // read_record
#include "report_format.h"  // report_fmt::g17: a search log's numbers read back as the same double
#include "run_figures.h"    // run_figures
#include "run_status.h"     // status_is
#include "sweep_dir.h"      // record_path
#include "text.h"           // join
#include "tpe.h"            // tpe_propose

namespace sweep {
namespace {

// Each trial's runs and, once its batch has run, its loss (every trial's, read again from
// the records: a decision is a function of what they hold at that moment).
void observe(const SweepSpec& spec, const std::vector<GridPoint>& points, const std::string& dir,
             std::vector<SearchTrial>& trials, bool ran) {
  const auto ids_of = search_runs(spec.search, points);
  const double sign = spec.search.mode == "max" ? -1 : 1;
  for (SearchTrial& t : trials) {
    const auto it = ids_of.find(search_inputs(spec.search, t.values));
    t.run_ids = it == ids_of.end() ? std::vector<std::string>{} : it->second;
    if (!ran) continue;
    double sum = 0;
    bool worst = t.run_ids.empty();
    for (const auto& id : t.run_ids) {
      const double v = run_metric(dir, id, spec.search.metric);
      if (std::isnan(v)) worst = true;
      sum += v;
    }
    t.finished = true;  // the batch ran: a run without a completed record failed for good
    t.loss = worst ? INFINITY : sign * sum / double(t.run_ids.size());
  }
}

// The same for a search judged on a Pareto front: each trial's mean of every metric and
// of every constraint's metric over its runs (NaN where a run has none), and its entry.
void observe_pareto(const SweepSpec& spec, const std::vector<GridPoint>& points, const std::string& dir,
                    std::vector<SearchTrial>& trials, bool ran) {
  const SearchSpec& s = spec.search;
  const auto ids_of = search_runs(s, points);
  std::vector<std::string> names = s.metrics;
  for (const MetricConstraint& c : s.constraints) names.push_back(c.metric);
  for (SearchTrial& t : trials) {
    const auto it = ids_of.find(search_inputs(s, t.values));
    t.run_ids = it == ids_of.end() ? std::vector<std::string>{} : it->second;
    if (!ran) continue;
    std::vector<double> sum(names.size(), t.run_ids.empty() ? NAN : 0.0);
    for (const auto& id : t.run_ids) {
      const std::vector<double> v = run_metrics(dir, id, names);
      for (size_t k = 0; k < names.size(); ++k) sum[k] += v[k];
    }
    t.finished = true;
    t.metric_values.assign(sum.begin(), sum.begin() + std::ptrdiff_t(s.metrics.size()));
    t.constraint_values.assign(sum.begin() + std::ptrdiff_t(s.metrics.size()), sum.end());
    for (double& v : t.metric_values) v /= double(std::max<size_t>(1, t.run_ids.size()));
    for (double& v : t.constraint_values) v /= double(std::max<size_t>(1, t.run_ids.size()));
    t.entry = pareto_entry(s, t.metric_values, t.constraint_values);
    t.loss = t.entry.failed() ? INFINITY : t.entry.loss.front();
  }
}

}  // namespace

std::vector<double> run_metrics(const std::string& dir, const std::string& id,
                                const std::vector<std::string>& metrics) {
  std::vector<double> out(metrics.size(), NAN);
  Record r;
  try {
    r = read_record(record_path(dir, id));
  } catch (const std::exception&) {
    return out;  // failed, interrupted for good, or damaged: the worst
  }
  if (!status_is(r.status, RunStatus::completed)) return out;
  for (size_t k = 0; k < metrics.size(); ++k) out[k] = record_metric(r, metrics[k]);
  return out;
}

ParetoEntry pareto_entry(const SearchSpec& s, const std::vector<double>& metric_values,
                         const std::vector<double>& constraint_values) {
  ParetoEntry e;
  for (size_t k = 0; k < s.metrics.size(); ++k) {
    const double v = k < metric_values.size() ? metric_values[k] : NAN;
    e.loss.push_back(std::isfinite(v) ? (s.modes[k] == "max" ? -v : v) : INFINITY);
  }
  for (size_t k = 0; k < s.constraints.size(); ++k)
    e.violation += constraint_violation(s.constraints[k], k < constraint_values.size() ? constraint_values[k] : NAN);
  return e;
}

double run_metric(const std::string& dir, const std::string& id, const std::string& metric) {
  Record r;
  try {
    r = read_record(record_path(dir, id));
  } catch (const std::exception&) {
    return NAN;  // failed, interrupted for good, or damaged: the worst
  }
  if (!status_is(r.status, RunStatus::completed)) return NAN;
  return record_metric(r, metric);
}

namespace {

// A finished trial's figures on its log line: each metric as the runs have it, each
// constraint's metric, and the verdict.
std::string pareto_words(const SearchSpec& s, const SearchTrial& t) {
  std::string w;
  const auto value = [](double v) { return std::isfinite(v) ? report_fmt::g17(v) : std::string("none"); };
  for (size_t k = 0; k < s.metrics.size(); ++k)
    w += " " + s.metrics[k] + "=" + value(k < t.metric_values.size() ? t.metric_values[k] : NAN);
  for (size_t k = 0; k < s.constraints.size(); ++k)
    if (std::find(s.metrics.begin(), s.metrics.end(), s.constraints[k].metric) == s.metrics.end() &&
        w.find(" " + s.constraints[k].metric + "=") == std::string::npos)
      w += " " + s.constraints[k].metric + "=" + value(k < t.constraint_values.size() ? t.constraint_values[k] : NAN);
  if (t.entry.failed())
    w += " worst (failed, diverged or a metric not finite)";
  else if (!s.constraints.empty())
    w += t.entry.feasible() ? " feasible" : " infeasible (violation " + report_fmt::g17(t.entry.violation) + ")";
  return w;
}

}  // namespace

std::string tpe_log(const SweepSpec& spec, const std::vector<SearchTrial>& trials) {
  const SearchSpec& s = spec.search;
  std::string text = "# sweep search log: one decision per line; the same grid file and results give the same lines\n";
  text += "search tpe seed=" + std::to_string(s.seed) + " samples=" + std::to_string(s.samples) +
          " parallel=" + std::to_string(s.parallel) + " startup=" + std::to_string(s.startup) +
          search_objective_words(s) + " keys=";
  for (size_t i = 0; i < s.space.size(); ++i) text += (i ? "," : "") + s.space[i].key;
  text += "\n";
  for (size_t i = 0; i < trials.size(); ++i) {
    const SearchTrial& t = trials[i];
    text += "trial " + std::to_string(i) + " batch " + std::to_string(t.batch) + " " + t.source + ": " +
            search_inputs(s, t.values) + " ->";
    if (t.run_ids.empty()) text += " (no run: excluded)";
    for (const auto& id : t.run_ids) text += " " + id;
    if (!t.finished)
      text += " (not finished)";
    else if (s.pareto())
      text += pareto_words(s, t);
    else  // the metric as the runs have it (t.loss is negated under mode max, so lower is better)
      text += std::isinf(t.loss) ? " " + s.metric + "=worst (failed, diverged or no finite " + s.metric + ")"
                                 : " " + s.metric + "=" + report_fmt::g17(s.mode == "max" ? -t.loss : t.loss);
    text += "\n";
  }
  return text;
}

SweepSummary run_tpe_search(SweepSpec spec, const std::string& out_dir, const RunBatch& run_batch) {
  SearchSpec& s = spec.search;
  std::vector<SearchTrial> trials;
  for (int64_t i = 0; i < s.startup; ++i) {
    SearchTrial t;
    for (const SearchDim& d : s.space) t.values.push_back(draw(d, s.seed, i));
    t.source = "random";
    trials.push_back(std::move(t));
  }
  ZipGroup& zip = spec.zips.back();  // the search's draws (grid.cpp)
  SweepSummary total;
  for (int64_t batch = 0;; ++batch) {
    for (size_t k = 0; k < s.space.size(); ++k) {
      zip.axes[k].values.clear();
      for (const SearchTrial& t : trials) zip.axes[k].values.push_back(t.values[k]);
    }
    const std::vector<GridPoint> points = expand(spec);
    const auto see = s.pareto() ? observe_pareto : observe;
    see(spec, points, out_dir, trials, /*ran=*/false);  // what was decided goes to the log before it runs
    write_file_atomically(out_dir + "/search.log", tpe_log(spec, trials));
    const SweepSummary b = run_batch(points);
    // Every batch runs every trial's points: those an earlier batch completed are skipped
    // again, and a failed one is tried again, so only the runs new to this batch count.
    total.skipped += b.skipped - (total.completed + total.skipped);
    total.completed += b.completed, total.retries += b.retries;
    total.failed = b.failed, total.interrupted = b.interrupted, total.not_started = b.not_started;
    total.stop_signal = b.stop_signal, total.report_path = b.report_path;
    if (b.stop_signal) return total;  // what ran is on disk; the next `sweep run` replays to here
    see(spec, points, out_dir, trials, /*ran=*/true);
    write_file_atomically(out_dir + "/search.log", tpe_log(spec, trials));
    if (int64_t(trials.size()) >= s.samples) return total;
    // The next batch, every proposal from the same history: the order runs finished in
    // never matters.
    std::vector<TpeTrial> history;
    history.reserve(trials.size());
    for (const SearchTrial& t : trials) history.push_back({t.values, t.loss});
    std::vector<ParetoEntry> entries;
    entries.reserve(trials.size());
    for (const SearchTrial& t : trials) entries.push_back(t.entry);
    const size_t good = tpe_good_count(history.size());
    const int64_t first = int64_t(trials.size()), end = std::min(s.samples, first + s.parallel);
    for (int64_t i = first; i < end; ++i) {
      SearchTrial t;
      t.values =
          s.pareto() ? motpe_propose(s.space, history, entries, s.seed, i) : tpe_propose(s.space, history, s.seed, i);
      t.batch = batch + 1;
      t.source = std::string(s.pareto() ? "motpe" : "tpe") + " (good " + std::to_string(good) + " of " +
                 std::to_string(history.size()) + ")";
      trials.push_back(std::move(t));
    }
  }
}

}  // namespace sweep
