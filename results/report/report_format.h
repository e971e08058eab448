// How the report spells its figures, shared by the HTML, Markdown, CSV and JSON writers
// so that every format prints a number the same way. Internal to sweep_results.
#pragma once

#include <algorithm>  // sort
#include <cctype>     // isspace
#include <cmath>      // isfinite
#include <cstdint>    // SIZE_MAX
#include <cstdio>     // snprintf
#include <cstdlib>    // strtod
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "hex.h"  // hex16
#include "report.h"
#include "text.h"  // exact_double, printable_lines

namespace sweep::report_fmt {

/// Six significant digits: what a reader compares by eye; "-" for a missing figure.
inline std::string g6(double v) { return std::isnan(v) ? "-" : significant(v, 6); }

/// 17 significant digits: reads back as the same double (JSON, CSV).
inline std::string g17(double v) { return exact_double(v); }

/// True when all of `s` is one number as strtod reads it ("-0.5", "1e-3", "-inf", "nan").
inline bool csv_number(const std::string& s) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  (void)std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

/// Whether a spreadsheet would read text `s` as a formula: after any leading blanks
/// (space, tab, line break, no-break space) it starts with = + - @ or their full-width
/// forms (U+FF1D, U+FF0B, U+FF0D, U+FF20), which spreadsheets also take as operators; or
/// it starts with a tab or a carriage return.
inline bool csv_formula_like(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
      ++i;
    } else if (s.compare(i, 2, "\xc2\xa0") == 0) {
      i += 2;
    } else {
      break;
    }
  }
  if (i >= s.size()) return false;
  if (s[0] == '\t' || s[0] == '\r') return true;  // some read a cell that starts so as one
  if (std::string("=+-@").find(s[i]) != std::string::npos) return true;
  for (const char* wide : {"\xef\xbc\x9d", "\xef\xbc\x8b", "\xef\xbc\x8d", "\xef\xbc\xa0"})
    if (s.compare(i, 3, wide) == 0) return true;
  return false;
}

/// One CSV field (RFC 4180): quoted when it holds a separator, quote or line break, with
/// its quotes doubled. Text of unknown origin is made harmless first: control characters
/// other than line feed and tab (an ESC sequence that would act on the terminal a CSV is
/// printed to), invisible and bidi-override characters and bytes that are not UTF-8 are
/// written escaped as printable_lines() does (\x1b, \u{202e}). A text a spreadsheet
/// would run as a formula (csv_formula_like) gets a leading ', as spreadsheet-safe writers
/// do; so does one that starts with ' itself, so the value is exact again by dropping one
/// leading ' from any cell that has it. Numbers ("-0.5", "-inf") are never changed.
inline std::string csv_field(const std::string& value) {
  if (csv_number(value)) return value;
  std::string s = printable_lines(value);
  if (csv_formula_like(s) || (!s.empty() && s[0] == '\'')) s = "'" + s;
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

inline std::string plural(size_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

/// "1.234 ± 0.005 (n=3)" of the objective, just the mean for one run, "-" for none.
inline std::string mean_std(const RunGroup& g) {
  if (g.finite_objectives == 0) return "-";
  if (g.finite_objectives == 1) return g6(g.objective_mean);
  return g6(g.objective_mean) + " \u00b1 " + g6(g.objective_std) + " (n=" + std::to_string(g.finite_objectives) + ")";
}

/// What the objective is when every group agrees ("final eval loss"), else "objective".
inline std::string objective_title(const ReportModel& m) {
  std::string name;
  for (const auto& g : m.groups) {
    if (g.objective_name.empty()) continue;
    if (!name.empty() && name != g.objective_name) return "objective";
    name = g.objective_name;
  }
  return name.empty() ? "objective" : name;
}

/// The objective cell of a group: mean_std, and what it is when the title cannot say.
inline std::string objective_cell(const ReportModel& m, const RunGroup& g) {
  const std::string title = objective_title(m);
  return mean_std(g) + (title == "objective" && !g.objective_name.empty() ? " (" + g.objective_name + ")" : "");
}

/// The flags of a group's runs: each name once, with how many runs raised it when the
/// group has more than one ("loss_rose (1 of 2)"); "" when healthy.
inline std::string group_health(const ReportModel& m, const RunGroup& g) {
  std::vector<std::pair<std::string, size_t>> names;
  for (size_t i : g.runs)
    for (const auto& f : m.runs[i].health) {
      auto it = names.begin();
      while (it != names.end() && it->first != f.name) ++it;
      if (it == names.end())
        names.emplace_back(f.name, 1);
      else
        ++it->second;
    }
  std::string s;
  for (const auto& [name, n] : names)
    s += (s.empty() ? "" : ", ") + name +
         (g.runs.size() > 1 ? " (" + std::to_string(n) + " of " + std::to_string(g.runs.size()) + ")" : "");
  return s;
}

/// A run's flag names, space-separated; "" when healthy.
inline std::string run_health_names(const ReportRun& r) { return health_names(r.health); }

/// Problems in the summary line: unreadable run directories and runs with a health flag.
inline size_t problem_count(const SweepRecords& sweep, const ReportModel& m) {
  return sweep.problems.size() + m.flagged;
}

/// Bytes as MiB with three significant digits; "-" when not recorded.
inline std::string mib(int64_t bytes) {
  if (bytes < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s MiB", significant(double(bytes) / (1024.0 * 1024.0), 3).c_str());
  return buf;
}

inline std::string seconds(double s) {
  if (s < 0) return "unknown";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

/// "N completed, M diverged, ..." for the summary line: the words and order of `sweep
/// status`, each count that is not zero (they add up to m.total).
inline std::string counts_text(const ReportModel& m) {
  std::string s;
  for (const auto& [n, word] : std::initializer_list<std::pair<size_t, const char*>>{
           {m.completed, "completed"},
           {m.running, "running"},
           {m.stopped, "stopped early by the search (at a halving rung)"},
           {m.failed, "failed"},
           {m.interrupted, "interrupted"},
           {m.diverged, "diverged"},
           {m.damaged, "damaged"},
           {m.missing, "without a record"},
           {m.pending, "pending"}})
    if (n) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + word;
  if (s.empty()) s = "none";
  if (m.flagged) s += "; " + std::to_string(m.flagged) + " with health flags";
  if (m.unverified)
    s += "; " + std::to_string(m.unverified) +
         " unverified (records of schema version 1 have no digest to check them by)";
  return s;
}

/// Sample steps of a curve for formats that cannot draw: first, quartiles, last.
inline std::vector<size_t> curve_samples(size_t n) {
  std::vector<size_t> out;
  if (n == 0) return out;
  for (size_t q = 0; q <= 4; ++q) {
    size_t i = (n - 1) * q / 4;
    if (out.empty() || out.back() != i) out.push_back(i);
  }
  return out;
}

/// How the report's "variance explained" is computed, said under every effects table.
inline constexpr const char* kImportanceMethod =
    "Variance explained: the share of the objective's variance over all runs that lies between the means at "
    "each value of the axis (eta squared of a one-way analysis of variance). In a complete grid the axes' "
    "shares add up to at most 1; what is left is interactions and seed noise. An axis that changes together "
    "with another cannot be told apart from it, and the means of an unbalanced axis (an incomplete grid) also "
    "carry other axes' effects.";

/// How a search's importance is computed (ReportModel::rank_importance), said under its table.
inline constexpr const char* kRankImportanceMethod =
    "Importance in a search, where every draw may differ: each key's runs are split by its values, a continuous "
    "key's into up to 5 quantile bins of equal counts, and the ranks of the objective are compared across them "
    "(the Kruskal-Wallis H statistic), reported as its effect size eta squared of H = (H - k + 1) / (n - k) for "
    "k bins and n runs: 0 when the bins differ no more than chance would, 1 when they alone order the objective. "
    "Ranks keep a few diverging runs from deciding it, and bins catch any shape of effect, a best value in the "
    "middle too. rho is Spearman's rank correlation of the key with the objective: negative when larger values "
    "give a lower objective; it sees only a trend one way. A key derived from another (train.min_lr of "
    "train.min_lr_ratio) changes together with it.";

/// The method note of the report's importance column.
inline const char* importance_method(const ReportModel& m) {
  return m.rank_importance ? kRankImportanceMethod : kImportanceMethod;
}

/// What the effects table of a one-knob-at-a-time sweep (ReportModel::base_deltas) shows,
/// said under it in place of the importance method.
inline constexpr const char* kBaseDeltaMethod =
    "One knob at a time: each row is a point that changes the knobs it names from the base, and its delta is the "
    "delta against the base point (the run that changes no knob): its objective minus the base's, over the seeds "
    "both have (means over them when there are several; \"seeds\" says how many), and relative to the base's "
    "objective where that is not 0. A negative delta is a lower objective than the base's. No variance explained "
    "is given: each value is one point and no two knobs are crossed, so there are no axes to share the variance "
    "between. A delta no larger than the base's standard deviation over its seeds is marked \"within the seed "
    "spread\": the seeds alone move the objective that much.";

/// A difference with its sign, six significant digits: "+0.0123", "-0.5", "0"; "-" when missing.
inline std::string signed_g6(double v) { return (v > 0 ? "+" : "") + g6(v); }

/// A relative difference in percent with its sign, three significant digits: "+1.94%",
/// "-0.125%", "0%"; "-" when unknown (a base objective of 0).
inline std::string signed_percent(double share) {
  if (!std::isfinite(share)) return "-";
  if (share == 0) return "0%";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.3g%%", 100 * share);
  return buf;
}

/// "train.precision = bf16" (", "-separated for several): what a point changes from the
/// base, long values by their alias (shown_value).
inline std::string changes_text(const ReportModel& m, const PointDelta& d) {
  std::string s;
  for (const auto& [k, v] : d.changes) s += (s.empty() ? "" : ", ") + k + " = " + shown_value(m, k, v);
  return s;
}

/// The seeds cell of a point's delta: how many seeds were compared, or why none was.
inline std::string delta_seeds(const PointDelta& d) {
  return d.seeds.empty() ? "no seed in common with the base" : std::to_string(d.seeds.size());
}

/// "Base point (the run that changes no knob): run 3f2a...: final train loss 1.55 ± 0.002
/// over 3 seeds (0, 1, 2), the seed noise a delta has to stand out from."
inline std::string base_note(const SweepRecords& sweep, const ReportModel& m) {
  const BaseDeltas& b = m.base_deltas;
  std::string ids, seeds;
  std::vector<std::string> finite;
  for (size_t i : b.base_runs) {
    ids += (ids.empty() ? "" : ", ") + sweep.runs[i].run_id;
    if (std::isfinite(m.runs[i].objective)) finite.push_back(report_value(sweep.runs[i], "train.seed"));
  }
  std::sort(finite.begin(), finite.end(), value_less);
  for (const auto& seed : finite) seeds += (seeds.empty() ? "" : ", ") + seed;
  std::string s =
      "Base point (the run that changes no knob): " + std::string(b.base_runs.size() == 1 ? "run " : "runs ") + ids +
      ": " + objective_title(m) + " ";
  if (b.base_seeds == 0) return s + "not finite in any run.";
  if (b.base_seeds == 1) return s + g6(b.base_mean) + " (1 seed).";
  return s + g6(b.base_mean) + " \u00b1 " + g6(b.base_std) + " over " + std::to_string(b.base_seeds) + " seeds (" +
         seeds + "), the seed noise a delta has to stand out from.";
}

/// "34.5%" of a share in [0, 1], "0.052%" below 1% (two significant digits), "0%" for
/// none; "-" when unknown.
inline std::string percent(double share) {
  if (!std::isfinite(share)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, share > 0 && share < 0.01 ? "%.2g%%" : "%.1f%%", 100 * share);
  return share == 0 ? "0%" : buf;
}

/// The importance of an axis and what limits its reading: "72.0%; changes together with
/// train.min_lr; unbalanced". `searched`: the report's importance is rank_eta_squared.
inline std::string effect_notes(const AxisEffect& e, bool searched = false) {
  std::string s = percent(e.importance);
  if (!e.confounded_with.empty()) {
    s += "; changes together with ";
    for (size_t i = 0; i < e.confounded_with.size(); ++i) s += (i ? ", " : "") + e.confounded_with[i];
    s += " (effects not separable)";
  }
  // In a search the keys are drawn, not crossed: none is balanced, and the method says so.
  if (!e.balanced && !e.binned && !searched) s += "; unbalanced (other axes differ between its values)";
  return s;
}

/// Spearman's rho of an axis, "rho -0.82"; "" when the key is not numeric.
inline std::string rho_text(const AxisEffect& e) {
  if (!std::isfinite(e.rank_correlation)) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "rho %+.2f", e.rank_correlation);
  return buf;
}

/// "+0.0123 (min -0.001, max +0.02, 3 seeds)" of a baseline difference's objective.
inline std::string diff_text(const BaselineDiff& d) {
  if (std::isnan(d.objective_mean)) return "-";
  auto sig = [](double v) { return (v > 0 ? "+" : "") + g6(v); };
  if (d.seeds.size() == 1) return sig(d.objective_mean) + " (1 seed)";
  // The seeds disagree on its sign: what the change does is inside the seeds' own spread.
  const bool within = d.objective_lo < 0 && d.objective_hi > 0;
  return sig(d.objective_mean) + " (min " + sig(d.objective_lo) + ", max " + sig(d.objective_hi) + ", " +
         std::to_string(d.seeds.size()) + " seeds" +
         (within ? "; within the seed spread: the seeds disagree on its sign" : "") + ")";
}

/// A point's delta against the base: "+0.0123", with " (within the seed spread)" where
/// the base's seeds alone move the objective that much (PointDelta::within_spread).
inline std::string delta_text(const PointDelta& d) {
  return signed_g6(d.delta) + (d.within_spread ? " (within the seed spread)" : "");
}

/// "train.precision=fp16 minus train.precision=fp32" for the difference's title.
inline std::string diff_title(const ReportModel& m, const BaselineDiff& d) {
  std::string other;
  for (const auto& [k, v] : m.groups[d.group].values)
    if (k == m.baseline_key) other = k + "=" + v;
  std::string rest;
  for (const auto& [k, v] : m.groups[d.group].values)
    if (k != m.baseline_key) rest += (rest.empty() ? "" : ", ") + k + "=" + v;
  return other + " minus " + m.baseline_key + "=" + m.baseline_value + (rest.empty() ? "" : " at " + rest);
}

/// Where each run sits in the model: its group and its layout set.
struct RunIndex {
  std::vector<size_t> group, layout_set;  // per run; layout_set is SIZE_MAX when in none
};

inline RunIndex index_runs(const SweepRecords& sweep, const ReportModel& m) {
  RunIndex x{std::vector<size_t>(sweep.runs.size()), std::vector<size_t>(sweep.runs.size(), SIZE_MAX)};
  for (size_t g = 0; g < m.groups.size(); ++g)
    for (size_t i : m.groups[g].runs) x.group[i] = g;
  for (size_t s = 0; s < m.layout_sets.size(); ++s)
    for (size_t i : m.layout_sets[s].runs) x.layout_set[i] = s;
  return x;
}

inline std::string final_checksum(const Record& r) {
  return r.checksums.empty() ? "" : hex16(r.checksums.back().params);
}

}  // namespace sweep::report_fmt
