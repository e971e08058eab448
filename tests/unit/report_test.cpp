// Sweep reports: loading a sweep directory, finding varying keys, and the HTML page.
#include "report.h"

#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <cmath>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace sweep {
namespace {

namespace fs = std::filesystem;
using Config = std::vector<std::pair<std::string, std::string>>;

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

std::string svg_part(const std::string& html) {
  size_t a = html.find("<svg"), b = html.find("</svg>");
  return a == std::string::npos || b == std::string::npos ? "" : html.substr(a, b - a);
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "report_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Writes runs/<id>/record.h5; unfinished leaves only record.h5.partial behind.
  void write_run(const std::string& id, const Config& config, const std::vector<double>& losses, bool finished = true) {
    fs::path run_dir = dir_ / "runs" / id;
    fs::create_directories(run_dir);
    RecordHeader h;
    h.run_id = id;
    h.sweep_id = "sweep-test";
    h.config_yaml = "# test\n";
    h.config = config;
    RecordWriter w((run_dir / "record.h5").string(), h);
    for (size_t i = 0; i < losses.size(); ++i) {
      StepMetrics m;
      m.step = static_cast<int64_t>(i) + 1;
      m.loss = losses[i];
      w.append_step(m);
      w.append_checksum({m.step, 0x0123456789abcdefULL + i, {}});
    }
    if (finished) w.finish("completed");
  }

  fs::path dir_;
};

Record make_record(const std::string& id, std::map<std::string, std::string> config, const std::vector<double>& losses) {
  Record r;
  r.run_id = id;
  r.status = "completed";
  r.config = std::move(config);
  for (size_t i = 0; i < losses.size(); ++i) {
    StepMetrics m;
    m.step = static_cast<int64_t>(i) + 1;
    m.loss = losses[i];
    r.steps.push_back(m);
  }
  return r;
}

TEST_F(ReportTest, LoadSweepFindsCompletedRunsAndReportsPartialOnes) {
  write_run("run-b", {{"optim.lr", "0.2"}}, {2.0, 1.5});
  write_run("run-a", {{"optim.lr", "0.1"}}, {2.0, 1.0, 0.5});
  write_run("run-c", {{"optim.lr", "0.3"}}, {2.0}, /*finished=*/false);
  ASSERT_TRUE(fs::exists(dir_ / "runs" / "run-c" / "record.h5.partial"));
  fs::create_directories(dir_ / "runs" / "run-d");  // started, nothing written yet

  SweepRecords s = load_sweep(dir_.string());
  ASSERT_EQ(s.runs.size(), 2u);
  EXPECT_EQ(s.runs[0].run_id, "run-a");
  EXPECT_EQ(s.runs[1].run_id, "run-b");
  EXPECT_EQ(s.runs[0].steps.size(), 3u);
  EXPECT_EQ(s.runs[0].status, "completed");
  ASSERT_EQ(s.problems.size(), 2u);
  EXPECT_NE(s.problems[0].find("run-c"), std::string::npos) << s.problems[0];
  EXPECT_NE(s.problems[0].find("record.h5.partial"), std::string::npos) << s.problems[0];
  EXPECT_NE(s.problems[1].find("run-d"), std::string::npos) << s.problems[1];
}

TEST_F(ReportTest, LoadSweepWithoutRunsFolderIsEmpty) {
  SweepRecords s = load_sweep(dir_.string());
  EXPECT_TRUE(s.runs.empty());
  EXPECT_TRUE(s.problems.empty());
  s = load_sweep((dir_ / "does-not-exist").string());
  EXPECT_TRUE(s.runs.empty());
  EXPECT_TRUE(s.problems.empty());
}

TEST(VaryingKeys, ReturnsExactlyTheDifferingKeys) {
  std::vector<Record> runs = {
      make_record("a", {{"model.dim", "64"}, {"optim.lr", "0.1"}, {"seed", "1"}}, {}),
      make_record("b", {{"model.dim", "64"}, {"optim.lr", "0.2"}, {"seed", "1"}, {"data.extra", "x"}}, {}),
      make_record("c", {{"model.dim", "64"}, {"optim.lr", "0.1"}, {"seed", "1"}}, {}),
  };
  EXPECT_EQ(varying_keys(runs), (std::vector<std::string>{"data.extra", "optim.lr"}));
  EXPECT_TRUE(varying_keys({runs[0]}).empty());
  EXPECT_TRUE(varying_keys({}).empty());
}

TEST_F(ReportTest, RenderHtmlShowsRunsAndEscapesUserStrings) {
  write_run("run-a", {{"optim.lr", "0.1"}, {"note", "<script>alert(1)</script>"}}, {2.0, 1.0, 0.1234567});
  write_run("run-b", {{"optim.lr", "0.2"}, {"note", "plain"}}, {2.5, 1.75});
  SweepRecords s = load_sweep(dir_.string());
  ASSERT_EQ(s.runs.size(), 2u);
  std::string html = render_html("sweep <b>\"x\"</b>", s);

  EXPECT_NE(html.find("<meta charset=\"utf-8\">"), std::string::npos);
  EXPECT_NE(html.find("<style>"), std::string::npos);
  EXPECT_NE(html.find("run-a"), std::string::npos);
  EXPECT_NE(html.find("run-b"), std::string::npos);
  EXPECT_NE(html.find("0.123457"), std::string::npos);
  EXPECT_NE(html.find("1.75"), std::string::npos);
  EXPECT_NE(html.find("0123456789abcdf1"), std::string::npos);  // last checksum of run-a
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(count(html, "<polyline"), 2u);
  EXPECT_NE(html.find("2 runs, 0 problems"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  // The value shows in the table and in the chart's title and legend.
  EXPECT_GE(count(html, "&lt;script&gt;"), 3u);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_EQ(count(html, "sweep &lt;b&gt;&quot;x&quot;&lt;/b&gt;"), 2u);  // <title> and <h1>
}

TEST(RenderHtml, ZeroRunsSaysSoAndListsProblems) {
  SweepRecords s;
  std::string html = render_html("empty", s);
  EXPECT_NE(html.find("no completed runs"), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("0 runs, 0 problems"), std::string::npos);

  s.problems.push_back("runs/x/record.h5: the run has not finished & <never> will");
  html = render_html("empty", s);
  EXPECT_NE(html.find("1 problem"), std::string::npos);
  EXPECT_NE(html.find("<li>runs/x/record.h5: the run has not finished &amp; &lt;never&gt; will</li>"), std::string::npos);
}

TEST(RenderHtml, ChartSurvivesDegenerateRuns) {
  SweepRecords s;
  s.runs.push_back(make_record("empty", {{"k", "0"}}, {}));
  s.runs.push_back(make_record("single", {{"k", "1"}}, {0.5}));
  s.runs.push_back(make_record("bad", {{"k", "2"}}, {0.5, NAN, INFINITY, -INFINITY, 0.5}));
  s.runs.push_back(make_record("unplotted", {{"k", "3"}}, {NAN, NAN}));
  std::string html = render_html("degenerate", s);
  std::string svg = svg_part(html);
  ASSERT_FALSE(svg.empty());
  // Every finite loss is 0.5, so the loss axis has zero width; no coordinate may be NaN.
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 1u);  // only "bad" keeps two finite points
  EXPECT_EQ(count(svg, "<circle"), 1u);    // "single" is drawn as a dot
  for (const char* id : {"empty", "single", "bad", "unplotted"}) EXPECT_NE(svg.find(id), std::string::npos) << id;
  EXPECT_NE(html.find("<td class=\"num\">-</td>"), std::string::npos);  // no final loss for "empty"

  // One run with one step: both axes have zero width.
  SweepRecords one;
  one.runs.push_back(make_record("only", {}, {3.0}));
  svg = svg_part(render_html("one", one));
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(count(svg, "<circle"), 1u);

  // No finite loss anywhere: no chart, but the table still renders.
  SweepRecords none;
  none.runs.push_back(make_record("nothing", {}, {NAN}));
  html = render_html("none", none);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("nothing"), std::string::npos);
}

TEST(RenderHtml, ManyRunsCycleThePaletteWithDashes) {
  SweepRecords s;
  for (int i = 0; i < 12; ++i) s.runs.push_back(make_record("r" + std::to_string(i), {{"seed", std::to_string(i)}}, {1.0 + i, 0.5}));
  std::string svg = svg_part(render_html("many", s));
  EXPECT_EQ(count(svg, "<polyline"), 12u);
  EXPECT_EQ(count(svg, "stroke-dasharray"), 4u);  // two curves and their two legend swatches
}

TEST(HtmlEscape, EscapesAllFiveCharacters) {
  EXPECT_EQ(html_escape("&<>\"'"), "&amp;&lt;&gt;&quot;&#39;");
  EXPECT_EQ(html_escape("a & b < c > d \"e\" 'f'"), "a &amp; b &lt; c &gt; d &quot;e&quot; &#39;f&#39;");
  EXPECT_EQ(html_escape("plain text, ünïcode"), "plain text, ünïcode");
  EXPECT_EQ(html_escape(""), "");
}

}  // namespace
}  // namespace sweep
