#include "plan.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string_view>
#include <unordered_map>

#include "accepted_changes.h"  // acceptance_lines
#include "halving_plan.h"      // halving_trials
#include "pbt_plan.h"          // pbt_decision_steps
#include "run_files.h"         // regular_file_problem
#include "sweep_dir.h"         // scan_runs
#include "text.h"              // significant

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

namespace {

/// A point's state as the plan shows it: the state's own word, but "done" for completed.
const char* plan_word(RunStatus s) { return s == RunStatus::completed ? "done" : status_name(s); }

/// What a search will do: its kind, trials, keys and seed, what it is judged on, and a
/// halving search's brackets and rungs.
std::string search_lines(const SweepSpec& spec, const Expansion& e) {
  std::string out;
  const SearchSpec& search = spec.search;
  const std::string keys = std::to_string(search.space.size()) + (search.space.size() == 1 ? " key" : " keys");
  // What a search is judged on: one metric, or a Pareto front under constraints.
  std::string judged = search.metric + " (" + search.mode + ")";
  if (search.pareto()) {
    judged = "Pareto front of ";
    for (size_t k = 0; k < search.metrics.size(); ++k)
      judged += (k ? ", " : "") + search.metrics[k] + " (" + search.modes[k] + ")";
    for (size_t k = 0; k < search.constraints.size(); ++k)
      judged += (k ? ", " : " subject to ") + search.constraints[k].metric + " " + search.constraints[k].op + " " +
                search.constraints[k].bound_text;
  }
  if (search.kind == "random")
    out += "search random: " + std::to_string(search.samples) + " draws from " + keys + ", search seed " +
           std::to_string(search.seed) + (search.pareto() ? "; the report draws the " + judged : "") + "\n";
  if (search.kind == "tpe")
    out += "search tpe: " + std::to_string(search.samples) + " trials over " + keys + ", search seed " +
           std::to_string(search.seed) + ": the " + std::to_string(search.startup) +
           " random startup trials below, then batches of " + std::to_string(search.parallel) + " proposed from the " +
           judged + " of every earlier trial, listed in search.log as they are made\n";
  if (search.halves()) {
    const auto trials = halving_trials(spec, e.points);
    const auto brackets = halving_schedule(
        search, e.points.empty() ? search.min_steps : e.points.front().config.train.steps, int64_t(trials.size()));
    out += "search " + search.kind + ": " + std::to_string(trials.size()) + " trials (" +
           (search.space.empty() ? "the grid's points" : "draws from " + keys) + "), eta " +
           std::to_string(search.eta) + ", by " + search.metric + " (" + search.mode + ")";
    for (size_t b = 0; b < brackets.size(); ++b) {
      out += b ? "; bracket " : ": bracket ";
      out += std::to_string(b) + " rungs";
      for (const HalvingRung& r : brackets[b].rungs)
        out += " " + std::to_string(r.trials) + "x" + std::to_string(r.steps);
    }
    out += search.kind == "asha"
               ? " (trials x steps of synchronous halving; asha promotes as results come, in trial order, and may "
                 "promote more; decisions in search.log as they are made)\n"
               : " (trials x steps; decisions in search.log as they are made)\n";
  }
  if (search.kind == "pbt") {
    const int64_t budget = e.points.empty() ? 0 : e.points.front().config.train.steps;
    std::string at;
    for (int64_t st : pbt_decision_steps(search, budget)) at += (at.empty() ? "" : ", ") + std::to_string(st);
    out += "search pbt: " + std::to_string(search.population) + " members (draws from " + keys + "), search seed " +
           std::to_string(search.seed) + ", ranked by " + judged + " at steps " + at + ": the bottom " +
           significant(search.quantile, 6) + " fork from the top with perturbed or resampled keys (the members " +
           "below; forks in search.log as they are made)\n";
  }
  return out;
}

}  // namespace

PlanTable::PlanTable(const SweepSpec& spec, const std::string& dir)
    : spec_(spec), dir_(dir), runs_(scan_runs(dir)), stops_runs_(spec.search.halves() || spec.search.kind == "pbt") {
  // A stopped run is done only when a finished halving search stopped it: a plain grid
  // resumes it, and a search that has not said "done" may still promote it.
  if (stops_runs_) {
    std::ifstream in(dir + "/search.log");
    const std::string log{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    search_done_ = log.size() >= 5 && log.compare(log.size() - 5, 5, "done\n") == 0;
  }
  for (const auto& [k, v] : to_flat(apply_run_values(RunConfig{}, spec.base))) base_[k] = v;
}

void PlanTable::add(const GridPoint& p) {
  PlanCounts& c = counts_;
  const bool first_point = c.total == 0;
  ++c.total;
  auto it = runs_.find(p.id);
  const RunState none;
  const RunState& s = it == runs_.end() ? none : it->second;
  // What the next `sweep run` does with it (next_action, the rule it follows): a plain
  // grid resumes a stopped run to train.steps; a halving search keeps it when it has
  // finished and decides at its next rung while it goes on.
  PointAsk ask;
  if (stops_runs_) ask.search_finished = search_done_;
  switch (next_action(s, ask)) {
    case NextAction::keep:
      ++c.done;
      break;
    case NextAction::keep_failed:
      ++c.diverged;
      break;
    case NextAction::await_rung:
      ++c.at_rung;
      break;
    case NextAction::start_over:  // moved aside and re-run by the next `sweep run`
      if (s.state == RunStatus::stale) stale_.push_back(p.id + ": " + s.detail);
      ++c.pending;
      break;
    case NextAction::run:
    case NextAction::promote:
      ++c.pending;
      break;
  }
  c.max_cores = std::max(c.max_cores, p.cores());
  state_.push_back(s.state);
  cores_.push_back(p.cores());

  // A key's value where a point does not sweep it is the base's (or "-"): a key first
  // seen at a later point had that value at the first one.
  auto base_value = [&](const std::string& key) -> const std::string& {
    static const std::string none = "-";
    auto b = base_.find(key);
    return b == base_.end() ? none : b->second;
  };
  std::fill(in_point_.begin(), in_point_.end(), 0);
  cells_ += p.id;
  cells_ += '\0';
  for (const auto& [k, v] : p.values) {
    auto [ki, fresh] = key_index_.emplace(k, uint16_t(keys_.size()));
    if (fresh) {
      if (keys_.size() == 0xffff) throw ConfigError(spec_.source + ": more than 65,535 swept keys");
      keys_.push_back(k);
      first_.push_back(first_point ? v : base_value(k));
      varies_.push_back(0);
      in_point_.push_back(0);
    }
    const uint16_t i = ki->second;
    in_point_[i] = 1;
    if (v != first_[i]) varies_[i] = 1;
    cells_ += char(i & 0xff);
    cells_ += char(i >> 8);
    cells_ += v;
    cells_ += '\0';
  }
  for (size_t i = 0; i < keys_.size(); ++i)
    if (!in_point_[i] && !varies_[i] && base_value(keys_[i]) != first_[i]) varies_[i] = 1;
  row_end_.push_back(cells_.size());
}

std::string PlanTable::render(const Expansion& e, std::FILE* file, PlanCounts* counts) {
  const PlanCounts& c = counts_;
  std::string out = "sweep " + spec_.name + ": " + std::to_string(c.total) + " runs in " + dir_ + " (" +
                    std::to_string(c.done) + " done, " +
                    (c.at_rung ? std::to_string(c.at_rung) + " stopped at a rung of the unfinished search, " : "") +
                    std::to_string(c.pending) + " to run" +
                    (c.diverged ? ", " + std::to_string(c.diverged) + " recorded as diverged" : "") + ")\n";
  std::string notes;
  if (e.excluded) notes += std::to_string(e.excluded) + " excluded";
  if (e.mismatched) notes += (notes.empty() ? "" : ", ") + std::to_string(e.mismatched) + " skipped by constraints";
  if (e.duplicates) notes += (notes.empty() ? "" : ", ") + std::to_string(e.duplicates) + " duplicates";
  if (!notes.empty()) out += "points dropped: " + notes + "\n";
  out += search_lines(spec_, e);
  out += "launcher " + spec_.launch.launcher + ", parallel " + std::to_string(spec_.launch.parallel) +
         ", largest run " + std::to_string(c.max_cores) + " cores\n";

  // The varying columns, their widths, and each row's cell per column (the base's value,
  // or "-", where the point does not sweep the key).
  std::vector<size_t> column(keys_.size(), SIZE_MAX);  // key index -> column
  std::vector<std::string> cols;
  std::vector<std::string> fallback;
  for (size_t i = 0; i < keys_.size(); ++i)
    if (varies_[i]) {
      column[i] = cols.size();
      cols.push_back(keys_[i]);
      auto b = base_.find(keys_[i]);
      fallback.push_back(b == base_.end() ? "-" : b->second);
    }
  std::vector<std::string_view> cell(cols.size());
  auto row_cells = [&](size_t r) -> std::string_view {  // fills `cell`; returns the id
    const size_t begin = r ? row_end_[r - 1] : 0;
    const char* p = cells_.data() + begin;
    const char* end = cells_.data() + row_end_[r];
    const std::string_view id(p);
    p += id.size() + 1;
    for (size_t j = 0; j < cols.size(); ++j) cell[j] = fallback[j];
    while (p < end) {
      const size_t key = size_t(uint8_t(p[0])) | size_t(uint8_t(p[1])) << 8;
      const std::string_view v(p + 2);
      if (column[key] != SIZE_MAX) cell[column[key]] = v;
      p += 2 + v.size() + 1;
    }
    return id;
  };
  std::vector<size_t> width(cols.size());
  for (size_t j = 0; j < cols.size(); ++j) width[j] = cols[j].size();
  for (size_t r = 0; r < row_end_.size(); ++r) {
    row_cells(r);
    for (size_t j = 0; j < cols.size(); ++j) width[j] = std::max(width[j], cell[j].size());
  }

  auto pad = [](std::string& line, std::string_view s, size_t w) {
    line += s;
    line.append(w > s.size() ? w - s.size() : 0, ' ');
    line += "  ";
  };
  auto flush = [&](bool last) {
    if (file && (last || out.size() >= (1 << 20))) {
      std::fwrite(out.data(), 1, out.size(), file);
      out.clear();
    }
  };
  std::string line;
  pad(line, "id", 16);
  pad(line, "state", 11);
  pad(line, "cores", 5);
  for (size_t j = 0; j < cols.size(); ++j) pad(line, cols[j], width[j]);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  out += line + "\n";
  if (!file) out.reserve(out.size() + row_end_.size() * (40 + cols.size() * 10));
  char cores[24];
  for (size_t r = 0; r < row_end_.size(); ++r) {
    line.clear();
    pad(line, row_cells(r), 16);
    pad(line, plan_word(state_[r]), 11);
    std::snprintf(cores, sizeof cores, "%lld", static_cast<long long>(cores_[r]));
    pad(line, cores, 5);
    for (size_t j = 0; j < cols.size(); ++j) pad(line, cell[j], width[j]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
    flush(false);
  }
  for (const std::string& why : stale_)
    out += "stale " + why + ": `sweep run` keeps its record and checkpoints aside and runs it again\n";
  for (const std::string& line : acceptance_lines(dir_)) out += line + "\n";
  flush(true);
  if (counts) *counts = c;
  return out;
}

std::string render_plan(const SweepSpec& spec, const Expansion& e, const std::string& dir, PlanCounts* counts) {
  PlanTable table(spec, dir);
  for (const GridPoint& p : e.points) table.add(p);
  return table.render(e, nullptr, counts);
}

DataFileCheck::DataFileCheck(const SweepSpec& spec)
    : spec_(spec),
      elsewhere_(spec.launch.launcher == "slurm" || (spec.launch.launcher == "mpirun" && !spec.launch.hosts.empty())) {}

void DataFileCheck::add(const GridPoint& point) {
  const size_t i = points_++;
  const RunConfig& c = point.config;
  if (c.data.kind == "synthetic" || c.data.kind == "program") return;  // no file of ours
  if (!first_error_.empty()) return;                                   // the first one is said
  for (const auto& [key, path] : {std::pair<std::string, std::string>{"data.path", c.data.path},
                                  std::pair<std::string, std::string>{"data.eval_path", c.data.eval_path}}) {
    if (path.empty()) continue;  // data.eval_path is optional; a missing data.path is a config error already
    auto it = seen_.find(path);
    if (it == seen_.end()) it = seen_.emplace(path, regular_file_problem(path)).first;
    if (it->second.empty()) continue;
    std::string values;
    for (const auto& [k, v] : point.values) values += (values.empty() ? "" : " ") + k + "=" + v;
    // "of N" is known only after the last point.
    const std::string head = "key '" + key + "' of point " + std::to_string(i + 1) + " of ";
    const std::string tail = (values.empty() ? "" : " (" + values + ")") + ": '" + printable(path) + "': " + it->second;
    if (!elsewhere_) {
      first_error_ = head;
      first_error_rest_ = tail;
      return;
    }
    notes_.emplace_back(head, tail);
    it->second.clear();  // one note per path
  }
}

std::vector<std::string> DataFileCheck::finish() {
  const std::string n = std::to_string(points_);
  if (!first_error_.empty())
    throw ConfigError(spec_.source + ": " + first_error_ + n + first_error_rest_ + "; nothing was started");
  std::vector<std::string> out;
  for (const auto& [head, tail] : notes_)
    out.push_back(spec_.source + ": note: " + head + n + tail +
                  " on this machine; the run's node checks it when it starts");
  return out;
}

std::vector<std::string> check_data_files(const SweepSpec& spec, const std::vector<GridPoint>& points) {
  DataFileCheck check(spec);
  for (const GridPoint& p : points) check.add(p);
  return check.finish();
}

}  // namespace sweep
