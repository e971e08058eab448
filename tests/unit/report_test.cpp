// Sweep reports: loading a sweep directory, finding varying keys, and the HTML page.
#include "report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "export.h"              // render_export_csv
#include "export_tensorboard.h"  // crc32c
#include "paused_child.h"        // PausedChild: the running run is another process
#include "report_format.h"       // csv_field
#include "report_plots.h"        // svg_line_chart: spike marks
#include "run_files.h"           // RunLock: the running run holds its run directory
#include "temp_dir.h"            // TempDirTest

namespace sweep {
namespace {

namespace fs = std::filesystem;
using Config = std::vector<std::pair<std::string, std::string>>;

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

// The first plot of a page (legend swatches are SVGs too, but no plots).
std::string svg_part(const std::string& html) {
  size_t a = html.find("<svg class=\"lines\""), b = html.find("</svg>", a);
  return a == std::string::npos || b == std::string::npos ? "" : html.substr(a, b - a);
}

// The first chart with its legend.
std::string figure_part(const std::string& html) {
  size_t a = html.find("<figure class=\"chart\">"), b = html.find("</figure>", a);
  return a == std::string::npos || b == std::string::npos ? "" : html.substr(a, b - a);
}

class ReportTest : public sweep_test::TempDirTest {
 protected:
  ReportTest() : TempDirTest("report_test") {}

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
};

Record make_record(const std::string& id, std::map<std::string, std::string> config,
                   const std::vector<double>& losses) {
  Record r;
  r.run_id = id;
  r.status = "completed";
  r.verified = true;  // as a record of this version with its digest reads
  r.config = std::move(config);
  for (size_t i = 0; i < losses.size(); ++i) {
    StepMetrics m;
    m.step = static_cast<int64_t>(i) + 1;
    m.loss = losses[i];
    r.steps.push_back(m);
  }
  return r;
}

// `sweep export`'s CSV, cell by cell: the varying config key (quoted where it needs it),
// every recorded column of each step, a program's own figures only where a step has one,
// held-out rows at their steps, and each double as "%.17g" spells it.
TEST(RenderExportCsv, EveryRowAndCellOfARun) {
  Record a = make_record("aa", {{"train.lr", "0.1"}, {"model.kind", "tiny"}}, {2.5, 0.1});
  Record b = make_record("bb", {{"train.lr", "1,5"}, {"model.kind", "tiny"}}, {-INFINITY});
  a.steps[0].lr = 1e-3, a.steps[0].grad_norm = NAN, a.steps[0].skipped = 1, a.steps[0].tokens = 64;
  a.steps[1].tokens_per_s = 1.0 / 3;
  a.step_extra["acc"] = {NAN, 0.5};
  a.evals = {{2, 1.25}};
  a.eval_extra["acc"] = {0.75};
  SweepRecords sw;
  sw.runs = {a, b};
  const std::string lead_a1 = "aa,completed,0.1,1,", lead_a2 = "aa,completed,0.1,2,",
                    lead_b = "bb,completed,\"1,5\",1,";
  const auto columns = [](const std::string& lead, const std::vector<std::string>& values) {
    const char* names[] = {"loss",    "lr",     "grad_norm",   "clip_coef",   "loss_scale",
                           "skipped", "tokens", "step_time_s", "tokens_per_s"};
    std::string out;
    for (size_t i = 0; i < values.size(); ++i) out += lead + names[i] + "," + values[i] + "\r\n";
    return out;
  };
  const std::string expected =
      "run_id,status,train.lr,step,metric,value\r\n" +
      columns(lead_a1, {"2.5", "0.001", "nan", "1", "1", "1", "64", "0", "0"}) +
      columns(lead_a2, {"0.10000000000000001", "0", "0", "1", "1", "0", "0", "0", "0.33333333333333331"}) + lead_a2 +
      "acc,0.5\r\n" + lead_a2 + "eval_loss,1.25\r\n" + lead_a2 + "eval_acc,0.75\r\n" +
      columns(lead_b, {"-inf", "0", "0", "1", "1", "0", "0", "0", "0"});
  EXPECT_EQ(render_export_csv(sw), expected);
  std::vector<std::string> chunks;  // streamed: the header, then one chunk per run
  render_export_csv(sw, [&](const std::string& c) { chunks.push_back(c); });
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0] + chunks[1] + chunks[2], expected);
}

/// What an export says beyond its rows: the failed runs' words and problems, and each
/// exported run's id and verified flag.
std::string export_notes(const SweepRecords& s) {
  std::string t;
  for (const auto& r : s.runs) t += r.run_id + (r.verified ? " v\n" : " u\n");
  for (const auto& f : s.failed) t += "failed " + f.run_id + " " + f.status + " " + f.problem + "\n";
  for (const auto& p : s.problems) t += "problem " + p + "\n";
  return t;
}

// export_sweep_csv reads a chunk of run directories at a time, twice: whatever the chunk,
// it writes what rendering the sweep read whole writes, chunk by chunk as it goes, and
// says the same of what it left out; also where a run directory is not named by a run id
// (the sweep is then read whole).
TEST(ExportSweepCsv, ReadInChunksItWritesWhatTheWholeReadWrites) {
  sweep_test::TempDir tmp("export_sweep_csv_");
  const std::string dir = (tmp.path() / "s").string();
  ASSERT_EQ(std::system((std::string(SWEEP_BIN_DIR "/make_records") + " --out " + dir +
                         " --runs 60 --steps 5 --diverged 2 --failed 3 >/dev/null")
                            .c_str()),
            0);
  const SweepRecords before = load_sweep(dir);
  ASSERT_EQ(before.runs.size(), 60u);  // (and 3 failed)
  std::filesystem::resize_file(before.runs[20].path, std::filesystem::file_size(before.runs[20].path) / 2);
  for (const bool renamed : {false, true}) {
    if (renamed)  // a directory whose name is not a run id
      std::filesystem::rename(std::filesystem::path(before.runs[30].path).parent_path(),
                              std::filesystem::path(dir) / "runs" / "not-an-id");
    const SweepRecords whole = load_sweep(dir, {false});
    const std::string expected = render_export_csv(whole);
    EXPECT_EQ(whole.runs.size(), 59u);                        // the damaged one is left out
    EXPECT_NE(expected.find("train.lr"), std::string::npos);  // a config key varies
    for (size_t chunk : {1, 7, 2048}) {
      std::string text;
      size_t pieces = 0;
      const SweepRecords read = export_sweep_csv(
          dir, [&](const std::string& c) { text += c, ++pieces; }, chunk);
      EXPECT_EQ(text, expected) << chunk << (renamed ? " renamed" : "");
      EXPECT_EQ(pieces, 1 + whole.runs.size()) << chunk;  // the header, then run by run
      EXPECT_EQ(export_notes(read), export_notes(whole)) << chunk << (renamed ? " renamed" : "");
    }
  }
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

// A sweep in progress: the run whose process holds run.lock and writes its partial
// record is "running" with its step of total, not a problem; a partial that says running
// with nobody holding the lock is a run that was stopped ("interrupted"). The writer is a
// child process, as in a real sweep (HDF5 refuses a second, differently locked open of a
// file inside one process).
TEST_F(ReportTest, ARunInProgressIsRunningWithItsStepAndAnAbandonedOneIsInterrupted) {
  write_run("done", {{"train.lr", "0.1"}, {"train.steps", "10"}}, {2.0, 1.0});
  write_run("gone", {{"train.lr", "0.3"}, {"train.steps", "10"}}, {2.0}, /*finished=*/false);
  const fs::path live = dir_ / "runs" / "live";
  sweep_test::PausedChild writer([&](const std::function<void()>& pause) {
    RunLock lock(live.string());
    RecordHeader h;
    h.run_id = "live";
    h.config = {{"train.lr", "0.2"}, {"train.steps", "10"}};
    RecordWriter w((live / "record.h5").string(), h);
    for (int64_t i = 1; i <= 4; ++i) {
      StepMetrics m;
      m.step = i, m.loss = 3.0 - 0.25 * double(i);
      w.append_step(m);
    }
    w.flush();
    pause();
  });
  ASSERT_TRUE(writer.wait_paused());
  const SweepRecords s = load_sweep(dir_.string());
  const ReportModel m = build_report("t", s);
  const std::string html = render_html(s, m), json = render_json(s, m), md = render_markdown(s, m);
  ASSERT_EQ(writer.finish(), 0);

  ASSERT_EQ(s.runs.size(), 1u);
  ASSERT_EQ(s.failed.size(), 2u);
  const FailedRun& gone = s.failed[0];
  EXPECT_EQ(gone.run_id, "gone");
  EXPECT_EQ(gone.status, "interrupted");
  EXPECT_NE(gone.cause.find("no process holds"), std::string::npos) << gone.cause;
  const FailedRun& running = s.failed[1];
  EXPECT_EQ(running.run_id, "live");
  EXPECT_EQ(running.status, "running");
  EXPECT_EQ(running.cause, "running: step 4 of 10, loss 2");
  EXPECT_EQ(running.step, 4);
  EXPECT_EQ(running.steps, 10);
  EXPECT_EQ(running.loss, 2.0);
  EXPECT_TRUE(running.problem.empty());
  ASSERT_EQ(s.problems.size(), 1u);  // only the interrupted run is a problem
  EXPECT_NE(s.problems[0].find("gone"), std::string::npos) << s.problems[0];
  EXPECT_EQ(m.running, 1u);
  EXPECT_EQ(m.interrupted, 1u);  // one word per run, sweep status's
  EXPECT_EQ(m.failed, 0u);
  EXPECT_EQ(m.total, 3u);
  EXPECT_NE(html.find("<h2>Running and failed runs</h2>"), std::string::npos);
  // The step in an element of its own, which a served page advances in place (harness/serve).
  EXPECT_NE(html.find("running: step <span class=\"step\" data-run=\"live\">4</span> of 10, loss 2"), std::string::npos)
      << html;
  EXPECT_NE(md.find("## Running and failed runs"), std::string::npos);
  EXPECT_NE(json.find("\"status\":\"running\",\"cause\":\"running: step 4 of 10, loss 2\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"step\":4,\"steps\":10,\"loss\":2"), std::string::npos) << json;
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
  EXPECT_EQ(count(svg_part(html), "<polyline stroke="), 2u);  // the loss chart's curves
  EXPECT_NE(html.find("2 runs, 0 problems"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  // The value shows in the table and in the chart's title and legend.
  EXPECT_GE(count(html, "&lt;script&gt;"), 3u);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  // <title>, <h1> and the parallel-coordinates plot's label.
  EXPECT_EQ(count(html, "sweep &lt;b&gt;&quot;x&quot;&lt;/b&gt;"), 3u);
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
  EXPECT_NE(html.find("<li>runs/x/record.h5: the run has not finished &amp; &lt;never&gt; will</li>"),
            std::string::npos);
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
  EXPECT_EQ(count(svg, "<polyline stroke="), 1u);  // only "bad" keeps two finite points
  EXPECT_EQ(count(svg, "<circle"), 1u);            // "single" is drawn as a dot
  const std::string figure = figure_part(html);    // the legend names every curve, drawn or not
  for (const char* id : {"empty", "single", "bad", "unplotted"}) EXPECT_NE(figure.find(id), std::string::npos) << id;
  EXPECT_EQ(count(figure, "no finite value"), 2u);
  EXPECT_NE(html.find("<td class=\"num\">-</td>"), std::string::npos);  // no final loss for "empty"

  // One run with one step: both axes have zero width.
  SweepRecords one;
  one.runs.push_back(make_record("only", {}, {3.0}));
  svg = svg_part(render_html("one", one));
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(count(svg, "<circle"), 1u);

  // No finite loss anywhere (and no other figure recorded): no chart, but the table still renders.
  SweepRecords none;
  none.runs.push_back(make_record("nothing", {}, {NAN}));
  html = render_html("none", none);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("No finite values to plot."), std::string::npos);
  EXPECT_NE(html.find("nothing"), std::string::npos);
}

TEST(RenderHtml, ManyRunsCycleThePaletteWithDashes) {
  SweepRecords s;
  for (int i = 0; i < 14; ++i)
    s.runs.push_back(make_record("r" + std::to_string(i), {{"seed", std::to_string(i)}}, {1.0 + i, 0.5}));
  const std::string html = render_html("many", s);
  std::string svg = svg_part(html);
  EXPECT_EQ(count(svg, "<polyline stroke="), 14u);
  EXPECT_EQ(count(svg, "stroke-dasharray"), 2u);                // curves 13 and 14
  EXPECT_EQ(count(figure_part(html), "stroke-dasharray"), 4u);  // and their legend swatches
  // Each curve is named at its end by the key that differs, not the run ids (those are in
  // the tooltips), and so is its legend entry.
  EXPECT_NE(svg.find("class=\"end\">seed=13<title>r13"), std::string::npos);
  EXPECT_NE(figure_part(html).find("<li title=\"r13 (seed=13)\">"), std::string::npos);
  EXPECT_EQ(count(svg, "class=\"end\""), 14u);
}

// A page of 100,000 runs would be ~120 MB: past kHtmlRuns the page lists the best runs and
// every flagged one, says so, and the CSV keeps every run.
TEST(RenderHtml, PastKHtmlRunsThePageListsTheBestAndTheFlaggedRuns) {
  const auto id = [](size_t i) {
    char b[8];
    std::snprintf(b, sizeof b, "r%04zu", i);
    return std::string(b);
  };
  SweepRecords s;
  const size_t n = kHtmlRuns + 300, flagged = kHtmlRuns + 250, left_out = kHtmlRuns + 100;
  for (size_t i = 0; i < n; ++i)  // run i's loss ends at 1 + i/1000: the lower i, the better
    s.runs.push_back(
        make_record(id(i), {{"train.lr", std::to_string(i)}}, {5.0, i == flagged ? NAN : 2.0, 1.0 + double(i) / 1000}));
  const ReportModel m = build_report("many", s);
  ASSERT_EQ(m.html_runs.size(), kHtmlRuns + 1);
  EXPECT_EQ(m.html_runs.back(), flagged);
  EXPECT_EQ(m.html_runs[kHtmlRuns - 1], kHtmlRuns - 1);
  const std::string html = render_html(s, m);
  EXPECT_NE(html.find(std::to_string(kHtmlRuns + 1) + " of " + std::to_string(n) + " runs shown"), std::string::npos);
  EXPECT_NE(html.find(">" + id(flagged) + "<"), std::string::npos);
  EXPECT_NE(html.find(">" + id(kHtmlRuns - 1) + "<"), std::string::npos);
  // Not in the runs table, the diagnostics table or the parallel coordinates (the loss
  // curves draw groups, here one per run: what a chart shows of many is not this cap's).
  for (const char* section : {"<h2>Runs</h2>", "<h2>Diagnostics</h2>", "<h2>All runs</h2>"}) {
    const size_t from = html.find(section);
    ASSERT_NE(from, std::string::npos) << section;
    const std::string part = html.substr(from, html.find("<h2>", from + 4) - from);
    EXPECT_EQ(part.find(id(left_out)), std::string::npos) << section;
    EXPECT_NE(part.find(id(flagged)), std::string::npos) << section;
  }
  EXPECT_NE(render_csv(s, m).find(id(left_out)), std::string::npos) << "the CSV lists every run";
  // Up to kHtmlRuns, every run and no note.
  s.runs.resize(kHtmlRuns);
  const ReportModel all = build_report("all", s);
  EXPECT_EQ(all.html_runs.size(), kHtmlRuns);
  EXPECT_EQ(render_html(s, all).find("runs shown"), std::string::npos);
}

// The y tick labels of one chart (right-aligned tick texts), as numbers.
std::vector<double> y_ticks(const std::string& svg) {
  std::vector<double> out;
  const std::string mark = "text-anchor=\"end\" class=\"tick y\">";
  for (size_t at = svg.find(mark); at != std::string::npos; at = svg.find(mark, at + 1)) {
    std::string label = svg.substr(at + mark.size(), svg.find('<', at) - at - mark.size());
    label.erase(std::remove(label.begin(), label.end(), ','), label.end());
    out.push_back(std::stod(label));
  }
  return out;
}

// Five healthy runs between 2 and 3.4 and one that diverged after peaking at 9,251.
SweepRecords sweep_with_a_diverged_run() {
  SweepRecords s;
  for (int r = 0; r < 5; ++r) {
    std::vector<double> loss;
    for (int k = 0; k < 20; ++k) loss.push_back(2.0 + 0.1 * r + 1.0 / (1 + k));
    s.runs.push_back(make_record("ok" + std::to_string(r), {{"train.lr", "0.0" + std::to_string(r + 1)}}, loss));
  }
  Record bad = make_record("blowup", {{"train.lr", "10"}}, {3.0, 40.0, 800.0, 9251.0, NAN});
  bad.status = "diverged";
  s.runs.push_back(bad);
  return s;
}

TEST(RenderHtml, ADivergedRunIsClippedAndTheTicksSpanTheBulk) {
  std::string svg = svg_part(render_html("diverged", sweep_with_a_diverged_run()));
  std::vector<double> ticks = y_ticks(svg);
  ASSERT_GE(ticks.size(), 4u) << svg;
  ASSERT_LE(ticks.size(), 8u) << svg;
  for (double t : ticks) {
    EXPECT_GE(t, 1.8) << "tick below the healthy curves";
    EXPECT_LE(t, 3.6) << "tick set by the diverged run";
  }
  EXPECT_EQ(svg.find("log scale"), std::string::npos);
  EXPECT_EQ(count(svg, "class=\"clipped\""), 1u);  // one marker, at the top edge
  EXPECT_NE(svg.find("clipped: blowup (train.lr=10) peaks at 9,251"), std::string::npos) << svg;
  EXPECT_GE(count(svg, "class=\"grid\""), 8u);  // gridlines on both axes
}

TEST(RenderHtml, GroupByPanelsShareOneYRange) {
  SweepRecords s;
  s.runs.push_back(make_record("a", {{"model.dim", "8"}, {"train.lr", "0.1"}}, {10.0, 8.0, 6.0}));
  s.runs.push_back(make_record("b", {{"model.dim", "8"}, {"train.lr", "0.2"}}, {9.0, 7.5}));
  s.runs.push_back(make_record("c", {{"model.dim", "16"}, {"train.lr", "0.1"}}, {3.0, 2.0, 1.0}));
  s.runs.push_back(make_record("d", {{"model.dim", "16"}, {"train.lr", "0.2"}}, {2.5, 1.5}));
  ReportOptions opt;
  opt.group_by = "model.dim";
  std::string html = render_html(s, build_report("panels", s, opt));
  const size_t second = html.find("<svg class=\"lines\"", html.find("<svg class=\"lines\"") + 1);
  ASSERT_NE(second, std::string::npos);
  std::vector<double> first_ticks = y_ticks(svg_part(html)), second_ticks = y_ticks(svg_part(html.substr(second)));
  EXPECT_GE(first_ticks.size(), 4u);
  EXPECT_EQ(first_ticks, second_ticks);
  EXPECT_LE(first_ticks.front(), 2.0);
  EXPECT_GE(first_ticks.back(), 9.0);
}

TEST(HtmlEscape, EscapesAllFiveCharacters) {
  EXPECT_EQ(html_escape("&<>\"'"), "&amp;&lt;&gt;&quot;&#39;");
  EXPECT_EQ(html_escape("a & b < c > d \"e\" 'f'"), "a &amp; b &lt; c &gt; d &quot;e&quot; &#39;f&#39;");
  EXPECT_EQ(html_escape("plain text, ünïcode"), "plain text, ünïcode");
  EXPECT_EQ(html_escape(""), "");
}

// ---------------------------------------------------------------- the full report

Record with_trajectory(Record r, uint64_t salt) {
  for (int64_t s = 0; s <= int64_t(r.steps.size()); ++s) r.checksums.push_back({s, salt * 1000 + uint64_t(s), {}});
  return r;
}

std::map<std::string, std::string> layout(const std::string& lr, int world, int accum,
                                          const std::string& reduction = "canonical") {
  return {{"train.lr", lr},
          {"dist.world_size", std::to_string(world)},
          {"train.accum", std::to_string(accum)},
          {"dist.reduction", reduction}};
}

TEST(BuildReport, GroupsSeedsAndComputesTheirFigures) {
  SweepRecords s;
  s.runs.push_back(make_record("a", {{"train.lr", "0.1"}, {"train.seed", "0"}}, {3.0, 1.0, 2.0}));
  s.runs.push_back(make_record("b", {{"train.lr", "0.1"}, {"train.seed", "1"}}, {3.0, 3.0, 6.0}));
  s.runs.push_back(make_record("c", {{"train.lr", "0.02"}, {"train.seed", "0"}}, {3.0, 0.5}));
  s.runs[0].steps[0].tokens = 100, s.runs[0].steps[0].step_time_s = 0.5;
  s.runs[0].memory = {{10, 20}, {1, 2}, {100, 200}, {}, {}};  // no step peak or RSS kept
  ReportModel m = build_report("t", s);
  EXPECT_EQ(m.varying, (std::vector<std::string>{"train.lr", "train.seed"}));
  EXPECT_EQ(m.columns, (std::vector<std::string>{"train.lr"}));  // seeds are averaged over
  ASSERT_EQ(m.groups.size(), 2u);
  // Numbers sort as numbers: 0.02 before 0.1.
  EXPECT_EQ(m.groups[0].values[0].second, "0.02");
  const RunGroup& g = m.groups[1];
  EXPECT_EQ(g.runs.size(), 2u);
  // The objective of a run without evaluations: the mean of its last 20 losses (all 3 here).
  EXPECT_EQ(g.objective_name, "final train loss");
  EXPECT_DOUBLE_EQ(g.objective_mean, 3.0);
  EXPECT_DOUBLE_EQ(g.objective_std, std::sqrt(2.0));  // sample std of {2, 4}
  EXPECT_DOUBLE_EQ(g.best_loss, 1.0);
  EXPECT_DOUBLE_EQ(g.tokens_per_s, 200.0);  // only run a has timings
  EXPECT_EQ(g.memory_bytes, 222);           // rank 1 of run a: 20 + 2 + 200
  EXPECT_EQ(g.status, "2 completed");
  EXPECT_EQ(g.curve_steps, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_DOUBLE_EQ(g.curve_loss[2], 4.0);
  EXPECT_EQ(m.completed, 3u);

  // Grouped by seed, the seeds are no longer averaged.
  ReportOptions by_seed;
  by_seed.group_by = "train.seed";
  ReportModel ms = build_report("t", s, by_seed);
  EXPECT_EQ(ms.groups.size(), 3u);
  ASSERT_EQ(ms.charts.size(), 2u);
  EXPECT_EQ(ms.charts[0].title, "train.seed = 0");
  EXPECT_EQ(ms.charts[0].groups.size(), 2u);
  const std::string html = render_html(s, ms);
  const size_t curves = html.find("<h2>Loss curves</h2>");
  ASSERT_NE(curves, std::string::npos);
  EXPECT_EQ(count(html.substr(curves, html.find("<h2>", curves + 1) - curves), "<svg class=\"lines\""),
            2u);  // one per panel
  EXPECT_NE(html.find("<h3>train.seed = 1</h3>"), std::string::npos);
}

TEST(BuildReport, GroupsAreRankedByTheirObjectiveAndFlaggedRunsAreProblems) {
  SweepRecords s;
  s.runs.push_back(make_record("a", {{"train.lr", "0.1"}}, {3.0, 2.0}));
  s.runs.push_back(make_record("b", {{"train.lr", "0.2"}}, {3.0, 1.0}));
  s.runs.push_back(make_record("c", {{"train.lr", "0.3"}}, {3.0, NAN}));  // no objective: last
  s.runs.push_back(make_record("d", {{"train.lr", "0.4"}}, {3.0, 1.5}));
  // d evaluated held-out data: its objective is the final eval loss, 0.5.
  s.runs[3].evals = {{1, 0.7, 10, 0}, {2, 0.5, 10, 0}};
  const ReportModel m = build_report("t", s);
  std::vector<std::string> order;
  for (const auto& g : m.groups) order.push_back(g.values[0].second);
  EXPECT_EQ(order, (std::vector<std::string>{"0.4", "0.2", "0.1", "0.3"}));
  EXPECT_EQ(m.groups[0].objective_name, "final eval loss");
  EXPECT_DOUBLE_EQ(m.groups[0].objective_mean, 0.5);
  EXPECT_DOUBLE_EQ(m.groups[1].objective_mean, 2.0);  // mean of both steps' losses
  // c's NaN loss is a health flag: still completed, but a problem in the summary line.
  EXPECT_EQ(health_names(m.runs[2].health), "nonfinite_loss");
  EXPECT_EQ(m.completed, 4u);
  EXPECT_EQ(m.flagged, 1u);
  const std::string md = render_report(s, m, ReportFormat::markdown);
  EXPECT_NE(md.find("4 runs, 1 problem: 4 completed; 1 with health flags."), std::string::npos) << md.substr(0, 300);
  EXPECT_NE(md.find("1 with health flags"), std::string::npos);
  EXPECT_NE(md.find("| c | completed | 0.3 | 2 | - | 3 | - | - | - | **nonfinite\\_loss** |"), std::string::npos) << md;
  const std::string html = render_html(s, m);
  EXPECT_NE(html.find("<span class=\"flag\">nonfinite_loss</span>"), std::string::npos);
  EXPECT_NE(html.find("<th class=\"obj\">objective (mean &#177; std over seeds)</th>"), std::string::npos);
  const std::string csv = render_report(s, m, ReportFormat::csv);
  EXPECT_NE(csv.find(",nonfinite_loss,\"nonfinite_loss: 1 of 2 steps had a non-finite loss"), std::string::npos) << csv;
  const std::string json = render_report(s, m, ReportFormat::json);
  EXPECT_NE(json.find("\"health\":[{\"flag\":\"nonfinite_loss\""), std::string::npos);
  EXPECT_NE(json.find("\"problems\":1,\"health_flagged\":1"), std::string::npos);
}

// A diverged run's partial loss is no objective: its group is listed apart, after the
// ranked ones, and counts in no axis effect (it used to rank first and give its axis 100%).
TEST(BuildReport, ADivergedRunIsListedApartAndCountsInNoEffect) {
  SweepRecords s;
  s.runs.push_back(make_record("a", {{"train.on_nan", "skip_step"}, {"train.seed", "0"}}, {5.0, 4.0}));
  s.runs.push_back(make_record("b", {{"train.on_nan", "skip_step"}, {"train.seed", "1"}}, {5.0, 4.5}));
  s.runs.push_back(make_record("c", {{"train.on_nan", "stop"}, {"train.seed", "0"}}, {1.0, NAN}));
  s.runs[2].status = "diverged";
  const ReportModel m = build_report("t", s);
  ASSERT_EQ(m.groups.size(), 2u);
  EXPECT_EQ(m.groups[0].values[0].second, "skip_step");
  EXPECT_EQ(m.groups[1].finite_objectives, 0u);
  EXPECT_EQ(m.groups[1].objective_name, "none (diverged)");
  for (const auto& e : m.effects)
    if (e.key == "train.on_nan") {
      EXPECT_FALSE(e.importance > 0) << e.importance;  // no variance between its values: one has no runs
      ASSERT_EQ(e.counts.size(), 2u);
      EXPECT_EQ(e.counts[0] + e.counts[1], 2u);
    }
  const std::string md = render_report(s, m, ReportFormat::markdown);
  const size_t apart = md.find("**Not ranked**");
  ASSERT_NE(apart, std::string::npos) << md;
  EXPECT_LT(md.find("| skip\\_step |"), apart);
  EXPECT_GT(md.find("| stop |"), apart);
  const std::string html = render_html(s, m);
  const size_t apart_html = html.find("<p><strong>Not ranked</strong>");
  ASSERT_NE(apart_html, std::string::npos);
  EXPECT_LT(html.find("<td>skip_step</td>"), apart_html);
  EXPECT_GT(html.find("<td>stop</td>"), apart_html);
  EXPECT_EQ(html.find("<tr class=\"best\"", apart_html), std::string::npos);  // nothing after it is best
  const std::string json = render_report(s, m, ReportFormat::json);
  EXPECT_NE(json.find("\"objective_name\":\"none (diverged)\",\"finite_objectives\":0,\"ranked\":false"),
            std::string::npos);
}

TEST(BuildReport, AxisEffectsRankTheAxes) {
  SweepRecords s;
  s.runs.push_back(make_record("a", {{"train.lr", "0.1"}, {"train.seed", "0"}}, {1.0}));
  s.runs.push_back(make_record("b", {{"train.lr", "0.1"}, {"train.seed", "1"}}, {1.2}));
  s.runs.push_back(make_record("c", {{"train.lr", "0.2"}, {"train.seed", "0"}}, {3.0}));
  s.runs.push_back(make_record("d", {{"train.lr", "0.2"}, {"train.seed", "1"}}, {3.2}));
  ReportModel m = build_report("t", s);
  ASSERT_EQ(m.effects.size(), 2u);
  EXPECT_EQ(m.effects[0].key, "train.lr");  // largest spread first
  EXPECT_DOUBLE_EQ(m.effects[0].means[0], 1.1);
  EXPECT_DOUBLE_EQ(m.effects[0].means[1], 3.1);
  EXPECT_DOUBLE_EQ(m.effects[0].spread, 2.0);
  EXPECT_EQ(m.effects[1].key, "train.seed");
  EXPECT_NEAR(m.effects[1].spread, 0.2, 1e-12);
}

TEST(BuildReport, EquivalenceClassesAndRunsThatShouldBeIdentical) {
  SweepRecords s;
  s.runs.push_back(with_trajectory(make_record("r1", layout("0.1", 1, 2), {2, 1}), 1));
  s.runs.push_back(with_trajectory(make_record("r2", layout("0.1", 2, 1), {2, 1}), 1));  // same bits: fine
  s.runs.push_back(with_trajectory(make_record("r3", layout("0.1", 2, 2), {2, 1}), 1));  // other global batch
  s.runs.push_back(with_trajectory(make_record("r4", layout("0.2", 1, 2), {2, 1}), 4));
  s.runs.push_back(with_trajectory(make_record("r5", layout("0.2", 2, 1), {2, 0.5}), 5));  // should match r4, does not
  s.runs.push_back(with_trajectory(make_record("r6", layout("0.3", 1, 2, "native"), {2, 1}), 6));
  s.runs.push_back(
      with_trajectory(make_record("r7", layout("0.3", 2, 1, "native"), {2, 1}), 7));  // native: not expected
  s.runs.push_back(make_record("r8", layout("0.4", 1, 1), {2}));  // no checksums: a class of its own
  s.runs.push_back(make_record("r9", layout("0.5", 1, 1), {2}));
  ReportModel m = build_report("t", s);
  ASSERT_EQ(m.classes.size(), 7u);
  EXPECT_EQ(m.classes[0].runs, (std::vector<size_t>{0, 1, 2}));  // identical trajectories, whatever the config
  EXPECT_EQ(m.classes[0].name, "C1");
  EXPECT_EQ(m.runs[7].equivalence, 5u);
  EXPECT_EQ(m.runs[8].equivalence, 6u);

  ASSERT_EQ(m.layout_sets.size(), 3u);
  // The flagged set comes first.
  EXPECT_EQ(m.layout_sets[0].runs, (std::vector<size_t>{3, 4}));
  EXPECT_FALSE(m.layout_sets[0].identical);
  EXPECT_NE(m.layout_sets[0].first_difference.find("r5 vs r4: diverged at step 0"), std::string::npos)
      << m.layout_sets[0].first_difference;
  EXPECT_EQ(m.layout_sets[1].runs, (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(m.layout_sets[1].identical);
  EXPECT_TRUE(m.layout_sets[1].by_design.empty());
  // The native all-reduce promises no bits across layouts: r7 is measured, not flagged.
  EXPECT_EQ(m.layout_sets[2].runs, (std::vector<size_t>{5, 6}));
  EXPECT_TRUE(m.layout_sets[2].identical);
  EXPECT_EQ(m.layout_sets[2].by_design, (std::vector<size_t>{6}));
  EXPECT_EQ(m.layout_sets[2].by_design_max_rel, 0.0);

  const std::string html = render_html(s, m);
  EXPECT_EQ(count(html, "NOT IDENTICAL"), 1u);
  EXPECT_NE(html.find("<td>C1</td><td class=\"num\">3</td>"), std::string::npos);
}

// train.deterministic false (benchmark mode) beside its deterministic partner: the report
// gives each run's tokens/s and the cost of determinism; benchmark runs of one layout are
// not held to each other's bits; a run with another config is not paired.
TEST(BuildReport, DeterminismCostPairsRunsThatDifferOnlyInTrainDeterministic) {
  SweepRecords s;
  const auto timed = [](Record r, double tokens_per_s) {
    for (auto& st : r.steps) st.tokens = int64_t(tokens_per_s), st.step_time_s = 1;
    return r;
  };
  auto bench = layout("0.1", 2, 1);
  bench["train.deterministic"] = "false";
  s.runs.push_back(timed(with_trajectory(make_record("det", layout("0.1", 2, 1), {2, 1}), 1), 1000));
  s.runs.push_back(timed(with_trajectory(make_record("bench", bench, {2, 1}), 2), 1100));
  s.runs.push_back(timed(with_trajectory(make_record("bench2", bench, {2, 1.5}), 3), 1050));  // no partner left
  s.runs.push_back(timed(with_trajectory(make_record("other", layout("0.2", 2, 1), {2, 1}), 4), 900));  // no partner
  auto bench_w1 = layout("0.1", 1, 2);
  bench_w1["train.deterministic"] = "false";
  s.runs.push_back(timed(with_trajectory(make_record("bench_w1", bench_w1, {2, 1.25}), 5), 1200));
  ReportModel m = build_report("t", s);
  ASSERT_EQ(m.determinism_costs.size(), 1u);
  const DeterminismCost& c = m.determinism_costs[0];
  EXPECT_EQ(c.deterministic, 0u);
  EXPECT_EQ(c.benchmark, 1u);
  EXPECT_DOUBLE_EQ(c.deterministic_tokens_per_s, 1000);
  EXPECT_DOUBLE_EQ(c.benchmark_tokens_per_s, 1100);
  EXPECT_DOUBLE_EQ(c.cost, 1.1);
  // Benchmark runs promise no bits: the layout set of bench, bench2 and bench_w1 differs
  // everywhere, but nothing in it is flagged; each is measured against the first instead.
  bool found = false;
  for (const auto& ls : m.layout_sets)
    if (ls.runs == std::vector<size_t>{1, 2, 4}) {
      found = true;
      EXPECT_TRUE(ls.identical) << ls.first_difference;
      EXPECT_EQ(ls.by_design, (std::vector<size_t>{2, 4}));
    }
  EXPECT_TRUE(found);
  const std::string html = render_html(s, m), md = render_markdown(s, m), json = render_json(s, m);
  EXPECT_NE(html.find("<h3>What determinism costs</h3>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"id\">det</td><td class=\"num\">1000</td><td class=\"id\">bench</td><td "
                      "class=\"num\">1100</td><td class=\"num\">1.1x</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(md.find("| det | 1000 | bench | 1100 | 1.1x |"), std::string::npos) << md;
  EXPECT_NE(json.find("\"determinism_costs\":[{\"deterministic\":\"det\",\"deterministic_tokens_per_s\":1000,"
                      "\"benchmark\":\"bench\",\"benchmark_tokens_per_s\":1100,\"cost\":1.1"),
            std::string::npos)
      << json;

  // Throughput measured while other processes shared a run's cores is marked, and such a
  // pair gets no cost: it would measure the machine's load, not determinism.
  s.runs[1].summary["rank_runqueue_share"] = "0.03,0.5";
  m = build_report("t", s);
  ASSERT_EQ(m.determinism_costs.size(), 1u);
  EXPECT_TRUE(std::isnan(m.determinism_costs[0].cost));
  EXPECT_EQ(m.determinism_costs[0].refused, "measured on shared cores (bench)");
  EXPECT_TRUE(m.runs[1].shared_cores());
  EXPECT_FALSE(m.runs[0].shared_cores());
  const std::string shared_html = render_html(s, m), shared_md = render_markdown(s, m);
  EXPECT_NE(shared_html.find("<td class=\"num\">refused: measured on shared cores (bench)</td>"), std::string::npos)
      << shared_html;
  EXPECT_NE(shared_html.find("1100 (shared cores)"), std::string::npos) << shared_html;
  EXPECT_NE(shared_md.find("| bench | 1100 | refused: measured on shared cores (bench) |"), std::string::npos)
      << shared_md;
  EXPECT_NE(render_json(s, m).find("\"runqueue_share\":0.5,\"shared_cores\":true"), std::string::npos);
  s.runs[1].summary.erase("rank_runqueue_share");

  // Without a benchmark run there is no section.
  s.runs.erase(s.runs.begin() + 1, s.runs.begin() + 3);
  s.runs.pop_back();
  m = build_report("t", s);
  EXPECT_TRUE(m.determinism_costs.empty());
  EXPECT_EQ(render_html(s, m).find("What determinism costs"), std::string::npos);
}

// The native all-reduce does the same math in another order: it is named as such with its
// measured largest relative difference, and held to identity only with runs of its own
// layout (1x3 native twice with other ZeRO stages must still match).
TEST(BuildReport, SameMathOtherBitsByDesignIsMeasuredNotFlagged) {
  SweepRecords s;
  s.runs.push_back(with_trajectory(make_record("a", layout("0.1", 3, 1), {2.0, 1.0}), 1));
  auto native = layout("0.1", 1, 3);
  native["dist.reduction"] = "native";
  s.runs.push_back(with_trajectory(make_record("b", native, {2.0, 1.0 + 1e-6}), 2));
  auto zero3 = native;
  zero3["dist.zero_stage"] = "3";
  s.runs.push_back(with_trajectory(make_record("c", zero3, {2.0, 1.0 + 1e-6}), 2));
  ReportModel m = build_report("t", s);
  ASSERT_EQ(m.layout_sets.size(), 1u);
  const LayoutSet& ls = m.layout_sets[0];
  EXPECT_TRUE(ls.identical);
  EXPECT_EQ(ls.by_design, (std::vector<size_t>{1, 2}));
  EXPECT_NEAR(ls.by_design_max_rel, 1e-6, 1e-9);
  EXPECT_NE(ls.by_design_note.find("b (1x3x1 native) vs a: largest relative loss difference 1e-06 at step 2"),
            std::string::npos)
      << ls.by_design_note;
  // c leaving b (same layout, other ZeRO stage) is a real difference.
  s.runs[2] = with_trajectory(make_record("c", zero3, {2.0, 1.5}), 3);
  m = build_report("t", s);
  EXPECT_FALSE(m.layout_sets[0].identical);
  EXPECT_NE(m.layout_sets[0].first_difference.find("c vs b:"), std::string::npos) << m.layout_sets[0].first_difference;
  const std::string html = render_html(s, m), md = render_markdown(s, m), json = render_json(s, m);
  EXPECT_NE(html.find("same math, other bits by design: b, c; c (1x3x1 native) vs a"), std::string::npos);
  EXPECT_NE(md.find("| b, c: c (1x3x1 native) vs a: largest relative loss difference 0.3333 at step 2 |"),
            std::string::npos)
      << md;
  EXPECT_NE(json.find("\"by_design\":[\"b\",\"c\"],\"by_design_max_relative_difference\":"), std::string::npos);
}

// The band of a group is the smallest to the largest loss of its seeds at each step, and
// it is drawn; a group of one run has none.
TEST(BuildReport, SeedBandsSpanTheGroupsSmallestToLargestLoss) {
  SweepRecords s;
  s.runs.push_back(make_record("a", {{"train.lr", "0.1"}, {"train.seed", "0"}}, {3.0, 1.0, 2.0}));
  s.runs.push_back(make_record("b", {{"train.lr", "0.1"}, {"train.seed", "1"}}, {4.0, NAN, 1.0}));
  s.runs.push_back(make_record("c", {{"train.lr", "0.1"}, {"train.seed", "2"}}, {3.5, 2.0, 3.0}));
  s.runs.push_back(make_record("d", {{"train.lr", "0.2"}, {"train.seed", "0"}}, {3.0, 2.0, 1.0}));
  const ReportModel m = build_report("t", s);
  ASSERT_EQ(m.groups.size(), 2u);
  const RunGroup& g = m.groups[1].runs.size() == 3 ? m.groups[1] : m.groups[0];
  ASSERT_EQ(g.runs.size(), 3u);
  EXPECT_EQ(g.curve_lo, (std::vector<double>{3.0, 1.0, 1.0}));
  EXPECT_EQ(g.curve_hi, (std::vector<double>{4.0, 2.0, 3.0}));  // b's NaN is left out
  EXPECT_DOUBLE_EQ(g.curve_loss[1], 1.5);
  const RunGroup& one = &g == &m.groups[0] ? m.groups[1] : m.groups[0];
  EXPECT_EQ(one.curve_lo, one.curve_loss);
  EXPECT_EQ(one.curve_hi, one.curve_loss);
  const std::string html = render_html(s, m);
  EXPECT_EQ(count(svg_part(html), "<polygon class=\"band\""), 1u);  // the loss chart: one band, for the seeds
  EXPECT_NE(html.find("the band spans their smallest to largest loss"), std::string::npos);
  EXPECT_NE(render_json(s, m).find("\"min_loss\":[3,1,1],\"max_loss\":[4,2,3]"), std::string::npos);
}

// "fp16 minus fp32": each run minus its partner of the same seed at the baseline value,
// per step and for the objective; a seed without a partner is left out and a group
// without any partner is named.
TEST(BuildReport, BaselineDifferencesArePairedBySeed) {
  SweepRecords s;
  auto cfg = [](const std::string& p, const std::string& seed, const std::string& lr = "0.1") {
    return std::map<std::string, std::string>{{"train.precision", p}, {"train.seed", seed}, {"train.lr", lr}};
  };
  s.runs.push_back(make_record("b0", cfg("fp32", "0"), {3.0, 2.0}));
  s.runs.push_back(make_record("b1", cfg("fp32", "1"), {3.0, 1.0}));
  s.runs.push_back(make_record("h0", cfg("fp16", "0"), {3.5, 2.5}));
  s.runs.push_back(make_record("h1", cfg("fp16", "1"), {2.0, 2.0}));
  s.runs.push_back(make_record("h2", cfg("fp16", "2"), {9.0, 9.0}));         // no fp32 run of seed 2
  s.runs.push_back(make_record("x0", cfg("bf16", "0", "0.2"), {1.0, 1.0}));  // no fp32 run at lr 0.2
  ReportOptions opt;
  opt.baseline_key = "train.precision", opt.baseline_value = "fp32";
  const ReportModel m = build_report("t", s, opt);
  ASSERT_EQ(m.baseline_diffs.size(), 1u);
  const BaselineDiff& d = m.baseline_diffs[0];
  EXPECT_EQ(m.groups[d.group].values,
            (std::vector<std::pair<std::string, std::string>>{{"train.lr", "0.1"}, {"train.precision", "fp16"}}));
  EXPECT_EQ(report_value(s.runs[m.groups[d.baseline].runs[0]], "train.precision"), "fp32");
  EXPECT_EQ(d.seeds, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(d.steps, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(d.mean, (std::vector<double>{-0.25, 0.75}));  // step 1: 0.5 and -1; step 2: 0.5 and 1
  EXPECT_EQ(d.lo, (std::vector<double>{-1.0, 0.5}));
  EXPECT_EQ(d.hi, (std::vector<double>{0.5, 1.0}));
  // Objectives (mean of both steps): h0 3 - b0 2.5 = 0.5, h1 2 - b1 2 = 0.
  EXPECT_EQ(d.objective_diffs, (std::vector<double>{0.5, 0.0}));
  EXPECT_DOUBLE_EQ(d.objective_mean, 0.25);
  EXPECT_EQ(d.objective_lo, 0.0);
  EXPECT_EQ(d.objective_hi, 0.5);
  ASSERT_EQ(m.baseline_unpaired.size(), 1u);
  EXPECT_EQ(m.baseline_unpaired[0], "train.lr=0.2, train.precision=bf16");

  const std::string html = render_html(s, m), md = render_markdown(s, m), json = render_json(s, m),
                    csv = render_csv(s, m);
  EXPECT_NE(html.find("<h2>Differences against train.precision=fp32</h2>"), std::string::npos);
  EXPECT_NE(html.find("train.precision=fp16 minus train.precision=fp32 at train.lr=0.1"), std::string::npos);
  EXPECT_NE(html.find("+0.25 (min 0, max +0.5, 2 seeds)"), std::string::npos);
  EXPECT_NE(md.find("| train.precision=fp16 minus train.precision=fp32 at train.lr=0.1 | 0, 1 |"), std::string::npos)
      << md;
  EXPECT_NE(json.find("\"baseline\":{\"key\":\"train.precision\",\"value\":\"fp32\""), std::string::npos);
  EXPECT_NE(json.find("\"objective_differences\":[0.5,0]"), std::string::npos);
  EXPECT_NE(csv.find(",baseline_objective_difference,"), std::string::npos);
  // Without a baseline nothing of it is shown.
  const ReportModel plain = build_report("t", s);
  EXPECT_TRUE(plain.baseline_diffs.empty());
  EXPECT_EQ(render_html(s, plain).find("Differences against"), std::string::npos);
}

// Variance explained is eta squared: worked by hand on a 2 x 2 grid with two seeds. A key
// that always changes with another is named, and an incomplete grid is unbalanced.
TEST(BuildReport, AxisImportanceConfoundingAndBalance) {
  SweepRecords s;
  // Objectives (one step each): lr 0.1 -> 1, 1.2 (clip 1), 1.1, 1.3 (clip 2); lr 0.2 -> 3, 3.2, 3.1, 3.3.
  int n = 0;
  for (const char* lr : {"0.1", "0.2"})
    for (const char* clip : {"1", "2"})
      for (const char* seed : {"0", "1"}) {
        const double base = std::string(lr) == "0.1" ? 1.0 : 3.0;
        const double v = base + (std::string(clip) == "2" ? 0.1 : 0) + (std::string(seed) == "1" ? 0.2 : 0);
        const std::string min_lr = std::string(lr) == "0.1" ? "0.01" : "0.02";  // derived from lr
        s.runs.push_back(make_record(
            "r" + std::to_string(n++),
            {{"train.lr", lr}, {"train.clip_norm", clip}, {"train.seed", seed}, {"train.min_lr", min_lr}}, {v}));
      }
  ReportModel m = build_report("t", s);
  std::map<std::string, const AxisEffect*> by_key;
  for (const auto& e : m.effects) by_key[e.key] = &e;
  // Grand mean 2.15; total SS = 8 + 8 * 0.0025 + 8 * 0.01 = 8.1; between lr = 8, clip 0.02, seed 0.08.
  EXPECT_NEAR(by_key["train.lr"]->importance, 8.0 / 8.1, 1e-12);
  EXPECT_NEAR(by_key["train.clip_norm"]->importance, 0.02 / 8.1, 1e-12);
  EXPECT_NEAR(by_key["train.seed"]->importance, 0.08 / 8.1, 1e-12);
  EXPECT_EQ(by_key["train.lr"]->confounded_with, (std::vector<std::string>{"train.min_lr"}));
  EXPECT_EQ(by_key["train.min_lr"]->confounded_with, (std::vector<std::string>{"train.lr"}));
  EXPECT_TRUE(by_key["train.clip_norm"]->confounded_with.empty());
  for (const auto& e : m.effects) EXPECT_TRUE(e.balanced) << e.key;
  const std::string html = render_html(s, m);
  EXPECT_NE(html.find("98.8%; changes together with train.min_lr (effects not separable)"), std::string::npos);
  EXPECT_NE(html.find("eta squared of a one-way analysis of variance"), std::string::npos);

  s.runs.pop_back();  // lr 0.2, clip 2, seed 1 is gone
  m = build_report("t", s);
  for (const auto& e : m.effects) EXPECT_FALSE(e.balanced) << e.key;
  EXPECT_NE(render_markdown(s, m).find("unbalanced (other axes differ between its values)"), std::string::npos);
}

// One knob at a time, as sweeps/seven-tricks.yaml: a base and include entries that each
// change one knob or a small fixed set (world size with accumulation), the seeds a knob of
// their own. Each point is compared with the base over the seeds both have (seed 0 here,
// though the base ran three), and no share of variance is given.
TEST(BaseDeltas, AOneKnobSweepComparesEachPointWithTheBaseAndGivesNoEtaSquared) {
  const std::map<std::string, std::string> base = {
      {"train.precision", "fp32"},  {"train.clip_norm", "1"}, {"data.workers", "0"}, {"train.warmup", "6"},
      {"train.schedule", "cosine"}, {"dist.world_size", "1"}, {"train.accum", "2"},  {"dist.zero_stage", "0"},
      {"train.micro_batch", "4"},   {"train.seed", "0"}};
  // (changes, objective): one step each, so the objective is that step's loss.
  const std::vector<std::pair<std::map<std::string, std::string>, double>> points = {
      {{}, 2.0},
      {{{"train.seed", "1"}}, 2.6},
      {{{"train.seed", "2"}}, 2.2},
      {{{"train.precision", "bf16"}}, 2.25},
      {{{"train.clip_norm", "0"}}, 1.5},
      {{{"data.workers", "2"}}, 2.0},
      {{{"train.micro_batch", "8"}, {"train.accum", "1"}}, 2.125},
      {{{"dist.world_size", "2"}, {"train.accum", "1"}}, 1.75},
      {{{"dist.world_size", "2"}, {"train.accum", "1"}, {"dist.zero_stage", "1"}}, 1.875},
      {{{"train.warmup", "0"}, {"train.schedule", "constant"}}, 2.0625}};
  SweepRecords s;
  for (size_t i = 0; i < points.size(); ++i) {
    auto config = base;
    for (const auto& [k, v] : points[i].first) config[k] = v;
    s.runs.push_back(make_record("r" + std::to_string(i), config, {points[i].second}));
  }
  const ReportModel m = build_report("tricks", s);
  const BaseDeltas& b = m.base_deltas;
  ASSERT_TRUE(b.one_knob());
  EXPECT_EQ(b.base_runs, (std::vector<size_t>{0, 1, 2}));  // the base at each of its seeds
  EXPECT_EQ(b.base_seeds, 3u);
  EXPECT_NEAR(b.base_mean, 6.8 / 3, 1e-12);
  const double mean = 6.8 / 3;
  const double ss = (2.0 - mean) * (2.0 - mean) + (2.6 - mean) * (2.6 - mean) + (2.2 - mean) * (2.2 - mean);
  EXPECT_NEAR(b.base_std, std::sqrt(ss / 2), 1e-12);
  ASSERT_EQ(b.points.size(), 7u);
  std::map<std::string, const PointDelta*> by_change;
  for (const auto& d : b.points) by_change[report_fmt::changes_text(m, d)] = &d;
  const std::vector<std::pair<std::string, double>> want = {
      {"train.precision = bf16", 2.25},
      {"train.clip_norm = 0", 1.5},
      {"data.workers = 2", 2.0},
      {"train.accum = 1, train.micro_batch = 8", 2.125},
      {"dist.world_size = 2, train.accum = 1", 1.75},
      {"dist.world_size = 2, dist.zero_stage = 1, train.accum = 1", 1.875},
      {"train.schedule = constant, train.warmup = 0", 2.0625}};
  for (const auto& [change, objective] : want) {
    ASSERT_EQ(by_change.count(change), 1u) << change;
    const PointDelta& d = *by_change[change];
    EXPECT_EQ(d.seeds, (std::vector<std::string>{"0"})) << change;
    EXPECT_DOUBLE_EQ(d.objective, objective) << change;
    EXPECT_DOUBLE_EQ(d.base_objective, 2.0) << change;  // the base at seed 0, not its mean over seeds
    EXPECT_DOUBLE_EQ(d.delta, objective - 2.0) << change;
    EXPECT_DOUBLE_EQ(d.relative, (objective - 2.0) / 2.0) << change;
  }
  EXPECT_EQ(report_fmt::changes_text(m, b.points[0]), "train.clip_norm = 0");  // the largest change first
  EXPECT_EQ(report_fmt::changes_text(m, b.points[6]), "data.workers = 2");     // no change last
  // No eta squared anywhere: not in the model, nor in any format.
  EXPECT_FALSE(m.rank_importance);
  for (const auto& e : m.effects) EXPECT_TRUE(std::isnan(e.importance)) << e.key;
  const std::string md = render_markdown(s, m), html = render_html(s, m);
  const std::string json = render_report(s, m, ReportFormat::json);
  for (const std::string& page : {md, html}) {
    EXPECT_EQ(page.find("eta squared"), std::string::npos);
    EXPECT_EQ(page.find("Effect of each axis"), std::string::npos);
    EXPECT_NE(page.find("delta against the base point (the run that changes no knob)"), std::string::npos);
  }
  EXPECT_NE(md.find("| change from the base | seeds | final train loss | base final train loss | delta | delta % |"),
            std::string::npos)
      << md;
  // The base's seeds spread by 0.3055: a delta no larger is marked, a larger one is not.
  EXPECT_NE(md.find("| train.precision = bf16 | 1 | 2.25 | 2 | +0.25 (within the seed spread) | +12.5% |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| train.clip\\_norm = 0 | 1 | 1.5 | 2 | -0.5 | -25% |"), std::string::npos);
  EXPECT_NE(md.find("| data.workers = 2 | 1 | 2 | 2 | 0 (within the seed spread) | 0% |"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">+0.25 (within the seed spread) <span"), std::string::npos);
  EXPECT_NE(md.find("Base point (the run that changes no knob): runs r0, r1, r2: final train loss 2.26667 \u00b1 "
                    "0.305505 over 3 seeds (0, 1, 2)"),
            std::string::npos);
  EXPECT_NE(html.find("<td>train.precision = bf16</td><td class=\"num\">1</td><td class=\"num\">2.25</td>"),
            std::string::npos);
  EXPECT_NE(json.find("\"importance_method\":\"delta_against_base\""), std::string::npos);
  EXPECT_EQ(json.find("\"importance_method\":\"eta_squared\""), std::string::npos);
  EXPECT_NE(json.find("\"variance_explained\":null,\"importance\":null"), std::string::npos);
  EXPECT_NE(
      json.find("{\"changes\":[{\"key\":\"train.precision\",\"value\":\"bf16\"}],\"runs\":[\"r3\"],"
                "\"seeds\":[\"0\"],\"objective\":2.25,\"base_objective\":2,\"delta\":0.25,\"relative_delta\":0.125,"
                "\"within_seed_spread\":true}"),
      std::string::npos)
      << json;
  EXPECT_NE(json.find("\"base_runs\":[\"r0\",\"r1\",\"r2\"],\"base_seeds\":3"), std::string::npos);
}

// A paired difference whose seeds disagree on its sign is inside the seeds' spread, and
// says so; one whose seeds agree (a zero is no disagreement) does not.
TEST(BaselineDiff, SeedsThatDisagreeOnTheSignAreWithinTheSeedSpread) {
  BaselineDiff d;
  d.seeds = {"0", "1"};
  d.objective_mean = 0.1, d.objective_lo = -0.2, d.objective_hi = 0.4;
  EXPECT_EQ(report_fmt::diff_text(d),
            "+0.1 (min -0.2, max +0.4, 2 seeds; within the seed spread: the seeds disagree on its sign)");
  d.objective_lo = 0;
  EXPECT_EQ(report_fmt::diff_text(d), "+0.1 (min 0, max +0.4, 2 seeds)");
}

// With seeds crossed with every point, a delta is over the seeds both sides finished, and
// says how many; a point with no seed in common has no delta and comes last. The
// comparison runs on the records' configs alone, in any order.
TEST(BaseDeltas, SeedsAreComparedLikeForLike) {
  SweepRecords s;
  const auto add = [&](const std::string& id, const std::string& precision, const std::string& clip,
                       const std::string& seed, double objective) {
    s.runs.push_back(make_record(id, {{"train.precision", precision}, {"train.clip_norm", clip}, {"train.seed", seed}},
                                 {objective}));
  };
  add("a", "bf16", "1", "0", 3.0);
  add("b", "bf16", "1", "1", 3.5);  // precision bf16 at seeds 0 and 1
  add("c", "fp32", "1", "0", 2.0);
  add("d", "fp32", "1", "1", 1.0);
  add("e", "fp32", "1", "2", 9.0);  // the base at seeds 0, 1 and 2
  add("f", "fp32", "0", "0", 2.5);
  add("g", "fp32", "0", "1", NAN);  // clip 0: seed 1 has no objective, so only seed 0 counts
  add("h", "fp16", "1", "7", 1.0);  // fp16 at a seed the base lacks
  const ReportModel m = build_report("seeds", s);
  const BaseDeltas& b = m.base_deltas;
  ASSERT_TRUE(b.one_knob());
  EXPECT_EQ(b.base_runs, (std::vector<size_t>{2, 3, 4}));
  EXPECT_EQ(b.base,
            (std::vector<std::pair<std::string, std::string>>{{"train.clip_norm", "1"}, {"train.precision", "fp32"}}));
  ASSERT_EQ(b.points.size(), 3u);
  // bf16: (3 + 3.5) / 2 against (2 + 1) / 2 over seeds 0 and 1; seed 2 of the base is left out.
  EXPECT_EQ(report_fmt::changes_text(m, b.points[0]), "train.precision = bf16");
  EXPECT_EQ(b.points[0].seeds, (std::vector<std::string>{"0", "1"}));
  EXPECT_DOUBLE_EQ(b.points[0].objective, 3.25);
  EXPECT_DOUBLE_EQ(b.points[0].base_objective, 1.5);
  EXPECT_DOUBLE_EQ(b.points[0].delta, 1.75);
  EXPECT_DOUBLE_EQ(b.points[0].relative, 1.75 / 1.5);
  EXPECT_EQ(report_fmt::changes_text(m, b.points[1]), "train.clip_norm = 0");
  EXPECT_EQ(b.points[1].seeds, (std::vector<std::string>{"0"}));
  EXPECT_DOUBLE_EQ(b.points[1].delta, 0.5);
  EXPECT_EQ(report_fmt::changes_text(m, b.points[2]), "train.precision = fp16");
  EXPECT_TRUE(b.points[2].seeds.empty());
  EXPECT_TRUE(std::isnan(b.points[2].delta));
  const std::string md = render_markdown(s, m);
  // The base's seeds spread by 4.36 (2, 1, 9): inside it.
  EXPECT_NE(md.find("| train.precision = bf16 | 2 | 3.25 | 1.5 | +1.75 (within the seed spread) | +117% |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| train.precision = fp16 | no seed in common with the base | - | - | - | - |"), std::string::npos);
  // Relative to a base of 0: no percentage.
  for (auto& r : s.runs)
    if (r.run_id == "c") r.steps[0].loss = 0;
  const ReportModel z = build_report("zero", s);
  ASSERT_TRUE(z.base_deltas.one_knob());
  for (const auto& d : z.base_deltas.points)
    if (report_fmt::changes_text(z, d) == "train.clip_norm = 0") {
      EXPECT_DOUBLE_EQ(d.delta, 2.5);
      EXPECT_TRUE(std::isnan(d.relative));
    }
}

// A crossed grid keeps its eta squared: a full one (its values tie, so no base), and one
// whose knobs have a clear most common value but where a point combines two knobs that
// also ran alone (lr=0.2 with clip 2 beside lr=0.2 and clip 2): a crossing, not a knob.
TEST(BaseDeltas, ACrossedGridKeepsItsEtaSquared) {
  SweepRecords full;
  for (const char* lr : {"0.1", "0.2", "0.3"})
    for (const char* clip : {"1", "2"})
      for (const char* seed : {"0", "1"})
        full.runs.push_back(make_record(
            std::string("g") + lr + clip + seed, {{"train.lr", lr}, {"train.clip_norm", clip}, {"train.seed", seed}},
            {std::strtod(lr, nullptr) * 10 + std::strtod(clip, nullptr) + std::strtod(seed, nullptr) * 0.01}));
  SweepRecords crossed;
  const std::vector<std::tuple<const char*, const char*, const char*, double>> points = {{"0.1", "1", "fp32", 1.0},
                                                                                         {"0.2", "1", "fp32", 2.0},
                                                                                         {"0.1", "2", "fp32", 1.5},
                                                                                         {"0.2", "2", "fp32", 2.5},
                                                                                         {"0.1", "1", "bf16", 1.25}};
  for (const auto& [lr, clip, precision, objective] : points)
    crossed.runs.push_back(make_record(std::string("c") + lr + clip + precision,
                                       {{"train.lr", lr}, {"train.clip_norm", clip}, {"train.precision", precision}},
                                       {objective}));
  for (const SweepRecords* s : {&full, &crossed}) {
    const ReportModel m = build_report("grid", *s);
    EXPECT_FALSE(m.base_deltas.one_knob());
    EXPECT_TRUE(m.base_deltas.points.empty());
    for (const auto& e : m.effects) EXPECT_TRUE(std::isfinite(e.importance)) << e.key;
    const std::string md = render_markdown(*s, m);
    EXPECT_NE(md.find("## Effect of each axis on the final train loss"), std::string::npos);
    EXPECT_NE(md.find("eta squared of a one-way analysis of variance"), std::string::npos);
    EXPECT_EQ(md.find("against the base point"), std::string::npos);
    const std::string json = render_report(*s, m, ReportFormat::json);
    EXPECT_NE(json.find("\"importance_method\":\"eta_squared\""), std::string::npos);
    EXPECT_NE(json.find("\"base_deltas\":null"), std::string::npos);
  }
  const ReportModel m = build_report("grid", full);
  std::map<std::string, double> share;
  for (const auto& e : m.effects) share[e.key] = e.importance;
  // Objectives 10 lr + clip + 0.01 seed: SS lr = 4 * (1 + 0 + 1) = 8, clip = 12 * 0.25 = 3,
  // seed = 12 * 0.000025 = 0.0003; they are crossed, so the shares add to one.
  EXPECT_NEAR(share["train.lr"], 8 / 11.0003, 1e-9);
  EXPECT_NEAR(share["train.clip_norm"], 3 / 11.0003, 1e-9);
}

// The Pareto front of objective (lower) against tokens/s (higher), and the per-run
// diagnostics: share of applied steps clipped, skipped steps, the slowest rank.
TEST(BuildReport, ParetoFrontAndRunDiagnostics) {
  SweepRecords s;
  const double objective[] = {1.0, 2.0, 1.5, 2.5, 1.0};
  const double speed[] = {100, 300, 200, 250, 50};  // d is beaten by b; e by a
  for (int i = 0; i < 5; ++i) {
    // The micro-batch changes throughput by design: the trade-off is drawn.
    s.runs.push_back(
        make_record(std::string(1, char('a' + i)), {{"train.micro_batch", std::to_string(i + 1)}}, {objective[i]}));
    s.runs.back().steps[0].tokens = int64_t(speed[i]), s.runs.back().steps[0].step_time_s = 1;
  }
  Record& r = s.runs[0];
  r.steps = {};
  for (int k = 1; k <= 4; ++k) {
    StepMetrics m;
    m.step = k, m.loss = 1.0, m.tokens = 100, m.step_time_s = 1;
    m.clip_coef = k <= 2 ? 0.5 : 1;
    m.skipped = k == 4;
    r.steps.push_back(m);
  }
  r.world_size = 3;
  r.rank_step_time_s = {{1.0, 1.0, 2.0}, {1.0, 1.2, 2.2}, {1.0, 1.1, 2.1}, {1.0, 0.9, 1.9}};
  const ReportModel m = build_report("t", s);
  std::vector<bool> front;
  for (const auto& f : m.runs) front.push_back(f.pareto);
  EXPECT_EQ(front, (std::vector<bool>{true, true, true, false, false}));
  EXPECT_DOUBLE_EQ(m.runs[0].clipped_share, 2.0 / 3.0);  // 2 of the 3 applied steps
  EXPECT_EQ(m.runs[0].skipped_steps, 1);
  EXPECT_EQ(m.runs[0].slowest_rank, 2);
  // Rank medians 1, 1.1 (of 0.9, 1, 1.1, 1.2: the upper middle) and 2.1: 2.1 / 1.1.
  EXPECT_NEAR(m.runs[0].slowest_rank_ratio, 2.1 / 1.1, 1e-12);
  EXPECT_EQ(m.runs[1].slowest_rank, -1);
  const std::string html = render_html(s, m);
  EXPECT_NE(html.find("<h2>Diagnostics</h2>"), std::string::npos);
  EXPECT_NE(html.find("rank 2 (1.90909x)"), std::string::npos);
  // The straggler's run drawn rank by rank, and the best group's row highlighted.
  EXPECT_NE(html.find("<h3>Per-rank step time</h3>\n<p>a, the multi-rank run whose slowest rank is furthest from "
                      "the median of its ranks: rank 2 at 1.90909x"),
            std::string::npos);
  EXPECT_NE(html.find("aria-label=\"step time (s) against step: a\""), std::string::npos);
  EXPECT_EQ(count(html, "<tr class=\"best\""), 1u);
  EXPECT_EQ(count(html, "<circle class=\"front\""), 3u);
  EXPECT_NE(html.find("aria-label=\"parallel coordinates: t\""), std::string::npos);
  const std::string json = render_json(s, m);
  EXPECT_NE(json.find("\"pareto\":true,\"clipped_share\":0.66666666666666663,\"skipped_steps\":1,"
                      "\"slowest_rank\":2"),
            std::string::npos);
  // Wall step times are equal on ranks in lockstep: where the trainer judged each rank's
  // compute time against its peers in the same steps (rank_compute_ratio), that is it.
  s.runs[0].summary["rank_compute_ratio"] = "1,1.32,0.98";
  const ReportModel judged = build_report("t", s);
  EXPECT_EQ(judged.runs[0].slowest_rank, 1);
  EXPECT_DOUBLE_EQ(judged.runs[0].slowest_rank_ratio, 1.32);
  s.runs[0].summary["rank_compute_ratio"] = "1,1.32";  // not one per rank: the step times
  EXPECT_EQ(build_report("t", s).runs[0].slowest_rank, 2);
}

// The slowest rank of a multi-rank run is red by the straggler flag's rule alone (the
// trainer's ratio and excess over its peers, dist.straggler_ratio): a ratio the flag let
// pass is plain, however large, and one it named is red, however small. A run measured on
// shared cores says so beside the figure, in neither colour.
TEST(RenderHtml, ASlowRankIsRedOnlyWhereTheStragglerFlagNamesIt) {
  SweepRecords s;
  s.runs.push_back(make_record("pair", {{"train.lr", "0.1"}}, {2.0, 1.5}));
  s.runs.push_back(make_record("other", {{"train.lr", "0.2"}}, {2.0, 1.6}));
  Record& r = s.runs[0];
  r.world_size = 2;
  r.summary["rank_compute_ratio"] = "1,1.31";
  auto html = [&] { return render_html(s, build_report("t", s)); };
  std::string h = html();
  EXPECT_NE(h.find("<td>rank 1 (1.31x)</td>"), std::string::npos) << "no flag, no red";
  EXPECT_EQ(h.find("<td class=\"flag\">rank 1"), std::string::npos);
  r.summary["stragglers"] = "1";  // the trainer named rank 1: the straggler flag
  h = html();
  EXPECT_NE(h.find("<td class=\"flag\">rank 1 (1.31x)</td>"), std::string::npos);
  // The flag's sentence opens from its name, so the runs table keeps one line a run.
  EXPECT_NE(h.find("<details class=\"more\"><summary><span class=\"flag\">straggler</span></summary><span "
                   "class=\"failure\">rank 1 computed more slowly"),
            std::string::npos);
  r.summary["rank_compute_ratio"] = "1,1.1";  // a run with a lower dist.straggler_ratio
  EXPECT_NE(html().find("<td class=\"flag\">rank 1 (1.1x)</td>"), std::string::npos);
  r.summary["stragglers"] = "0";  // a flag on another rank than the slowest does not paint it
  EXPECT_NE(html().find("<td>rank 1 (1.1x)</td>"), std::string::npos);
  r.summary.erase("stragglers");
  r.summary["rank_compute_ratio"] = "1,1.31";
  r.summary["rank_runqueue_share"] = "0.02,0.3";  // rank 1 waited for a CPU: marked, not red
  h = html();
  EXPECT_NE(h.find("<td>rank 1 (1.31x, shared cores)</td>"), std::string::npos) << h;
  EXPECT_NE(render_markdown(s, build_report("t", s)).find("| rank 1 (1.31x, shared cores) |"), std::string::npos);
}

// The fp16 loss scale (65536 and its halvings) and every other run's 1 are decades apart:
// on a log axis each run's curve lies inside the plot, none clipped, none on an edge.
TEST(RenderHtml, TheLossScaleIsPlottedOnALogAxisThatHoldsEveryRun) {
  SweepRecords s;
  for (const char* p : {"fp32", "bf16", "fp16"}) {
    s.runs.push_back(make_record(p, {{"train.precision", p}}, {2.0, 1.8, 1.7, 1.6}));
    if (std::string(p) == "fp16")
      for (size_t k = 0; k < s.runs.back().steps.size(); ++k)
        s.runs.back().steps[k].loss_scale = k == 2 ? 32768 : 65536;
  }
  const std::string html = render_html(s, build_report("t", s));
  const size_t at = html.find("<svg class=\"lines\"", html.find("<h3>Loss scale (fp16)</h3>"));
  ASSERT_NE(at, std::string::npos);
  const std::string svg = html.substr(at, html.find("</svg>", at) - at);
  EXPECT_NE(svg.find("loss scale (log scale)"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("class=\"clipped\""), std::string::npos) << svg;
  const std::vector<double> ticks = y_ticks(svg);
  EXPECT_EQ(ticks, (std::vector<double>{1, 10, 100, 1000, 10000, 100000}));
  // Each curve's points strictly between the axis's ends (y 20 top, 320 bottom).
  for (size_t p = svg.find("<polyline stroke="); p != std::string::npos; p = svg.find("<polyline stroke=", p + 1)) {
    const size_t from = svg.find("points=\"", p) + 8;
    std::string pts = svg.substr(from, svg.find('"', from) - from);
    for (size_t c = pts.find(','); c != std::string::npos; c = pts.find(',', c + 1)) {
      const double y = std::strtod(pts.c_str() + c + 1, nullptr);
      EXPECT_GT(y, 20.5) << pts;
      EXPECT_LT(y, 319.5) << pts;
    }
  }
}

// Every plot of the report has labelled ticks on both axes, and every string a plot shows
// (keys, values, labels, tooltips) is escaped.
TEST(RenderHtml, EveryPlotHasTickLabelsOnBothAxesAndEscapesItsStrings) {
  SweepRecords s;
  const std::string evil = "<img src=x onerror=alert(1)>";
  for (int i = 0; i < 8; ++i) {
    s.runs.push_back(make_record("r" + std::to_string(i),
                                 {{"train.precision", i % 2 ? "fp32" : "bf16"},
                                  {"model." + evil, (i / 2) % 2 ? evil : "plain"},
                                  {"train.seed", std::to_string(i / 4)},
                                  {"train.clip_norm", "1"}},
                                 {3.0, 2.0 - 0.1 * i, 1.0 + 0.1 * i}));
    for (auto& st : s.runs.back().steps)
      st.tokens = 100 + i, st.step_time_s = 1, st.tokens_per_s = 100 + i, st.lr = 0.1, st.grad_norm = 1.5;
  }
  ReportOptions opt;
  opt.baseline_key = "model." + evil, opt.baseline_value = "plain";
  const ReportModel m = build_report("t", s, opt);
  const std::string html = render_html(s, m);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  size_t svgs = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    const std::string svg = html.substr(at, html.find("</svg>", at) - at);
    if (svg.rfind("<svg class=\"swatch\"", 0) == 0) continue;  // a legend's swatch
    ++svgs;
    EXPECT_GE(count(svg, "class=\"tick x\""), 2u) << svg.substr(0, 200);
    EXPECT_GE(count(svg, "class=\"tick y\""), 2u) << svg.substr(0, 200);
  }
  // Loss, baseline difference, parallel coordinates, Pareto scatter, gradient norm, lr, tokens/s.
  EXPECT_EQ(svgs, 7u);
  EXPECT_NE(html.find("clip_norm 1"), std::string::npos);  // the threshold line on the gradient norm
}

TEST(BuildReport, EnvironmentSummaryFlagsDifferences) {
  SweepRecords s;
  s.runs.push_back(make_record("a", {{"k", "1"}}, {1}));
  s.runs.push_back(make_record("b", {{"k", "2"}}, {1}));
  s.runs[0].environment = {{"blas", "OpenBLAS"}, {"hosts", "n1"}};
  s.runs[1].environment = {{"blas", "OpenBLAS"}, {"hosts", "n2"}};
  ReportModel m = build_report("t", s);
  ASSERT_EQ(m.environment.size(), 2u);
  EXPECT_EQ(m.environment[0].values.size(), 1u);
  EXPECT_EQ(m.environment[1].key, "hosts");
  EXPECT_EQ(m.environment[1].values.size(), 2u);
  EXPECT_EQ(count(render_html(s, m), "differs</span>"), 1u);
}

TEST_F(ReportTest, FailedRunsShowStatusCauseAndTheEndOfTheirLog) {
  write_run("ok", {{"train.lr", "0.1"}}, {2.0, 1.0});
  {
    fs::create_directories(dir_ / "runs" / "bad" / "logs");
    std::ofstream log(dir_ / "runs" / "bad" / "logs" / "rank0.log");
    for (int i = 1; i <= 40; ++i) log << "line " << i << (i == 40 ? " <boom> & \"out\"" : "") << "\n";
    RecordHeader h;
    h.run_id = "bad";
    h.config = {{"train.lr", "0.2"}};
    RecordWriter w((dir_ / "runs" / "bad" / "record.h5").string(), h);
    w.abandon("step 3: <rank 1> died");
  }
  {
    fs::create_directories(dir_ / "runs" / "nan");
    RecordHeader h;
    h.run_id = "nan";
    h.config = {{"train.lr", "0.3"}};
    RecordWriter w((dir_ / "runs" / "nan" / "record.h5").string(), h);
    StepMetrics m;
    m.step = 1, m.loss = NAN;
    w.append_step(m);
    w.finish("diverged", "non-finite loss at step 1");
  }
  SweepRecords s = load_sweep(dir_.string());
  ASSERT_EQ(s.runs.size(), 2u);  // ok and nan
  ASSERT_EQ(s.failed.size(), 2u);
  const FailedRun& bad = s.failed[0];
  EXPECT_EQ(bad.run_id, "bad");
  EXPECT_EQ(bad.status, "failed");
  EXPECT_EQ(bad.cause, "step 3: <rank 1> died");
  EXPECT_EQ(bad.log_tail.rfind("line 26\n", 0), 0u) << bad.log_tail;  // the last 15 lines
  EXPECT_EQ(count(bad.log_tail, "\n"), 14u);
  EXPECT_EQ(s.failed[1].status, "diverged");
  EXPECT_EQ(s.failed[1].cause, "non-finite loss at step 1");
  EXPECT_GE(s.wall_time_s, -1.0);

  ReportModel m = build_report("t", s);
  EXPECT_EQ(m.completed, 1u);
  EXPECT_EQ(m.diverged, 1u);
  EXPECT_EQ(m.failed, 1u);
  const std::string html = render_html(s, m);
  EXPECT_NE(html.find("<h2>Failed runs</h2>"), std::string::npos);
  EXPECT_NE(html.find("step 3: &lt;rank 1&gt; died"), std::string::npos);
  EXPECT_NE(html.find("line 40 &lt;boom&gt; &amp; &quot;out&quot;"), std::string::npos);
  EXPECT_EQ(html.find("line 25\n"), std::string::npos);
  EXPECT_EQ(html.find("<h2>Problems</h2>"), std::string::npos);  // the partial is shown once, as a failed run
  EXPECT_NE(html.find("<td>1 completed, 1 failed, 1 diverged;"), std::string::npos);
  EXPECT_NE(html.find("3 runs, "), std::string::npos);
}

TEST_F(ReportTest, UnfinishedRecordsAreNamedByWhatTheyHold) {
  write_run("crashed", {{"train.lr", "0.1"}}, {2.0});
  // Died between the final status and the rename: whole, but never completed.
  fs::rename(dir_ / "runs" / "crashed" / "record.h5", dir_ / "runs" / "crashed" / "record.h5.partial");
  // Says running, but nobody holds its run.lock: stopped (a running one is tested above).
  write_run("stopped", {{"train.lr", "0.2"}}, {2.0}, /*finished=*/false);
  fs::create_directories(dir_ / "runs" / "empty");
  SweepRecords s = load_sweep(dir_.string());
  ASSERT_EQ(s.failed.size(), 3u);
  EXPECT_EQ(s.failed[0].status, "failed");
  EXPECT_NE(s.failed[0].cause.find("never completed"), std::string::npos) << s.failed[0].cause;
  EXPECT_EQ(s.failed[1].status, "missing");
  EXPECT_EQ(s.failed[2].status, "interrupted");
  ReportModel m = build_report("t", s);
  EXPECT_EQ(m.failed, 1u);
  EXPECT_EQ(m.interrupted, 1u);
  EXPECT_EQ(m.running, 0u);
  EXPECT_EQ(m.missing, 1u);
}

SweepRecords hostile_sweep() {
  SweepRecords s;
  s.runs.push_back(make_record("a", {{"data.path", "<script>alert(1)</script>|x"}, {"train.seed", "0"}}, {2.0, NAN}));
  s.runs.push_back(make_record("b", {{"data.path", "a,\"b\"\nc"}, {"train.seed", "0"}}, {2.0, 1.5}));
  s.failed.push_back({"gone", "missing", "runs/gone/record.h5: no such \x01 record",
                      "runs/gone/record.h5: no such \x01 record", "tail ``` here"});
  s.problems.push_back("runs/gone/record.h5: no such \x01 record");
  return s;
}

TEST(RenderFormats, MarkdownEscapesCellsAndFencesLogs) {
  SweepRecords s = hostile_sweep();
  const std::string md = render_report(s, build_report("t|<b>", s), ReportFormat::markdown);
  EXPECT_EQ(md.rfind("# t\\|&lt;b&gt;\n", 0), 0u) << md.substr(0, 40);
  EXPECT_EQ(md.find("<script"), std::string::npos);
  EXPECT_NE(md.find("&lt;script&gt;alert(1)&lt;/script&gt;\\|x"), std::string::npos);
  EXPECT_NE(md.find("a,\"b\" c"), std::string::npos);  // a line break would end the table row
  EXPECT_NE(md.find("````\ntail ``` here\n````"), std::string::npos);
  for (const char* section : {"## Results", "## Loss curves", "## Effect of each axis", "## Reproducibility", "## Runs",
                              "## Environment", "## Failed runs"})
    EXPECT_NE(md.find(section), std::string::npos) << section;
}

TEST(RenderFormats, CsvQuotesFieldsAndHasOneRowPerRun) {
  SweepRecords s = hostile_sweep();
  const std::string csv = render_report(s, build_report("t", s), ReportFormat::csv);
  EXPECT_EQ(csv.rfind("run_id,status,verified,data.path,steps,final_loss,", 0), 0u) << csv.substr(0, 80);
  EXPECT_NE(csv.find("\"a,\"\"b\"\"\nc\""), std::string::npos);
  EXPECT_EQ(count(csv, "\r\n"), 4u);  // header, two runs, one run without a record
  EXPECT_NE(csv.find("\r\ngone,missing,"), std::string::npos);
  EXPECT_NE(csv.find(",1.5,"), std::string::npos);  // exact final loss of b
}

TEST(RenderFormats, JsonEscapesStringsAndWritesNullForNan) {
  SweepRecords s = hostile_sweep();
  const std::string json = render_report(s, build_report("t\"\\", s), ReportFormat::json);
  EXPECT_EQ(json.rfind("{\"format\":\"sweep-report\",\"version\":7,\"title\":\"t\\\"\\\\\"", 0), 0u)
      << json.substr(0, 80);
  EXPECT_NE(json.find("\"final_loss\":null"), std::string::npos);  // NaN is not JSON
  EXPECT_EQ(json.find("nan"), std::string::npos);
  EXPECT_NE(json.find("no such \\u0001 record"), std::string::npos);
  EXPECT_NE(json.find("\"a,\\\"b\\\"\\nc\""), std::string::npos);
  EXPECT_NE(json.find("\"curve\":{\"step\":[1,2],\"mean_loss\":[2,1.5],\"min_loss\":[2,1.5],\"max_loss\":[2,1.5]}"),
            std::string::npos);
  // Markdown shows a log's control sequences and bidi overrides as text, never raw.
  s.failed[0].log_tail =
      "step 3\n\x1b]8;;http://x\x07"
      "click\x1b]8;;\x07 \u202eevil\n";
  const std::string md_bytes = render_report(s, build_report("t", s), ReportFormat::markdown);
  EXPECT_EQ(md_bytes.find('\x1b'), std::string::npos);
  EXPECT_EQ(md_bytes.find("\u202e"), std::string::npos);
  EXPECT_NE(md_bytes.find("step 3\n\\x1b]8;;http://x\\x07click\\x1b]8;;\\x07 \\u{202e}evil"), std::string::npos)
      << md_bytes;
  // JSON is UTF-8: a stray byte in a log becomes U+FFFD, valid sequences stay.
  s.failed[0].log_tail = "bad \xff byte, good \xc3\xbc";
  const std::string bytes = render_report(s, build_report("t", s), ReportFormat::json);
  EXPECT_NE(bytes.find("bad \\ufffd byte, good \xc3\xbc"), std::string::npos);
}

TEST(RenderFormats, CsvCellsNeverRunAsSpreadsheetFormulas) {
  using report_fmt::csv_field;
  EXPECT_EQ(csv_field("=1+2"), "'=1+2");
  EXPECT_EQ(csv_field("=HYPERLINK(\"http://x\",\"y\")"), "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"");
  EXPECT_EQ(csv_field("+SUM(1)"), "'+SUM(1)");
  EXPECT_EQ(csv_field("@x"), "'@x");
  EXPECT_EQ(csv_field("-x"), "'-x");
  EXPECT_EQ(csv_field("\tx"), "'\tx");
  EXPECT_EQ(csv_field("'quoted"), "''quoted");  // so dropping one leading ' is always exact
  // What spreadsheets also read as a formula: after blanks, and the full-width operators.
  EXPECT_EQ(csv_field(" =1+2"), "' =1+2");
  EXPECT_EQ(csv_field("\n=1+2"), "\"'\n=1+2\"");
  EXPECT_EQ(csv_field("\xc2\xa0@SUM(1)"), "'\xc2\xa0@SUM(1)");
  EXPECT_EQ(csv_field("\xef\xbc\x9d"
                      "1+2"),
            "'\xef\xbc\x9d"
            "1+2");
  EXPECT_EQ(csv_field("\xef\xbc\x8b"
                      "1"),
            "'\xef\xbc\x8b"
            "1");
  EXPECT_EQ(csv_field("a=b"), "a=b");  // not at the start: text
  // Terminal escapes, bidi overrides and bytes that are not UTF-8 never reach the output.
  EXPECT_EQ(csv_field("loss \x1b]0;pwned\x07 ok"), "loss \\x1b]0;pwned\\x07 ok");
  EXPECT_EQ(csv_field("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(csv_field("a\xe2\x80\xae"
                      "b"),
            "a\\u{202e}b");
  EXPECT_EQ(csv_field("bad \xff byte"), "bad \\xff byte");
  EXPECT_EQ(csv_field("line\r\nnext"), "\"line\\x0d\nnext\"");  // a lone CR would move the cursor
  // Numbers stay exactly as written, signs included.
  for (const std::string n : {"-0.5", "+1e-3", "-1.7976931348623157e+308", "-inf", "nan", "3"})
    EXPECT_EQ(csv_field(n), n);
  EXPECT_EQ(csv_field("plain"), "plain");
}

TEST(RenderFormats, ParsesFormatNames) {
  ReportFormat f;
  ASSERT_TRUE(parse_report_format("md", &f));
  EXPECT_EQ(f, ReportFormat::markdown);
  ASSERT_TRUE(parse_report_format("json", &f));
  EXPECT_EQ(f, ReportFormat::json);
  EXPECT_FALSE(parse_report_format("pdf", &f));
}

}  // namespace
}  // namespace sweep

namespace sweep {
namespace {

// The check value every CRC-32C implementation publishes, and TFRecord's mask of it.
TEST(TensorBoardExport, Crc32cMatchesItsPublishedCheckValue) {
  EXPECT_EQ(crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  const uint32_t c = 0xe3069283u;
  EXPECT_EQ(masked_crc32c("123456789"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

// A pbt search's log gives each member's schedule: its spans of steps, the values each
// trained with (the log's words, annotations kept for the text) and whose checkpoint a
// span forked from; the final ranking closes the last span.
TEST(SearchProgress, PbtMembersScheduleIsReadSpanBySpanFromTheLog) {
  const std::string log =
      "# sweep search log\n"
      "search pbt seed=5 population=3 interval=6 decisions_at=6,12 quantile=0.34 perturb=0.8,1.2 resample=0.25 "
      "budget=18 metric=final_eval_loss mode=min\n"
      "member 0: train.lr=0.007 train.clip_norm=0.5 -> 000000000000000a\n"
      "member 1: train.lr=0.001 train.clip_norm=1.0 -> 000000000000000b\n"
      "member 2: train.lr=0.004 train.clip_norm=0.5 -> 000000000000000c\n"
      "generation 1 step 6: rank 1 member 0 run 000000000000000a final_eval_loss=3.8 top\n"
      "generation 1 step 6: member 1 exploits member 0 (run 000000000000000a, checkpoint 36f2789d5623e42a): "
      "train.lr=0.0056 (x0.8) train.clip_norm=1.0 (next) -> 000000000000000d\n"
      "generation 1: decided\n"
      "generation 2 step 12: member 2 exploits member 1 (run 000000000000000d, checkpoint 16f2789d5623e42a): "
      "train.lr=0.03 (resampled) train.clip_norm=0.5 (previous) -> 000000000000000e\n"
      "generation 2: decided\n"
      "final step 18: rank 1 member 2 run 000000000000000e final_eval_loss=2.5 best\n"
      "final step 18: rank 2 member 1 run 000000000000000d final_eval_loss=2.75\n"
      "final step 18: rank 3 member 0 run 000000000000000a final_eval_loss=3\n"
      "done\n";
  const SearchProgress p = search_progress(log, {}, {});
  EXPECT_EQ(p.kind, "pbt");
  EXPECT_EQ(p.budget, 18);
  EXPECT_EQ(p.keys, (std::vector<std::string>{"train.clip_norm", "train.lr"}));
  ASSERT_EQ(p.members.size(), 3u);
  const auto& m0 = p.members[0];
  ASSERT_EQ(m0.spans.size(), 1u);
  EXPECT_EQ(m0.spans[0].to, 18);
  EXPECT_EQ(m0.rank, 3u);
  EXPECT_EQ(m0.final_value, 3.0);
  const auto& m1 = p.members[1];
  ASSERT_EQ(m1.spans.size(), 2u);
  EXPECT_EQ(m1.spans[0].to, 6);
  EXPECT_EQ(m1.spans[1].from, 7);
  EXPECT_EQ(m1.spans[1].to, 18);
  EXPECT_EQ(m1.spans[1].from_member, 0);
  EXPECT_EQ(m1.spans[1].run, "000000000000000d");
  EXPECT_EQ(m1.spans[1].values.at("train.lr"), "0.0056");
  const auto& m2 = p.members[2];
  ASSERT_EQ(m2.spans.size(), 2u);
  EXPECT_EQ(m2.spans[0].to, 12);
  EXPECT_EQ(m2.rank, 1u);
  EXPECT_EQ(pbt_schedule_text(m2),
            "steps 1-12: train.lr=0.004 train.clip_norm=0.5; steps 13-18 (from member 1 at step 12): train.lr=0.03 "
            "(resampled) train.clip_norm=0.5 (previous)");
  // A search still running: the last span ends at the budget.
  const SearchProgress q = search_progress(log.substr(0, log.find("final step")), {}, {});
  ASSERT_EQ(q.members.size(), 3u);
  EXPECT_EQ(q.members[0].spans.back().to, 18);
  EXPECT_EQ(q.members[0].rank, 0u);
}

// The search section reads search.log back: a halving search's compute counts only the
// steps each rung adds (a promoted run resumes), and its points are each rung's best.
TEST(SearchProgress, HalvingSpendsOnlyEachRungsNewStepsAndShowsEachRungsBest) {
  const std::string log =
      "# sweep search log\n"
      "search halving seed=0 eta=3 min_steps=2 brackets=1 budget=18 metric=train_loss_end mode=min trials=3\n"
      "bracket 0 s=1: trials 0..2, rungs 3x6 1x18\n"
      "trial 0: train.lr=1 -> 000000000000000a 000000000000000b\n"
      "trial 1: train.lr=2 -> 000000000000000c 000000000000000d\n"
      "trial 2: train.lr=3 -> 000000000000000e 000000000000000f\n"
      "bracket 0 rung 0 steps 6: rank 1 trial 1 loss=2.5 promoted\n"
      "bracket 0 rung 0 steps 6: rank 2 trial 0 loss=3 stopped\n"
      "bracket 0 rung 0 steps 6: rank 3 trial 2 loss=worst (failed, diverged or no finite train_loss_end) stopped\n"
      "bracket 0 rung 1 steps 18: rank 1 trial 1 loss=1.25 best of bracket\n"
      "done\n";
  const SearchProgress p = search_progress(log, {}, {});
  EXPECT_EQ(p.kind, "halving");
  EXPECT_EQ(p.metric, "train_loss_end");
  ASSERT_EQ(p.best_so_far.size(), 2u);
  EXPECT_EQ(p.best_so_far[0].compute, 3 * 2 * 6.0);  // three trials of two seeds, 6 steps
  EXPECT_EQ(p.best_so_far[0].best, 2.5);
  EXPECT_EQ(p.best_so_far[0].label, "bracket 0 rung 0 (6 steps)");
  EXPECT_EQ(p.best_so_far[1].compute, 36 + 2 * 12.0);  // two runs, 12 more steps each
  EXPECT_EQ(p.best_so_far[1].best, 1.25);
  EXPECT_EQ(p.decisions.size(), 9u);
  // The rung picture: each rung's trials, promotions and new steps; each trial's path.
  EXPECT_EQ(p.keys, std::vector<std::string>{"train.lr"});
  ASSERT_EQ(p.trials.size(), 3u);
  EXPECT_EQ(p.trials[1].label, "trial 1");
  EXPECT_EQ(p.trials[1].inputs, "train.lr=2");
  ASSERT_EQ(p.rungs.size(), 2u);
  EXPECT_EQ(p.rungs[0].steps, 6);
  EXPECT_EQ(p.rungs[0].trials, 3u);
  EXPECT_EQ(p.rungs[0].promoted, 1u);
  EXPECT_EQ(p.rungs[0].steps_spent, 36.0);
  EXPECT_EQ(p.rungs[1].rung, 1u);
  EXPECT_EQ(p.rungs[1].trials, 1u);
  EXPECT_EQ(p.rungs[1].steps_spent, 24.0);
  ASSERT_EQ(p.paths.size(), 3u);
  EXPECT_EQ(p.paths[0].trial, 1u);  // in the order the log ranks them first
  EXPECT_EQ(p.paths[0].fate, "best of bracket");
  EXPECT_EQ(p.paths[0].points, (std::vector<std::pair<int64_t, double>>{{6, 2.5}, {18, 1.25}}));
  EXPECT_EQ(p.paths[1].fate, "stopped");
  EXPECT_TRUE(std::isnan(p.paths[2].points[0].second));  // failed: no metric
  // Logs name their metric now ("train_loss_end=2.5"); read the same.
  std::string named = log;
  for (size_t at; (at = named.find(" loss=")) != std::string::npos;) named.replace(at, 6, " train_loss_end=");
  const SearchProgress q = search_progress(named, {}, {});
  ASSERT_EQ(q.best_so_far.size(), 2u);
  EXPECT_EQ(q.best_so_far[0].best, 2.5);
  EXPECT_EQ(q.best_so_far[1].best, 1.25);
}

// A tpe search's losses are the log's (sign x metric: mode max is negated back), its
// compute the records' steps; a random search's best comes from the records' objectives.
TEST(SearchProgress, TpeAndRandomTakeTheBestSoFarInTheirDecisionOrder) {
  std::vector<Record> runs = {make_record("00000000000000a1", {}, {3, 2}),
                              make_record("00000000000000a2", {}, {3, 2, 1})};
  const std::string tpe =
      "search tpe seed=1 samples=3 parallel=1 startup=1 metric=tokens_per_s mode=max keys=train.lr\n"
      "trial 0 batch 0 random: train.lr=1 -> 00000000000000a1 loss=-10\n"
      "trial 1 batch 1 tpe (good 1 of 1): train.lr=2 -> 00000000000000a2 loss=-5\n"
      "trial 2 batch 2 tpe (good 1 of 2): train.lr=3 -> (no run: excluded) loss=worst (failed)\n";
  std::vector<ReportRun> figs(2);
  const SearchProgress t = search_progress(tpe, runs, figs);
  ASSERT_EQ(t.best_so_far.size(), 3u);
  EXPECT_EQ(t.keys, std::vector<std::string>{"train.lr"});
  ASSERT_EQ(t.trials.size(), 3u);
  EXPECT_EQ(t.trials[1].run_ids, std::vector<std::string>{"00000000000000a2"});
  EXPECT_EQ(t.best_so_far[0].best, 10);  // tokens/s, higher is better
  EXPECT_EQ(t.best_so_far[1].best, 10);
  EXPECT_EQ(t.best_so_far[1].compute, 5);
  EXPECT_EQ(t.best_so_far[2].label, "trial 2 batch 2 tpe (good 1 of 2)");
  // A log that names its metric gives the metric's own value, also under mode max.
  const SearchProgress named = search_progress(
      "search tpe seed=1 samples=2 parallel=1 startup=1 metric=final_eval_loss mode=max keys=train.lr\n"
      "trial 0 batch 0 random: train.lr=1 -> 00000000000000a1 final_eval_loss=10\n"
      "trial 1 batch 1 tpe (good 1 of 1): train.lr=2 -> 00000000000000a2 final_eval_loss=5\n",
      runs, figs);
  ASSERT_EQ(named.best_so_far.size(), 2u);
  EXPECT_EQ(named.best_so_far[0].best, 10);
  EXPECT_EQ(named.best_so_far[1].best, 10);
  figs[0].objective = 0.5, figs[1].objective = 0.25;
  const SearchProgress r = search_progress(
      "search random seed=1 samples=2 keys=train.lr\ndraw 0: train.lr=1 -> 00000000000000a1\n"
      "draw 1: train.lr=2 -> 00000000000000a2\n",
      runs, figs);
  ASSERT_EQ(r.best_so_far.size(), 2u);
  EXPECT_EQ(r.best_so_far[0].best, 0.5);
  EXPECT_EQ(r.best_so_far[1].best, 0.25);
  EXPECT_EQ(r.best_so_far[1].compute, 5);
  EXPECT_TRUE(search_progress("not a search log\n", runs, figs).kind.empty());
}

// An environment key no run has a value for says nothing, and is not shown; one run's
// value among empty ones is.
TEST(BuildReport, EnvironmentKeysEmptyInEveryRunAreLeftOut) {
  SweepRecords s;
  s.runs.push_back(make_record("a", {{"train.lr", "0.1"}}, {1.0}));
  s.runs.push_back(make_record("b", {{"train.lr", "0.2"}}, {1.0}));
  s.runs[0].environment = {{"device", ""}, {"git_commit", "abc"}, {"cuda", ""}};
  s.runs[1].environment = {{"device", ""}, {"git_commit", ""}};
  const ReportModel m = build_report("t", s);
  std::vector<std::string> keys;
  for (const auto& e : m.environment) keys.push_back(e.key);
  EXPECT_EQ(keys, std::vector<std::string>{"git_commit"});
}

// ---------------------------------------------------------------- issue 38: reading at any size

// splitmix64 in [0, 1): the same draws on every standard library.
double unit_draw(uint64_t& state) {
  uint64_t x = (state += 0x9e3779b97f4a7c15ULL);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return double((x ^ (x >> 31)) >> 11) * 0x1.0p-53;
}

TEST(Importance, RankEtaSquaredQuantileBinsAndSpearmanHaveTheirKnownValues) {
  // Two groups of four whose ranks do not overlap: H = 12/72 (10^2/4 + 26^2/4) - 27 = 16/3,
  // so eta squared of H = (16/3 - 2 + 1) / (8 - 2) = 13/18.
  EXPECT_NEAR(rank_eta_squared({1, 2, 3, 4, 5, 6, 7, 8}, {0, 0, 0, 0, 1, 1, 1, 1}), 13.0 / 18.0, 1e-12);
  // Ranks only: any monotone change of the values gives the same.
  EXPECT_NEAR(rank_eta_squared({1, 2, 3, 4, 50, 60, 700, 8000}, {0, 0, 0, 0, 1, 1, 1, 1}), 13.0 / 18.0, 1e-12);
  // Groups that do not differ: 0 (chance alone would explain more); all equal: unknown.
  EXPECT_EQ(rank_eta_squared({1, 8, 2, 7, 3, 6, 4, 5}, {0, 0, 0, 0, 1, 1, 1, 1}), 0.0);
  EXPECT_TRUE(std::isnan(rank_eta_squared({1, 1, 1, 1}, {0, 0, 1, 1})));
  EXPECT_TRUE(std::isnan(rank_eta_squared({1, 2, 3}, {0, 0, 0})));
  // Quantile bins of equal counts; equal values share one.
  EXPECT_EQ(quantile_bins({5, 1, 3, 2, 4, 6}, 3), (std::vector<size_t>{2, 0, 1, 0, 1, 2}));
  EXPECT_EQ(quantile_bins({1, 1, 1, 1, 2, 3}, 3), (std::vector<size_t>{0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(midranks({10, 20, 20, 30}), (std::vector<double>{1, 2.5, 2.5, 4}));
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {1, 4, 9, 16}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_TRUE(std::isnan(spearman({1, 2, 3}, {5, 5, 5})));
}

// A 40-trial search where one parameter decides the objective and two do not: the report
// bins the continuous ones and ranks the planted parameter first, whether its effect goes
// one way (clip_norm) or has its best in the middle (lr, where Spearman's rho sees ~0).
TEST(Importance, ASearchRanksThePlantedParameterFirst) {
  for (const std::string planted : {"train.lr", "train.clip_norm"}) {
    SweepRecords s;
    uint64_t state = 38;
    for (int t = 0; t < 40; ++t) {
      const double log_lr = -3 + 1.5 * unit_draw(state), clip = 0.25 + 1.75 * unit_draw(state);
      const int warmup = 10 * int(5 * unit_draw(state));
      const double noise = 0.02 * unit_draw(state);
      const double objective = planted == "train.lr" ? 1.5 + std::pow(log_lr + 2.3, 2) + noise : 1.5 + clip + noise;
      char lr[32], cn[32];
      std::snprintf(lr, sizeof lr, "%.6g", std::pow(10.0, log_lr));
      std::snprintf(cn, sizeof cn, "%.6g", clip);
      s.runs.push_back(make_record(
          "t" + std::to_string(t),
          {{"train.lr", lr}, {"train.warmup", std::to_string(warmup)}, {"train.clip_norm", cn}}, {objective}));
    }
    const ReportModel m = build_report("search", s);
    ASSERT_TRUE(m.rank_importance) << planted;
    ASSERT_EQ(m.effects.size(), 3u);
    std::map<std::string, const AxisEffect*> by_key;
    for (const auto& e : m.effects) by_key[e.key] = &e;
    EXPECT_EQ(m.effects[0].key, planted);
    EXPECT_GT(m.effects[0].importance, 0.8) << planted;
    EXPECT_LT(m.effects[1].importance, 0.2) << planted;
    EXPECT_LT(m.effects[2].importance, 0.2) << planted;
    EXPECT_TRUE(by_key["train.lr"]->binned);
    EXPECT_TRUE(by_key["train.clip_norm"]->binned);
    EXPECT_FALSE(by_key["train.warmup"]->binned);  // five values: each its own level
    EXPECT_EQ(by_key["train.lr"]->values.size(), 5u);
    EXPECT_TRUE(by_key["train.lr"]->confounded_with.empty());  // drawn apart, not together
    if (planted == "train.lr") {
      EXPECT_LT(std::abs(by_key["train.lr"]->rank_correlation), 0.5);  // a trend-only measure misses it
    } else {
      EXPECT_GT(by_key["train.clip_norm"]->rank_correlation, 0.9);
    }
    const std::string html = render_html(s, m);
    EXPECT_NE(html.find("Kruskal-Wallis"), std::string::npos);
    EXPECT_EQ(html.find("effects not separable"), std::string::npos);
  }
}

TEST(Legends, ABaseWithOneChangePerKnobNamesOnlyTheChanges) {
  SweepRecords s;
  const std::map<std::string, std::string> base = {
      {"train.precision", "fp32"}, {"train.clip_norm", "1"}, {"data.workers", "0"}, {"train.warmup", "6"}};
  const std::vector<std::pair<std::string, std::string>> changes = {
      {"", ""}, {"train.precision", "bf16"}, {"train.clip_norm", "0"}, {"data.workers", "2"}, {"train.warmup", "0"}};
  for (size_t i = 0; i < changes.size(); ++i) {
    auto config = base;
    if (!changes[i].first.empty()) config[changes[i].first] = changes[i].second;
    s.runs.push_back(make_record("r" + std::to_string(i), config, {2.0 - 0.1 * double(i)}));
  }
  const ReportModel m = build_report("tricks", s);
  std::vector<std::string> labels = m.group_labels;
  std::sort(labels.begin(), labels.end());
  EXPECT_EQ(labels, (std::vector<std::string>{"base", "clip_norm=0", "precision=bf16", "warmup=0", "workers=2"}));
  EXPECT_TRUE(m.facet_by.empty());
  // A full grid names every key that varies (short), on every curve.
  SweepRecords g;
  for (const char* lr : {"0.1", "0.2"})
    for (const char* clip : {"1", "2"})
      g.runs.push_back(make_record(std::string("g") + lr + clip, {{"train.lr", lr}, {"train.clip_norm", clip}}, {1}));
  const ReportModel mg = build_report("grid", g);
  labels = mg.group_labels;
  std::sort(labels.begin(), labels.end());
  EXPECT_EQ(labels, (std::vector<std::string>{"clip_norm=1, lr=0.1", "clip_norm=1, lr=0.2", "clip_norm=2, lr=0.1",
                                              "clip_norm=2, lr=0.2"}));
  EXPECT_EQ(short_key_names({"train.lr", "model.lr", "train.warmup", "model.moe.top_k"}),
            (std::vector<std::string>{"train.lr", "model.lr", "warmup", "top_k"}));
}

TEST(Legends, ManyGroupsOfAFullGridAreSplitIntoEvenPanels) {
  SweepRecords s;
  for (const char* lr : {"1e-3", "2e-3", "3e-3", "5e-3", "1e-2"})
    for (const char* warmup : {"0", "10", "20"})
      for (const char* clip : {"0.5", "1"})
        s.runs.push_back(make_record(std::string("r") + lr + warmup + clip,
                                     {{"train.lr", lr}, {"train.warmup", warmup}, {"train.clip_norm", clip}},
                                     {1, 0.5}));
  const ReportModel m = build_report("grid", s);
  EXPECT_EQ(m.facet_by, "train.warmup");  // 3 panels of 10 (clip: 2 of 15, lr: 5 of 6)
  ASSERT_EQ(m.charts.size(), 3u);
  EXPECT_EQ(m.charts[1].title, "train.warmup = 10");
  EXPECT_EQ(m.charts[1].groups.size(), 10u);
  for (const auto& l : m.charts[1].labels) EXPECT_EQ(l.find("warmup"), std::string::npos) << l;
  const std::string html = render_html(s, m);
  EXPECT_NE(html.find("One panel per value of train.warmup"), std::string::npos);
  // --group-by decides the panels itself.
  ReportOptions opt;
  opt.group_by = "train.lr";
  const ReportModel by_lr = build_report("grid", s, opt);
  EXPECT_TRUE(by_lr.facet_by.empty());
  EXPECT_EQ(by_lr.charts.size(), 5u);
}

// A plain hyperparameter sweep: every run its own class, throughput differing by noise
// alone; neither the class column nor the trade-off plot is shown. A layout pair brings the
// classes back, a precision axis the plot.
TEST(BuildReport, ClassesAndTheThroughputTradeOffOnlyWhereTheyMeanSomething) {
  SweepRecords s;
  for (int i = 0; i < 4; ++i) {
    s.runs.push_back(
        with_trajectory(make_record("r" + std::to_string(i), {{"train.lr", std::to_string(i + 1)}}, {2, 1}), i + 1));
    for (auto& st : s.runs.back().steps) st.tokens = 100 + i, st.step_time_s = 1;
  }
  ReportModel m = build_report("plain", s);
  EXPECT_FALSE(m.classes_matter);
  EXPECT_TRUE(m.throughput_varies_with.empty());
  std::string html = render_html(s, m);
  EXPECT_EQ(html.find("reproducibility class"), std::string::npos);
  EXPECT_EQ(html.find("<th>class</th>"), std::string::npos);
  EXPECT_EQ(html.find("against throughput"), std::string::npos);
  EXPECT_NE(html.find("no trade-off"), std::string::npos);
  EXPECT_EQ(render_markdown(s, m).find("## Pareto front"), std::string::npos);

  s.runs.push_back(with_trajectory(make_record("twin", layout("1", 2, 1), {2, 1}), 1));
  s.runs.push_back(with_trajectory(make_record("base", layout("1", 1, 2), {2, 1}), 1));
  for (auto& r : s.runs) r.config["train.precision"] = r.run_id == "r3" ? "bf16" : "fp32";
  m = build_report("layout", s);
  EXPECT_TRUE(m.classes_matter);
  EXPECT_EQ(m.throughput_varies_with,
            (std::vector<std::string>{"dist.reduction", "dist.world_size", "train.accum", "train.precision"}));
  html = render_html(s, m);
  EXPECT_NE(html.find("<th title=\"reproducibility class\">repro&shy;ducibility class</th>"), std::string::npos);
  EXPECT_NE(html.find("Reproducibility class: runs whose parameter checksums agree"), std::string::npos);
  EXPECT_NE(html.find("against throughput</h2>"), std::string::npos);
}

TEST(RenderHtml, LongValuesGoByAnAliasWithAKeyAndTheObjectiveComesFirst) {
  SweepRecords s;
  const std::string path = "/data/corpora/very/long/path/to/the/tokenised/shard-0001.bin";
  s.runs.push_back(make_record("a", {{"data.path", path}, {"train.lr", "0.1"}}, {1.0}));
  s.runs.push_back(make_record("b", {{"data.path", "short.bin"}, {"train.lr", "0.2"}}, {2.0}));
  const ReportModel m = build_report("t", s);
  ASSERT_EQ(m.long_values.size(), 1u);
  EXPECT_EQ(m.long_values[0].alias, "#1");
  EXPECT_EQ(shown_value(m, "data.path", path), "#1");
  const std::string html = render_html(s, m);
  const size_t results = html.find("<table class=\"results\">");
  ASSERT_NE(results, std::string::npos);
  const std::string table = html.substr(results, html.find("</table>", results) - results);
  EXPECT_EQ(table.find(path + "<"), std::string::npos);  // in the cell's tooltip only
  EXPECT_NE(table.find(">#1</td>"), std::string::npos);
  EXPECT_LT(table.find("<th class=\"obj\">"), table.find("<th class=\"key\""));  // the objective first
  EXPECT_NE(html.find("Values too long for the table and the legends"), std::string::npos);
  EXPECT_NE(html.find(">" + path + "</td>"), std::string::npos);  // the key to the alias
  // The legend names the value by its alias too.
  EXPECT_NE(figure_part(html).find("path=#1"), std::string::npos);
}

// A spike decision on a loss curve: a rewind's stretch shaded from the state it went back
// to through the spiking step, a skipped update a line alone, each titled (escaped) with
// its sentence; both inside the plot whatever steps they name.
TEST(ReportPlots, SpikeMarksAreShadedUnderTheCurveWithTheirSentence) {
  report_plot::LineChart c;
  report_plot::Series s;
  s.label = "loss";
  for (int k = 1; k <= 30; ++k) s.x.push_back(k), s.y.push_back(3.0 + 0.01 * k);
  c.series.push_back(s);
  c.marks = {{12, 15, "run a: step 15 <rewound>"}, {20, 20, "step 20: skipped"}, {-5, 99, "out of range"}};
  const std::string svg = report_plot::svg_line_chart(c, report_plot::shared_scale({&c}));
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<g class=\"spike\">"), 3u);
  EXPECT_EQ(count("<rect "), 2u);  // the skip is a line alone
  EXPECT_NE(svg.find("<title>run a: step 15 &lt;rewound&gt;</title>"), std::string::npos);
  EXPECT_EQ(svg.find("<rewound>"), std::string::npos);
  // Drawn before the curves, so that they stay on top.
  EXPECT_LT(svg.find("class=\"spike\""), svg.find("class=\"curves\""));
  // Clamped to the plot: the out-of-range stretch starts at step 1's x and ends at step 30's,
  // inside the figure's width.
  double width = 0, x = 0, w = 0, first_x = 0, first_w = 0;
  ASSERT_EQ(std::sscanf(svg.c_str() + svg.find("width=\""), "width=\"%lf\"", &width), 1);
  ASSERT_EQ(std::sscanf(svg.c_str() + svg.find("<rect x=\""), "<rect x=\"%lf\" y=\"%*[^\"]\" width=\"%lf\"", &first_x,
                        &first_w),
            2);
  ASSERT_EQ(std::sscanf(svg.c_str() + svg.rfind("<rect x=\""), "<rect x=\"%lf\" y=\"%*[^\"]\" width=\"%lf\"", &x, &w),
            2);
  EXPECT_LT(x, first_x);
  EXPECT_GT(x, 0);
  EXPECT_LT(x + w, width);
  EXPECT_GT(w, first_w * 5);  // steps 1 to 30 against 12 to 15
}

}  // namespace
}  // namespace sweep
