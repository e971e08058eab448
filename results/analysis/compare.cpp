// Comparing records: a merge over step numbers, so records with different lengths or
// checksum intervals still compare on what they share.
#include "compare.h"

#include <malloc.h>  // mallopt

#include <algorithm>  // min
#include <cmath>      // fabs, isfinite
#include <cstdint>    // uint64_t
#include <cstdio>     // snprintf
#include <cstring>    // memcpy
#include <map>        // run id -> record
#include <set>        // union of names and run ids
#include <string>
#include <tuple>  // the two sides

#include "parallel_for.h"    // the pairs compared on every core
#include "run_figures.h"     // the objective of each run
#include "text.h"            // exact_double
#include "timing_metrics.h"  // is_timing_metric, timing_figures

namespace sweep {
std::vector<ValueDiff> lineage_changes(const std::map<std::string, std::string>& parent,
                                       const std::map<std::string, std::string>& child) {
  const auto value = [](const std::map<std::string, std::string>& m, const char* key) {
    const auto it = m.find(key);
    return it == m.end() ? std::string() : it->second;
  };
  const std::string fork_step = value(child, "train.fork_step");
  const bool switch_at_fork = !fork_step.empty() && value(child, "train.lr_switch_step") == fork_step;
  std::vector<ValueDiff> out;
  for (ValueDiff& d : diff_maps(parent, child)) {
    if (d.key == "train.fork_parent" || d.key == "train.fork_step") continue;
    if (switch_at_fork && (d.key == "train.lr_switch_step" || d.key == "train.lr_before_switch")) continue;
    out.push_back(std::move(d));
  }
  return out;
}

namespace {

bool same_bits(double a, double b) {
  uint64_t x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  return x == y;
}

}  // namespace

std::vector<ValueDiff> diff_maps(const std::map<std::string, std::string>& a,
                                 const std::map<std::string, std::string>& b, bool missing_is_empty) {
  // One walk over the two sorted maps, in key order.
  std::vector<ValueDiff> out;
  const std::string none;
  auto ia = a.begin(), ib = b.begin();
  while (ia != a.end() || ib != b.end()) {
    const bool take_a = ib == b.end() || (ia != a.end() && ia->first <= ib->first);
    const bool take_b = ia == a.end() || (ib != b.end() && ib->first <= ia->first);
    const std::string& key = take_a ? ia->first : ib->first;
    const std::string& va = take_a ? ia->second : none;
    const std::string& vb = take_b ? ib->second : none;
    if (va != vb || (!missing_is_empty && !(take_a && take_b))) out.push_back({key, va, vb});
    if (take_a) ++ia;
    if (take_b) ++ib;
  }
  return out;
}

namespace {

// The first tensor whose hash differs names the parameter; when the parameter tables
// themselves differ, a name from either side would mislead.
std::string first_differing_param(const Record& a, const Record& b, const ChecksumRow& ra, const ChecksumRow& rb) {
  const bool same_table =
      a.params.size() == b.params.size() &&
      std::equal(a.params.begin(), a.params.end(), b.params.begin(),
                 [](const ParamInfo& x, const ParamInfo& y) { return x.name == y.name && x.shape == y.shape; });
  if (!same_table) return "(the parameter tables differ)";
  const size_t n = std::min({ra.tensors.size(), rb.tensors.size(), a.params.size()});
  for (size_t i = 0; i < n; ++i)
    if (ra.tensors[i] != rb.tensors[i]) return a.params[i].name;
  return "";  // no per-tensor hashes recorded, or only the run hash differs
}

/// |x - y| over the larger magnitude; infinite when either is not finite (a NaN is infinitely
/// far from any number, whatever the tolerance).
double relative_difference(double x, double y) {
  if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;
  const double scale = std::max(std::fabs(x), std::fabs(y));
  return scale > 0 ? std::fabs(x - y) / scale : 0;
}

void compare_losses(const Record& a, const Record& b, const CompareOptions& opt, RecordComparison& c) {
  size_t i = 0, j = 0;
  while (i < a.steps.size() || j < b.steps.size()) {
    const bool has_a = i < a.steps.size(), has_b = j < b.steps.size();
    if (!has_b || (has_a && a.steps[i].step < b.steps[j].step)) {
      if (c.missing_step == kNoStep) c.missing_step = a.steps[i].step, c.missing_in_b = true;
      ++i;
      continue;
    }
    if (!has_a || b.steps[j].step < a.steps[i].step) {
      if (c.missing_step == kNoStep) c.missing_step = b.steps[j].step, c.missing_in_b = false;
      ++j;
      continue;
    }
    const StepMetrics &sa = a.steps[i++], &sb = b.steps[j++];
    ++c.steps_compared;
    c.last_step = sa.step;
    if (same_bits(sa.loss, sb.loss)) continue;
    if (c.loss_step == kNoStep) c.loss_step = sa.step, c.loss_a = sa.loss, c.loss_b = sb.loss;
    const bool finite = std::isfinite(sa.loss) && std::isfinite(sb.loss);
    const double abs = finite ? std::fabs(sa.loss - sb.loss) : INFINITY;
    const double rel = relative_difference(sa.loss, sb.loss);
    if (abs > c.max_abs || c.max_abs_step == kNoStep) c.max_abs = abs, c.max_abs_step = sa.step;
    if (rel > c.max_rel || c.max_rel_step == kNoStep) c.max_rel = rel, c.max_rel_step = sa.step;
    // A non-finite loss against anything else is never "within tolerance", however wide.
    if (!finite || !(rel <= opt.rtol)) c.losses_within_rtol = false;
  }
}

void compare_checksums(const Record& a, const Record& b, RecordComparison& c) {
  size_t i = 0, j = 0;
  while (i < a.checksums.size() && j < b.checksums.size()) {
    const ChecksumRow &ra = a.checksums[i], &rb = b.checksums[j];
    if (ra.step < rb.step) {
      ++i;
      continue;
    }
    if (rb.step < ra.step) {
      ++j;
      continue;
    }
    ++c.checksums_compared, ++i, ++j;
    c.last_checksum_step = ra.step;
    if (c.checksum_step == kNoStep && (ra.params != rb.params || ra.tensors != rb.tensors)) {
      c.checksum_step = ra.step;
      c.first_param = first_differing_param(a, b, ra, rb);
    }
  }
}

void compare_evals(const Record& a, const Record& b, const CompareOptions& opt, RecordComparison& c) {
  size_t i = 0, j = 0;
  while (i < a.evals.size() || j < b.evals.size()) {
    const bool has_a = i < a.evals.size(), has_b = j < b.evals.size();
    if (!has_b || (has_a && a.evals[i].step < b.evals[j].step)) {  // an evaluation B lacks
      if (c.eval_step == kNoStep) c.eval_step = a.evals[i].step, c.eval_a = a.evals[i].loss;
      c.evals_within_rtol = false, ++i;
      continue;
    }
    if (!has_a || b.evals[j].step < a.evals[i].step) {
      if (c.eval_step == kNoStep) c.eval_step = b.evals[j].step, c.eval_b = b.evals[j].loss;
      c.evals_within_rtol = false, ++j;
      continue;
    }
    const EvalRow &ea = a.evals[i++], &eb = b.evals[j++];
    ++c.evals_compared;
    if (same_bits(ea.loss, eb.loss)) continue;
    if (c.eval_step == kNoStep) c.eval_step = ea.step, c.eval_a = ea.loss, c.eval_b = eb.loss;
    if (!(std::isfinite(ea.loss) && std::isfinite(eb.loss)) || !(relative_difference(ea.loss, eb.loss) <= opt.rtol))
      c.evals_within_rtol = false;
  }
}

/// The program's own figures of two records, by name, at the steps (evaluations) both have:
/// the first that differs in bits or that one side lacks. A timing metric (either record's
/// word, is_timing_metric) is left out: the clock gives no run its bits.
void compare_extras(const Record& a, const Record& b, RecordComparison& c) {
  using Columns = std::map<std::string, std::vector<double>>;
  if (a.step_extra.empty() && b.step_extra.empty() && a.eval_extra.empty() && b.eval_extra.empty()) return;
  const auto compare = [&](const std::vector<int64_t>& steps_a, const std::vector<int64_t>& steps_b,
                           const Columns& cols_a, const Columns& cols_b, const std::string& prefix) {
    std::map<int64_t, size_t> at_b;
    for (size_t j = 0; j < steps_b.size(); ++j) at_b.emplace(steps_b[j], j);
    std::set<std::string> names;
    for (const auto& kv : cols_a) names.insert(kv.first);
    for (const auto& kv : cols_b) names.insert(kv.first);
    for (const auto& name : names) {
      if (is_timing_metric(a, prefix + name) || is_timing_metric(b, prefix + name)) continue;
      const auto ia = cols_a.find(name), ib = cols_b.find(name);
      for (size_t i = 0; i < steps_a.size(); ++i) {
        const auto j = at_b.find(steps_a[i]);
        if (j == at_b.end()) continue;
        const double va = ia == cols_a.end() ? NAN : ia->second[i];
        const double vb = ib == cols_b.end() ? NAN : ib->second[j->second];
        if (same_bits(va, vb)) continue;
        if (c.extra_step == kNoStep || steps_a[i] < c.extra_step)
          c.extra_step = steps_a[i], c.extra_metric = prefix + name;
        break;
      }
    }
  };
  const auto step_numbers = [](const auto& rows) {
    std::vector<int64_t> out;
    out.reserve(rows.size());
    for (const auto& r : rows) out.push_back(r.step);
    return out;
  };
  compare(step_numbers(a.steps), step_numbers(b.steps), a.step_extra, b.step_extra, "");
  compare(step_numbers(a.evals), step_numbers(b.evals), a.eval_extra, b.eval_extra, "eval_");
}

/// The gradient telemetry of two records at the steps both took a row: each tensor's norm
/// and the routing, bit for bit (layout-free by construction, SCHEMA.md /telemetry).
void compare_telemetry(const Record& a, const Record& b, RecordComparison& c) {
  if (a.telemetry.empty() || b.telemetry.empty()) return;
  std::map<int64_t, const TelemetryRow*> at_b;
  for (const auto& t : b.telemetry) at_b.emplace(t.step, &t);
  for (const auto& ta : a.telemetry) {
    const auto it = at_b.find(ta.step);
    if (it == at_b.end()) continue;
    const TelemetryRow& tb = *it->second;
    ++c.telemetry_compared;
    if (c.telemetry_step != kNoStep) continue;
    std::string what;
    if (ta.tensor_grad_norm.size() != tb.tensor_grad_norm.size()) {
      what = "the number of tensors";
    } else {
      for (size_t i = 0; i < ta.tensor_grad_norm.size() && what.empty(); ++i)
        if (!same_bits(ta.tensor_grad_norm[i], tb.tensor_grad_norm[i]))
          what = "the gradient norm of " + (i < a.params.size() ? a.params[i].name : "tensor " + std::to_string(i));
    }
    if (what.empty() && ta.routed_tokens != tb.routed_tokens) what = "the MoE routing (tokens per expert)";
    if (!what.empty()) c.telemetry_step = ta.step, c.telemetry_what = what;
  }
}

// Steps are recorded in increasing order, so a binary search finds one.
const StepMetrics* find_step(const Record& r, int64_t step) {
  auto it = std::lower_bound(r.steps.begin(), r.steps.end(), step,
                             [](const StepMetrics& s, int64_t v) { return s.step < v; });
  return it != r.steps.end() && it->step == step ? &*it : nullptr;
}

std::string g6(double v) { return significant(v, 6); }

/// When the bits differ and the runs' instruction sets do too: which, and what it means.
std::string isa_change_line(const Record& a, const Record& b, const RecordComparison& c) {
  if (c.same_training()) return "";
  std::string sides;
  for (const char* key : {"cpu.isa", "aten.isa"}) {
    const std::string va = a.env(key), vb = b.env(key);
    if (va.empty() || vb.empty() || va == vb) continue;
    sides += std::string(sides.empty() ? "" : ", ") + key + " " + va + " -> " + vb;
  }
  if (sides.empty()) return "";
  return "the instruction sets differ (" + sides +
         "): oneDNN's bf16 kernels and LibTorch's vectorised ones are chosen by the instruction set, so bits "
         "are promised across machines only with SWEEP_ONEDNN=0 and the same ATEN_CPU_CAPABILITY "
         "(docs/design.md, Instruction sets)";
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  for (size_t at = 0; at < s.size();) {
    const size_t end = std::min(s.find('\n', at), s.size());
    out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// A line as shown: without its indent, unless the indent is what differs.
std::string shown_line(const std::string& line, const std::string& other) {
  const auto trim = [](const std::string& l) { return l.substr(std::min(l.find_first_not_of(" \t"), l.size())); };
  return trim(line) == trim(other) ? "'" + line + "'" : trim(line);
}

// A value of several lines that differs (a program's key table, `program.keys`, where one
// key's help string changed): its lines that differ, each once, from a longest common
// subsequence of lines; the lines of a change paired A -> B.
std::vector<std::string> changed_lines(const std::string& what, const std::string& a, const std::string& b) {
  const std::vector<std::string> la = lines_of(a), lb = lines_of(b);
  const size_t na = la.size(), nb = lb.size();
  // The common prefix and suffix first: one changed line costs nothing more.
  size_t head = 0, tail = 0;
  while (head < na && head < nb && la[head] == lb[head]) ++head;
  while (tail < na - head && tail < nb - head && la[na - 1 - tail] == lb[nb - 1 - tail]) ++tail;
  const size_t ma = na - head - tail, mb = nb - head - tail;
  // keep[i][j]: the longest common subsequence of the middles' lines from i and j on
  // (none past 2,000 x 2,000 lines: the whole middle is the change).
  std::vector<std::vector<uint32_t>> keep;
  if (ma * mb <= 4000000) {
    keep.assign(ma + 1, std::vector<uint32_t>(mb + 1, 0));
    for (size_t i = ma; i-- > 0;)
      for (size_t j = mb; j-- > 0;)
        keep[i][j] = la[head + i] == lb[head + j] ? keep[i + 1][j + 1] + 1 : std::max(keep[i + 1][j], keep[i][j + 1]);
  }
  std::vector<std::string> out;
  std::vector<size_t> gone, added;  // a run of changed lines, by index
  const auto flush = [&] {
    for (size_t k = 0; k < gone.size() || k < added.size(); ++k) {
      if (k < gone.size() && k < added.size()) {
        const std::string& x = la[gone[k]];
        const std::string& y = lb[added[k]];
        out.push_back("  line " + std::to_string(gone[k] + 1) +
                      (gone[k] == added[k] ? "" : " (" + std::to_string(added[k] + 1) + " in B)") + ": " +
                      shown_line(x, y) + " -> " + shown_line(y, x));
      } else if (k < gone.size()) {
        out.push_back("  line " + std::to_string(gone[k] + 1) + " only in A: " + la[gone[k]]);
      } else {
        out.push_back("  line " + std::to_string(added[k] + 1) + " only in B: " + lb[added[k]]);
      }
    }
    gone.clear(), added.clear();
  };
  for (size_t i = 0, j = 0; i < ma || j < mb;) {
    if (!keep.empty() && i < ma && j < mb && la[head + i] == lb[head + j]) {
      flush();
      ++i, ++j;
    } else if (j == mb || (i < ma && (keep.empty() || keep[i + 1][j] >= keep[i][j + 1]))) {
      gone.push_back(head + i++);
    } else {
      added.push_back(head + j++);
    }
  }
  flush();
  if (out.empty()) return {what + ": the same lines, one value ending in a newline and the other not"};
  const std::string n = std::to_string(out.size()) + (out.size() == 1 ? " line" : " lines");
  out.insert(out.begin(),
             what + ": " +
                 (na == nb ? n + " of its " + std::to_string(na) + (out.size() == 1 ? " differs" : " differ")
                           : n + (out.size() == 1 ? " differs" : " differ") + " (A has " + std::to_string(na) + ", B " +
                                 std::to_string(nb) + ")") +
                 ", A -> B:");
  return out;
}

}  // namespace

int64_t RecordComparison::divergent_step() const {
  int64_t s = kNoStep;
  for (int64_t x : {loss_step, checksum_step, missing_step})
    if (x != kNoStep && (s == kNoStep || x < s)) s = x;
  return s;
}

RecordComparison compare_records(const Record& a, const Record& b, const CompareOptions& opt) {
  RecordComparison c;
  c.rtol = opt.rtol;
  c.status_a = a.status, c.status_b = b.status;
  compare_losses(a, b, opt, c);
  compare_checksums(a, b, c);
  compare_evals(a, b, opt, c);
  compare_extras(a, b, c);
  compare_telemetry(a, b, c);
  c.timing = timing_figures(a, b);
  if (const int64_t s = c.divergent_step(); s != kNoStep) {
    const StepMetrics *sa = find_step(a, s), *sb = find_step(b, s);
    c.step_in_a = sa != nullptr, c.step_in_b = sb != nullptr;
    if (sa) c.step_loss_a = sa->loss;
    if (sb) c.step_loss_b = sb->loss;
  }
  const RunFigures fa = run_figures(a), fb = run_figures(b);
  c.objective_a = fa.objective, c.objective_b = fb.objective;
  c.objective_name =
      fa.objective_name == fb.objective_name ? fa.objective_name : fa.objective_name + " / " + fb.objective_name;
  c.config = diff_maps(a.config, b.config);
  c.environment = diff_maps(a.environment, b.environment, /*missing_is_empty=*/true);
  // The training file, then the held-out file (data.eval_path), each by its contents.
  for (const std::string prefix : {"data.", "data.eval_"}) {
    const std::string ha = a.env(prefix + "hash"), hb = b.env(prefix + "hash");
    if (ha.empty() || hb.empty() || ha == hb) continue;
    const std::string fa = a.env(prefix + "file"), fb = b.env(prefix + "file");
    c.data_change += std::string(c.data_change.empty() ? "the data differ: " : "; ") +
                     (fa == fb ? fa : fa + " vs " + fb) + " (" + ha + " -> " + hb + "): the contents of the " +
                     (prefix == "data." ? "data file" : "held-out data file") + " changed";
  }
  c.isa_change = isa_change_line(a, b, c);
  return c;
}

std::string exact_number(double v) { return exact_double(v); }

std::string timing_line(const std::vector<TimingFigure>& timing) {
  const auto mean = [](double v) { return std::isnan(v) ? std::string("(none)") : g6(v); };
  std::string means;
  for (const TimingFigure& f : timing)
    means += (means.empty() ? "" : ", ") + f.metric + " " + mean(f.mean_a) + " vs " + mean(f.mean_b);
  return "timing metrics (not compared bit for bit), means: " + means;
}

std::string verdict_line(const RecordComparison& c) {
  const std::string counts =
      std::to_string(c.steps_compared) + " steps, " + std::to_string(c.checksums_compared) + " checksums";
  if (c.bitwise())
    return "identical bit-for-bit: " + counts +
           (c.evals_compared ? ", " + std::to_string(c.evals_compared) + " evaluations" : "");
  auto show = [](const std::string& v) { return v.empty() ? std::string("(none)") : v; };
  // A differing status is named whatever else is said (completed vs diverged).
  const std::string status = c.status_a == c.status_b ? "" : "; status " + show(c.status_a) + " vs " + show(c.status_b);
  if (c.same_training()) {
    // Equal losses and equal checksum rows, but not at the last step: the final
    // parameters were never compared, so this is not "bit-for-bit".
    if (!c.final_params_compared())
      return (c.checksums_compared == 0
                  ? std::string("losses identical; parameters never compared (no checksum row at a common step)")
                  : "losses identical; parameters not compared after step " + std::to_string(c.last_checksum_step)) +
             " (" + counts + ")" + status;
    // The training matched; only the held-out losses differ (other held-out data, or none on one side).
    if (c.eval_step != kNoStep && !c.match())
      return "training identical bit-for-bit (" + counts + "), but the held-out loss differs after step " +
             std::to_string(c.eval_step) + ": " + (std::isnan(c.eval_a) ? "(none)" : exact_number(c.eval_a)) + " vs " +
             (std::isnan(c.eval_b) ? "(none)" : exact_number(c.eval_b)) + status;
    if (c.extra_step != kNoStep)
      return "training identical bit-for-bit (" + counts + "), but the program's own metric " + c.extra_metric +
             " differs at step " + std::to_string(c.extra_step) + status;
    if (c.telemetry_step != kNoStep)
      return "training identical bit-for-bit (" + counts + "), but the gradient telemetry differs at step " +
             std::to_string(c.telemetry_step) + ": " + c.telemetry_what + status;
    if (!c.match())
      return "training identical bit-for-bit (" + counts + "), but the status differs: " + show(c.status_a) + " vs " +
             show(c.status_b);
  }
  if (c.match())
    return "within tolerance (rtol " + g6(c.rtol) + "): " + counts + "; max abs loss difference " + g6(c.max_abs) +
           ", max rel " + g6(c.max_rel) + "; not bitwise from step " + std::to_string(c.divergent_step());
  const int64_t s = c.divergent_step();
  const std::string line = "diverged at step " + std::to_string(s) + ": ";
  if (s == 0) return line + "the initial parameters differ" + status;
  const std::string a = c.step_in_a ? exact_number(c.step_loss_a) : "(no such step)";
  const std::string b = c.step_in_b ? exact_number(c.step_loss_b) : "(no such step)";
  // Equal losses with differing checksums: the update of this step is what differs.
  const bool same = c.step_in_a && c.step_in_b && same_bits(c.step_loss_a, c.step_loss_b);
  return line + "loss " + a + " vs " + b + (same ? " (equal; the parameters differ after the update)" : "") + status;
}

std::vector<std::string> detail_lines(const RecordComparison& c) {
  std::vector<std::string> out;
  if (c.checksum_step != kNoStep)
    out.push_back("first differing parameter: " +
                  (c.first_param.empty() ? std::string("(no per-tensor hashes)") : c.first_param) +
                  " (checksums at step " + std::to_string(c.checksum_step) + ")");
  if (c.loss_step != kNoStep && c.loss_step != c.divergent_step())
    out.push_back("first loss difference at step " + std::to_string(c.loss_step) + ": " + exact_number(c.loss_a) +
                  " vs " + exact_number(c.loss_b));
  if (c.loss_step != kNoStep)
    out.push_back("max loss difference: abs " + g6(c.max_abs) + " at step " + std::to_string(c.max_abs_step) +
                  ", rel " + g6(c.max_rel) + " at step " + std::to_string(c.max_rel_step));
  if (c.status_a != c.status_b)
    out.push_back("status: " + (c.status_a.empty() ? std::string("(none)") : c.status_a) + " -> " +
                  (c.status_b.empty() ? std::string("(none)") : c.status_b));
  if (c.missing_step != kNoStep)
    out.push_back(std::string("steps differ: ") + (c.missing_in_b ? "B" : "A") + " has no step " +
                  std::to_string(c.missing_step));
  if (!same_bits(c.objective_a, c.objective_b))
    out.push_back(c.objective_name + ": " + g6(c.objective_a) + " vs " + g6(c.objective_b));
  if (!c.timing.empty()) out.push_back(timing_line(c.timing));
  auto show = [](const std::string& v) { return v.empty() ? std::string("(unset)") : v; };
  if (!c.data_change.empty()) out.push_back(c.data_change);
  if (!c.isa_change.empty()) out.push_back(c.isa_change);
  // A value of several lines on both sides (a key table) by the lines that differ, not twice whole.
  const auto differs = [&](const std::string& what, const ValueDiff& d) {
    if (d.a.empty() || d.b.empty() || (d.a.find('\n') == std::string::npos && d.b.find('\n') == std::string::npos)) {
      out.push_back(what + " " + d.key + ": " + show(d.a) + " -> " + show(d.b));
      return;
    }
    for (std::string& l : changed_lines(what + " " + d.key, d.a, d.b)) out.push_back(std::move(l));
  };
  for (const auto& d : c.config) differs("config", d);
  for (const auto& d : c.environment) differs("environment", d);
  if (c.environment.empty()) out.push_back("environment: identical");
  return out;
}

bool SweepComparison::match() const {
  if (!only_a.empty() || !only_b.empty() || !uncompared.empty() || !problems.empty()) return false;
  for (const auto& p : pairs)
    if (!p.result.match()) return false;
  return true;
}

SweepComparison compare_sweeps(const SweepRecords& a, const SweepRecords& b, const CompareOptions& opt,
                               const std::map<std::string, RecordComparison>* done) {
  SweepComparison out;
  // Runs without a readable record, by id: their word and cause on each side.
  std::map<std::string, const FailedRun*> broken_a, broken_b;
  for (const auto& f : a.failed)
    if (!f.problem.empty()) broken_a[f.run_id] = &f;
  for (const auto& f : b.failed)
    if (!f.problem.empty()) broken_b[f.run_id] = &f;
  std::map<std::string, const Record*> by_id;
  for (const auto& r : b.runs) by_id[r.run_id] = &r;
  std::set<std::string> seen;
  std::vector<std::pair<const Record*, const Record*>> paired;
  for (const auto& r : a.runs) {
    auto it = by_id.find(r.run_id);
    if (it == by_id.end()) {
      if (!broken_b.count(r.run_id)) out.only_a.push_back(r.run_id);
      continue;
    }
    seen.insert(r.run_id);
    paired.emplace_back(&r, it->second);
  }
  out.pairs.resize(paired.size());
  parallel_for(paired.size(), [&](size_t i) {  // each pair on its own
    const auto [ra, rb] = paired[i];
    const RecordComparison* known = nullptr;
    if (done)
      if (const auto it = done->find(ra->run_id); it != done->end()) known = &it->second;
    out.pairs[i] = {ra->run_id, known ? *known : compare_records(*ra, *rb, opt), ra->verified, rb->verified};
  });
  for (const auto& r : b.runs)
    if (!seen.count(r.run_id) && !broken_a.count(r.run_id)) out.only_b.push_back(r.run_id);
  std::set<std::string> ids;
  for (const auto& [id, f] : broken_a) ids.insert(id);
  for (const auto& [id, f] : broken_b) ids.insert(id);
  std::set<std::string> readable_a, readable_b;
  for (const auto& r : a.runs) readable_a.insert(r.run_id);
  for (const auto& r : b.runs) readable_b.insert(r.run_id);
  for (const auto& id : ids) {
    const auto word = [&](const std::map<std::string, const FailedRun*>& broken,
                          const std::set<std::string>& readable) {
      const auto it = broken.find(id);
      return it != broken.end() ? it->second->status : readable.count(id) ? std::string("completed") : "absent";
    };
    const FailedRun* why = broken_a.count(id) ? broken_a.at(id) : broken_b.at(id);
    out.uncompared.push_back({id, word(broken_a, readable_a), word(broken_b, readable_b), why->cause});
  }
  // What is left of the problems belongs to no run (a runs/ that cannot be listed).
  for (const auto& [side, sweep, broken] : {std::tuple{"A: ", &a, &broken_a}, std::tuple{"B: ", &b, &broken_b}})
    for (const auto& p : sweep->problems)
      if (std::none_of(broken->begin(), broken->end(), [&](const auto& kv) { return kv.second->problem == p; }))
        out.problems.push_back(side + p);
  return out;
}

SweepComparison compare_sweep_dirs(const std::string& a, const std::string& b, const CompareOptions& opt,
                                   size_t chunk) {
  const LoadOptions lean{false};  // (no per-rank rows: comparing never reads them)
  SweepLoader la(a, lean), lb(b, lean);
  SweepRecords sa, sb;
  if (!la.named_by_run_id() || !lb.named_by_run_id()) {
    la.load(0, la.ids().size(), &sa), lb.load(0, lb.ids().size(), &sb);
    la.finish(&sa), lb.finish(&sb);
    return compare_sweeps(sa, sb, opt);
  }
  // Chunks of A's run ids and B's up to the same id: a record's run id is its directory's
  // name, so each pair is in one chunk. What is kept of a record is what the pairing and
  // the counts read (run id, status, verified).
  chunk = std::max<size_t>(chunk, 1);
  const std::vector<std::string>&ia = la.ids(), &ib = lb.ids();
  // Each chunk frees ~1,000,000 small blocks and then asks for large ones, which makes
  // glibc sort its fast bins again and again: without fast bins, 100,000 runs compare in
  // 11 s rather than 14 s (tests/bench/README.md). Set back when done. (The `sweep`
  // command links jemalloc where it was found, SWEEP_ALLOCATOR; then this changes glibc's
  // malloc, which nothing uses, and does nothing.)
  ::mallopt(M_MXFAST, 0);
  struct FastBinsBack {
    ~FastBinsBack() { ::mallopt(M_MXFAST, 64 * sizeof(size_t) / 4); }  // glibc's default
  } fast_bins_back;
  std::map<std::string, RecordComparison> done;
  for (size_t pa = 0, pb = 0; pa < ia.size() || pb < ib.size();) {
    const size_t ea = std::min(ia.size(), pa + chunk);
    const size_t eb =
        ea == ia.size() ? ib.size()
                        : size_t(std::upper_bound(ib.begin() + std::ptrdiff_t(pb), ib.end(), ia[ea - 1]) - ib.begin());
    SweepRecords ca, cb;
    la.load(pa, ea, &ca), lb.load(pb, eb, &cb);
    std::map<std::string, const Record*> in_b;
    for (const Record& r : cb.runs) in_b[r.run_id] = &r;
    std::vector<std::pair<const Record*, const Record*>> paired;
    for (const Record& r : ca.runs)
      if (const auto it = in_b.find(r.run_id); it != in_b.end()) paired.emplace_back(&r, it->second);
    std::vector<RecordComparison> results(paired.size());
    parallel_for(paired.size(),
                 [&](size_t i) { results[i] = compare_records(*paired[i].first, *paired[i].second, opt); });
    for (size_t i = 0; i < paired.size(); ++i) done.emplace(paired[i].first->run_id, std::move(results[i]));
    keep_stubs(&ca, &sa), keep_stubs(&cb, &sb);
    pa = ea, pb = eb;
  }
  la.finish(&sa), lb.finish(&sb);
  return compare_sweeps(sa, sb, opt, &done);
}

Record truncate_record(const Record& r, int64_t steps) {
  Record t = r;
  const auto after = [&](const auto& row) { return row.step > steps; };
  const size_t kept = size_t(std::find_if(t.steps.begin(), t.steps.end(), after) - t.steps.begin());
  if (kept < t.steps.size()) t.status = "stopped";  // at the rung: its figures are the rung's
  t.steps.resize(kept);
  if (t.rank_step_time_s.size() > kept) t.rank_step_time_s.resize(kept);
  // A program's own columns (metrics.NAME) have one value per row: cut with their rows.
  for (auto& [name, column] : t.step_extra)
    if (column.size() > kept) column.resize(kept);
  std::vector<double> keep_eval;
  for (const auto& e : t.evals) keep_eval.push_back(after(e) ? 0 : 1);
  for (auto& [name, column] : t.eval_extra) {
    std::vector<double> cut;
    for (size_t i = 0; i < column.size(); ++i)
      if (i >= keep_eval.size() || keep_eval[i]) cut.push_back(column[i]);
    column = std::move(cut);
  }
  t.evals.erase(std::remove_if(t.evals.begin(), t.evals.end(), after), t.evals.end());
  t.checksums.erase(std::remove_if(t.checksums.begin(), t.checksums.end(), after), t.checksums.end());
  return t;
}

}  // namespace sweep
