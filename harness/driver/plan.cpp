#include "plan.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "halving_plan.h"  // halving_trials
#include "run_files.h"     // regular_file_problem
#include "sweep_dir.h"     // scan_runs

namespace sweep {
namespace {

/// Value of `key` at point `p`: as written when swept there, else the base's canonical value.
const std::string& value_at(const GridPoint& p, const std::string& key,
                            const std::map<std::string, std::string>& base) {
  for (const auto& [k, v] : p.values)
    if (k == key) return v;
  static const std::string none = "-";
  auto it = base.find(key);
  return it == base.end() ? none : it->second;
}

}  // namespace

std::vector<std::string> varying_columns(const std::vector<GridPoint>& points, const RunConfig& base_config) {
  std::vector<std::string> keys;
  for (const auto& p : points)
    for (const auto& [k, v] : p.values)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  std::map<std::string, std::string> base;
  for (const auto& [k, v] : to_flat(base_config)) base[k] = v;
  std::vector<std::string> out;
  for (const auto& k : keys) {
    const std::string& first = value_at(points[0], k, base);
    for (const auto& p : points)
      if (value_at(p, k, base) != first) {
        out.push_back(k);
        break;
      }
  }
  return out;
}

std::string render_plan(const SweepSpec& spec, const Expansion& e, const std::string& dir, PlanCounts* counts) {
  PlanCounts c;
  c.total = e.points.size();
  const auto runs = scan_runs(dir);  // one listing; a missing dir is an empty one
  RunConfig base_config = apply_run_values(RunConfig{}, spec.base);
  std::map<std::string, std::string> base;
  for (const auto& [k, v] : to_flat(base_config)) base[k] = v;
  std::vector<std::string> cols =
      e.points.empty() ? std::vector<std::string>{} : varying_columns(e.points, base_config);

  // A stopped run is done only when a finished halving search stopped it: a plain grid
  // resumes it, and a search that has not said "done" may still promote it.
  const bool halving = spec.search.kind == "halving";
  bool search_done = false;
  if (halving) {
    std::ifstream in(dir + "/search.log");
    const std::string log{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    search_done = log.size() >= 5 && log.compare(log.size() - 5, 5, "done\n") == 0;
  }
  std::vector<const char*> state(e.points.size());
  std::vector<std::string> stale;  // "id: why", said after the table
  std::vector<size_t> width(cols.size());
  for (size_t j = 0; j < cols.size(); ++j) width[j] = cols[j].size();
  for (size_t i = 0; i < e.points.size(); ++i) {
    const GridPoint& p = e.points[i];
    auto it = runs.find(p.id);
    const std::string s = it == runs.end() ? "pending" : it->second.state;
    if (s == "completed")
      state[i] = "done", ++c.done;
    else if (s == "diverged")
      state[i] = "diverged", ++c.diverged;
    else if (s == "damaged")
      state[i] = "damaged", ++c.pending;  // moved aside and re-run by the next `sweep run`
    else if (s == "stale")
      state[i] = "stale", ++c.pending, stale.push_back(p.id + ": " + it->second.detail);  // the same
    else if (s == "failed")
      state[i] = "failed", ++c.pending;
    else if (s == "interrupted")
      state[i] = "interrupted", ++c.pending;
    else if (s == "stopped" && !halving)
      state[i] = "stopped", ++c.pending;  // a plain grid trains it to train.steps: it resumes
    else if (s == "stopped" && search_done)
      state[i] = "stopped", ++c.done;  // the finished search's decision
    else if (s == "stopped")
      state[i] = "stopped", ++c.at_rung;  // the search, going on, decides whether it resumes
    else if (s == "running")
      state[i] = "running", ++c.pending;
    else
      state[i] = "pending", ++c.pending;
    c.max_cores = std::max(c.max_cores, p.cores());
    for (size_t j = 0; j < cols.size(); ++j) width[j] = std::max(width[j], value_at(p, cols[j], base).size());
  }

  std::string out = "sweep " + spec.name + ": " + std::to_string(c.total) + " runs in " + dir + " (" +
                    std::to_string(c.done) + " done, " +
                    (c.at_rung ? std::to_string(c.at_rung) + " stopped at a rung of the unfinished search, " : "") +
                    std::to_string(c.pending) + " to run" +
                    (c.diverged ? ", " + std::to_string(c.diverged) + " recorded as diverged" : "") + ")\n";
  std::string notes;
  if (e.excluded) notes += std::to_string(e.excluded) + " excluded";
  if (e.mismatched) notes += (notes.empty() ? "" : ", ") + std::to_string(e.mismatched) + " skipped by constraints";
  if (e.duplicates) notes += (notes.empty() ? "" : ", ") + std::to_string(e.duplicates) + " duplicates";
  if (!notes.empty()) out += "points dropped: " + notes + "\n";
  const std::string keys =
      std::to_string(spec.search.space.size()) + (spec.search.space.size() == 1 ? " key" : " keys");
  if (spec.search.kind == "random")
    out += "search random: " + std::to_string(spec.search.samples) + " draws from " + keys + ", search seed " +
           std::to_string(spec.search.seed) + "\n";
  if (spec.search.kind == "tpe")
    out += "search tpe: " + std::to_string(spec.search.samples) + " trials over " + keys + ", search seed " +
           std::to_string(spec.search.seed) + ": the " + std::to_string(spec.search.startup) +
           " random startup trials below, then batches of " + std::to_string(spec.search.parallel) +
           " proposed from the " + spec.search.metric + " (" + spec.search.mode +
           ") of every earlier trial, listed in search.log as they are made\n";
  if (spec.search.kind == "halving") {
    const auto trials = halving_trials(spec, e.points);
    const auto brackets =
        halving_schedule(spec.search, e.points.empty() ? spec.search.min_steps : e.points.front().config.train.steps,
                         int64_t(trials.size()));
    out += "search halving: " + std::to_string(trials.size()) + " trials (" +
           (spec.search.space.empty() ? "the grid's points" : "draws from " + keys) + "), eta " +
           std::to_string(spec.search.eta) + ", by " + spec.search.metric + " (" + spec.search.mode + ")";
    for (size_t b = 0; b < brackets.size(); ++b) {
      out += b ? "; bracket " : ": bracket ";
      out += std::to_string(b) + " rungs";
      for (const HalvingRung& r : brackets[b].rungs)
        out += " " + std::to_string(r.trials) + "x" + std::to_string(r.steps);
    }
    out += " (trials x steps; decisions in search.log as they are made)\n";
  }
  out += "launcher " + spec.launch.launcher + ", parallel " + std::to_string(spec.launch.parallel) + ", largest run " +
         std::to_string(c.max_cores) + " cores\n";

  auto pad = [](std::string& line, const std::string& s, size_t w) {
    line += s;
    line.append(w > s.size() ? w - s.size() : 0, ' ');
    line += "  ";
  };
  std::string line;
  pad(line, "id", 16);
  pad(line, "state", 11);
  pad(line, "cores", 5);
  for (size_t j = 0; j < cols.size(); ++j) pad(line, cols[j], width[j]);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  out += line + "\n";
  out.reserve(out.size() + e.points.size() * (40 + cols.size() * 10));
  char cores[16];
  for (size_t i = 0; i < e.points.size(); ++i) {
    const GridPoint& p = e.points[i];
    line.clear();
    pad(line, p.id, 16);
    pad(line, state[i], 11);
    std::snprintf(cores, sizeof cores, "%lld", static_cast<long long>(p.cores()));
    pad(line, cores, 5);
    for (size_t j = 0; j < cols.size(); ++j) pad(line, value_at(p, cols[j], base), width[j]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  for (const std::string& why : stale)
    out += "stale " + why + ": `sweep run` keeps its record aside and runs it again\n";
  if (counts) *counts = c;
  return out;
}

std::vector<std::string> check_data_files(const SweepSpec& spec, const std::vector<GridPoint>& points) {
  const bool elsewhere =
      spec.launch.launcher == "slurm" || (spec.launch.launcher == "mpirun" && !spec.launch.hosts.empty());
  std::vector<std::string> notes;
  std::map<std::string, std::string> seen;  // path -> problem ("" = fine), one look per path
  for (size_t i = 0; i < points.size(); ++i) {
    const RunConfig& c = points[i].config;
    if (c.data.kind == "synthetic" || c.data.kind == "program") continue;  // no file of ours
    for (const auto& [key, path] : {std::pair<std::string, std::string>{"data.path", c.data.path},
                                    std::pair<std::string, std::string>{"data.eval_path", c.data.eval_path}}) {
      if (path.empty()) continue;  // data.eval_path is optional; a missing data.path is a config error already
      auto it = seen.find(path);
      if (it == seen.end()) it = seen.emplace(path, regular_file_problem(path)).first;
      if (it->second.empty()) continue;
      std::string values;
      for (const auto& [k, v] : points[i].values) values += (values.empty() ? "" : " ") + k + "=" + v;
      const std::string what = "key '" + key + "' of point " + std::to_string(i + 1) + " of " +
                               std::to_string(points.size()) + (values.empty() ? "" : " (" + values + ")") + ": '" +
                               printable(path) + "': " + it->second;
      if (!elsewhere) throw ConfigError(spec.source + ": " + what + "; nothing was started");
      notes.push_back(spec.source + ": note: " + what + " on this machine; the run's node checks it when it starts");
      it->second.clear();  // one note per path
    }
  }
  return notes;
}

}  // namespace sweep
