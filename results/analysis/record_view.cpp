// What `sweep show` says of one record (record_view.h).
#include "record_view.h"

#include <algorithm>
#include <cmath>  // isfinite
#include <cstdint>
#include <cstring>  // strlen
#include <exception>
#include <filesystem>

#include "run_figures.h"        // run_figures, figures_text, has_objective, g4
#include "run_files.h"          // read_state_fields
#include "run_status.h"         // status_is
#include "stall.h"              // stall_words: whether a running run advances
#include "sweep_records.h"      // read_run_record
#include "telemetry_summary.h"  // telemetry_summary
#include "text.h"               // split

namespace fs = std::filesystem;

namespace sweep {
namespace {

/// The last finite value of a column and its step ("0.61 at step 60"), or "none".
std::string last_value(const std::vector<double>& values, const std::vector<int64_t>& steps) {
  for (size_t i = values.size(); i-- > 0;)
    if (std::isfinite(values[i])) return g4(values[i]) + " at step " + std::to_string(steps[i]);
  return "none";
}

/// Where a running run is, from its partial record: "step 37 of 100, advancing"; "" when
/// it cannot be read right now (caught mid-update: the status line has said running).
std::string progress_line(const std::string& path) {
  try {
    // read_partial_progress takes the record's own name
    const std::string record = is_partial_path(path) ? path.substr(0, path.size() - std::strlen(kPartialSuffix)) : path;
    const RecordProgress p = read_partial_progress(record);
    const std::string stall = stall_words(p);
    return "step " + std::to_string(p.step) + " of " + std::to_string(p.steps) +
           (stall.empty() ? ", advancing" : stall);
  } catch (const std::exception&) {
    return "";
  }
}

/// Reads the record itself and says what it is.
void read_it(RecordView* v, std::string* verdict) {
  if (v->partial) {
    v->record = read_record_unverified(v->path);  // RecordError when it does not read at all
    *verdict = "a partial record (the run has not completed; not verified): its status says " + v->record.status;
    return;
  }
  try {
    v->record = read_run_record(v->path);
    *verdict =
        v->record.verified ? "verified by its digest" : "unverified (schema version 1: no digest to check it by)";
  } catch (const RecordError& e) {
    *verdict = std::string("DAMAGED: ") + e.what();
    v->record = read_record_unverified(v->path);  // shown as it stands, for the evidence
  }
}

}  // namespace

RecordView view_record(const std::string& given, const SweepFlagsFn& sweep_flags) {
  RecordView v;
  std::error_code ec;
  v.path = given;
  if (fs::is_directory(given, ec)) {
    v.path = (fs::path(given) / "record.h5").string();
    if (!fs::exists(v.path, ec) && fs::exists(v.path + kPartialSuffix, ec)) v.path += kPartialSuffix;
  }
  if (!fs::exists(v.path, ec)) throw RecordError(given + ": no record.h5 (or partial record) there");
  v.partial = is_partial_path(v.path);
  std::string verdict;
  read_it(&v, &verdict);
  const Record& r = v.record;
  const auto line = [&v](const std::string& key, const std::string& value) { v.lines.emplace_back(key, value); };
  line("record", v.path);
  line("verdict", verdict);
  line("run", r.run_id + (r.sweep_id.empty() ? "" : " (sweep " + r.sweep_id + ")"));
  line("status", r.status + (r.failure.empty() ? "" : ": " + r.failure));
  if (status_is(r.status, RunStatus::running))  // a partial record still being written: whether it advances (stall.h)
    if (const std::string p = progress_line(v.path); !p.empty()) line("progress", p);
  // The driver's word on the run (runs/<id>/state), which decides where the record alone
  // cannot: a run it failed or stopped on a Ctrl-C.
  const fs::path run_dir = fs::path(v.path).parent_path();
  const auto state = read_state_fields(run_dir.string());
  if (const auto s = state.find("state"); s != state.end()) {
    const auto d = state.find("detail");
    line("driver", s->second + (d == state.end() || d->second.empty() ? "" : ": " + d->second));
  }
  line("schema", std::to_string(r.schema_version) + ", world size " + std::to_string(r.world_size));
  if (!r.lineage.kind.empty())
    line("lineage", r.lineage.kind + " from run " + r.lineage.parent_run_id + " at step " +
                        std::to_string(r.lineage.parent_step) + " (steps 1-" + std::to_string(r.lineage.parent_step) +
                        " are its rows)");
  std::vector<int64_t> steps, eval_steps;
  for (const auto& s : r.steps) steps.push_back(s.step);
  for (const auto& e : r.evals) eval_steps.push_back(e.step);
  line("steps",
       std::to_string(r.steps.size()) + (r.steps.empty() ? "" : " (last " + std::to_string(steps.back()) + ")") + ", " +
           std::to_string(r.evals.size()) + " evaluations, " + std::to_string(r.checksums.size()) + " checksum rows" +
           (r.checksums.empty() ? "" : " (last at step " + std::to_string(r.checksums.back().step) + ")"));
  line("figures", figures_text(run_figures(r)));
  // The run's own flags, then the sweep's (throughput_outlier), as status and the report
  // say them, when it is a run directory of a sweep.
  v.flags = run_health(r);
  if (sweep_flags && run_dir.parent_path().filename() == "runs" && run_dir.filename() == r.run_id &&
      has_objective(r.status)) {
    const auto more = sweep_flags(run_dir.parent_path().parent_path().string(), r.run_id);
    v.flags.insert(v.flags.end(), more.begin(), more.end());
  }
  line("health", v.flags.empty() ? "ok" : health_names(v.flags));
  for (const auto& f : v.flags) line("  " + f.name, f.detail);
  for (const auto& [name, values] : r.step_extra) line("metric", name + ": last " + last_value(values, steps));
  for (const auto& [name, values] : r.eval_extra)
    line("metric", "eval_" + name + ": last " + last_value(values, eval_steps));
  for (const auto& t : telemetry_summary(r)) line("telemetry", t);
  for (const auto& [k, val] : r.summary) line("summary", k + " = " + val);
  // A key its grid left to a program: the value is the script's own default.
  const std::vector<std::string> own = split(r.env("program.script_defaults"), ' ');
  for (const auto& [k, val] : r.config)
    line("config", k + " = " + val + (std::find(own.begin(), own.end(), k) != own.end() ? " (the script's own)" : ""));
  for (const auto& [k, val] : r.environment)
    if (!val.empty()) line("environment", k + " = " + val);
  return v;
}

}  // namespace sweep
