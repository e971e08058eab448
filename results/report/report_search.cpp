// The report's search section: a search.log read back (its formats are written by the
// harness: `draw` lines of kind random, `trial ... batch` lines of kind tpe, `trial` and
// `bracket ... rung` lines of kind halving, `rung ... result` lines of kind asha) with the records' steps and
// objectives.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>  // SIZE_MAX
#include <cstdlib>
#include <map>
#include <sstream>

#include "pareto.h"  // pareto_front, constraint_violation
#include "report.h"
#include "run_status.h"     // status_is
#include "search_metric.h"  // record_metric

namespace sweep {
namespace {

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

/// The run ids after " -> " (words of 16 hex digits, up to the first other word).
std::vector<std::string> ids_after_arrow(const std::string& line) {
  std::vector<std::string> ids;
  const size_t arrow = line.find(" ->");
  if (arrow == std::string::npos) return ids;
  for (const std::string& w : split_words(line.substr(arrow + 3))) {
    if (w.size() != 16 || w.find_first_not_of("0123456789abcdef") != std::string::npos) break;
    ids.push_back(w);
  }
  return ids;
}

/// The number after " METRIC=" (NaN when absent or "worst"): the metric as the runs have
/// it. Logs written before the metric was named say " loss=" (tpe's: sign x metric).
double metric_of(const std::string& line, const std::string& metric) {
  std::string key = " " + metric + "=";
  size_t at = line.find(key);
  if (at == std::string::npos) at = line.find(key = " loss=");
  if (at == std::string::npos) return NAN;
  const char* p = line.c_str() + at + key.size();
  char* end = nullptr;
  const double v = std::strtod(p, &end);
  return end == p ? NAN : v;
}

/// The value of `key=` in the header's words, or `fallback`.
std::string header_value(const std::vector<std::string>& words, const std::string& key, const std::string& fallback) {
  for (const auto& w : words)
    if (w.rfind(key + "=", 0) == 0) return w.substr(key.size() + 1);
  return fallback;
}

/// `text` split at commas ("" gives none).
std::vector<std::string> split_commas(std::string text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    out.push_back(text.substr(0, comma));
    text = comma == std::string::npos ? "" : text.substr(comma + 1);
  }
  return out;
}

/// A Pareto search's figures per trial, from the records of its runs (a run without a
/// completed record has none), judged as the search judges them (pareto.h).
void pareto_trials(SearchProgress& p, const std::vector<Record>& runs, const std::map<std::string, size_t>& run_of) {
  std::vector<MetricConstraint> constraints;
  for (const std::string& c : p.constraints) {
    MetricConstraint mc;
    if (parse_metric_constraint(c, &mc).empty()) constraints.push_back(mc);
  }
  const auto mean_of = [&](const std::vector<std::string>& ids, const std::string& metric) {
    double sum = ids.empty() ? NAN : 0.0;
    for (const auto& id : ids) {
      const auto it = run_of.find(id);
      sum += it == run_of.end() || !status_is(runs[it->second].status, RunStatus::completed)
                 ? NAN
                 : record_metric(runs[it->second], metric);
    }
    return sum / double(std::max<size_t>(1, ids.size()));
  };
  std::vector<ParetoEntry> entries;
  for (size_t t = 0; t < p.trials.size(); ++t) {
    if (p.trials[t].run_ids.empty()) continue;
    SearchProgress::ParetoTrial pt;
    pt.trial = t;
    ParetoEntry e;
    for (size_t k = 0; k < p.metrics.size(); ++k) {
      pt.values.push_back(mean_of(p.trials[t].run_ids, p.metrics[k]));
      const double v = pt.values.back();
      e.loss.push_back(std::isfinite(v) ? (k < p.modes.size() && p.modes[k] == "max" ? -v : v) : INFINITY);
    }
    for (const auto& c : constraints) {
      pt.constraint_values.push_back(mean_of(p.trials[t].run_ids, c.metric));
      e.violation += constraint_violation(c, pt.constraint_values.back());
    }
    pt.failed = e.failed(), pt.feasible = e.feasible(), pt.violation = e.violation;
    p.pareto.push_back(pt);
    entries.push_back(e);
  }
  for (size_t i : pareto_front(entries)) p.pareto[i].front = true;
}

/// A halving search's rungs, each trial's path through them and the best after each rung,
/// from its decisions.
/// The path of `trial` ("trial J") in p.paths, made on its first mention (in bracket
/// `bracket`); `path_of` maps each trial to its path's index.
SearchProgress::Path& trial_path(SearchProgress& p, std::map<std::string, size_t>& path_of, const std::string& trial,
                                 size_t bracket) {
  auto [at, fresh] = path_of.emplace(trial, p.paths.size());
  if (fresh) {
    SearchProgress::Path path;
    path.trial = SIZE_MAX;
    for (size_t t = 0; t < p.trials.size(); ++t)
      if (p.trials[t].label == trial) path.trial = t;
    path.bracket = bracket;
    p.paths.push_back(path);
  }
  return p.paths[at->second];
}

void read_halving(SearchProgress& p, double sign) {
  double compute = 0;
  std::map<std::string, size_t> runs_of_trial;  // "trial J" -> its run count
  std::map<std::string, double> reached;        // "trial J" -> steps trained so far
  std::string rung;                             // "bracket B rung R" of the lines being read
  double rung_best = INFINITY, rung_steps = 0;
  const auto close_rung = [&] {
    if (!rung.empty() && std::isfinite(rung_best))
      p.best_so_far.push_back(
          {compute, sign * rung_best, rung + " (" + std::to_string(int64_t(rung_steps)) + " steps)"});
    rung.clear(), rung_best = INFINITY;
  };
  std::map<std::string, size_t> path_of;  // "trial J" -> index into p.paths
  for (const std::string& d : p.decisions) {
    const auto w = split_words(d);
    if (w.size() >= 2 && w[0] == "trial" && d.find(" -> ") != std::string::npos) {
      runs_of_trial["trial " + w[1].substr(0, w[1].find(':'))] = ids_after_arrow(d).size();
      continue;
    }
    // bracket B rung R steps S: rank K trial J METRIC=X verdict
    if (w.size() < 10 || w[0] != "bracket" || w[2] != "rung" || w[4] != "steps") continue;
    const std::string this_rung = "bracket " + w[1] + " rung " + w[3];
    const size_t bracket = size_t(std::atoll(w[1].c_str())), rung_index = size_t(std::atoll(w[3].c_str()));
    if (this_rung != rung) {
      close_rung(), rung = this_rung;
      p.rungs.push_back({bracket, rung_index, std::atoll(w[5].c_str()), 0, 0, 0});
    }
    const double steps = std::atof(w[5].c_str());
    const std::string trial = "trial " + w[9];
    const double added = (steps - reached[trial]) * double(runs_of_trial[trial]);
    compute += added;
    reached[trial] = steps;
    rung_steps = steps;
    const double v = metric_of(d, p.metric);
    if (std::isfinite(v) && sign * v < rung_best) rung_best = sign * v;
    std::string verdict;
    for (const char* word : {"best of bracket", "promoted", "stopped", "finished"})
      if (d.size() >= std::string(word).size() &&
          d.compare(d.size() - std::string(word).size(), std::string::npos, word) == 0)
        verdict = word;
    SearchProgress::Rung& r = p.rungs.back();
    ++r.trials, r.steps_spent += added, r.promoted += verdict == "promoted" ? 1 : 0;
    SearchProgress::Path& path = trial_path(p, path_of, trial, bracket);
    path.points.emplace_back(int64_t(steps), v);
    path.fate = verdict, path.last_rung = rung_index;
  }
  close_rung();
}

/// An asha search's log (run_asha_search): per rung "rung R steps S: result N trial J
/// METRIC=X" in the rung's order, "rung R steps S: promoted trial J (...)", and at the end
/// "best: trial J at rung R ...". The same rungs, paths and best-by-rung as halving's.
void read_asha(SearchProgress& p, double sign) {
  double compute = 0;
  std::map<std::string, size_t> runs_of_trial;  // "trial J" -> its run count
  std::map<std::string, double> reached;        // "trial J" -> steps trained so far
  std::map<std::string, size_t> path_of;        // "trial J" -> index into p.paths
  std::map<size_t, size_t> rung_at;             // rung -> index into p.rungs
  std::map<size_t, double> rung_best;           // rung -> sign x its best metric
  size_t top = 0;
  const auto path = [&](const std::string& trial) -> SearchProgress::Path& {
    return trial_path(p, path_of, trial, 0);  // one bracket
  };
  for (const std::string& d : p.decisions) {
    const auto w = split_words(d);
    if (w.size() >= 2 && w[0] == "trial" && d.find(" -> ") != std::string::npos) {
      runs_of_trial["trial " + w[1].substr(0, w[1].find(':'))] = ids_after_arrow(d).size();
      continue;
    }
    if (w.size() >= 2 && w[0] == "rungs") {  // "rungs 2 6 18 (steps; ...": the top rung's index
      size_t n = 1;
      while (n < w.size() && !w[n].empty() && std::isdigit(static_cast<unsigned char>(w[n][0]))) ++n;
      top = n >= 2 ? n - 2 : 0;
      continue;
    }
    if (w.size() >= 5 && w[0] == "best:" && w[1] == "trial") {
      const auto it = path_of.find("trial " + w[2]);
      if (it != path_of.end()) p.paths[it->second].fate = "best of bracket";
      continue;
    }
    // rung R steps S: result N trial J METRIC=X  |  rung R steps S: promoted trial J (...)
    if (w.size() < 7 || w[0] != "rung" || w[2] != "steps") continue;
    const size_t rung = size_t(std::atoll(w[1].c_str()));
    const int64_t steps = std::atoll(w[3].c_str());
    auto [at, fresh] = rung_at.emplace(rung, p.rungs.size());
    if (fresh) p.rungs.push_back({0, rung, steps, 0, 0, 0});
    SearchProgress::Rung& r = p.rungs[at->second];
    if (w[4] == "promoted" && w[5] == "trial") {
      ++r.promoted;
      SearchProgress::Path& pa = path("trial " + w[6]);
      pa.fate = "promoted";
      continue;
    }
    if (w[4] != "result" || w.size() < 9 || w[6] != "trial") continue;
    const std::string trial = "trial " + w[7];
    const double added = (double(steps) - reached[trial]) * double(runs_of_trial[trial]);
    compute += added, reached[trial] = double(steps);
    ++r.trials, r.steps_spent += added;
    const double v = metric_of(d, p.metric);
    if (std::isfinite(v)) {
      auto [b, first] = rung_best.emplace(rung, sign * v);
      if (!first && sign * v < b->second) b->second = sign * v;
    }
    SearchProgress::Path& pa = path(trial);
    pa.points.emplace_back(steps, v);
    pa.fate = rung == top ? "finished" : "stopped", pa.last_rung = rung;
  }
  // The best of each rung, at the compute spent once its last result was taken.
  double spent = 0;
  for (const auto& r : p.rungs) {
    spent += r.steps_spent;
    if (const auto b = rung_best.find(r.rung); b != rung_best.end())
      p.best_so_far.push_back(
          {spent, sign * b->second, "rung " + std::to_string(r.rung) + " (" + std::to_string(r.steps) + " steps)"});
  }
}

/// "k=v (how) k2=v2 ..." as a map k -> v (the annotations in parentheses left out).
std::map<std::string, std::string> key_values(const std::string& inputs) {
  std::map<std::string, std::string> out;
  for (const std::string& w : split_words(inputs))
    if (const size_t eq = w.find('='); eq != std::string::npos && eq > 0 && w[0] != '(')
      out[w.substr(0, eq)] = w.substr(eq + 1);
  return out;
}

/// A pbt search's log (run_pbt_search): "member J: INPUTS -> ID" starts each member's
/// first span; "generation G step S: member J exploits member K (...): INPUTS -> ID" ends
/// its span at S and starts one from K's checkpoint; "final step N: rank R member J run ID
/// METRIC=X" ranks it. Each member's schedule, from the log alone.
void read_pbt(SearchProgress& p) {
  std::map<int64_t, size_t> at;  // member number -> index into p.members
  const auto member = [&](int64_t j) -> SearchProgress::Member& {
    auto [it, fresh] = at.emplace(j, p.members.size());
    if (fresh) p.members.push_back({"member " + std::to_string(j), {}, 0, NAN});
    return p.members[it->second];
  };
  for (const std::string& d : p.decisions) {
    const auto w = split_words(d);
    if (w.size() >= 4 && w[0] == "member" && d.find(" -> ") != std::string::npos) {
      const size_t colon = d.find(": "), arrow = d.find(" -> ");
      if (colon == std::string::npos || colon > arrow) continue;
      SearchProgress::Span s;
      s.inputs = d.substr(colon + 2, arrow - colon - 2);
      s.values = key_values(s.inputs);
      const auto ids = ids_after_arrow(d);
      s.run = ids.empty() ? "" : ids.front();
      member(std::atoll(w[1].c_str())).spans = {s};
      if (p.keys.empty())
        for (const auto& [k, v] : s.values) p.keys.push_back(k);
      continue;
    }
    // generation G step S: member J exploits member K (run R, checkpoint D): INPUTS -> ID
    if (w.size() >= 8 && w[0] == "generation" && w[2] == "step" && w[4] == "member" && w[6] == "exploits") {
      const int64_t step = std::atoll(w[3].c_str());
      const size_t open = d.find("): "), arrow = d.find(" -> ");
      if (open == std::string::npos || arrow == std::string::npos || open > arrow) continue;
      SearchProgress::Member& m = member(std::atoll(w[5].c_str()));
      if (!m.spans.empty()) m.spans.back().to = step;
      SearchProgress::Span s;
      s.from = step + 1;
      s.inputs = d.substr(open + 3, arrow - open - 3);
      s.values = key_values(s.inputs);
      const auto ids = ids_after_arrow(d);
      s.run = ids.empty() ? "" : ids.front();
      s.from_member = std::atoll(w[8].c_str());
      m.spans.push_back(s);
      continue;
    }
    // final step N: rank R member J run ID METRIC=X [best]
    if (w.size() >= 7 && w[0] == "final" && w[1] == "step" && w[3] == "rank" && w[5] == "member") {
      SearchProgress::Member& m = member(std::atoll(w[6].c_str()));
      m.rank = size_t(std::atoll(w[4].c_str()));
      m.final_value = metric_of(d, p.metric);
      if (!m.spans.empty()) m.spans.back().to = std::atoll(w[2].substr(0, w[2].find(':')).c_str());
    }
  }
  // A schedule still running ends where the budget does.
  for (auto& m : p.members)
    if (!m.spans.empty() && m.spans.back().to == 0) m.spans.back().to = p.budget;
}

}  // namespace

std::string pbt_schedule_text(const SearchProgress::Member& m) {
  std::string s;
  for (const SearchProgress::Span& span : m.spans) {
    s += (s.empty() ? "" : "; ") + std::string("steps ") + std::to_string(span.from) + "-" + std::to_string(span.to);
    if (span.from_member >= 0)
      s += " (from member " + std::to_string(span.from_member) + " at step " + std::to_string(span.from - 1) + ")";
    s += ": " + span.inputs;
  }
  return s;
}

SearchProgress search_progress(const std::string& log, const std::vector<Record>& runs,
                               const std::vector<ReportRun>& figures) {
  SearchProgress p;
  std::map<std::string, size_t> run_of;
  for (size_t i = 0; i < runs.size(); ++i) run_of[runs[i].run_id] = i;
  const auto steps_of = [&](const std::string& id) {
    const auto it = run_of.find(id);
    return it == run_of.end() || runs[it->second].steps.empty() ? 0.0 : double(runs[it->second].steps.back().step);
  };
  std::istringstream in(log);
  std::string line;
  bool header = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      const auto words = split_words(line);
      if (words.size() < 2 || words[0] != "search") return SearchProgress{};  // not a search log we know
      p.kind = words[1];
      p.metric =
          header_value(words, "metric", p.kind == "halving" || p.kind == "asha" ? "train_loss_end" : "objective");
      p.mode = header_value(words, "mode", "min");
      p.budget = std::atoll(header_value(words, "budget", "0").c_str());
      p.constraints = split_commas(header_value(words, "constraints", ""));
      if (p.metric.find(',') != std::string::npos || !p.constraints.empty()) {
        p.metrics = split_commas(p.metric), p.modes = split_commas(p.mode);
        p.metric = p.metrics.front(), p.mode = p.modes.empty() ? "min" : p.modes.front();
      }
      for (std::string keys = header_value(words, "keys", ""); !keys.empty();) {
        const size_t comma = keys.find(',');
        p.keys.push_back(keys.substr(0, comma));
        keys = comma == std::string::npos ? "" : keys.substr(comma + 1);
      }
      header = true;
      continue;
    }
    p.decisions.push_back(line);
  }
  for (const std::string& d : p.decisions) {  // the trials, in the log's order
    const bool draw = d.rfind("draw ", 0) == 0, trial = d.rfind("trial ", 0) == 0;
    if ((!draw && !trial) || d.find(" ->") == std::string::npos) continue;
    const auto w = split_words(d);
    if (w.size() < 2) continue;
    const size_t colon = d.find(": "), arrow = d.find(" ->");
    const std::string inputs =
        colon != std::string::npos && colon < arrow ? d.substr(colon + 2, arrow - colon - 2) : "";
    p.trials.push_back({w[0] + " " + w[1].substr(0, w[1].find(':')), inputs, ids_after_arrow(d)});
    if (p.keys.empty())
      for (const std::string& kv : split_words(inputs)) p.keys.push_back(kv.substr(0, kv.find('=')));
  }
  const double sign = p.mode == "max" ? -1 : 1;
  double compute = 0, best = INFINITY;  // best: sign x metric, lower is better
  if (p.kind == "random" || p.kind == "tpe") {
    for (const std::string& d : p.decisions) {
      const bool draw = d.rfind("draw ", 0) == 0, trial = d.rfind("trial ", 0) == 0;
      if (!draw && !trial) continue;
      const auto ids = ids_after_arrow(d);
      double sum = 0, v = NAN;
      for (const auto& id : ids) compute += steps_of(id);
      if (p.kind == "tpe") {
        v = metric_of(d, p.metric);
        if (d.find(" " + p.metric + "=") != std::string::npos) v *= sign;  // a " loss=" of old logs already is
      } else if (!ids.empty()) {
        for (const auto& id : ids) {
          const auto it = run_of.find(id);
          sum += it == run_of.end() || !status_is(runs[it->second].status, RunStatus::completed)
                     ? NAN
                     : figures[it->second].objective;
        }
        v = sum / double(ids.size());
      }
      if (std::isfinite(v) && v < best) best = v;
      if (std::isfinite(best)) p.best_so_far.push_back({compute, sign * best, d.substr(0, d.find(':'))});
    }
    if (p.kind == "random" && p.metrics.empty()) p.metric = "objective", p.mode = "min";
    if (!p.metrics.empty()) {  // the front is its result; no single metric has a best
      p.best_so_far.clear();
      pareto_trials(p, runs, run_of);
    }
    return p;
  }
  if (p.kind == "halving") read_halving(p, sign);
  if (p.kind == "asha") read_asha(p, sign);
  if (p.kind == "pbt") read_pbt(p);
  return p;
}

}  // namespace sweep
