// `sweep diagnose` on real runs of the real binaries, one test per class of fault: a NaN
// keyed to a sample is the data (its samples and first non-finite module named), a rank
// that flips a bit of every share it computes is that rank, a fault that does not repeat
// is transient; rotating the ranks' shares (dist.diagnose_rotate) keeps a healthy run's
// bits; bad input is refused with one line, exit 2 and nothing written. The verdicts are
// digests compared bit for bit. DiagnoseMpi runs under mpiexec (label mpi); DiagnoseRules
// pins the class rules alone, on made-up evidence (label unit).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <tuple>

#include "diagnose.h"     // read_step_evidence, newest_diagnosis
#include "e2e_util.h"     // E2eTest, tiny_model
#include "record.h"       // read_record_digest
#include "record_util.h"  // bit_difference
#include "test_util.h"    // EXPECT_CONTAINS, listing

namespace fs = std::filesystem;

namespace {

using sweep_test::bit_difference;

/// A W=2 run of six steps with checkpoints after steps 2 and 4; `fault` its fault: line.
class DiagnoseMpi : public sweep_test::E2eTest {
 protected:
  DiagnoseMpi() : E2eTest("sweep_diagnose") {}
  static std::string config(const std::string& extra, int world = 2, int accum = 2) {
    return sweep_test::tiny_model() +
           "data: {samples: 24}\n"
           "train: {steps: 6, micro_batch: 2, lr: 3.0e-3, checkpoint_every: 2, keep_checkpoints: 10, accum: " +
           std::to_string(accum) + "}\ndist: {world_size: " + std::to_string(world) + "}\n" + extra;
  }
  /// config() at W=3 with ZeRO 2, bf16 and a mixture of experts (4 experts, top 2).
  static std::string w3_moe_config(const std::string& extra) {
    std::string cfg = config(extra, 3);
    cfg.replace(cfg.find("dist: {"), 7, "dist: {zero_stage: 2, ");
    cfg.replace(cfg.find("train: {"), 8, "train: {precision: bf16, ");
    cfg.insert(cfg.find('}'), ", moe: {experts: 4, top_k: 2}");
    return cfg;
  }
  /// `sweep diagnose <dir>/<name> --step S ARGS`.
  sweep_test::CliResult diagnose(const std::string& name, int64_t step, std::vector<std::string> args = {}) const {
    std::vector<std::string> argv = {"diagnose",  (dir_ / name).string(), "--step", std::to_string(step),
                                     "--mpiexec", SWEEP_MPIEXEC};
    argv.insert(argv.end(), args.begin(), args.end());
    return sweep_cli(argv, name + "-diagnose.log");
  }
  /// The record's digest and the run's checkpoints, which a diagnosis must leave alone.
  std::string untouched(const std::string& name) const {
    std::string out = sweep::read_record_digest((dir_ / name / "record.h5").string());
    for (const std::string& f : sweep_test::listing(dir_ / name / "checkpoints")) out += " " + f;
    return out;
  }
};

TEST_F(DiagnoseMpi, RotatingTheRanksSharesKeepsAHealthyRunsBits) {
  // W=2 (a power-of-two accumulation: the rotation takes the subtree path), W=3 with ZeRO 2
  // and bf16, and W=3 with leaves of one sequence (the fused leaf path), rotated by one and
  // by two.
  struct Layout {
    int world;
    std::string dist, train;
  };
  for (const Layout& l :
       {Layout{2, "", ""}, Layout{3, "zero_stage: 2, ", "precision: bf16, "}, Layout{3, "", "leaf: 1, "}}) {
    const std::string base = "w" + std::to_string(l.world) + (l.train.empty() ? "" : l.train.substr(0, 4));
    std::string cfg = config("", l.world);
    cfg.replace(cfg.find("dist: {"), 7, "dist: {" + l.dist);
    cfg.replace(cfg.find("train: {"), 8, "train: {" + l.train);
    ASSERT_TRUE(train(base, cfg, l.world).ok()) << log(base);
    // k = 0: the evidence alone; k > 0: shares rotated. Every one has the run's bits, and
    // the same evidence share by share: only who computed each share moves.
    std::vector<sweep::StepEvidenceFile> ev;
    for (int k = 0; k < l.world; ++k) {
      const std::string name = base + "r" + std::to_string(k);
      std::string rotated = cfg;
      rotated.replace(rotated.find("dist: {"), 7,
                      "dist: {diagnose_rotate: " + std::to_string(k) + ", diagnose_step: 5, ");
      ASSERT_TRUE(train(name, rotated, l.world).ok()) << log(name);
      EXPECT_EQ(bit_difference(record(base), record(name)), "") << name;
      ev.push_back(sweep::read_step_evidence((dir_ / name / "evidence_step5.txt").string()));
      const sweep::StepEvidenceFile& e = ev.back();
      ASSERT_EQ(e.shares.size(), size_t(2 * l.world)) << name;
      EXPECT_EQ(std::make_tuple(e.loss, e.grad_norm, e.params, e.tensors),
                std::make_tuple(ev[0].loss, ev[0].grad_norm, ev[0].params, ev[0].tensors))
          << name;
      // Share j belongs to rank j / accum; rank r computed rank (r + k) mod W's.
      for (size_t j = 0; j < e.shares.size(); ++j) {
        EXPECT_EQ(e.shares[j].rank, (int(j / 2) - k + l.world) % l.world) << name << " share " << j;
        EXPECT_EQ(std::make_tuple(e.shares[j].digest, e.shares[j].losses, e.shares[j].samples),
                  std::make_tuple(ev[0].shares[j].digest, ev[0].shares[j].losses, ev[0].shares[j].samples))
            << name << " share " << j;
      }
    }
  }
}

TEST_F(DiagnoseMpi, ASampleKeyedNanIsTheDataOrProgramNamingItsSamplesAndFirstNonFiniteModule) {
  // Eight samples: every step's global batch holds them all, sample 6 among them.
  std::string cfg = config("fault: {nan_sample_step: 5, nan_sample: 6}\n");
  cfg.replace(cfg.find("samples: 24"), 11, "samples: 8");
  ASSERT_EQ(train("nan", cfg, 2).code, 1) << log("nan");
  const std::string before = untouched("nan");
  const auto st = diagnose("nan", 5);
  EXPECT_EQ(st.code, 0) << st.out;
  EXPECT_CONTAINS(st.out,
                  "diagnose step 5: data or program: every replay (own layout, shares rotated, one rank) has "
                  "the original's bits; non-finite loss in share ");
  EXPECT_CONTAINS(st.out, "6");
  EXPECT_CONTAINS(st.out, "first non-finite module: embed (its output non-finite for sample 6;");
  EXPECT_EQ(before, untouched("nan"));
  EXPECT_TRUE(fs::exists(dir_ / "nan" / "diagnose" / "1" / "verdict.txt"));
}

// launch.diagnose: `sweep run` replays the last step of each run that diverged, after the
// runs, and says the verdict in one line; a run that completed is left alone.
TEST_F(DiagnoseMpi, ASweepWithLaunchDiagnoseDiagnosesItsDivergedRuns) {
  std::string cfg = config("fault: {nan_sample_step: 5, nan_sample: 6}\n");
  cfg.replace(cfg.find("samples: 24"), 11, "samples: 8");
  std::string base;
  for (size_t at = 0, nl; at < cfg.size(); at = nl + 1) {
    nl = cfg.find('\n', at);
    base += "  " + cfg.substr(at, nl - at) + "\n";
  }
  const std::string grid = write("g.yaml", "name: diag\nbase:\n" + base +
                                               "grid:\n  fault.nan_sample_step: [5, 0]\n"
                                               "launch: {diagnose: true, mpi_args: [--oversubscribe]}\n");
  const auto run = sweep_cli({"run", grid, "--out", (dir_ / "out").string()}, "run.log");
  EXPECT_EQ(run.code, 1) << run.out;  // a run diverged
  std::set<std::string> runs;
  for (const auto& e : fs::directory_iterator(dir_ / "out" / "runs")) runs.insert(e.path().filename().string());
  ASSERT_EQ(runs.size(), 2u);
  int diagnosed = 0;
  for (const std::string& id : runs) {
    const fs::path d = dir_ / "out" / "runs" / id;
    if (!fs::exists(d / "diagnose")) continue;
    ++diagnosed;
    EXPECT_CONTAINS(run.out, "diagnosed " + id + ": diagnose step 5: data or program: every replay ");
    EXPECT_CONTAINS(sweep::newest_diagnosis(d.string()), "diagnose step 5: data or program");
  }
  EXPECT_EQ(diagnosed, 1) << run.out;
  // The report `sweep run` wrote after the diagnosis says it, in HTML, and so do markdown
  // and JSON made again.
  std::string id;
  for (const std::string& r : runs)
    if (fs::exists(dir_ / "out" / "runs" / r / "diagnose")) id = r;
  const std::string html = sweep_test::read_file(dir_ / "out" / "report.html");
  EXPECT_CONTAINS(html, "<h2>Diagnoses</h2>");
  EXPECT_CONTAINS(html, "diagnose step 5: data or program: every replay");
  for (const std::string format : {"md", "json"}) {
    const fs::path out = dir_ / ("report." + format);
    ASSERT_TRUE(
        sweep_cli({"report", (dir_ / "out").string(), "--format", format, "-o", out.string()}, "report.log").ok())
        << sweep_test::read_file(dir_ / "report.log");
    const std::string text = sweep_test::read_file(out);
    EXPECT_CONTAINS(text, format == "md" ? "## Diagnoses\n\nThe newest" : "\"diagnoses\":[{\"run_id\":\"" + id + "\"");
    EXPECT_CONTAINS(text, "diagnose step 5: data or program: every replay");
  }
}

// launch.diagnose also replays the first spike decision of a run that completed after one:
// a learning rate of 1 for the update of step 14 (fault.spike_step) spikes the loss, the
// skip policy decides at step 15, and the replays of step 15 have the original's bits on
// every layout: the data or the program (here, the schedule), not a rank.
TEST_F(DiagnoseMpi, ASweepWithLaunchDiagnoseDiagnosesALossSpike) {
  const std::string grid =
      write("spike.yaml", "name: spike\nbase:\n" + sweep_test::tiny_model("  ") +
                              "  train: {steps: 20, micro_batch: 2, accum: 3, lr: 3.0e-3, schedule: cosine, warmup: 2, "
                              "checkpoint_every: 4, keep_checkpoints: 10, spike_policy: skip, spike_limit: 1}\n"
                              "  dist: {world_size: 2}\n"
                              "  fault: {spike_step: 14}\n"
                              "launch: {diagnose: true, mpi_args: [--oversubscribe]}\n");
  const auto run = sweep_cli({"run", grid, "--out", (dir_ / "spike").string()}, "spike.log");
  EXPECT_EQ(run.code, 0) << run.out;
  const auto records = sweep_test::completed_records(dir_ / "spike");
  ASSERT_EQ(records.size(), 1u) << run.out;
  const std::string id = records.begin()->first;
  ASSERT_EQ(records.begin()->second.summary.count("spike_decision.1"), 1u) << run.out;
  EXPECT_CONTAINS(run.out, "diagnosed " + id + " (its loss spike): diagnose step 15: data or program: every replay");
  EXPECT_CONTAINS(sweep::newest_diagnosis((dir_ / "spike" / "runs" / id).string()),
                  "diagnose step 15: data or program");
}

TEST_F(DiagnoseMpi, ACorruptRankIsNamedAndShowAndStatusSayIt) {
  ASSERT_TRUE(train("bad", config("fault: {corrupt_from: 3, corrupt_rank: 1}\n"), 2).ok()) << log("bad");
  const std::string before = untouched("bad");
  const auto st = diagnose("bad", 5);
  EXPECT_EQ(st.code, 0) << st.out;
  // Rank 1 computes shares 2-3 on its own layout, 0-1 rotated: its first one is wrong each time.
  EXPECT_CONTAINS(st.out,
                  "diagnose step 5: rank 1: shares differ from the one-rank replay exactly where rank 1 computes "
                  "them (share 2 (rank 1) on the own layout, share 0 (rank 1) with shares rotated)");
  EXPECT_EQ(before, untouched("bad"));
  const std::string verdict = read("bad/diagnose/1/verdict.txt");
  EXPECT_EQ(verdict.rfind("sweep-diagnose-verdict 1\nstep 5\ncheckpoint 4\nverdict rank\n", 0), 0u) << verdict;
  EXPECT_CONTAINS(verdict, "evidence own layout: ");
  EXPECT_CONTAINS(verdict, ": the original's bits\n");
  const auto shown = sweep_cli({"show", (dir_ / "bad").string()}, "show.log");
  EXPECT_CONTAINS(shown.out, "diagnosis:   diagnose step 5: rank 1: ");
  // In a sweep directory, status says it under the table.
  fs::create_directories(dir_ / "sweep" / "runs");
  fs::copy(dir_ / "bad", dir_ / "sweep" / "runs" / "bad", fs::copy_options::recursive);
  const auto status = sweep_cli({"status", (dir_ / "sweep").string()}, "status.log");
  EXPECT_EQ(status.code, 0) << status.out;
  EXPECT_CONTAINS(status.out, "\n  bad: diagnose step 5: rank 1: shares differ from the one-rank replay");
  // A second diagnosis goes beside the first; the newest is the one shown.
  ASSERT_EQ(diagnose("bad", 6).code, 0);
  EXPECT_EQ(sweep::newest_diagnosis((dir_ / "bad").string()).rfind("diagnose step 6: rank 1: ", 0), 0u);
}

TEST_F(DiagnoseMpi, ATransientFaultIsTransient) {
  ASSERT_TRUE(train("hit", config("fault: {transient_step: 5, transient_rank: 0}\n"), 2).ok()) << log("hit");
  const auto st = diagnose("hit", 5);
  EXPECT_EQ(st.code, 0) << st.out;
  EXPECT_CONTAINS(st.out,
                  "diagnose step 5: transient: every replay differs from the original and all agree with "
                  "each other");
  // A step the fault did not touch replays as the original: the program's own bits.
  const auto clean = diagnose("hit", 4);
  EXPECT_CONTAINS(clean.out, "diagnose step 4: data or program: every replay");
}

// W=3 (a rank count that is not a power of two), ZeRO 2, bf16 and a mixture of experts:
// rank 2 is named.
TEST_F(DiagnoseMpi, ACorruptRankIsNamedAtW3WithZero2Bf16AndMoE) {
  ASSERT_TRUE(train("moe", w3_moe_config("fault: {corrupt_from: 3, corrupt_rank: 2}\n"), 3).ok()) << log("moe");
  const auto st = diagnose("moe", 5);
  EXPECT_EQ(st.code, 0) << st.out;
  // Rank 2 computes shares 4-5 on its own layout, rank 0's 0-1 rotated by one.
  EXPECT_CONTAINS(st.out,
                  "diagnose step 5: rank 2: shares differ from the one-rank replay exactly where rank 2 "
                  "computes them (share 4 (rank 2) on the own layout, share 0 (rank 2) with shares rotated)");
}

// The other two classes on the same layout: W=3, ZeRO 2, bf16 and a mixture of experts.
// The sample-keyed NaN is the data or program, with its sample and first non-finite module
// named; the fault that strikes once is transient.
TEST_F(DiagnoseMpi, TheDataAndTransientClassesHoldAtW3WithZero2Bf16AndMoE) {
  // Twelve samples: every step's global batch (3 ranks x 2 x 2) holds them all.
  std::string nan = w3_moe_config("fault: {nan_sample_step: 5, nan_sample: 6}\n");
  nan.replace(nan.find("samples: 24"), 11, "samples: 12");
  ASSERT_EQ(train("nan3", nan, 3).code, 1) << log("nan3");
  const auto data = diagnose("nan3", 5);
  EXPECT_EQ(data.code, 0) << data.out;
  EXPECT_CONTAINS(data.out,
                  "diagnose step 5: data or program: every replay (own layout, shares rotated, one rank) has "
                  "the original's bits; non-finite loss in share ");
  EXPECT_CONTAINS(data.out, "first non-finite module: embed (its output non-finite for sample 6;");

  ASSERT_TRUE(train("hit3", w3_moe_config("fault: {transient_step: 5, transient_rank: 1}\n"), 3).ok()) << log("hit3");
  const auto hit = diagnose("hit3", 5);
  EXPECT_EQ(hit.code, 0) << hit.out;
  EXPECT_CONTAINS(hit.out,
                  "diagnose step 5: transient: every replay differs from the original and all agree with "
                  "each other");
}

// Each refusal: one line, exit 2, and no diagnose/ directory.
TEST_F(DiagnoseMpi, BadInputIsRefusedWithOneLineAndNothingWritten) {
  ASSERT_TRUE(train("two", config(""), 2).ok()) << log("two");
  ASSERT_TRUE(train("one", config("", 1, 4)).ok()) << log("one");
  fs::create_directories(dir_ / "empty");
  const std::vector<std::tuple<std::string, int64_t, std::string>> cases = {
      {"two", 7, "--step 7: " + (dir_ / "two" / "record.h5").string() + " has no such step (it has steps 1-6)"},
      {"two", 2, "has no complete checkpoint before it to replay it from"},
      {"one", 5, ": the run had one rank, so no share can be computed by another rank"},
      {"empty", 3, ": not a run directory (no record.h5 in it)"},
  };
  for (const auto& [name, step, words] : cases) {
    const auto st = diagnose(name, step);
    EXPECT_EQ(st.code, 2) << name << ": " << st.out;
    EXPECT_CONTAINS(st.out, words);
    EXPECT_EQ(std::count(st.out.begin(), st.out.end(), '\n'), 1) << st.out;
    EXPECT_FALSE(fs::exists(dir_ / name / "diagnose")) << name;
  }
}

/// Made-up evidence of a W=2 step with four shares (two a rank): `digests` per share, rank
/// r computing rank (r + rotate) mod 2's.
sweep::StepEvidenceFile evidence(const std::vector<std::string>& digests, int rotate, const std::string& params) {
  sweep::StepEvidenceFile e;
  e.step = 5, e.world = digests.size() == 4 ? 2 : 1, e.loss = "4000000000000000", e.grad_norm = params;
  e.params = params;
  for (size_t j = 0; j < digests.size(); ++j) {
    sweep::ShareEvidence s;
    s.rank = e.world == 1 ? 0 : (int(j / 2) - rotate + 2) % 2;
    s.digest = digests[j];
    e.shares.push_back(s);
  }
  return e;
}

TEST(DiagnoseRules, EachClassFollowsFromWhichReplaysHaveTheOriginalsBitsAndWhichSharesDiffer) {
  using sweep::DiagnoseClass;
  const auto one = evidence({"a", "b", "c", "d"}, 0, "p");
  // Everything the original: the data or the program.
  auto r = sweep::classify_replays(5, {true, true, true}, {one, evidence({"a", "b", "c", "d"}, 1, "p"), one}, {});
  EXPECT_EQ(r.verdict, DiagnoseClass::data_or_program) << r.line;
  // No replay the original, all alike: transient.
  r = sweep::classify_replays(5, {false, false, false}, {one, evidence({"a", "b", "c", "d"}, 1, "p"), one}, {});
  EXPECT_EQ(r.verdict, DiagnoseClass::transient) << r.line;
  // Share 2 wrong where rank 1 computes it, share 0 where it computes that one rotated: rank 1,
  // with its host when the ranks ran on several.
  r = sweep::classify_replays(5, {true, false, false},
                              {evidence({"a", "b", "X", "d"}, 0, "q"), evidence({"Y", "b", "c", "d"}, 1, "r"), one},
                              {"node-a", "node-b"});
  EXPECT_EQ(r.verdict, DiagnoseClass::rank) << r.line;
  EXPECT_EQ(r.line.rfind("diagnose step 5: rank 1 (host node-b): ", 0), 0u) << r.line;
  EXPECT_EQ(r.exit_code(), 0);
  // The same share wrong on both layouts, whoever computes it: not a rank (the shares follow
  // the data, but the one-rank replay disagrees): inconclusive, exit 1.
  r = sweep::classify_replays(5, {true, false, false},
                              {evidence({"a", "b", "X", "d"}, 0, "q"), evidence({"a", "b", "X", "d"}, 1, "q"), one},
                              {});
  EXPECT_EQ(r.verdict, DiagnoseClass::inconclusive) << r.line;
  EXPECT_EQ(r.exit_code(), 1);
  // Replays that differ from the original and from each other are no transient.
  r = sweep::classify_replays(5, {false, false, false},
                              {evidence({"a", "b", "X", "d"}, 0, "q"), evidence({"Y", "b", "c", "d"}, 1, "r"), one},
                              {});
  EXPECT_EQ(r.verdict, DiagnoseClass::rank) << r.line;
}

}  // namespace
