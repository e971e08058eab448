#include "asha_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include "atomic_file.h"     // write_file_atomically
#include "compare.h"         // truncate_record
#include "halving_search.h"  // stale_trials_line, trial_lines
#include "record.h"          // read_record
#include "report_format.h"   // report_fmt::g17
#include "run_status.h"      // status_is
#include "search_metric.h"   // record_metric
#include "sweep_dir.h"       // run_dir, scan_runs

namespace sweep {

namespace fs = std::filesystem;

AshaPlan asha_decide(size_t trials, const std::vector<int64_t>& rung_steps, int64_t eta, bool maximize,
                     const std::string& metric, const std::function<std::optional<double>(size_t, size_t)>& result) {
  AshaPlan p;
  const size_t rungs = rung_steps.size();
  p.entered.assign(rungs, {});
  p.taken.assign(rungs, 0);
  for (size_t j = 0; j < trials; ++j) p.entered[0].push_back(j);
  const double sign = maximize ? -1 : 1;
  const auto value = [&](double v) {
    return std::isnan(v) ? " " + metric + "=worst (failed, diverged or no finite " + metric + ")"
                         : " " + metric + "=" + report_fmt::g17(v);
  };
  // The best finite result of the highest rung that has one: the search's answer.
  std::optional<std::pair<size_t, std::pair<double, size_t>>> best;  // (rung, (signed value, trial))
  p.done = true;
  for (size_t k = 0; k < rungs; ++k) {
    const std::string at = "rung " + std::to_string(k) + " steps " + std::to_string(rung_steps[k]) + ": ";
    const bool top = k + 1 == rungs;
    // The results taken so far, best first (ties: the lower trial number); the worst last.
    std::vector<std::pair<double, size_t>> ranked;
    std::set<size_t> promoted;
    for (size_t n = 0; n < p.entered[k].size(); ++n) {
      const size_t j = p.entered[k][n];
      const std::optional<double> v = result(j, k);
      if (!v) break;  // the results after it wait for it: the order is fixed
      p.taken[k] = n + 1;
      const double key = std::isfinite(*v) ? sign * *v : INFINITY;
      ranked.insert(std::upper_bound(ranked.begin(), ranked.end(), std::make_pair(key, j)), {key, j});
      p.lines.push_back(at + "result " + std::to_string(n + 1) + " trial " + std::to_string(j) + value(*v));
      if (top) continue;
      // The best floor(n/eta) of the first n go on; a trial without a finite result never
      // does: it cannot get better by training longer.
      const size_t keep = (n + 1) / size_t(eta);
      for (size_t r = 0; r < keep && r < ranked.size() && std::isfinite(ranked[r].first); ++r)
        if (promoted.insert(ranked[r].second).second) {
          p.entered[k + 1].push_back(ranked[r].second);
          p.lines.push_back(at + "promoted trial " + std::to_string(ranked[r].second) + " (rank " +
                            std::to_string(r + 1) + " of the first " + std::to_string(n + 1) + " results)");
        }
    }
    if (p.taken[k] < p.entered[k].size()) p.done = false;
    if (!ranked.empty() && std::isfinite(ranked.front().first)) best = {k, ranked.front()};
  }
  if (p.done && best)
    p.lines.push_back("best: trial " + std::to_string(best->second.second) + " at rung " + std::to_string(best->first) +
                      value(sign * best->second.first));
  return p;
}

std::optional<double> asha_rung_result(const std::string& dir, const std::string& id, int64_t steps,
                                       const std::string& metric) {
  const std::string run = run_dir(dir, id);
  std::vector<std::string> files = {run + "/record.h5"};
  std::error_code ec;
  for (fs::directory_iterator it(run, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind("record.h5.stopped-", 0) == 0) files.push_back(it->path().string());
  std::sort(files.begin() + 1, files.end());
  bool diverged = false;
  for (const std::string& f : files) {
    Record r;
    try {
      r = read_record(f);
    } catch (const std::exception&) {
      continue;  // none yet, or damaged: no result from it
    }
    if (status_is(r.status, RunStatus::diverged)) diverged = true;
    if ((status_is(r.status, RunStatus::completed) || status_is(r.status, RunStatus::stopped)) && !r.steps.empty() &&
        r.steps.back().step >= steps)
      return record_metric(truncate_record(r, steps), metric);
  }
  if (diverged) return NAN;
  return std::nullopt;
}

namespace {

/// The feed of one invocation: the decisions from the results so far (read from the
/// records once each, again only for a run that ended since), what runs, what failed.
class AshaFeed : public RunFeed {
 public:
  AshaFeed(const SweepSpec& spec, const std::vector<HalvingTrial>& trials, std::vector<int64_t> rung_steps,
           std::string out_dir, std::string head)
      : spec_(spec), trials_(trials), steps_(std::move(rung_steps)), out_(std::move(out_dir)), head_(std::move(head)) {
    for (size_t j = 0; j < trials_.size(); ++j)
      for (const std::string& id : trials_[j].run_ids) trial_of_[id] = j;
    // A run whose program changed since it ran (or whose record is damaged) starts over:
    // what it left decides nothing until it has run again.
    for (const auto& [id, st] : scan_runs(out_))
      if (st.state == RunStatus::stale || st.state == RunStatus::damaged) fresh_only_.insert(id);
    replan();
  }

  std::optional<FedRun> next() override {
    if (dirty_) replan();
    // The highest rung first: a promotion before a new trial, as asha does.
    for (size_t k = steps_.size(); k-- > 0;)
      for (size_t j : plan_.entered[k])
        for (const std::string& id : trials_[j].run_ids) {
          if (running_.count(id) || failed_.count(id) || run_result(id, k)) continue;
          running_[id] = k;
          return FedRun{id, k + 1 < steps_.size() ? steps_[k] : 0};
        }
    return std::nullopt;
  }

  void adopted(const std::string& id) override {
    // An earlier driver started it for the lowest rung it has entered without a result.
    const auto t = trial_of_.find(id);
    if (t == trial_of_.end()) return;
    if (dirty_) replan();
    for (size_t k = 0; k < steps_.size(); ++k) {
      const auto& in = plan_.entered[k];
      if (std::find(in.begin(), in.end(), t->second) != in.end() && !run_result(id, k)) {
        running_[id] = k;
        return;
      }
    }
  }

  void ended(const std::string& id) override {
    const auto it = running_.find(id);
    if (it == running_.end()) return;
    const size_t k = it->second;
    running_.erase(it);
    fresh_only_.erase(id);
    for (size_t r = 0; r < steps_.size(); ++r) cache_.erase({id, r});  // read again
    if (!run_result(id, k)) failed_.insert(id);                        // failed for good in this invocation
    dirty_ = true;
  }

  const AshaPlan& plan() {
    if (dirty_) replan();
    return plan_;
  }
  const std::set<std::string>& failed() const { return failed_; }
  /// Whether run `id` has its result at rung `k` (from any invocation).
  bool has_result(const std::string& id, size_t k) { return run_result(id, k).has_value(); }
  const std::vector<int64_t>& steps() const { return steps_; }
  /// Rewrites search.log when its decisions changed, with `tail` after them.
  void write_log(const std::string& tail = "") {
    std::string text = head_;
    for (const std::string& l : plan().lines) text += l + "\n";
    text += tail;
    if (text != written_) write_file_atomically(out_ + "/search.log", text), written_ = text;
  }

 private:
  std::optional<double> run_result(const std::string& id, size_t k) {
    if (fresh_only_.count(id)) return std::nullopt;
    const auto key = std::make_pair(id, k);
    if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
    const std::optional<double> v = asha_rung_result(out_, id, steps_[k], spec_.search.metric);
    cache_[key] = v;
    return v;
  }
  void replan() {
    plan_ = asha_decide(trials_.size(), steps_, spec_.search.eta, spec_.search.mode == "max", spec_.search.metric,
                        [&](size_t j, size_t k) -> std::optional<double> {
                          double sum = 0;
                          for (const std::string& id : trials_[j].run_ids) {
                            const std::optional<double> v = run_result(id, k);
                            if (!v) return std::nullopt;
                            sum += *v;  // a NaN (the worst) makes the mean the worst
                          }
                          return sum / double(trials_[j].run_ids.size());
                        });
    dirty_ = false;
    write_log();
  }

  const SweepSpec& spec_;
  const std::vector<HalvingTrial>& trials_;
  const std::vector<int64_t> steps_;
  const std::string out_, head_;
  std::unordered_map<std::string, size_t> trial_of_;
  std::set<std::string> fresh_only_, failed_;
  std::map<std::string, size_t> running_;  ///< run id -> the rung it trains to
  std::map<std::pair<std::string, size_t>, std::optional<double>> cache_;
  AshaPlan plan_;
  bool dirty_ = true;
  std::string written_;
};

}  // namespace

SweepSummary run_asha_search(const SweepSpec& spec, const std::vector<GridPoint>& points, const std::string& out_dir,
                             const RunFed& run_fed) {
  const SearchSpec& s = spec.search;
  const int64_t budget = points.empty() ? 0 : points.front().config.train.steps;
  const std::vector<HalvingTrial> trials = halving_trials(spec, points);
  if (const std::string line = stale_trials_line(trials, scan_runs(out_dir)); !line.empty())
    std::fprintf(stderr, "%s\n", line.c_str());
  std::vector<int64_t> steps;
  for (const HalvingRung& r : halving_schedule(s, budget, int64_t(trials.size())).front().rungs)
    steps.push_back(r.steps);

  std::string head = "# sweep search log: one decision per line; the same grid file and results give the same lines\n";
  head += "search asha seed=" + std::to_string(s.seed) + " eta=" + std::to_string(s.eta) +
          " min_steps=" + std::to_string(s.min_steps) + " budget=" + std::to_string(budget) + " metric=" + s.metric +
          " mode=" + s.mode + " trials=" + std::to_string(trials.size()) + "\n";
  head += "rungs";
  for (int64_t st : steps) head += " " + std::to_string(st);
  head += " (steps; a rung takes its results in the order its trials entered it)\n" + trial_lines(trials);

  AshaFeed feed(spec, trials, steps, out_dir, head);
  SweepSummary total = run_fed(points, feed);
  // A run trains once a rung: counted once, by its state now. Completed if it trained now
  // and its last attempt did not fail, diverge or get interrupted (those count there); already
  // done if it has its first rung's result and trained nothing now.
  const auto states = scan_runs(out_dir);
  const auto ended_badly = [&](const std::string& id) {
    const auto st = states.find(id);
    return st != states.end() && (st->second.state == RunStatus::failed || st->second.state == RunStatus::diverged ||
                                  st->second.state == RunStatus::interrupted);
  };
  std::set<std::string> trained;
  for (const std::string& id : total.completed_runs)
    if (!ended_badly(id)) trained.insert(id);
  total.completed_runs.assign(trained.begin(), trained.end());
  total.completed = int(trained.size());
  std::set<std::string> skipped;
  for (const HalvingTrial& t : trials)
    for (const std::string& id : t.run_ids)
      if (!trained.count(id) && !ended_badly(id) && feed.has_result(id, 0)) skipped.insert(id);
  total.skipped_runs.assign(skipped.begin(), skipped.end());
  total.skipped = int(skipped.size());
  if (total.stop_signal) return total;  // what ran is on disk; the next `sweep run` replays to here

  const AshaPlan& plan = feed.plan();
  if (plan.done) {
    feed.write_log("done\n");
    return total;
  }
  // Decisions wait for a result that will not come in this invocation: name it.
  std::string missing;
  int missing_runs = 0;
  for (size_t k = 0; k < steps.size(); ++k)
    for (size_t n = plan.taken[k]; n < plan.entered[k].size(); ++n) {
      const size_t j = plan.entered[k][n];
      for (const std::string& id : trials[j].run_ids)
        if (feed.failed().count(id)) {
          missing += "rung " + std::to_string(k) + " steps " + std::to_string(steps[k]) + ": trial " +
                     std::to_string(j) + " run " + id + " has no result (failed; see sweep status); " +
                     "the decisions after it wait\n";
          ++missing_runs;
        }
    }
  feed.write_log(missing);
  std::fprintf(stderr, "%s", missing.c_str());
  std::fprintf(stderr,
               "sweep: the asha search stopped short: %d run(s) failed; `sweep run` again retries them and "
               "goes on\n",
               missing_runs);
  total.failed = std::max(total.failed, std::max(missing_runs, 1));
  return total;
}

}  // namespace sweep
