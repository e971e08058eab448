// `sweep export --format telemetry`: the gradient telemetry in long format (export.h).
#include <algorithm>  // min, max

#include "export.h"
#include "report_format.h"     // csv_field
#include "telemetry_series.h"  // expert_load_at
#include "text.h"              // append_exact_double

namespace sweep {
namespace {

std::string header_row() { return std::string(kTelemetryCsvStart) + "name,rank,layer,expert,value\r\n"; }

/// Every row of one run.
std::string run_rows(const Record& r) {
  using report_fmt::csv_field;
  std::string out;
  const std::string lead = csv_field(r.run_id) + "," + csv_field(r.status) + ",";
  // One row: the lead cells, the step and why, the kind and the cells that name the figure.
  const auto row = [&](int64_t step, const std::string& why, const char* kind,
                       const std::string& name_rank_layer_expert, double v) {
    out += lead, out += std::to_string(step), out += ',', out += why, out += ',', out += kind, out += ',';
    out += name_rank_layer_expert, out += ',';
    append_exact_double(out, v);
    out += "\r\n";
  };
  const auto number = [](int64_t n) { return n < 0 ? std::string() : std::to_string(n); };
  size_t t = 0;  // the next /telemetry row
  const auto telemetry_rows_through = [&](int64_t step) {
    for (; t < r.telemetry.size() && r.telemetry[t].step <= step; ++t) {
      const TelemetryRow& row_t = r.telemetry[t];
      const std::string why = csv_field(row_t.why);
      for (size_t p = 0; p < row_t.tensor_grad_norm.size() && p < r.params.size(); ++p)
        row(row_t.step, why, "tensor_grad_norm", csv_field(r.params[p].name) + ",,,", row_t.tensor_grad_norm[p]);
      if (row_t.routed_tokens.empty()) continue;
      for (int64_t l = 0; l < r.moe_layers; ++l) {
        for (int64_t e = 0; e < r.moe_experts && size_t(l * r.moe_experts + e) < row_t.routed_tokens.size(); ++e)
          row(row_t.step, why, "routed_tokens", ",," + number(l) + "," + number(e),
              double(row_t.routed_tokens[size_t(l * r.moe_experts + e)]));
        const ExpertLoad load = expert_load_at(r, t, l);
        row(row_t.step, why, "expert_load", ",," + number(l) + "," + number(load.busiest), load.max_over_mean);
        row(row_t.step, why, "routing_entropy", ",," + number(l) + ",", load.entropy);
      }
    }
  };
  for (size_t i = 0; i < r.rank_grad_norm.size() && i < r.steps.size(); ++i) {
    telemetry_rows_through(r.steps[i].step - 1);
    for (size_t k = 0; k < r.rank_grad_norm[i].size(); ++k)
      row(r.steps[i].step, "", "rank_grad_norm", "," + std::to_string(k) + ",,", r.rank_grad_norm[i][k]);
  }
  telemetry_rows_through(INT64_MAX);
  return out;
}

}  // namespace

void render_telemetry_csv(const SweepRecords& sweep, const std::function<void(const std::string&)>& sink) {
  sink(header_row());
  for (const Record& r : sweep.runs) sink(run_rows(r));
}

SweepRecords export_sweep_telemetry_csv(const std::string& dir, const std::function<void(const std::string&)>& sink,
                                        size_t chunk) {
  SweepLoader loader(dir);  // (with each rank's rows: the export writes them)
  SweepRecords kept;
  if (!loader.named_by_run_id()) {  // (a record's id need not be its directory's name: read whole)
    loader.load(0, loader.ids().size(), &kept);
    loader.finish(&kept);
    render_telemetry_csv(kept, sink);
    return kept;
  }
  sink(header_row());
  chunk = std::max<size_t>(chunk, 1);
  const size_t n = loader.ids().size();
  for (size_t from = 0; from < n; from += chunk) {
    SweepRecords part;
    loader.load(from, std::min(n, from + chunk), &part);
    for (const Record& r : part.runs) sink(run_rows(r));
    keep_stubs(&part, &kept);
  }
  loader.finish(&kept);
  return kept;
}

}  // namespace sweep
