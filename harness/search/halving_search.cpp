#include "halving_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <set>

#include "atomic_file.h"    // write_file_atomically
#include "compare.h"        // truncate_record
#include "report_format.h"  // report_fmt::g17
#include "run_status.h"     // status_is
#include "sweep_dir.h"      // record_path, scan_runs
#include "text.h"           // printable
#include "tpe_search.h"     // record_metric (search_metric.h)

namespace sweep {

double rung_metric(const std::string& dir, const std::string& id, int64_t steps, const std::string& metric) {
  Record r;
  try {
    r = read_record(record_path(dir, id));
  } catch (const std::exception&) {
    return NAN;  // failed, interrupted for good, or damaged: the worst
  }
  if ((!status_is(r.status, RunStatus::completed) && !status_is(r.status, RunStatus::stopped)) || r.steps.empty() ||
      r.steps.back().step < steps)
    return NAN;
  return record_metric(truncate_record(r, steps), metric);
}

bool has_rung_result(const std::string& dir, const std::string& id, int64_t steps) {
  Record r;
  try {
    r = read_record(record_path(dir, id));
  } catch (const std::exception&) {
    return false;  // no completed record: the run failed, or it never ran
  }
  if (status_is(r.status, RunStatus::diverged)) return true;  // a result: the worst
  return (status_is(r.status, RunStatus::completed) || status_is(r.status, RunStatus::stopped)) && !r.steps.empty() &&
         r.steps.back().step >= steps;
}

std::string stale_trials_line(const std::vector<HalvingTrial>& trials,
                              const std::unordered_map<std::string, RunState>& runs) {
  std::set<std::string> names;
  size_t stale = 0;
  for (const HalvingTrial& t : trials) {
    bool any = false;
    for (const std::string& id : t.run_ids)
      if (const auto it = runs.find(id); it != runs.end() && it->second.state == RunStatus::stale) {
        any = true;
        for (const std::string& f : it->second.changed) names.insert(std::filesystem::path(f).filename().string());
      }
    stale += any;
  }
  if (!stale) return "";
  std::string what;
  for (const std::string& n : names) what += (what.empty() ? "" : ", ") + printable(n);
  return "sweep: " + (what.empty() ? std::string("the program's files") : what) + " changed since " +
         std::to_string(stale) + " of " + std::to_string(trials.size()) +
         " trials ran: they start over from step 0 (their records and checkpoints are kept aside)";
}

std::string trial_lines(const std::vector<HalvingTrial>& trials) {
  std::string lines;
  for (size_t j = 0; j < trials.size(); ++j) {
    lines += "trial " + std::to_string(j) + ": " + trials[j].inputs + " ->";
    for (const auto& id : trials[j].run_ids) lines += " " + id;
    lines += "\n";
  }
  return lines;
}

namespace {

/// search.log's head: the search, its brackets and rungs, and each trial's values and runs.
std::string search_log_head(const SearchSpec& s, int64_t budget, const std::vector<HalvingTrial>& trials,
                            const std::vector<HalvingBracket>& brackets) {
  std::string head = "# sweep search log: one decision per line; the same grid file and results give the same lines\n";
  head += "search halving seed=" + std::to_string(s.seed) + " eta=" + std::to_string(s.eta) +
          " min_steps=" + std::to_string(s.min_steps) + " brackets=" + std::to_string(s.brackets) +
          " budget=" + std::to_string(budget) + " metric=" + s.metric + " mode=" + s.mode +
          " trials=" + std::to_string(trials.size()) + "\n";
  for (size_t b = 0; b < brackets.size(); ++b) {
    const HalvingBracket& br = brackets[b];
    head += "bracket " + std::to_string(b) + " s=" + std::to_string(br.s) + ": trials " + std::to_string(br.first) +
            ".." + std::to_string(br.first + br.count - 1) + ", rungs";
    for (const HalvingRung& r : br.rungs) head += " " + std::to_string(r.trials) + "x" + std::to_string(r.steps);
    head += "\n";
  }
  return head + trial_lines(trials);
}

/// The trials `alive` at a rung of `steps`, best first by their runs' mean metric (signed
/// so that lower is better); a trial with a run that has no result is the worst.
std::vector<std::pair<double, size_t>> rank_trials(const std::vector<size_t>& alive,
                                                   const std::vector<HalvingTrial>& trials, const std::string& out_dir,
                                                   int64_t steps, const std::string& metric, double sign) {
  std::vector<std::pair<double, size_t>> ranked;
  for (size_t j : alive) {
    double sum = 0;
    bool worst = false;
    for (const auto& id : trials[j].run_ids) {
      const double v = rung_metric(out_dir, id, steps, metric);
      worst |= std::isnan(v);
      sum += v;
    }
    ranked.emplace_back(worst ? INFINITY : sign * sum / double(trials[j].run_ids.size()), j);
  }
  // Ties go to the trial whose first run id sorts first: never to timing.
  std::sort(ranked.begin(), ranked.end(), [&](const auto& x, const auto& y) {
    if (x.first != y.first) return x.first < y.first;
    return trials[x.second].run_ids.front() < trials[y.second].run_ids.front();
  });
  return ranked;
}

}  // namespace

SweepSummary run_halving_search(const SweepSpec& spec, const std::vector<GridPoint>& points, const std::string& out_dir,
                                const RunRung& run_rung) {
  const SearchSpec& s = spec.search;
  const int64_t budget = points.empty() ? 0 : points.front().config.train.steps;
  const std::vector<HalvingTrial> trials = halving_trials(spec, points);
  // A trial whose program changed since it ran (stopped at a rung or finished) starts
  // over at the first stage, so every rung is ranked on the program as it is now, and
  // search.log reads as that of a search started afresh. Said once, here.
  if (const std::string line = stale_trials_line(trials, scan_runs(out_dir)); !line.empty())
    std::fprintf(stderr, "%s\n", line.c_str());
  const std::vector<HalvingBracket> brackets = halving_schedule(s, budget, int64_t(trials.size()));
  const double sign = s.mode == "max" ? -1 : 1;

  const std::string head = search_log_head(s, budget, trials, brackets);
  std::string decisions;

  // alive[b]: the trials of bracket b still climbing; reached[j]: the last rung trial j
  // was (or is being) trained to.
  std::vector<std::vector<size_t>> alive(brackets.size());
  std::vector<int64_t> reached(trials.size(), 0);
  std::vector<size_t> bracket_of(trials.size());
  for (size_t b = 0; b < brackets.size(); ++b)
    for (int64_t j = brackets[b].first; j < brackets[b].first + brackets[b].count; ++j)
      alive[b].push_back(size_t(j)), bracket_of[size_t(j)] = b;
  const int64_t stages = brackets.empty() ? 0 : brackets.front().s + 1;  // bracket 0 has the most rungs

  // Each stage runs every point; a trial that climbs trains once a stage. The summary counts
  // each run once: completed if some stage trained it now, already done if the first stage
  // found its rung done and none trained it since.
  SweepSummary total;
  std::set<std::string> trained, found_done;
  const auto counted = [&]() -> SweepSummary {
    total.completed = int(trained.size());
    total.completed_runs.assign(trained.begin(), trained.end());
    total.skipped_runs.clear();
    for (const auto& id : found_done)
      if (!trained.count(id)) total.skipped_runs.push_back(id);
    total.skipped = int(total.skipped_runs.size());
    return total;
  };
  for (int64_t t = 0; t < stages; ++t) {
    for (size_t b = 0; b < brackets.size(); ++b)
      if (t <= brackets[b].s)
        for (size_t j : alive[b]) reached[j] = t;
    std::map<std::string, int64_t> stop;
    for (size_t j = 0; j < trials.size(); ++j) {
      const int64_t steps = brackets[bracket_of[j]].rungs[size_t(reached[j])].steps;
      if (steps < budget)
        for (const auto& id : trials[j].run_ids) stop[id] = steps;
    }
    write_file_atomically(out_dir + "/search.log", head + decisions + "stage " + std::to_string(t) + ": running\n");
    const SweepSummary r = run_rung(points, stop);
    // Every stage sees every run: those at their rung already are skipped.
    trained.insert(r.completed_runs.begin(), r.completed_runs.end());
    if (t == 0) found_done.insert(r.skipped_runs.begin(), r.skipped_runs.end());
    total.retries += r.retries, total.busy_s += r.busy_s;
    total.failed = r.failed, total.interrupted = r.interrupted, total.not_started = r.not_started;
    total.stop_signal = r.stop_signal, total.report_path = r.report_path;
    if (r.stop_signal) return counted();  // what ran is on disk; the next `sweep run` replays to here

    // A rung is ranked only on the results of all its trials. A run that failed for good
    // (after the retries the grid allows) is no result: ranking it as the worst would
    // promote another trial on a crash that may not repeat, and the records would then
    // disagree with search.log once it ran again. The search stops here instead, naming
    // it; the next `sweep run` runs it again and decides from there.
    std::string missing;
    int missing_runs = 0;
    for (size_t b = 0; b < brackets.size(); ++b) {
      if (t > brackets[b].s) continue;
      const int64_t steps = brackets[b].rungs[size_t(t)].steps;
      for (size_t j : alive[b])
        for (const auto& id : trials[j].run_ids)
          if (!has_rung_result(out_dir, id, steps)) {
            missing += "stage " + std::to_string(t) + ": trial " + std::to_string(j) + " run " + id +
                       " has no result at step " + std::to_string(steps) +
                       " (failed; see sweep status); the search stops before ranking\n";
            ++missing_runs;
          }
    }
    if (missing_runs) {
      write_file_atomically(out_dir + "/search.log", head + decisions + missing);
      std::fprintf(stderr, "%s", missing.c_str());
      std::fprintf(stderr,
                   "sweep: the halving search stopped at stage %lld: %d run(s) failed; `sweep run` again "
                   "retries them and goes on\n",
                   static_cast<long long>(t), missing_runs);
      total.failed = std::max(total.failed, missing_runs);
      return counted();
    }

    for (size_t b = 0; b < brackets.size(); ++b) {
      const HalvingBracket& br = brackets[b];
      if (t > br.s) continue;
      const int64_t steps = br.rungs[size_t(t)].steps;
      const auto ranked = rank_trials(alive[b], trials, out_dir, steps, s.metric, sign);
      const bool last = t == br.s;
      const size_t keep = last ? 0 : size_t(br.rungs[size_t(t) + 1].trials);
      alive[b].clear();
      for (size_t k = 0; k < ranked.size(); ++k) {
        const auto& [loss, j] = ranked[k];
        const char* verdict = last ? (k == 0 ? "best of bracket" : "finished") : k < keep ? "promoted" : "stopped";
        decisions += "bracket " + std::to_string(b) + " rung " + std::to_string(t) + " steps " + std::to_string(steps) +
                     ": rank " + std::to_string(k + 1) + " trial " + std::to_string(j) +
                     (std::isinf(loss) ? " " + s.metric + "=worst (failed, diverged or no finite " + s.metric + ")"
                                       : " " + s.metric + "=" + report_fmt::g17(sign * loss)) +
                     " " + verdict + "\n";
        if (!last && k < keep) alive[b].push_back(j);
      }
    }
  }
  write_file_atomically(out_dir + "/search.log", head + decisions + "done\n");
  return counted();
}

}  // namespace sweep
