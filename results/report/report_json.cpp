// The report as JSON, for scripts: every section of the HTML page, from the same
// ReportModel; numbers with 17 significant digits, null where a figure is missing.
#include "report.h"
#include "report_format.h"
#include "run_health.h"  // spike_decisions
#include "text.h"        // utf8_length, join

namespace sweep {
namespace {

using namespace report_fmt;

// A log tail or a config value may hold any bytes: json_quoted makes it UTF-8.
std::string jstr(const std::string& s) { return json_quoted(s); }

// JSON has no NaN or infinity: a missing or non-finite figure is null.
std::string jnum(double v) { return std::isfinite(v) ? g17(v) : "null"; }
std::string jint(int64_t v) { return std::to_string(v); }

std::string jlist(const std::vector<std::string>& items) { return "[" + join(items, ",") + "]"; }

std::string jrun_ids(const SweepRecords& sweep, const std::vector<size_t>& runs) {
  std::vector<std::string> ids;
  ids.reserve(runs.size());
  for (size_t i : runs) ids.push_back(jstr(sweep.runs[i].run_id));
  return jlist(ids);
}

std::string jints(const std::vector<int64_t>& v) {
  std::vector<std::string> s;
  s.reserve(v.size());
  for (int64_t x : v) s.push_back(jint(x));
  return jlist(s);
}

std::string jnums(const std::vector<double>& v) {
  std::vector<std::string> s;
  s.reserve(v.size());
  for (double x : v) s.push_back(jnum(x));
  return jlist(s);
}

/// A Pareto search's objectives and every trial's figures (empty for one metric).
std::string pareto_json(const SearchProgress& sp) {
  if (sp.metrics.empty()) return "";
  const auto strs = [](const std::vector<std::string>& v) {
    std::vector<std::string> out;
    out.reserve(v.size());
    for (const auto& x : v) out.push_back(jstr(x));
    return jlist(out);
  };
  std::vector<std::string> trials;
  for (const auto& t : sp.pareto)
    trials.push_back("{\"trial\":" + jstr(sp.trials[t.trial].label) + ",\"runs\":" + strs(sp.trials[t.trial].run_ids) +
                     ",\"values\":" + jnums(t.values) + ",\"constraint_values\":" + jnums(t.constraint_values) +
                     ",\"feasible\":" + (t.feasible ? "true" : "false") + ",\"front\":" + (t.front ? "true" : "false") +
                     "}");
  return ",\"metrics\":" + strs(sp.metrics) + ",\"modes\":" + strs(sp.modes) +
         ",\"constraints\":" + strs(sp.constraints) + ",\"pareto\":" + jlist(trials);
}

std::string json_baseline(const ReportModel& m, const BaselineDiff& d) {
  std::vector<std::string> seeds;
  for (const auto& x : d.seeds) seeds.push_back(jstr(x));
  return "{\"group\":" + jint(int64_t(d.group)) + ",\"baseline_group\":" + jint(int64_t(d.baseline)) +
         ",\"title\":" + jstr(diff_title(m, d)) + ",\"seeds\":" + jlist(seeds) +
         ",\"objective_differences\":" + jnums(d.objective_diffs) + ",\"objective_mean\":" + jnum(d.objective_mean) +
         ",\"objective_min\":" + jnum(d.objective_lo) + ",\"objective_max\":" + jnum(d.objective_hi) +
         ",\"curve\":{\"step\":" + jints(d.steps) + ",\"mean\":" + jnums(d.mean) + ",\"min\":" + jnums(d.lo) +
         ",\"max\":" + jnums(d.hi) + "}}";
}

std::string json_group(const SweepRecords& sweep, const ReportModel& m, const RunGroup& g) {
  std::string values = "{";
  for (size_t i = 0; i < g.values.size(); ++i)
    values += (i ? "," : "") + jstr(g.values[i].first) + ":" + jstr(g.values[i].second);
  std::vector<std::string> classes;
  for (size_t i : g.runs) classes.push_back(jstr(m.classes[m.runs[i].equivalence].name));
  return "{\"values\":" + values + "},\"runs\":" + jrun_ids(sweep, g.runs) +
         ",\"objective_name\":" + jstr(g.objective_name) +
         ",\"finite_objectives\":" + jint(int64_t(g.finite_objectives)) +
         ",\"ranked\":" + (g.ranked() ? "true" : "false") + ",\"objective_mean\":" + jnum(g.objective_mean) +
         ",\"objective_std\":" + jnum(g.objective_std) + ",\"best_loss\":" + jnum(g.best_loss) +
         ",\"best_eval_loss\":" + jnum(g.best_eval_loss) + ",\"tokens_per_s_median\":" + jnum(g.tokens_per_s) +
         ",\"flagged\":" + jint(int64_t(g.flagged)) +
         ",\"memory_bytes_per_rank_max\":" + (g.memory_bytes < 0 ? "null" : jint(g.memory_bytes)) +
         ",\"status\":" + jstr(g.status) + ",\"classes\":" + jlist(classes) +
         ",\"curve\":{\"step\":" + jints(g.curve_steps) + ",\"mean_loss\":" + jnums(g.curve_loss) +
         ",\"min_loss\":" + jnums(g.curve_lo) + ",\"max_loss\":" + jnums(g.curve_hi) + "}}";
}

// `changes`: what a resumed or forked run changed against its parent (LineageLine::changes).
std::string json_run(const SweepRecords& sweep, const ReportModel& m, const RunIndex& x, size_t i,
                     const std::string& changes) {
  const Record& r = sweep.runs[i];
  const ReportRun& f = m.runs[i];
  std::vector<std::string> health, spikes;
  for (const std::string& d : spike_decisions(r)) spikes.push_back(jstr(d));
  for (const auto& h : f.health) health.push_back("{\"flag\":" + jstr(h.name) + ",\"detail\":" + jstr(h.detail) + "}");
  std::string varying = "{";
  for (size_t k = 0; k < m.varying.size(); ++k)
    varying += (k ? "," : "") + jstr(m.varying[k]) + ":" + jstr(report_value(r, m.varying[k]));
  return "{\"run_id\":" + jstr(r.run_id) + ",\"status\":" + jstr(r.status) +
         ",\"verified\":" + (r.verified ? "true" : "false") + ",\"failure\":" + jstr(r.failure) + ",\"lineage\":" +
         (r.lineage.kind.empty()
              ? std::string("null")
              : "{\"kind\":" + jstr(r.lineage.kind) + ",\"parent_run_id\":" + jstr(r.lineage.parent_run_id) +
                    ",\"parent_step\":" + jint(r.lineage.parent_step) + ",\"changes\":" + jstr(changes) + "}") +
         ",\"spike_decisions\":" + jlist(spikes) + ",\"values\":" + varying +
         "},\"group\":" + jint(int64_t(x.group[i])) + ",\"steps\":" + jint(int64_t(r.steps.size())) +
         ",\"final_loss\":" + jnum(f.final_loss) + ",\"best_loss\":" + jnum(f.best_loss) +
         ",\"train_loss_end\":" + jnum(f.train_loss_end) +
         ",\"train_loss_end_steps\":" + jint(int64_t(f.train_loss_end_steps)) +
         ",\"final_eval_loss\":" + jnum(f.final_eval_loss) + ",\"best_eval_loss\":" + jnum(f.best_eval_loss) +
         ",\"best_eval_step\":" + (f.best_eval_step < 0 ? std::string("null") : jint(f.best_eval_step)) +
         ",\"objective\":" + jnum(f.objective) + ",\"objective_name\":" + jstr(f.objective_name) +
         ",\"tokens_per_s\":" + jnum(f.tokens_per_s) + ",\"tokens_per_s_median\":" + jnum(f.tokens_per_s_median) +
         ",\"runqueue_share\":" + jnum(f.runqueue_share) +
         ",\"shared_cores\":" + (f.shared_cores() ? "true" : "false") + ",\"health\":" + jlist(health) +
         ",\"train_time_s\":" + jnum(f.train_time_s) + ",\"memory_bytes\":{\"params\":" + jints(r.memory.params) +
         ",\"grads\":" + jints(r.memory.grads) + ",\"optimizer\":" + jints(r.memory.optimizer) +
         "},\"final_params_checksum\":" + jstr(final_checksum(r)) +
         ",\"class\":" + jstr(m.classes[f.equivalence].name) + ",\"pareto\":" + (f.pareto ? "true" : "false") +
         ",\"clipped_share\":" + jnum(f.clipped_share) + ",\"skipped_steps\":" + jint(f.skipped_steps) +
         ",\"slowest_rank\":" + (f.slowest_rank < 0 ? std::string("null") : jint(f.slowest_rank)) +
         ",\"slowest_rank_ratio\":" + jnum(f.slowest_rank_ratio) + "}";
}

/// "search": a search's kind, metric, keys, trials, rungs, paths and decisions (and a
/// Pareto search's front).
std::string json_search(const ReportModel& m) {
  if (m.search.kind.empty()) return "";
  std::string j;
  std::vector<std::string> points, decisions;
  for (const auto& pt : m.search.best_so_far)
    points.push_back("{\"compute_steps\":" + jnum(pt.compute) + ",\"best\":" + jnum(pt.best) +
                     ",\"label\":" + jstr(pt.label) + "}");
  for (const auto& d : m.search.decisions) decisions.push_back(jstr(d));
  std::vector<std::string> keys, trials, rungs, paths;
  for (const auto& k : m.search.keys) keys.push_back(jstr(k));
  for (const auto& t : m.search.trials) {
    std::vector<std::string> ids;
    for (const auto& id : t.run_ids) ids.push_back(jstr(id));
    trials.push_back("{\"label\":" + jstr(t.label) + ",\"inputs\":" + jstr(t.inputs) + ",\"runs\":" + jlist(ids) + "}");
  }
  for (const auto& r : m.search.rungs)
    rungs.push_back("{\"bracket\":" + jint(int64_t(r.bracket)) + ",\"rung\":" + jint(int64_t(r.rung)) +
                    ",\"steps\":" + jint(r.steps) + ",\"trials\":" + jint(int64_t(r.trials)) +
                    ",\"promoted\":" + jint(int64_t(r.promoted)) + ",\"steps_spent\":" + jnum(r.steps_spent) + "}");
  for (const auto& p : m.search.paths) {
    std::vector<std::string> pts;
    for (const auto& [steps, v] : p.points) pts.push_back("[" + jint(steps) + "," + jnum(v) + "]");
    paths.push_back("{\"trial\":" + jint(int64_t(p.trial)) + ",\"bracket\":" + jint(int64_t(p.bracket)) +
                    ",\"points\":" + jlist(pts) + ",\"fate\":" + jstr(p.fate) +
                    ",\"last_rung\":" + jint(int64_t(p.last_rung)) + "}");
  }
  std::vector<std::string> members;
  for (const auto& mem : m.search.members) {
    std::vector<std::string> spans;
    for (const auto& s : mem.spans)
      spans.push_back("{\"from\":" + jint(s.from) + ",\"to\":" + jint(s.to) + ",\"inputs\":" + jstr(s.inputs) +
                      ",\"run\":" + jstr(s.run) +
                      ",\"from_member\":" + (s.from_member < 0 ? std::string("null") : jint(s.from_member)) + "}");
    members.push_back("{\"label\":" + jstr(mem.label) +
                      ",\"rank\":" + (mem.rank ? jint(int64_t(mem.rank)) : std::string("null")) +
                      ",\"final\":" + jnum(mem.final_value) + ",\"spans\":" + jlist(spans) + "}");
  }
  j += ",\"search\":{\"kind\":" + jstr(m.search.kind) + ",\"metric\":" + jstr(m.search.metric) +
       ",\"mode\":" + jstr(m.search.mode) + ",\"keys\":" + jlist(keys) + ",\"best_so_far\":" + jlist(points) +
       ",\"trials\":" + jlist(trials) + ",\"rungs\":" + jlist(rungs) + ",\"paths\":" + jlist(paths) +
       ",\"members\":" + jlist(members) + ",\"decisions\":" + jlist(decisions) + pareto_json(m.search) + "}";
  return j;
}

/// "effects", "importance_method" and "base_deltas".
std::string json_effects(const SweepRecords& sweep, const ReportModel& m) {
  std::string j;
  std::vector<std::string> effects;
  for (const auto& e : m.effects) {
    std::vector<std::string> levels;
    for (size_t i = 0; i < e.values.size(); ++i)
      levels.push_back("{\"value\":" + jstr(e.values[i]) + ",\"runs\":" + jint(int64_t(e.counts[i])) +
                       ",\"mean_objective\":" + jnum(e.means[i]) + "}");
    std::vector<std::string> with;
    for (const auto& k : e.confounded_with) with.push_back(jstr(k));
    effects.push_back(
        "{\"key\":" + jstr(e.key) + ",\"spread\":" + jnum(e.spread) + ",\"variance_explained\":" + jnum(e.importance) +
        ",\"importance\":" + jnum(e.importance) + ",\"binned\":" + (e.binned ? "true" : "false") +
        ",\"rank_correlation\":" + jnum(e.rank_correlation) + ",\"changes_together_with\":" + jlist(with) +
        ",\"balanced\":" + (e.balanced ? "true" : "false") + ",\"levels\":" + jlist(levels) + "}");
  }
  const BaseDeltas& b = m.base_deltas;
  j += ",\"importance_method\":" +
       jstr(b.one_knob()        ? "delta_against_base"
            : m.rank_importance ? "rank_eta_squared"
                                : "eta_squared") +
       ",\"effects\":" + jlist(effects);
  if (b.one_knob()) {
    const auto pairs = [](const std::vector<std::pair<std::string, std::string>>& kv) {
      std::vector<std::string> out;
      out.reserve(kv.size());
      for (const auto& [k, v] : kv) out.push_back("{\"key\":" + jstr(k) + ",\"value\":" + jstr(v) + "}");
      return jlist(out);
    };
    std::vector<std::string> points;
    points.reserve(b.points.size());
    for (const auto& d : b.points) {
      std::vector<std::string> seeds;
      seeds.reserve(d.seeds.size());
      for (const auto& seed : d.seeds) seeds.push_back(jstr(seed));
      points.push_back("{\"changes\":" + pairs(d.changes) + ",\"runs\":" + jrun_ids(sweep, d.runs) +
                       ",\"seeds\":" + jlist(seeds) + ",\"objective\":" + jnum(d.objective) +
                       ",\"base_objective\":" + jnum(d.base_objective) + ",\"delta\":" + jnum(d.delta) +
                       ",\"relative_delta\":" + jnum(d.relative) +
                       ",\"within_seed_spread\":" + (d.within_spread ? "true" : "false") + "}");
    }
    j += ",\"base_deltas\":{\"base\":" + pairs(b.base) + ",\"base_runs\":" + jrun_ids(sweep, b.base_runs) +
         ",\"base_seeds\":" + jint(int64_t(b.base_seeds)) + ",\"base_mean\":" + jnum(b.base_mean) +
         ",\"base_std\":" + jnum(b.base_std) + ",\"points\":" + jlist(points) + "}";
  } else {
    j += ",\"base_deltas\":null";
  }
  return j;
}

/// "classes", "layout_sets" and "determinism_costs".
std::string json_reproducibility(const SweepRecords& sweep, const ReportModel& m) {
  std::string j;
  std::vector<std::string> classes, sets;
  for (const auto& c : m.classes)
    classes.push_back("{\"name\":" + jstr(c.name) + ",\"runs\":" + jrun_ids(sweep, c.runs) + "}");
  j += ",\"classes\":" + jlist(classes);
  for (const auto& s : m.layout_sets)
    sets.push_back("{\"identical\":" + std::string(s.identical ? "true" : "false") +
                   ",\"runs\":" + jrun_ids(sweep, s.runs) + ",\"first_difference\":" + jstr(s.first_difference) +
                   ",\"by_design\":" + jrun_ids(sweep, s.by_design) + ",\"by_design_max_relative_difference\":" +
                   jnum(s.by_design_max_rel) + ",\"by_design_note\":" + jstr(s.by_design_note) + "}");
  j += ",\"layout_sets\":" + jlist(sets);
  std::vector<std::string> costs;
  for (const auto& c : m.determinism_costs)
    costs.push_back("{\"deterministic\":" + jstr(sweep.runs[c.deterministic].run_id) +
                    ",\"deterministic_tokens_per_s\":" + jnum(c.deterministic_tokens_per_s) +
                    ",\"benchmark\":" + jstr(sweep.runs[c.benchmark].run_id) +
                    ",\"benchmark_tokens_per_s\":" + jnum(c.benchmark_tokens_per_s) + ",\"cost\":" + jnum(c.cost) +
                    ",\"refused\":" + jstr(c.refused) + "}");
  j += ",\"determinism_costs\":" + jlist(costs);
  return j;
}

/// "baseline" (the paired differences) and "charts".
std::string json_baseline_and_charts(const ReportModel& m) {
  std::string j;
  std::vector<std::string> charts;
  std::vector<std::string> diffs;
  for (const auto& d : m.baseline_diffs) diffs.push_back(json_baseline(m, d));
  std::vector<std::string> unpaired;
  for (const auto& u : m.baseline_unpaired) unpaired.push_back(jstr(u));
  j += ",\"baseline\":" + (m.baseline_key.empty()
                               ? std::string("null")
                               : "{\"key\":" + jstr(m.baseline_key) + ",\"value\":" + jstr(m.baseline_value) +
                                     ",\"differences\":" + jlist(diffs) + ",\"unpaired\":" + jlist(unpaired) + "}");
  for (const auto& c : m.charts) {
    std::vector<std::string> gs;
    for (size_t g : c.groups) gs.push_back(jint(int64_t(g)));
    std::vector<std::string> labels;
    for (const auto& l : c.labels) labels.push_back(jstr(l));
    charts.push_back("{\"title\":" + jstr(c.title) + ",\"groups\":" + jlist(gs) + ",\"labels\":" + jlist(labels) + "}");
  }
  j += ",\"charts\":" + jlist(charts);
  return j;
}

}  // namespace

std::string render_json(const SweepRecords& sweep, const ReportModel& m) {
  const RunIndex x = index_runs(sweep, m);
  std::vector<std::string> strs, groups, runs, env, failed, problems;
  // Version 2: groups carry the objective (final eval loss, else the mean training loss of
  // the last steps) instead of the final loss; runs their figures and health flags.
  // Version 3: curves carry their band (min_loss, max_loss); effects their variance
  // explained, confounding and balance; runs their Pareto membership and diagnostics;
  // layout sets the runs that differ by design; "baseline" the paired differences.
  // Version 4: groups carry their legend label; effects whether they were binned and
  // their rank correlation, with the model's importance_method; charts their labels and
  // facet_by; classes_matter, throughput_varies_with and long_values; the search its keys,
  // trials and (halving) rungs and paths.
  // Version 5: "base_deltas", each point of a one-knob-at-a-time sweep against its base
  // point (null for any other sweep); such a sweep's effects have a null importance and
  // variance_explained, and importance_method "delta_against_base".
  // Version 7: groups say whether they are ranked (a run with an objective: completed or
  // stopped at a rung; the others are listed apart); lineage, per run; base_deltas points
  // whether they are within the seed spread. Added since, without a new version (a reader
  // of version 7 passes it by): "diagnoses", each run's newest `sweep diagnose` line.
  std::string j = kJsonReportStart + ("\"version\":7,\"title\":" + jstr(m.title));
  j += ",\"summary\":{\"runs\":" + jint(int64_t(m.total)) + ",\"completed\":" + jint(int64_t(m.completed)) +
       ",\"diverged\":" + jint(int64_t(m.diverged)) + ",\"stopped\":" + jint(int64_t(m.stopped)) +
       ",\"failed\":" + jint(int64_t(m.failed)) + ",\"interrupted\":" + jint(int64_t(m.interrupted)) +
       ",\"damaged\":" + jint(int64_t(m.damaged)) + ",\"unfinished\":" + jint(int64_t(m.running)) +
       ",\"unverified\":" + jint(int64_t(m.unverified)) + ",\"pending\":" + jint(int64_t(m.pending)) +
       ",\"without_record\":" + jint(int64_t(m.missing)) + ",\"problems\":" + jint(int64_t(problem_count(sweep, m))) +
       ",\"health_flagged\":" + jint(int64_t(m.flagged)) +
       ",\"wall_time_s\":" + (m.wall_time_s < 0 ? "null" : jnum(m.wall_time_s)) +
       ",\"train_time_s\":" + jnum(m.train_time_s) + "}";
  j += json_search(m);
  j += ",\"diagnoses\":[";
  for (size_t i = 0; i < sweep.diagnoses.size(); ++i)
    j += std::string(i ? "," : "") + "{\"run_id\":" + jstr(sweep.diagnoses[i].first) +
         ",\"line\":" + jstr(sweep.diagnoses[i].second) + "}";
  j += "]";
  for (const auto& k : m.varying) strs.push_back(jstr(k));
  j += ",\"varying\":" + jlist(strs);
  strs.clear();
  for (const auto& k : m.columns) strs.push_back(jstr(k));
  j += ",\"columns\":" + jlist(strs) + ",\"group_by\":" + jstr(m.group_by) + ",\"facet_by\":" + jstr(m.facet_by);
  strs.clear();
  for (const auto& k : m.throughput_varies_with) strs.push_back(jstr(k));
  j += ",\"classes_matter\":" + std::string(m.classes_matter ? "true" : "false") +
       ",\"throughput_varies_with\":" + jlist(strs);
  strs.clear();
  for (const auto& l : m.long_values)
    strs.push_back("{\"key\":" + jstr(l.key) + ",\"value\":" + jstr(l.value) + ",\"alias\":" + jstr(l.alias) + "}");
  j += ",\"long_values\":" + jlist(strs);
  for (size_t g = 0; g < m.groups.size(); ++g) {
    std::string one = json_group(sweep, m, m.groups[g]);
    one.insert(1, "\"label\":" + jstr(g < m.group_labels.size() ? m.group_labels[g] : "") + ",");
    groups.push_back(std::move(one));
  }
  j += ",\"groups\":" + jlist(groups);
  std::vector<std::string> changes(sweep.runs.size());
  for (const LineageLine& l : lineage_lines(sweep)) changes[l.run] = l.changes;
  for (size_t i = 0; i < sweep.runs.size(); ++i) runs.push_back(json_run(sweep, m, x, i, changes[i]));
  j += ",\"runs\":" + jlist(runs);
  j += json_effects(sweep, m);
  j += json_reproducibility(sweep, m);
  j += json_baseline_and_charts(m);
  for (const auto& e : m.environment) {
    std::vector<std::string> vs;
    for (const auto& [v, n] : e.values) vs.push_back("{\"value\":" + jstr(v) + ",\"runs\":" + jint(int64_t(n)) + "}");
    env.push_back("{\"key\":" + jstr(e.key) + ",\"values\":" + jlist(vs) + "}");
  }
  j += ",\"environment\":" + jlist(env);
  for (const auto& f : sweep.failed)
    failed.push_back("{\"run_id\":" + jstr(f.run_id) + ",\"status\":" + jstr(f.status) + ",\"cause\":" + jstr(f.cause) +
                     ",\"log_tail\":" + jstr(f.log_tail) + ",\"step\":" + (f.step >= 0 ? jint(f.step) : "null") +
                     ",\"steps\":" + (f.steps >= 0 ? jint(f.steps) : "null") + ",\"loss\":" + jnum(f.loss) + "}");
  j += ",\"failed\":" + jlist(failed);
  for (const auto& p : sweep.problems) problems.push_back(jstr(p));
  return j + ",\"problems\":" + jlist(problems) + ",\"generator\":" + jstr(kReportGenerator) + "}\n";
}

std::string json_string(const std::string& s) { return jstr(s); }

}  // namespace sweep
