#include "pbt_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "atomic_file.h"    // write_file_atomically
#include "lineage_run.h"    // fork_config: a fork as `sweep fork` makes it
#include "pbt_plan.h"       // pbt_decision_steps
#include "record.h"         // read_record
#include "report_format.h"  // report_fmt::g17
#include "run_files.h"      // checkpoint_dir, checkpoint_digest
#include "run_status.h"     // status_is
#include "search.h"         // draw, draw_unit
#include "search_metric.h"  // record_metric
#include "sweep_dir.h"      // run_dir, scan_runs
#include "text.h"           // significant

namespace sweep {
namespace {

/// One member: the run it trains now and its values of the space's keys, in space order.
struct Member {
  std::string run;
  std::vector<ConfigValue> values;
};

std::string inputs_text(const SearchSpec& s, const std::vector<ConfigValue>& values) {
  std::string t;
  for (size_t k = 0; k < s.space.size(); ++k) t += (k ? " " : "") + s.space[k].key + "=" + values[k].text;
  return t;
}

/// search.log's head: the search and each member of generation 0 with its run.
std::string search_log_head(const SearchSpec& s, int64_t budget, const std::vector<int64_t>& steps,
                            const std::vector<Member>& members) {
  std::string head = "# sweep search log: one decision per line; the same grid file and results give the same lines\n";
  std::string at;
  for (int64_t st : steps) at += (at.empty() ? "" : ",") + std::to_string(st);
  head += "search pbt seed=" + std::to_string(s.seed) + " population=" + std::to_string(s.population) +
          " interval=" + std::to_string(s.interval) + " decisions_at=" + (at.empty() ? "none" : at) +
          " quantile=" + significant(s.quantile, 6) + " perturb=" + significant(s.perturb_down, 6) + "," +
          significant(s.perturb_up, 6) + " resample=" + significant(s.resample, 6) +
          " budget=" + std::to_string(budget) + search_objective_words(s) + "\n";
  for (size_t m = 0; m < members.size(); ++m)
    head += "member " + std::to_string(m) + ": " + inputs_text(s, members[m].values) + " -> " + members[m].run + "\n";
  return head;
}

/// The value of `metric` of run `id` after step `step`: from its record (rung_metric), or,
/// while a member that went on from there trains (or after it failed later), from the
/// record of that step its promotion moved aside (record.h5.stopped-TIME): a generation
/// is decided again from what it was decided on. NaN when neither has it.
double metric_at(const std::string& out_dir, const std::string& id, int64_t step, const std::string& metric) {
  const double v = rung_metric(out_dir, id, step, metric);
  if (!std::isnan(v)) return v;
  std::vector<std::string> aside;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(run_dir(out_dir, id), ec))
    if (e.path().filename().string().rfind("record.h5.stopped-", 0) == 0) aside.push_back(e.path().string());
  std::sort(aside.begin(), aside.end());
  for (const std::string& path : aside) {
    try {
      const Record r = read_record(path);
      if (status_is(r.status, RunStatus::stopped) && !r.steps.empty() && r.steps.back().step >= step)
        return record_metric(truncate_record(r, step), metric);
    } catch (const std::exception&) {
      // Damaged: another one, or none.
    }
  }
  return NAN;
}

/// The members ranked at `step`, best first: (signed metric, member), a member without a
/// result (failed for good, diverged, no finite metric) as +inf; ties go to the lower
/// member number, never to timing.
std::vector<std::pair<double, size_t>> rank_members(const std::vector<Member>& members, const std::string& out_dir,
                                                    int64_t step, const std::string& metric, double sign) {
  std::vector<std::pair<double, size_t>> ranked;
  for (size_t m = 0; m < members.size(); ++m) {
    const double v = members[m].run.empty() ? NAN : metric_at(out_dir, members[m].run, step, metric);
    ranked.emplace_back(std::isnan(v) ? INFINITY : sign * v, m);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) {
    return x.first < y.first || (x.first == y.first && x.second < y.second);
  });
  return ranked;
}

/// " metric=V" (17 digits) of a ranked value, or why it is the worst.
std::string metric_words(const SearchSpec& s, double v, double sign) {
  return std::isinf(v) ? " " + s.metric + "=worst (failed, diverged or no finite " + s.metric + ")"
                       : " " + s.metric + "=" + report_fmt::g17(sign * v);
}

/// How many members the top and the bottom quantile hold (Ray Tune's rule: ceil(N q),
/// at most half).
size_t quantile_size(size_t n, double q) {
  size_t k = size_t(std::ceil(double(n) * q - 1e-9));
  if (2 * k > n) k = n / 2;
  return std::max<size_t>(1, k);
}

/// A new value of `dim` for a member exploiting one whose value is `from`: drawn afresh
/// with probability s.resample, else perturbed (x down or x up within the bounds; a choice
/// moves to a neighbour). `i` numbers the decision (generation x population + member), so
/// every draw is a pure function of (seed, i, key). `how` says which.
ConfigValue explore(const SearchSpec& s, const SearchDim& dim, const ConfigValue& from, int64_t i, std::string* how) {
  if (draw_unit(s.seed, i, "pbt.resample." + dim.key) < s.resample) {
    *how = "resampled";
    return draw(dim, s.seed, s.population + i);  // past the members' own draws
  }
  const bool up = draw_unit(s.seed, i, "pbt.perturb." + dim.key) >= 0.5;
  ConfigValue v = from;
  if (dim.kind == "choice") {
    size_t at = 0;
    while (at < dim.choices.size() && dim.choices[at].text != from.text) ++at;
    const size_t n = dim.choices.size();
    if (at >= n || n == 1) {
      *how = "kept";
      return from;
    }
    // A neighbour: up or down, and at an end the one there is.
    const size_t to = up ? (at + 1 < n ? at + 1 : at - 1) : (at > 0 ? at - 1 : at + 1);
    *how = to > at ? "next" : "previous";
    return dim.choices[to];
  }
  const double factor = up ? s.perturb_up : s.perturb_down;
  *how = "x" + significant(factor, 6);
  double x = std::strtod(from.text.c_str(), nullptr) * factor;
  x = std::min(dim.hi, std::max(dim.lo, x));
  if (dim.kind == "int") {
    const int64_t k = int64_t(std::llround((x - dim.lo) / double(dim.step)));
    v.text = std::to_string(int64_t(dim.lo) + std::min(k, (int64_t(dim.hi) - int64_t(dim.lo)) / dim.step) * dim.step);
  } else {
    v.text = significant(x, 6);
  }
  v.where = dim.where;
  return v;
}

/// The state of the search as it goes: the members, every run it made (by id), and the
/// step each run that no member trains any more stopped at.
struct Population {
  std::vector<Member> members;
  std::map<std::string, GridPoint> runs;
  std::map<std::string, int64_t> left_at;
};

/// The fork of top member `parent` (whose run is `from`) after `step`, for decision `i`:
/// its keys explored, its config fork_config's; `said` gets "(run ID, checkpoint DIGEST):
/// KEY=VALUE (how) ... -> NEW-ID". Throws std::runtime_error when the parent's checkpoint
/// at the step is not there to fork from.
GridPoint fork_member(const SearchSpec& s, const std::string& out_dir, int64_t step, const Member& parent,
                      const GridPoint& from, int64_t i, std::string* said) {
  const std::string ckpt = checkpoint_dir(run_dir(out_dir, parent.run), step);
  const std::string digest = checkpoint_digest(ckpt);
  if (digest.empty())
    throw std::runtime_error(ckpt + ": no complete checkpoint with a digest to fork from (run " + parent.run +
                             " stopped at step " + std::to_string(step) + " should have left it)");
  FlatConfig changes;
  std::string what;
  GridPoint p;
  for (size_t d = 0; d < s.space.size(); ++d) {
    std::string how;
    const ConfigValue v = explore(s, s.space[d], parent.values[d], i, &how);
    changes[s.space[d].key] = v;
    p.values.emplace_back(s.space[d].key, v.text);
    what += (d ? " " : "") + s.space[d].key + "=" + v.text + " (" + how + ")";
  }
  p.config = fork_config(from.config, parent.run, step, changes);
  p.id = run_id(p.config);
  *said = "(run " + parent.run + ", checkpoint " + digest + "): " + what + " -> " + p.id;
  return p;
}

/// Decides generation `g` (1-based) at `step`: ranks the members and makes the exploits.
/// Returns the decision's lines and updates `pop`; throws std::runtime_error when a top
/// member's checkpoint at the step is not there to fork from.
std::string decide(const SearchSpec& s, const std::string& out_dir, size_t g, int64_t step, double sign,
                   Population& pop) {
  const std::string at = "generation " + std::to_string(g) + " step " + std::to_string(step) + ": ";
  const size_t n = pop.members.size();
  const auto ranked = rank_members(pop.members, out_dir, step, s.metric, sign);
  const size_t k = quantile_size(n, s.quantile);
  std::string lines;
  // The top members a bottom one may copy: those of the top quantile with a result.
  std::vector<size_t> top;
  for (size_t r = 0; r < k; ++r)
    if (!std::isinf(ranked[r].first)) top.push_back(ranked[r].second);
  std::vector<bool> exploits(n, false);
  for (size_t r = 0; r < n; ++r) {
    const auto& [v, m] = ranked[r];
    const bool bottom = r >= n - k || std::isinf(v);  // a member without a result exploits too
    exploits[m] = bottom && !top.empty();
    lines += at + "rank " + std::to_string(r + 1) + " member " + std::to_string(m) + " run " +
             (pop.members[m].run.empty() ? "-" : pop.members[m].run) + metric_words(s, v, sign) +
             (r < k    ? " top"
              : bottom ? " bottom"
                       : "") +
             "\n";
  }
  std::vector<double> value_of(n);
  for (const auto& [v, m] : ranked) value_of[m] = v;
  std::vector<Member> next = pop.members;
  for (size_t m = 0; m < n; ++m) {
    Member& mem = next[m];
    if (!exploits[m]) {
      if (std::isinf(value_of[m])) {
        // No result and no top member with one to copy: the member is out.
        if (!mem.run.empty()) pop.left_at.emplace(mem.run, step);
        lines += at + "member " + std::to_string(m) + " is out: no result, and no top member has one\n";
        mem.run.clear();
      } else {
        lines += at + "member " + std::to_string(m) + " continues run " + mem.run + "\n";
      }
      continue;
    }
    const int64_t i = int64_t(g) * s.population + int64_t(m);
    const size_t pick = std::min(top.size() - 1, size_t(draw_unit(s.seed, i, "pbt.exploit") * double(top.size())));
    const Member& parent = pop.members[top[pick]];
    std::string said;
    GridPoint p = fork_member(s, out_dir, step, parent, pop.runs.at(parent.run), i, &said);
    if (!mem.run.empty() && mem.run != p.id) pop.left_at.emplace(mem.run, step);
    lines += at + "member " + std::to_string(m) + " exploits member " + std::to_string(top[pick]) + " " + said + "\n";
    std::vector<ConfigValue> values;
    for (size_t d = 0; d < s.space.size(); ++d) values.push_back({p.values[d].second, s.space[d].where});
    mem.run = p.id, mem.values = values;
    pop.runs.emplace(p.id, std::move(p));
  }
  pop.members = std::move(next);
  // A run a member follows again is not left behind (two members may share one).
  for (const Member& mem : pop.members) pop.left_at.erase(mem.run);
  return lines + "generation " + std::to_string(g) + ": decided\n";
}

/// The blocks of decisions an earlier driver wrote to `path` under the same `head`: the
/// text of each "generation G: decided" block, in order; none when the file is missing or
/// its head differs (another search).
std::vector<std::string> logged_generations(const std::string& path, const std::string& head) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  if (text.compare(0, head.size(), head) != 0) return {};
  std::vector<std::string> blocks;
  std::string block;
  std::istringstream rest(text.substr(head.size()));
  for (std::string line; std::getline(rest, line);) {
    if (line.rfind("generation ", 0) != 0) break;
    block += line + "\n";
    if (line.size() > 9 && line.compare(line.size() - 9, 9, ": decided") == 0) blocks.push_back(block), block.clear();
  }
  return blocks;
}

/// Generation 0: member m is point m (the space's draw m) and its run.
Population first_generation(const SearchSpec& s, const std::vector<GridPoint>& points) {
  Population pop;
  for (const GridPoint& p : points) {
    Member m{p.id, {}};
    for (const SearchDim& d : s.space) {
      ConfigValue v;
      v.where = d.where;
      for (const auto& [key, text] : p.values)
        if (key == d.key) v.text = text;
      m.values.push_back(v);
    }
    pop.members.push_back(std::move(m));
    pop.runs.emplace(p.id, p);
  }
  return pop;
}

/// What one generation's session runs: the runs members follow, to `stop` (train.steps:
/// no stop), and those left behind that have their result, kept where they stopped (a run
/// that failed for good is not started again: it was decided on as the worst).
std::pair<std::vector<GridPoint>, std::map<std::string, int64_t>> generation_runs(const Population& pop, int64_t stop,
                                                                                  int64_t budget,
                                                                                  const std::string& out_dir) {
  std::map<std::string, int64_t> stop_at(pop.left_at.begin(), pop.left_at.end());
  std::set<std::string> current;
  for (const Member& m : pop.members)
    if (!m.run.empty()) current.insert(m.run);
  if (stop < budget)
    for (const auto& id : current) stop_at[id] = stop;
  std::vector<GridPoint> now;
  for (const auto& [id, p] : pop.runs) {
    const auto left = pop.left_at.find(id);
    if (current.count(id) || (left != pop.left_at.end() && has_rung_result(out_dir, id, left->second)))
      now.push_back(p);
  }
  return {now, stop_at};
}

/// The runs a search's sessions trained and found done, each counted once.
struct Tally {
  SweepSummary total;
  std::set<std::string> trained, found_done;
  bool ran = false;
  void add(const SweepSummary& r) {
    trained.insert(r.completed_runs.begin(), r.completed_runs.end());
    if (!ran) found_done.insert(r.skipped_runs.begin(), r.skipped_runs.end());
    ran = true;
    total.retries += r.retries;
    total.failed = r.failed, total.interrupted = r.interrupted, total.not_started = r.not_started;
    total.stop_signal = r.stop_signal, total.report_path = r.report_path;
  }
  SweepSummary counted() {
    total.completed = int(trained.size());
    total.completed_runs.assign(trained.begin(), trained.end());
    total.skipped_runs.clear();
    for (const auto& id : found_done)
      if (!trained.count(id)) total.skipped_runs.push_back(id);
    total.skipped = int(total.skipped_runs.size());
    return total;
  }
};

/// The first line where two blocks of decisions differ: (ours, theirs).
std::pair<std::string, std::string> first_difference(const std::string& ours, const std::string& theirs) {
  std::string a, b;
  std::istringstream x(ours), y(theirs);
  while (std::getline(x, a) && std::getline(y, b) && a == b) {
  }
  return {a, b};
}

/// The final ranking at train.steps, one line per member; `best` on the first.
std::string final_lines(const SearchSpec& s, const Population& pop, const std::string& out_dir, int64_t budget,
                        double sign) {
  std::string out;
  const auto ranked = rank_members(pop.members, out_dir, budget, s.metric, sign);
  for (size_t r = 0; r < ranked.size(); ++r) {
    const auto& [v, m] = ranked[r];
    out += "final step " + std::to_string(budget) + ": rank " + std::to_string(r + 1) + " member " + std::to_string(m) +
           " run " + (pop.members[m].run.empty() ? "-" : pop.members[m].run) + metric_words(s, v, sign) +
           (r == 0 ? " best" : "") + "\n";
  }
  return out;
}

}  // namespace

SweepSummary run_pbt_search(const SweepSpec& spec, const std::vector<GridPoint>& points, const std::string& out_dir,
                            const RunRung& run_rung) {
  const SearchSpec& s = spec.search;
  const int64_t budget = points.empty() ? 0 : points.front().config.train.steps;
  const std::vector<int64_t> steps = pbt_decision_steps(s, budget);
  const double sign = s.mode == "max" ? -1 : 1;
  Population pop = first_generation(s, points);
  const std::string head = search_log_head(s, budget, steps, pop.members);
  const std::string log_path = out_dir + "/search.log";
  const std::vector<std::string> logged = logged_generations(log_path, head);
  std::string decisions;
  Tally tally;
  for (size_t g = 0; g <= steps.size(); ++g) {
    const int64_t stop = g < steps.size() ? steps[g] : budget;
    // A generation an earlier driver decided trained already: it is decided again from
    // the records, not trained again (a run that failed for good stays the worst).
    if (g >= logged.size()) {
      const auto [now, stop_at] = generation_runs(pop, stop, budget, out_dir);
      write_file_atomically(log_path, head + decisions + "generation " + std::to_string(g) + ": training to step " +
                                          std::to_string(stop) + "\n");
      tally.add(run_rung(now, stop_at));
      if (tally.total.stop_signal) return tally.counted();  // what ran is on disk; the next `sweep run` goes on
    }
    if (g == steps.size()) break;
    std::string block;
    try {
      block = decide(s, out_dir, g + 1, stop, sign, pop);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sweep: the pbt search stopped at generation %zu: %s\n", g + 1, e.what());
      write_file_atomically(log_path,
                            head + decisions + "generation " + std::to_string(g + 1) + ": " + e.what() + "\n");
      tally.total.failed = std::max(tally.total.failed, 1);
      return tally.counted();
    }
    if (g < logged.size() && block != logged[g]) {
      // The records say otherwise than the log an earlier driver wrote: a record or a
      // checkpoint changed since. Deciding anew would make another search under its name.
      const auto [ours, theirs] = first_difference(block, logged[g]);
      std::fprintf(stderr,
                   "sweep: the pbt search's log decided generation %zu otherwise than its records do now (a record or "
                   "checkpoint changed since):\n  search.log: %s\n  records:    %s\nsweep: move %s aside to start "
                   "the search over\n",
                   g + 1, theirs.c_str(), ours.c_str(), out_dir.c_str());
      tally.total.failed = std::max(tally.total.failed, 1);
      return tally.counted();
    }
    decisions += block;
  }
  write_file_atomically(log_path, head + decisions + final_lines(s, pop, out_dir, budget, sign) + "done\n");
  return tally.counted();
}

}  // namespace sweep
