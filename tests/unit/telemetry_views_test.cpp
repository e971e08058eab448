// The gradient telemetry's figures (telemetry_series.h), the heat map, the report's and run
// page's telemetry parts, `show --telemetry`'s table and the telemetry CSV, on records built
// here (tests/python/test_telemetry_views.py checks them on a real run).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "export.h"            // render_telemetry_csv
#include "report_heatmap.h"    // svg_heatmap
#include "report_telemetry.h"  // telemetry_html, telemetry_tables
#include "run_pages.h"         // render_run_html
#include "telemetry_series.h"
#include "telemetry_summary.h"  // telemetry_table, telemetry_step_problem
#include "test_util.h"          // EXPECT_CONTAINS

using namespace sweep;

namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

/// Two ranks, 30 steps, rows at 10, 20, 30; 3 tensors; one MoE layer of 2 experts.
Record telemetry_record() {
  Record r;
  r.run_id = "0123456789abcdef", r.status = "completed", r.world_size = 2;
  r.params = {{"a", {4}, 0, 4}, {"b", {4}, 4, 4}, {"c", {4}, 8, 4}};
  for (int64_t s = 1; s <= 30; ++s) {
    StepMetrics m;
    m.step = s, m.loss = 2.0, m.grad_norm = 1.0;
    r.steps.push_back(m);
    r.rank_grad_norm.push_back({1.0, s == 17 ? 9.0 : 1.1});
  }
  r.moe_layers = 1, r.moe_experts = 2;
  r.telemetry = {{10, "every", {1, 5, 2}, {30, 10}},
                 {20, "every", {1, 1, 2}, {20, 20}},
                 {30, "every,last", {0.5, 0.1, 0.2}, {40, 0}}};
  return r;
}

}  // namespace

TEST(TelemetrySeries, ExpertLoadIsTheBusiestOverAnEvenSplitAndTheEntropyOverItsLargest) {
  const ExpertLoad even = expert_load({5, 5, 5, 5}), one = expert_load({0, 12, 0, 0}), none = expert_load({0, 0});
  EXPECT_EQ(even.max_over_mean, 1);
  EXPECT_DOUBLE_EQ(even.entropy, 1);
  EXPECT_EQ(one.max_over_mean, 4);
  EXPECT_EQ(one.busiest, 1);
  EXPECT_EQ(one.entropy, 0);
  EXPECT_TRUE(std::isnan(none.max_over_mean) && none.busiest == -1) << "no token routed: no figure";
  const Record r = telemetry_record();
  EXPECT_EQ(expert_load_at(r, 2, 0).max_over_mean, 2);
  EXPECT_EQ(expert_load_pooled(r, 0).tokens, 120);
}

TEST(TelemetrySeries, TheLargestTensorsAreRankedByTheirLargestNormAndANonFiniteOneFirst) {
  Record r = telemetry_record();
  // b is largest at row 10 though smallest at the last row; then c (2), then a (1).
  EXPECT_EQ(largest_tensors(r, 8), (std::vector<size_t>{1, 2, 0}));
  EXPECT_EQ(largest_tensors(r, 2), (std::vector<size_t>{1, 2}));
  r.telemetry[1].tensor_grad_norm[0] = NAN;
  EXPECT_EQ(largest_tensors(r, 1), (std::vector<size_t>{0}));
}

TEST(HeatMap, LongRunsAreBinnedToTheLargestOfEachColumnAndMissingValuesAreGrey) {
  report_plot::HeatMap m;
  m.title = "t", m.value_label = "gradient norm", m.rows = {"rank 0", "rank 1", "rank 2"};
  m.values.assign(3, {});
  for (int64_t s = 1; s <= 300; ++s) {
    m.steps.push_back(s);
    for (size_t k = 0; k < 3; ++k)
      m.values[k].push_back(k == 2 && s <= 5 ? NAN : k == 1 && s == 152 ? 50.0 : 1.0 + 0.001 * double(s));
  }
  const std::string svg = report_plot::svg_heatmap(m);
  EXPECT_CONTAINS(svg, "data-rows=\"3\" data-columns=\"120\"");
  EXPECT_EQ(count(svg, "class=\"cell\"") + count(svg, "class=\"cell none\""), 360u);
  EXPECT_EQ(count(svg, "class=\"cell none\""), 2u) << "steps 1-5 of rank 2 lie in the first two columns";
  EXPECT_CONTAINS(svg, "rank 1, steps 151-152: largest 50<") << "the spike survives its bin";
  EXPECT_CONTAINS(svg, "gradient norm (log scale): ");
  m.values.assign(3, std::vector<double>(300, NAN));
  EXPECT_EQ(report_plot::svg_heatmap(m).find("<svg"), std::string::npos) << "nothing finite: a sentence";
}

TEST(TelemetryViews, TheRunPageAndReportDrawEveryPartOnlyWhereTheRecordHasIt) {
  Record r = telemetry_record();
  const std::string h = telemetry_html(r);
  for (const char* part : {"rank-heatmap", "tensor-norms", "expert-load", "routing-entropy"})
    EXPECT_EQ(count(h, std::string("data-part=\"") + part + "\""), 1u) << part;
  EXPECT_EQ(count(h, "class=\"cell\""), 60u);
  RecordView v;
  v.record = r;
  const std::string page = render_run_html(v, "");
  EXPECT_CONTAINS(page, "data-part=\"rank-heatmap\"");
  EXPECT_CONTAINS(page, "data-part=\"routing-entropy\"");
  // One rank: no heat map (its norm is the grad_norm curve); no routing: no load parts.
  r.world_size = 1;
  for (auto& row : r.rank_grad_norm) row.resize(1);
  for (auto& t : r.telemetry) t.routed_tokens.clear();
  const std::string one = telemetry_html(r);
  EXPECT_EQ(one.find("rank-heatmap"), std::string::npos);
  EXPECT_EQ(one.find("expert-load"), std::string::npos);
  EXPECT_CONTAINS(one, "data-part=\"tensor-norms\"");
  // No telemetry at all: nothing, on the run page too.
  r.rank_grad_norm.clear(), r.telemetry.clear();
  EXPECT_EQ(telemetry_html(r), "");
  EXPECT_TRUE(telemetry_tables(r).empty());
  v.record = r;
  EXPECT_EQ(render_run_html(v, "").find("telemetry-part"), std::string::npos);
}

TEST(TelemetryViews, TheTablesSampleTheFirstQuartileAndLastSteps) {
  const auto tables = telemetry_tables(telemetry_record());
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_EQ(tables[0].head,
            (std::vector<std::string>{"rank", "median", "step 1", "step 8", "step 15", "step 22", "step 30"}));
  EXPECT_EQ(tables[0].rows[1][1], "1.1") << "rank 1's median: its one spike left out";
  EXPECT_EQ(tables[1].rows[0][0], "b");
  EXPECT_EQ(tables[2].rows[0], (std::vector<std::string>{"0", "load max/mean", "1.5", "1", "2"}));
  EXPECT_EQ(tables[2].rows[1][4], "0") << "every token to one expert at step 30";
}

TEST(ShowTelemetry, SaysWhichStepsItHasAndShowsAStepWithoutARowByItsRankNorms) {
  const Record r = telemetry_record();
  EXPECT_EQ(telemetry_step_problem(r, 0), "");
  EXPECT_EQ(telemetry_step_problem(r, 17), "");
  EXPECT_EQ(telemetry_step_problem(r, 31),
            "the record has no step 31 (its steps are 1 to 30); its /telemetry rows are at steps 10, 20, 30");
  EXPECT_CONTAINS(telemetry_step_problem(Record(), 0), "the record has no gradient telemetry");
  const auto last = telemetry_table(r, 0);
  EXPECT_EQ(last[0], "gradient telemetry at step 30 (its /telemetry row: every,last); rows at steps 10, 20, 30");
  EXPECT_EQ(last[3], "0     1          1");
  EXPECT_EQ(last[7], "a                        0.5");
  EXPECT_EQ(last.back(), "0          40      2              0               0        40 0");
  const auto mid = telemetry_table(r, 17);
  EXPECT_EQ(mid[0], "gradient telemetry at step 17: rank norms only, no /telemetry row; rows at steps 10, 20, 30");
  EXPECT_EQ(mid.back(), "1     9          9");
  EXPECT_EQ(mid.size(), 5u);
}

TEST(TelemetryCsv, OneRowPerFigureRankNormsBeforeTheRowOfTheirStep) {
  SweepRecords s;
  s.runs.push_back(telemetry_record());
  std::string csv;
  render_telemetry_csv(s, [&csv](const std::string& chunk) { csv += chunk; });
  EXPECT_EQ(csv.rfind("run_id,status,step,why,kind,name,rank,layer,expert,value\r\n", 0), 0u);
  EXPECT_CONTAINS(csv,
                  "0123456789abcdef,completed,10,,rank_grad_norm,,1,,,1.1000000000000001\r\n"
                  "0123456789abcdef,completed,10,every,tensor_grad_norm,a,,,,1\r\n");
  EXPECT_CONTAINS(csv, "0123456789abcdef,completed,30,\"every,last\",routed_tokens,,,0,1,0\r\n");
  EXPECT_CONTAINS(csv, "0123456789abcdef,completed,30,\"every,last\",expert_load,,,0,0,2\r\n");
  EXPECT_CONTAINS(csv, "0123456789abcdef,completed,30,\"every,last\",routing_entropy,,,0,,0\r\n");
  EXPECT_EQ(count(csv, "\r\n"), 1u + 60 + 9 + 3 * (2 + 2));
}
