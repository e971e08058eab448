// The report as Markdown, for reviews and diffs: the HTML page's sections as tables, the
// loss curves sampled at the first, quartile and last steps.
#include <algorithm>  // max, none_of
#include <cmath>      // isfinite

#include "report.h"
#include "report_format.h"
#include "report_telemetry.h"  // telemetry_runs, telemetry_tables
#include "run_status.h"        // status_is
#include "telemetry_series.h"  // has_telemetry
#include "text.h"              // printable_lines

namespace sweep {
namespace {

using namespace report_fmt;

// Cells must not break the table, and raw HTML in Markdown would be rendered. Control and
// invisible characters (an ESC sequence, a bidi override) are shown escaped, as \xNN or
// \u{NNNN} (printable_lines), so a name or log line reads as what it is.
std::string md(const std::string& s) {
  std::string out;
  for (char c : printable_lines(s)) {
    switch (c) {
      case '|':
        out += "\\|";
        break;
      case '\\':
      case '`':
      case '*':
      case '_':
      case '[':
      case ']':
      case '#':
        out += '\\', out += c;
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '\n':
      case '\r':
        out += ' ';
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string md_row(const std::vector<std::string>& cells) {
  std::string s = "|";
  for (const auto& c : cells) s += " " + c + " |";
  return s + "\n";
}

std::string md_header(const std::vector<std::string>& cells) {
  std::string s = md_row(cells) + "|";
  for (size_t i = 0; i < cells.size(); ++i) s += "---|";
  return s + "\n";
}

// A fence longer than any run of backticks in the text keeps a log inside its block; its
// control and invisible characters are shown escaped (printable_lines).
std::string md_code(const std::string& raw) {
  const std::string text = printable_lines(raw);
  size_t longest = 0, run = 0;
  for (char c : text) run = c == '`' ? run + 1 : 0, longest = std::max(longest, run);
  const std::string fence(std::max<size_t>(3, longest + 1), '`');
  return fence + "\n" + text + "\n" + fence + "\n";
}

std::string md_ids(const SweepRecords& sweep, const std::vector<size_t>& runs) {
  std::string s;
  for (size_t i : runs) s += (s.empty() ? "" : ", ") + md(sweep.runs[i].run_id);
  return s;
}

/// A Pareto search's front: how many trials were feasible, and every non-dominated one.
std::string pareto_markdown(const SearchProgress& sp) {
  if (sp.metrics.empty()) return "";
  size_t feasible = 0, front = 0;
  for (const auto& t : sp.pareto) feasible += t.feasible ? 1 : 0, front += t.front ? 1 : 0;
  std::string objectives;
  for (size_t k = 0; k < sp.metrics.size(); ++k)
    objectives += (k ? ", " : "") + md(sp.metrics[k]) + " (" + (k < sp.modes.size() ? sp.modes[k] : "min") + ")";
  std::string s = "### Pareto front\n\nThe non-dominated trials of " + objectives +
                  ": no other feasible trial is at least as good on every metric and better on one";
  if (!sp.constraints.empty()) {
    s += "; feasible means ";
    for (size_t k = 0; k < sp.constraints.size(); ++k) s += (k ? " and " : "") + md(sp.constraints[k]);
  }
  s += ". " + std::to_string(front) + " of " + std::to_string(sp.pareto.size()) + " trials (" +
       std::to_string(feasible) + " feasible).\n\n";
  std::vector<std::string> head = {"trial", "values", "runs"};
  for (const auto& metric : sp.metrics) head.push_back(md(metric));
  s += md_header(head);
  for (const auto& t : sp.pareto) {
    if (!t.front) continue;
    const SearchProgress::Trial& trial = sp.trials[t.trial];
    std::string ids;
    for (const auto& id : trial.run_ids) ids += (ids.empty() ? "" : " ") + id;
    std::vector<std::string> row = {md(trial.label), md(trial.inputs), ids};
    for (double v : t.values) row.push_back(g6(v));
    s += md_row(row);
  }
  return s + "\n";
}

// Each run's gradient telemetry as telemetry_tables says it, for the runs the HTML page draws.
std::string telemetry_md(const SweepRecords& sweep, const ReportModel& m) {
  const std::vector<size_t> runs = telemetry_runs(sweep, m);
  if (runs.empty()) return "";
  std::string s = "\n## Gradient telemetry\n\nAt the first, quartile and last steps (rows) that recorded it";
  size_t with = 0;
  for (size_t i : m.html_runs) with += has_telemetry(sweep.runs[i]) ? 1 : 0;
  s += with > runs.size() ? "; " + std::to_string(runs.size()) + " of the " + std::to_string(with) +
                                " runs that recorded some, flagged runs first (`sweep show --telemetry` shows any).\n"
                          : ".\n";
  for (size_t i : runs) {
    s += "\n### " + md(sweep.runs[i].run_id) + "\n";
    for (const TextTable& t : telemetry_tables(sweep.runs[i])) {
      const auto escaped = [](const std::vector<std::string>& cells) {
        std::vector<std::string> out;
        out.reserve(cells.size());
        for (const auto& c : cells) out.push_back(md(c));
        return out;
      };
      s += "\n" + md(t.title) + ":\n\n" + md_header(escaped(t.head));
      for (const auto& row : t.rows) s += md_row(escaped(row));
    }
  }
  return s;
}

/// ## Results: the groups ranked by the objective, the unranked apart.
std::string md_results(const SweepRecords& sweep, const ReportModel& m) {
  std::string s;
  s += "## Results\n\n";
  const std::string objective = objective_title(m);
  std::vector<std::string> head = {md(objective + " (mean ± std over seeds)")};
  for (const auto& k : m.columns) head.push_back(md(k));
  for (const char* h :
       {"runs", "health", "best loss", "best eval loss", "tokens/s (median)", "memory per rank", "status"})
    head.push_back(md(h));
  if (m.classes_matter) head.push_back("reproducibility class");
  s += md_header(head);
  const size_t n_ranked =
      size_t(std::count_if(m.groups.begin(), m.groups.end(), [](const RunGroup& g) { return g.ranked(); }));
  for (const auto& g : m.groups) {
    if (!g.ranked() && &g == &m.groups[n_ranked])  // the groups are sorted: the unranked last, apart
      s += "\n**Not ranked**: no run of these has a finite objective (a diverged, failed or interrupted run has none: "
           "its figures are partial).\n\n" +
           md_header(head);
    std::vector<std::string> row = {md(objective_cell(m, g))};
    for (const auto& kv : g.values) row.push_back(md(shown_value(m, kv.first, kv.second)));
    const std::string health = group_health(m, g);
    for (const std::string& c :
         {std::to_string(g.runs.size()), health.empty() ? "ok" : "**" + md(health) + "**", g6(g.best_loss),
          g6(g.best_eval_loss), g6(g.tokens_per_s), mib(g.memory_bytes), md(g.status)})
      row.push_back(c);
    if (m.classes_matter) {
      std::string classes;
      for (size_t i : g.runs) classes += (classes.empty() ? "" : " ") + m.classes[m.runs[i].equivalence].name;
      row.push_back(classes);
    }
    s += md_row(row);
  }
  s += "\nBest " + md(objective) +
       " first (the final eval loss of a run that evaluated held-out data, else the mean "
       "training loss of its last " +
       std::to_string(kLossWindow) + " steps).\n";
  if (!m.long_values.empty()) {
    s += "\nValues too long for the table:\n\n" + md_header({"shown as", "key", "value"});
    for (const auto& l : m.long_values) s += md_row({md(l.alias), md(l.key), md(l.value)});
  }
  return s;
}

/// ## Loss curves, and held-out loss and the programs' own metrics, sampled at the first,
/// quartile and last steps.
std::string md_curves(const SweepRecords& sweep, const ReportModel& m) {
  std::string s;
  s += "\n## Loss curves\n\nMean loss over the runs of each group at the first, quartile and last steps.\n\n";
  for (const auto& c : m.charts) {
    s += "### " + md(c.title) + "\n\n" + md_header({"group", "step: loss"});
    for (size_t j = 0; j < c.groups.size(); ++j) {
      const RunGroup& g = m.groups[c.groups[j]];
      std::string pts;
      for (size_t k : curve_samples(g.curve_steps.size()))
        pts += (pts.empty() ? "" : ", ") + std::to_string(g.curve_steps[k]) + ": " + g6(g.curve_loss[k]);
      s += md_row({md(j < c.labels.size() ? c.labels[j] : values_text(g)), pts.empty() ? "no finite loss" : pts});
    }
    s += "\n";
  }
  // Held-out loss and a program's own metrics, sampled like the loss curves.
  const std::vector<std::string> curves = metric_curves(sweep.runs);
  if (!curves.empty()) {
    s += "## Held-out loss and the programs' own metrics\n\nMean over the runs of each group at the first, "
         "quartile and last steps that recorded it.\n\n";
    for (const std::string& name : curves) {
      s += "### " + md(name) + "\n\n" + md_header({"group", "step: " + md(name)});
      for (size_t gi = 0; gi < m.groups.size(); ++gi) {
        const Curve c = metric_curve(sweep.runs, m.groups[gi].runs, name);
        std::string pts;
        for (size_t k : curve_samples(c.steps.size()))
          pts += (pts.empty() ? "" : ", ") + std::to_string(c.steps[k]) + ": " + g6(c.mean[k]);
        s += md_row({md(gi < m.group_labels.size() ? m.group_labels[gi] : values_text(m.groups[gi])),
                     pts.empty() ? "none recorded" : pts});
      }
      s += "\n";
    }
  }
  return s;
}

/// Differences against a baseline value, the effect of each change or axis, and the
/// objective/throughput Pareto front.
std::string md_effects(const SweepRecords& sweep, const ReportModel& m) {
  std::string s;
  const std::string objective = objective_title(m);
  if (!m.baseline_key.empty()) {
    s += "## Differences against " + md(m.baseline_key + "=" + m.baseline_value) +
         "\n\nEach run minus the run with the same seed and the baseline value; loss differences are the mean "
         "over seeds [smallest, largest] at the first, quartile and last steps.\n\n" +
         md_header({"difference", "seeds paired", md(objective) + " difference", "step: loss difference"});
    for (const auto& d : m.baseline_diffs) {
      std::string seeds, pts;
      for (const auto& x : d.seeds) seeds += (seeds.empty() ? "" : ", ") + x;
      for (size_t k : curve_samples(d.steps.size()))
        pts += (pts.empty() ? "" : ", ") + std::to_string(d.steps[k]) + ": " + g6(d.mean[k]) + " [" + g6(d.lo[k]) +
               ", " + g6(d.hi[k]) + "]";
      s += md_row({md(diff_title(m, d)), md(seeds), md(diff_text(d)), pts.empty() ? "no common step" : pts});
    }
    for (const auto& u : m.baseline_unpaired) s += md_row({md(u), "", "no partner at the baseline value", ""});
    s += "\n";
  }
  if (m.base_deltas.one_knob()) {
    s += "## Effect of each change on the " + md(objective) + ", against the base point\n\n" + md(base_note(sweep, m)) +
         "\n\n" +
         md_header({"change from the base", "seeds", md(objective), "base " + md(objective), "delta", "delta %"});
    for (const auto& d : m.base_deltas.points)
      s += md_row({md(changes_text(m, d)), md(delta_seeds(d)), g6(d.objective), g6(d.base_objective), md(delta_text(d)),
                   signed_percent(d.relative)});
    s += "\n" + md(kBaseDeltaMethod) + "\n";
  } else {
    s += "## Effect of each axis on the " + md(objective) + "\n\n" +
         md_header({"axis", "spread of means",
                    m.rank_importance ? "importance (rank eta squared)" : "variance explained",
                    m.rank_importance ? "value or bin" : "value", "runs", "mean " + md(objective)});
    for (const auto& e : m.effects) {
      const std::string rho = m.rank_importance ? rho_text(e) : "";
      const std::string notes = md(effect_notes(e, m.rank_importance)) + (rho.empty() ? "" : "; " + rho);
      for (size_t i = 0; i < e.values.size(); ++i)
        s += md_row({i ? "" : md(e.key), i ? "" : g6(e.spread), i ? "" : notes, md(e.values[i]),
                     std::to_string(e.counts[i]), g6(e.means[i])});
    }
    s += "\n" + md(importance_method(m)) + "\n";
  }
  std::string front;
  for (size_t i = 0; i < m.runs.size(); ++i)
    if (m.runs[i].pareto)
      front += md_row({md(sweep.runs[i].run_id), g6(m.runs[i].objective), g6(m.runs[i].tokens_per_s_median)});
  if (m.throughput_varies_with.empty())
    s += "\nThroughput: no key that changes it by design varies (precision, layout, kernels, model size); the "
         "differences in tokens/s are the machine's noise, so no Pareto front is given.\n";
  else if (!front.empty())
    s += "\n## Pareto front\n\nRuns no other run beats on both the " + md(objective) + " and tokens/s.\n\n" +
         md_header({"run", md(objective), "tokens/s (median)"}) + front;
  return s;
}

/// ## Diagnostics, the gradient telemetry, ## Reproducibility and what determinism costs.
std::string md_diagnostics(const SweepRecords& sweep, const ReportModel& m) {
  std::string s;
  s += "\n## Diagnostics\n\n" + md_header({"run", "steps clipped", "steps skipped", "slowest rank", "ZeRO stage"});
  for (size_t i = 0; i < m.runs.size(); ++i) {
    const ReportRun& f = m.runs[i];
    s += md_row({md(sweep.runs[i].run_id), percent(f.clipped_share), std::to_string(f.skipped_steps),
                 f.slowest_rank < 0 ? "-"
                                    : "rank " + std::to_string(f.slowest_rank) + " (" + g6(f.slowest_rank_ratio) + "x" +
                                          (f.shared_cores() ? ", shared cores" : "") + ")",
                 md(report_value(sweep.runs[i], "dist.zero_stage"))});
  }
  s += telemetry_md(sweep, m);
  if (!m.classes_matter) {
    s += "\n## Reproducibility\n\nEvery run has a checksum trajectory of its own and no runs differ only in "
         "layout, so nothing is held to identity.\n";
  } else {
    s += "\n## Reproducibility\n\nClasses of runs with identical checksum trajectories (classes of one run are "
         "not listed).\n\n";
    s += md_header({"class", "runs", "final params checksum", "run ids"});
    for (const auto& c : m.classes)
      if (c.runs.size() > 1)
        s += md_row(
            {c.name, std::to_string(c.runs.size()), final_checksum(sweep.runs[c.runs[0]]), md_ids(sweep, c.runs)});
    s += "\nRuns that should be identical (they differ only in layout keys with the same global batch):\n\n";
    s += md_header({"verdict", "runs", "first difference", "same math, other bits by design"});
    for (const auto& ls : m.layout_sets)
      s += md_row({ls.identical ? "identical" : "**NOT IDENTICAL**", md_ids(sweep, ls.runs), md(ls.first_difference),
                   ls.by_design.empty() ? "" : md_ids(sweep, ls.by_design) + ": " + md(ls.by_design_note)});
  }
  if (!m.determinism_costs.empty()) {
    s += "\nWhat determinism costs (runs that differ only in train.deterministic; tokens/s median, and the "
         "deterministic step time over the benchmark step time):\n\n";
    s += md_header({"deterministic run", "tokens/s", "benchmark run", "tokens/s", "cost"});
    for (const auto& c : m.determinism_costs)
      s += md_row({md(sweep.runs[c.deterministic].run_id), g6(c.deterministic_tokens_per_s),
                   md(sweep.runs[c.benchmark].run_id), g6(c.benchmark_tokens_per_s),
                   std::isfinite(c.cost) ? g4(c.cost) + "x"
                   : c.refused.empty()   ? "-"
                                         : "refused: " + md(c.refused)});
  }
  return s;
}

/// ## Runs, ## Health, ## Lineage and ## Environment.
std::string md_runs(const SweepRecords& sweep, const ReportModel& m) {
  std::string s;
  s += "\n## Runs\n\n";
  std::vector<std::string> head = {"run", "status"};
  for (const auto& k : m.varying) head.push_back(md(k));
  for (const std::string& h :
       {std::string("steps"), std::string("final loss"), "train loss (last " + std::to_string(kLossWindow) + ")",
        std::string("final eval loss"), std::string("best eval loss (step)"), std::string("tokens/s (median)"),
        std::string("health"), std::string("params checksum")})
    head.push_back(md(h));
  if (m.classes_matter) head.emplace_back("class");
  s += md_header(head);
  std::string flags;
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    const Record& r = sweep.runs[i];
    const ReportRun& f = m.runs[i];
    std::vector<std::string> row = {md(r.run_id), md(r.status + (r.verified ? "" : " (unverified)"))};
    for (const auto& k : m.varying) row.push_back(md(report_value(r, k)));
    const std::string health = run_health_names(f);
    for (const std::string& c :
         {std::to_string(r.steps.size()), g6(f.final_loss), g6(f.train_loss_end), g6(f.final_eval_loss),
          f.best_eval_step < 0 ? "-" : g6(f.best_eval_loss) + " (" + std::to_string(f.best_eval_step) + ")",
          g6(f.tokens_per_s_median) + (f.shared_cores() ? " (shared cores)" : ""),
          health.empty() ? "ok" : "**" + md(health) + "**", final_checksum(r)})
      row.push_back(c);
    if (m.classes_matter) row.push_back(m.classes[f.equivalence].name);
    s += md_row(row);
    for (const auto& h : f.health) flags += md_row({md(r.run_id), md(h.name), md(h.detail)});
  }
  if (!flags.empty()) s += "\n## Health\n\n" + md_header({"run", "flag", "what"}) + flags;
  const std::vector<LineageLine> lineage = lineage_lines(sweep);
  if (!lineage.empty()) {
    s += "\n## Lineage\n\nRuns started from another run's checkpoint (`sweep resume`, `sweep fork`), each family "
         "from its first run; a run's rows before the step it branched off are its parent's.\n\n";
    for (const LineageLine& l : lineage)
      s += std::string(size_t(2 * l.depth), ' ') + "- " + md(lineage_text(sweep, l)) + "\n";
  }
  s += "\n## Environment\n\n" + md_header({"key", "value (runs)"});
  for (const auto& e : m.environment) {
    std::string v;
    for (const auto& [value, n] : e.values)
      v += (v.empty() ? "" : "; ") + md(value.empty() ? "(empty)" : value) + " (" + std::to_string(n) + ")";
    s += md_row({md(e.key) + (e.values.size() > 1 ? " **differs**" : ""), v});
  }
  s += "\n";
  return s;
}

/// ## Search: the best so far, a Pareto search's front, the rungs, the decisions.
std::string md_search(const ReportModel& m) {
  if (!(!m.search.kind.empty())) return "";
  std::string s;
  s += "## Search (" + md(m.search.kind) + ")\n\n";
  if (!m.search.best_so_far.empty()) {
    s += md_row({"after", "training steps spent", "best " + md(m.search.metric)}) + md_row({"---", "---:", "---:"});
    for (const auto& pt : m.search.best_so_far) s += md_row({md(pt.label), g6(pt.compute), g6(pt.best)});
    s += "\n";
  }
  s += pareto_markdown(m.search);
  if (!m.search.rungs.empty()) {
    s += "Each rung of successive halving (a promoted run resumes, so a rung spends only the steps it adds):\n\n" +
         md_header({"bracket", "rung", "steps", "trials", "promoted", "steps spent (all runs)"});
    for (const auto& r : m.search.rungs)
      s += md_row({std::to_string(r.bracket), std::to_string(r.rung), std::to_string(r.steps), std::to_string(r.trials),
                   std::to_string(r.promoted), g6(r.steps_spent)});
    s += "\n";
  }
  if (!m.search.members.empty()) {
    s += "Each member's schedule: the values it trained with over each span of steps, and whose checkpoint a "
         "span forked from:\n\n" +
         md_header({"member", "final rank", md(m.search.metric), "schedule"});
    for (const auto& mem : m.search.members)
      s += md_row(
          {md(mem.label), mem.rank ? std::to_string(mem.rank) : "", g6(mem.final_value), md(pbt_schedule_text(mem))});
    s += "\n";
  }
  std::string text;
  for (const auto& d : m.search.decisions) text += d + "\n";
  s += "The decisions, as search.log has them:\n\n" + md_code(text) + "\n";
  return s;
}

/// ## Failed runs (and running ones), each with its cause and log tail.
std::string md_diagnoses(const SweepRecords& sweep) {
  if (sweep.diagnoses.empty()) return "";
  std::string s = "## Diagnoses\n\nThe newest `sweep diagnose` verdict of each run that has one.\n\n";
  for (const auto& [id, line] : sweep.diagnoses) s += "- " + md(id) + ": " + md(line) + "\n";
  return s + "\n";
}

std::string md_failed(const SweepRecords& sweep) {
  if (!(!sweep.failed.empty())) return "";
  std::string s;
  const bool running = std::any_of(sweep.failed.begin(), sweep.failed.end(),
                                   [](const FailedRun& f) { return status_is(f.status, RunStatus::running); });
  s += running ? "## Running and failed runs\n\n" : "## Failed runs\n\n";
  for (const auto& f : sweep.failed) {
    s += "### " + md(f.run_id) + ": " + md(f.status) + "\n\n" + md(f.cause) + "\n\n";
    if (!f.log_tail.empty()) s += md_code(f.log_tail) + "\n";
  }
  return s;
}

}  // namespace

std::string render_markdown(const SweepRecords& sweep, const ReportModel& m) {
  std::string s = "# " + md(m.title) + "\n" + kMarkdownReportMark + "\n\n";
  s += plural(m.total, "run") + ", " + plural(problem_count(sweep, m), "problem") + ": " + counts_text(m) + ".\n";
  s += "Wall time " + seconds(m.wall_time_s) + " (first run started to last record written); training time " +
       seconds(m.train_time_s) + " (summed over runs).\n\n";
  if (!sweep.runs.empty()) {
    s += md_results(sweep, m) + md_curves(sweep, m) + md_effects(sweep, m) + md_diagnostics(sweep, m) +
         md_runs(sweep, m);
  }
  s += md_search(m) + md_failed(sweep) + md_diagnoses(sweep);
  std::string problems;
  for (const auto& p : sweep.problems)
    if (std::none_of(sweep.failed.begin(), sweep.failed.end(), [&](const FailedRun& f) { return f.problem == p; }))
      problems += "- " + md(p) + "\n";
  if (!problems.empty()) s += "## Problems\n\n" + problems;
  return s;
}

}  // namespace sweep
