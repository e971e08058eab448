#include "tpe_search.h"

#include <cmath>
#include <cstdio>

#include "atomic_file.h"    // write_file_atomically
#include "record.h"         // read_record
#include "report_format.h"  // report_fmt::g17: a search log's numbers read back as the same double
#include "run_figures.h"    // run_figures
#include "sweep_dir.h"      // record_path
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

}  // namespace

double run_metric(const std::string& dir, const std::string& id, const std::string& metric) {
  Record r;
  try {
    r = read_record(record_path(dir, id));
  } catch (const std::exception&) {
    return NAN;  // failed, interrupted for good, or damaged: the worst
  }
  if (r.status != "completed") return NAN;
  return record_metric(r, metric);
}

double record_metric(const Record& r, const std::string& metric) {
  const RunFigures f = run_figures(r);
  const double v = metric == "final_loss"        ? f.final_loss
                   : metric == "train_loss_end"  ? f.train_loss_end
                   : metric == "final_eval_loss" ? f.final_eval_loss
                   : metric == "best_eval_loss"  ? f.best_eval_loss
                                                 : f.objective;
  return std::isfinite(v) ? v : NAN;
}

std::string tpe_log(const SweepSpec& spec, const std::vector<SearchTrial>& trials) {
  const SearchSpec& s = spec.search;
  std::string text = "# sweep search log: one decision per line; the same grid file and results give the same lines\n";
  text += "search tpe seed=" + std::to_string(s.seed) + " samples=" + std::to_string(s.samples) +
          " parallel=" + std::to_string(s.parallel) + " startup=" + std::to_string(s.startup) + " metric=" + s.metric +
          " mode=" + s.mode + " keys=";
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
    observe(spec, points, out_dir, trials, /*ran=*/false);  // what was decided goes to the log before it runs
    write_file_atomically(out_dir + "/search.log", tpe_log(spec, trials));
    const SweepSummary b = run_batch(points);
    // Every batch runs every trial's points: those an earlier batch completed are skipped
    // again, and a failed one is tried again, so only the runs new to this batch count.
    total.skipped += b.skipped - (total.completed + total.skipped);
    total.completed += b.completed, total.retries += b.retries;
    total.failed = b.failed, total.interrupted = b.interrupted, total.not_started = b.not_started;
    total.stop_signal = b.stop_signal, total.report_path = b.report_path;
    if (b.stop_signal) return total;  // what ran is on disk; the next `sweep run` replays to here
    observe(spec, points, out_dir, trials, /*ran=*/true);
    write_file_atomically(out_dir + "/search.log", tpe_log(spec, trials));
    if (int64_t(trials.size()) >= s.samples) return total;
    // The next batch, every proposal from the same history: the order runs finished in
    // never matters.
    std::vector<TpeTrial> history;
    history.reserve(trials.size());
    for (const SearchTrial& t : trials) history.push_back({t.values, t.loss});
    const size_t good = tpe_good_count(history.size());
    const int64_t first = int64_t(trials.size()), end = std::min(s.samples, first + s.parallel);
    for (int64_t i = first; i < end; ++i) {
      SearchTrial t;
      t.values = tpe_propose(s.space, history, s.seed, i);
      t.batch = batch + 1;
      t.source = "tpe (good " + std::to_string(good) + " of " + std::to_string(history.size()) + ")";
      trials.push_back(std::move(t));
    }
  }
}

}  // namespace sweep
