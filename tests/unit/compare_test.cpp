// Comparing records: the first divergent step and parameter, loss differences,
// tolerance, environment and config differences, and pairing the runs of two sweeps.
#include "compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "record.h"     // read_record
#include "temp_dir.h"   // TempDir
#include "test_util.h"  // EXPECT_CONTAINS

namespace sweep {
namespace {

// A record of `steps` steps with a checksum row at 0 and every step, two tensors.
Record make_record(int64_t steps, double base = 2.0) {
  Record r;
  r.run_id = "r";
  r.status = "completed";
  r.params = {{"embed", {4, 4}, 0, 16}, {"head", {4, 4}, 16, 16}};
  r.config = {{"train.lr", "0.001"}};
  r.environment = {{"hosts", "a"}, {"blas", "OpenBLAS"}};
  r.checksums.push_back({0, 100, {1000, 2000}});
  for (int64_t s = 1; s <= steps; ++s) {
    StepMetrics m;
    m.step = s;
    m.loss = base / double(s);
    r.steps.push_back(m);
    r.checksums.push_back({s, 100 + uint64_t(s), {1000 + uint64_t(s), 2000 + uint64_t(s)}});
  }
  return r;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

TEST(CompareRecords, HeldOutLossesAreComparedToo) {
  Record a = make_record(4), b = make_record(4);
  a.evals = b.evals = {{2, 3.5, 64, 0.01}, {4, 3.25, 64, 0.01}};
  b.evals[1].time_s = 0.5;  // timing is not the math
  RecordComparison c = compare_records(a, b);
  EXPECT_TRUE(c.bitwise());
  EXPECT_EQ(c.evals_compared, 2u);
  EXPECT_CONTAINS(verdict_line(c), "identical bit-for-bit: 4 steps, 5 checksums, 2 evaluations");
  // The same training, another held-out loss (other held-out data): not identical.
  b.evals[1].loss = std::nextafter(3.25, 4.0);
  c = compare_records(a, b);
  EXPECT_FALSE(c.bitwise());
  EXPECT_FALSE(c.match());
  EXPECT_EQ(c.eval_step, 4);
  EXPECT_CONTAINS(verdict_line(c),
                  "training identical bit-for-bit (4 steps, 5 checksums), but the held-out loss differs "
                  "after step 4: 3.25 vs 3.2500000000000004");
  CompareOptions loose;
  loose.rtol = 1e-9;
  EXPECT_TRUE(compare_records(a, b, loose).match()) << "within the tolerance";
  // An evaluation only one side has.
  b.evals.pop_back();
  c = compare_records(a, b);
  EXPECT_FALSE(c.match());
  EXPECT_CONTAINS(verdict_line(c), "differs after step 4: 3.25 vs (none)");
}

TEST(CompareRecords, GradientTelemetryIsComparedAtTheStepsBothTookARow) {
  Record a = make_record(4), b = make_record(4);
  a.telemetry = {{2, "every", {0.5, 0.25}, {}}, {4, "every,last", {0.5, 0.125}, {}}};
  b.telemetry = {{3, "spike", {9, 9}, {}}, {4, "last", {0.5, 0.125}, {}}};  // why is not the math
  b.rank_grad_norm = {{1}, {2}, {3}, {4}};                                  // nor is each rank's own
  RecordComparison c = compare_records(a, b);
  EXPECT_TRUE(c.bitwise()) << verdict_line(c);
  EXPECT_EQ(c.telemetry_compared, 1u) << "only step 4 is in both";
  b.telemetry[1].tensor_grad_norm[1] = std::nextafter(0.125, 1.0);
  c = compare_records(a, b);
  EXPECT_FALSE(c.bitwise());
  EXPECT_FALSE(c.match());
  EXPECT_EQ(verdict_line(c),
            "training identical bit-for-bit (4 steps, 5 checksums), but the gradient telemetry differs at step 4: "
            "the gradient norm of head");
  b.telemetry[1].tensor_grad_norm[1] = 0.125;
  a.telemetry[1].routed_tokens = {3, 5}, b.telemetry[1].routed_tokens = {4, 4};
  EXPECT_CONTAINS(verdict_line(compare_records(a, b)), "differs at step 4: the MoE routing (tokens per expert)");
}

TEST(CompareRecords, IdenticalRecordsAreBitwise) {
  Record a = make_record(5), b = make_record(5);
  b.run_id = "other";  // the id is not part of the comparison
  RecordComparison c = compare_records(a, b);
  EXPECT_TRUE(c.bitwise());
  EXPECT_TRUE(c.match());
  EXPECT_EQ(c.steps_compared, 5u);
  EXPECT_EQ(c.checksums_compared, 6u);
  EXPECT_EQ(c.divergent_step(), kNoStep);
  EXPECT_EQ(verdict_line(c), "identical bit-for-bit: 5 steps, 6 checksums");
  EXPECT_TRUE(c.environment.empty());
  EXPECT_EQ(joined(detail_lines(c)), "environment: identical\n");
}

TEST(CompareRecords, WithoutACommonChecksumRowItIsNeverCalledBitForBit) {
  // Equal losses say nothing about the parameters: no checksum row, no "bit-for-bit".
  Record a = make_record(5), b = make_record(5);
  a.checksums.clear(), b.checksums.clear();
  RecordComparison c = compare_records(a, b);
  EXPECT_EQ(c.checksums_compared, 0u);
  EXPECT_FALSE(c.bitwise());
  EXPECT_FALSE(c.match());
  EXPECT_EQ(verdict_line(c).find("bit-for-bit:"), std::string::npos) << verdict_line(c);
  EXPECT_EQ(verdict_line(c),
            "losses identical; parameters never compared (no checksum row at a common step) (5 steps, 0 checksums)");
  // Rows only at different steps compare nothing either.
  Record d = make_record(5), e = make_record(5);
  d.checksums.resize(1);
  e.checksums.erase(e.checksums.begin());
  EXPECT_FALSE(compare_records(d, e).bitwise());
}

TEST(CompareRecords, BitForBitNeedsTheFinalParametersCompared) {
  // The same losses, but B kept a checksum only at step 0 and its final parameters differ
  // from A's: nothing compared them, so it is not "bit-for-bit".
  Record a = make_record(5), b = make_record(5);
  b.checksums.resize(1);
  RecordComparison c = compare_records(a, b);
  EXPECT_FALSE(c.bitwise());
  EXPECT_FALSE(c.match());
  EXPECT_EQ(verdict_line(c), "losses identical; parameters not compared after step 0 (5 steps, 1 checksums)");
  // Rows at common steps, but none at the last one (5): still not compared at the end.
  Record d = make_record(5), e = make_record(5);
  d.checksums.pop_back(), e.checksums.pop_back();
  EXPECT_EQ(verdict_line(compare_records(d, e)),
            "losses identical; parameters not compared after step 4 (5 steps, 5 checksums)");
  // With the last row on both sides it is.
  EXPECT_EQ(verdict_line(compare_records(a, make_record(5))), "identical bit-for-bit: 5 steps, 6 checksums");
}

TEST(CompareRecords, ADifferentStatusIsAlwaysNamed) {
  // Completed vs diverged with the same bits: never "identical", and the status is said.
  Record a = make_record(5), b = make_record(5);
  b.status = "diverged";
  RecordComparison c = compare_records(a, b);
  EXPECT_FALSE(c.bitwise());
  EXPECT_FALSE(c.match());
  EXPECT_EQ(verdict_line(c),
            "training identical bit-for-bit (5 steps, 6 checksums), but the status differs: completed vs diverged");
  EXPECT_CONTAINS(joined(detail_lines(c)), "status: completed -> diverged");
  // A real divergence with a status difference names both.
  b.steps[2].loss += 1;
  EXPECT_CONTAINS(verdict_line(compare_records(a, b)), "; status completed vs diverged");
  // Within a tolerance, a status difference still does not match.
  EXPECT_FALSE(compare_records(a, b, {1.0}).match());
}

TEST(CompareRecords, OneUlpLossDifferenceIsTheDivergentStep) {
  Record a = make_record(6), b = make_record(6);
  b.steps[2].loss = std::nextafter(a.steps[2].loss, 10.0);  // step 3
  b.steps[4].loss += 0.5;                                   // step 5: the largest difference
  RecordComparison c = compare_records(a, b);
  EXPECT_FALSE(c.bitwise());
  EXPECT_FALSE(c.match());
  EXPECT_EQ(c.loss_step, 3);
  EXPECT_EQ(c.divergent_step(), 3);
  EXPECT_EQ(c.checksum_step, kNoStep);
  // 17 significant digits tell the two doubles apart.
  EXPECT_EQ(verdict_line(c),
            "diverged at step 3: loss " + exact_number(a.steps[2].loss) + " vs " + exact_number(b.steps[2].loss));
  EXPECT_NE(exact_number(a.steps[2].loss), exact_number(b.steps[2].loss));
  EXPECT_DOUBLE_EQ(c.max_abs, 0.5);
  EXPECT_EQ(c.max_abs_step, 5);
  EXPECT_DOUBLE_EQ(c.max_rel, 0.5 / (2.0 / 5 + 0.5));
  EXPECT_CONTAINS(joined(detail_lines(c)), "max loss difference: abs 0.5 at step 5");
}

TEST(CompareRecords, ChecksumNamesTheFirstDifferingParameter) {
  Record a = make_record(5), b = make_record(5);
  b.checksums[2].tensors[1] ^= 1;  // step 2, tensor "head"; losses stay equal
  b.checksums[2].params ^= 1;
  b.checksums[4].tensors[0] ^= 1;  // a later difference in "embed" must not be the one named
  RecordComparison c = compare_records(a, b);
  EXPECT_EQ(c.checksum_step, 2);
  EXPECT_EQ(c.first_param, "head");
  EXPECT_EQ(c.loss_step, kNoStep);
  EXPECT_EQ(c.divergent_step(), 2);
  const std::string v = verdict_line(c);
  EXPECT_CONTAINS(v, "diverged at step 2: loss 1 vs 1 (equal; the parameters differ after the update)");
  EXPECT_CONTAINS(joined(detail_lines(c)), "first differing parameter: head (checksums at step 2)");
  // Bitwise, differing checksums are a divergence; a tolerance is about losses only.
  EXPECT_FALSE(c.match());
  EXPECT_TRUE(compare_records(a, b, {1e-12}).match());
}

TEST(CompareRecords, InitialParametersAndParameterTables) {
  Record a = make_record(3), b = make_record(3);
  b.checksums[0].tensors[0] = 7;
  RecordComparison c = compare_records(a, b);
  EXPECT_EQ(c.divergent_step(), 0);
  EXPECT_EQ(verdict_line(c), "diverged at step 0: the initial parameters differ");
  EXPECT_EQ(c.first_param, "embed");

  b.params[1].name = "lm_head";  // another model: a name from either side would mislead
  EXPECT_EQ(compare_records(a, b).first_param, "(the parameter tables differ)");
}

TEST(CompareRecords, MissingStepsAreADifference) {
  Record a = make_record(5), b = make_record(3);
  RecordComparison c = compare_records(a, b);
  EXPECT_EQ(c.steps_compared, 3u);
  EXPECT_EQ(c.missing_step, 4);
  EXPECT_TRUE(c.missing_in_b);
  EXPECT_EQ(c.divergent_step(), 4);
  EXPECT_EQ(verdict_line(c), "diverged at step 4: loss " + exact_number(a.steps[3].loss) + " vs (no such step)");
  EXPECT_FALSE(compare_records(a, b, {0.5}).match());  // no tolerance covers a missing step
  RecordComparison r = compare_records(b, a);
  EXPECT_FALSE(r.missing_in_b);
  EXPECT_CONTAINS(joined(detail_lines(r)), "A has no step 4");
}

TEST(CompareRecords, ChecksumRowsAreMatchedByStep) {
  Record a = make_record(6), b = make_record(6);
  // B recorded checksums only every second step: the common rows still compare equal.
  std::vector<ChecksumRow> even;
  for (const auto& row : b.checksums)
    if (row.step % 2 == 0) even.push_back(row);
  b.checksums = even;
  RecordComparison c = compare_records(a, b);
  EXPECT_TRUE(c.bitwise());
  EXPECT_EQ(c.checksums_compared, 4u);  // steps 0, 2, 4, 6
}

TEST(CompareRecords, RelativeTolerance) {
  Record a = make_record(4), b = make_record(4);
  for (auto& s : b.steps) s.loss *= 1 + 1e-9;
  for (auto& row : b.checksums) row.params ^= 0xff;  // different bits, as a changed layout of native reduce would give
  EXPECT_FALSE(compare_records(a, b).match());
  RecordComparison loose = compare_records(a, b, {1e-6});
  EXPECT_TRUE(loose.match());
  EXPECT_FALSE(loose.bitwise());
  EXPECT_CONTAINS(verdict_line(loose), "within tolerance (rtol 1e-06): 4 steps, 5 checksums");
  EXPECT_NEAR(loose.max_rel, 1e-9, 1e-12);
  EXPECT_FALSE(compare_records(a, b, {1e-10}).match());
}

TEST(CompareRecords, NanMatchesOnlyItself) {
  Record a = make_record(3), b = make_record(3);
  a.steps[1].loss = NAN, b.steps[1].loss = NAN;
  EXPECT_TRUE(compare_records(a, b).bitwise());  // same bits: the same divergence reproduced
  b.steps[1].loss = 1.0;
  RecordComparison c = compare_records(a, b, {1e9});
  EXPECT_FALSE(c.match());
  EXPECT_TRUE(std::isinf(c.max_abs));
}

TEST(CompareRecords, ListsConfigAndEnvironmentDifferences) {
  Record a = make_record(2), b = make_record(2);
  b.environment["hosts"] = "b";
  b.environment["env.OMP_NUM_THREADS"] = "4";
  b.config["train.threads"] = "2";
  RecordComparison c = compare_records(a, b);
  EXPECT_TRUE(c.bitwise());  // differences in the environment alone do not make a divergence
  const std::string d = joined(detail_lines(c));
  EXPECT_CONTAINS(d, "environment hosts: a -> b\n");
  EXPECT_CONTAINS(d, "environment env.OMP_NUM_THREADS: (unset) -> 4\n");
  EXPECT_CONTAINS(d, "config train.threads: (unset) -> 2\n");
  EXPECT_EQ(d.find("environment: identical"), std::string::npos) << d;
}

// A program's key table (program.keys, the --describe-models YAML) whose one help string
// changed: that line, once, A -> B; not the whole table twice.
TEST(CompareRecords, AValueOfManyLinesIsShownByTheLinesThatDiffer) {
  const std::string keys =
      "offers: [linreg]\nmodels:\n  - kind: linreg\n    help: \"\"\n    keys:\n      - name: features\n"
      "        type: int\n        help: \"input features\"\n      - name: noise\n        type: real\n"
      "        help: \"label noise\"\n";
  Record a = make_record(2), b = make_record(2);
  a.environment["program.keys"] = keys;
  b.environment["program.keys"] = keys;
  const size_t at = keys.find("input features");
  b.environment["program.keys"].replace(at, 14, "features of the input");
  std::string d = joined(detail_lines(compare_records(a, b)));
  EXPECT_CONTAINS(d,
                  "environment program.keys: 1 line of its 11 differs, A -> B:\n"
                  "  line 8: help: \"input features\" -> help: \"features of the input\"\n");
  EXPECT_EQ(d.find("name: noise"), std::string::npos) << d;  // no line that is the same on both sides
  EXPECT_EQ(d.find("offers"), std::string::npos) << d;
  // A key added and another removed: each line once, where it is.
  std::string more = keys;
  more.insert(more.find("      - name: noise"), "      - name: bias\n        type: real\n");
  more.replace(more.find("        help: \"label noise\"\n"), 28, "");
  b.environment["program.keys"] = more;
  d = joined(detail_lines(compare_records(a, b)));
  EXPECT_CONTAINS(d,
                  "environment program.keys: 3 lines differ (A has 11, B 12), A -> B:\n"
                  "  line 9 only in B:       - name: bias\n"
                  "  line 10 only in B:         type: real\n"
                  "  line 11 only in A:         help: \"label noise\"\n");
  EXPECT_EQ(d.find("input features"), std::string::npos) << d;
  // Only the indent differs: the lines are shown whole, quoted, so the difference shows.
  b.environment["program.keys"] = keys;
  b.environment["program.keys"].replace(keys.find("    help: \"\""), 4, "  ");
  EXPECT_CONTAINS(joined(detail_lines(compare_records(a, b))), "  line 4: '    help: \"\"' -> '  help: \"\"'\n");
  // A value that one side lacks is shown as it was.
  b.environment.erase("program.keys");
  EXPECT_CONTAINS(joined(detail_lines(compare_records(a, b))), "environment program.keys: " + keys + " -> (unset)\n");
}

TEST(CompareRecords, BitsThatDifferAcrossInstructionSetsSaySo) {
  Record a = make_record(3), b = make_record(3);
  a.environment["cpu.isa"] = "avx512_bf16", b.environment["cpu.isa"] = "avx2";
  a.environment["aten.isa"] = b.environment["aten.isa"] = "avx2";
  // The same bits on both: the instruction sets are an environment difference, no cause.
  RecordComparison same = compare_records(a, b);
  EXPECT_TRUE(same.bitwise());
  EXPECT_EQ(same.isa_change, "");
  b.steps[1].loss += 1e-9;
  RecordComparison c = compare_records(a, b);
  EXPECT_EQ(c.isa_change.rfind("the instruction sets differ (cpu.isa avx512_bf16 -> avx2): ", 0), 0) << c.isa_change;
  EXPECT_CONTAINS(joined(detail_lines(c)), c.isa_change + "\n");
  // One side that cannot tell (a program's writer leaves aten.isa empty) is no difference.
  a.environment["cpu.isa"] = "avx2", a.environment["aten.isa"] = "";
  EXPECT_EQ(compare_records(a, b).isa_change, "");
}

TEST(DiffMaps, EveryKeyOfEitherSideInKeyOrder) {
  const std::map<std::string, std::string> a = {{"a", "1"}, {"b", "2"}, {"d", ""}, {"e", "5"}, {"g", "7"}};
  const std::map<std::string, std::string> b = {{"b", "2"}, {"c", "3"}, {"d", "4"}, {"f", ""}, {"g", "7"}, {"h", "8"}};
  const auto text = [](const std::vector<ValueDiff>& ds) {
    std::string out;
    for (const auto& d : ds) out += d.key + "=" + d.a + "|" + d.b + " ";
    return out;
  };
  // A key one side lacks is listed with "" there, even where the other side's value is "".
  EXPECT_EQ(text(diff_maps(a, b)), "a=1| c=|3 d=|4 e=5| f=| h=|8 ");
  // Missing is empty: "f" (absent against "") is no difference.
  EXPECT_EQ(text(diff_maps(a, b, true)), "a=1| c=|3 d=|4 e=5| h=|8 ");
  EXPECT_EQ(text(diff_maps(b, a)), "a=|1 c=3| d=4| e=|5 f=| h=8| ");
  EXPECT_TRUE(diff_maps(a, a).empty());
  EXPECT_EQ(text(diff_maps({}, {{"x", ""}})), "x=| ");
  EXPECT_TRUE(diff_maps({}, {{"x", ""}}, true).empty());
}

TEST(CompareRecords, HundredThousandStepsCompareInOnePass) {
  Record a = make_record(100000), b = a;
  b.steps[99998].loss += 1e-3;
  RecordComparison c = compare_records(a, b);
  EXPECT_EQ(c.steps_compared, 100000u);
  EXPECT_EQ(c.loss_step, 99999);
}

TEST(CompareSweeps, PairsRunsByIdAndListsTheRest) {
  SweepRecords a, b;
  Record r1 = make_record(3), r2 = make_record(3), r3 = make_record(3);
  r1.run_id = "aaaa", r2.run_id = "bbbb", r3.run_id = "cccc";
  a.runs = {r1, r2};
  Record r2b = r2;
  r2b.steps[0].loss = 9;
  b.runs = {r2b, r3};
  b.problems = {"runs/dddd/record.h5: no such record"};
  SweepComparison s = compare_sweeps(a, b);
  ASSERT_EQ(s.pairs.size(), 1u);
  EXPECT_EQ(s.pairs[0].run_id, "bbbb");
  EXPECT_EQ(s.pairs[0].result.loss_step, 1);
  EXPECT_EQ(s.only_a, std::vector<std::string>{"aaaa"});
  EXPECT_EQ(s.only_b, std::vector<std::string>{"cccc"});
  EXPECT_EQ(s.problems, std::vector<std::string>{"B: runs/dddd/record.h5: no such record"});
  EXPECT_FALSE(s.match());

  b.runs = {r2, r1};
  b.problems.clear();
  SweepComparison same = compare_sweeps(a, b);
  EXPECT_EQ(same.pairs.size(), 2u);
  EXPECT_TRUE(same.match());
}

// However wide the tolerance, a non-finite loss against a finite one (or a NaN against
// anything) is a difference: relative_difference makes it infinite, and inf <= inf.
TEST(CompareRecords, ANonFiniteLossIsNeverWithinTolerance) {
  Record a = make_record(5), b = make_record(5);
  b.steps[2].loss = std::nan("");
  CompareOptions wide;
  wide.rtol = INFINITY;
  RecordComparison c = compare_records(a, b, wide);
  EXPECT_FALSE(c.losses_within_rtol);
  EXPECT_FALSE(c.match());
  b = make_record(5);
  a.evals = b.evals = {{2, 3.5, 64, 0.01}, {4, 3.25, 64, 0.01}};
  b.evals[1].loss = INFINITY;
  c = compare_records(a, b, wide);
  EXPECT_TRUE(c.losses_within_rtol);
  EXPECT_FALSE(c.evals_within_rtol);
  EXPECT_FALSE(c.match());
}

}  // namespace
}  // namespace sweep

namespace sweep {
namespace {

/// Everything a sweep comparison says, as text.
std::string said(const SweepComparison& s) {
  std::string t;
  for (const auto& p : s.pairs) {
    t += p.run_id + " " + verdict_line(p.result) + (p.a_verified ? " v" : " u") + (p.b_verified ? "v\n" : "u\n");
    for (const auto& l : detail_lines(p.result)) t += "  " + l + "\n";
  }
  for (const auto& u : s.uncompared) t += "uncompared " + u.run_id + " " + u.a + " " + u.b + " " + u.cause + "\n";
  for (const auto& id : s.only_a) t += "only in A " + id + "\n";
  for (const auto& id : s.only_b) t += "only in B " + id + "\n";
  for (const auto& p : s.problems) t += "problem " + p + "\n";
  return t;
}

}  // namespace

// compare_sweep_dirs reads a few thousand runs of each sweep at a time: whatever the chunk,
// it says what comparing the two sweeps read whole says.
TEST(CompareSweepDirs, ReadInChunksItSaysWhatTheWholeReadSays) {
  sweep_test::TempDir tmp("compare_sweep_dirs_");
  const std::string a = (tmp.path() / "a").string(), b = (tmp.path() / "b").string();
  const std::string bin = SWEEP_BIN_DIR "/make_records";
  // A: 160 runs (the last 3 diverged) and 4 failed ones; B: the first 150, run 3 parting
  // from step 6, and 2 failed ones (which A completed); one of B's records damaged. (Over
  // 128 runs a chunk is read on two threads: ThreadSanitizer runs this test too.)
  ASSERT_EQ(std::system((bin + " --out " + a + " --runs 160 --steps 12 --diverged 3 --failed 4 >/dev/null").c_str()),
            0);
  ASSERT_EQ(
      std::system((bin + " --out " + b + " --runs 150 --steps 12 --mismatch-step 6 --failed 2 >/dev/null").c_str()), 0);
  const Record r = sweep::read_record(b + "/runs/" + sweep::load_sweep(b).runs[10].run_id + "/record.h5");
  std::filesystem::resize_file(r.path, std::filesystem::file_size(r.path) / 2);
  const SweepComparison whole = compare_sweeps(load_sweep(a, {false}), load_sweep(b, {false}));
  const std::string expected = said(whole);
  EXPECT_EQ(whole.pairs.size(), 149u);
  EXPECT_EQ(whole.only_a.size(), 8u);  // runs 152-159 (150 and 151 failed in B)
  EXPECT_EQ(whole.uncompared.size(), 4u + 2u + 1u);
  EXPECT_EQ(std::count_if(whole.pairs.begin(), whole.pairs.end(), [](const auto& p) { return !p.result.match(); }), 1);
  for (size_t chunk : {1, 7, 64, 2048}) EXPECT_EQ(said(compare_sweep_dirs(a, b, {}, chunk)), expected) << chunk;
}

}  // namespace sweep
