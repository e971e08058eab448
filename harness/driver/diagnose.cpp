// `sweep diagnose`: three replays of one step, compared bit for bit (diagnose.h).
#include "diagnose.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include "config_error.h"    // ConfigError
#include "diagnosis_file.h"  // kVerdictMagic
#include "hex.h"             // hex16, double_bits
#include "reproduce.h"       // reproduce, reproduce_config
#include "run_files.h"       // complete_checkpoints, check_real_directory
#include "sweep_records.h"   // read_run_record
#include "text.h"            // join, split, printable

namespace fs = std::filesystem;

namespace sweep {
namespace {

constexpr const char* kEvidenceMagic = "sweep-step-evidence 1";  // trainer/step/step_evidence.h
const char* const kReplayNames[3] = {"own layout", "shares rotated", "one rank"};
const char* const kReplayDirs[3] = {"own", "rotated", "one_rank"};

bool finite_bits(const std::string& hex) {
  double x;
  const uint64_t u = std::strtoull(hex.c_str(), nullptr, 16);
  std::memcpy(&x, &u, sizeof x);
  return std::isfinite(x);
}

/// Replays that agree bit for bit on everything the evidence names but who computed what.
bool same_step(const StepEvidenceFile& a, const StepEvidenceFile& b) {
  if (a.loss != b.loss || a.grad_norm != b.grad_norm || a.params != b.params || a.tensors != b.tensors) return false;
  if (a.shares.size() != b.shares.size()) return false;
  for (size_t j = 0; j < a.shares.size(); ++j)
    if (a.shares[j].digest != b.shares[j].digest) return false;
  return true;
}

/// The shares of `r` that differ from `ref`'s, and the ranks that computed them.
std::vector<size_t> differing_shares(const StepEvidenceFile& r, const StepEvidenceFile& ref, std::set<int>* ranks) {
  std::vector<size_t> out;
  for (size_t j = 0; j < r.shares.size() && j < ref.shares.size(); ++j)
    if (r.shares[j].digest != ref.shares[j].digest) out.push_back(j), ranks->insert(r.shares[j].rank);
  return out;
}

std::string share_list(const std::vector<size_t>& shares, const StepEvidenceFile& r) {
  std::vector<std::string> items;
  items.reserve(shares.size());
  for (size_t j : shares) items.push_back(std::to_string(j) + " (rank " + std::to_string(r.shares[j].rank) + ")");
  return items.empty() ? "none" : join(items);
}

std::string line_of(const std::string& path, int n) { return path + ":" + std::to_string(n); }

std::string evidence_path(const std::string& dir, int64_t step) {
  return dir + "/evidence_step" + std::to_string(step) + ".txt";
}

/// What a step's bits are, as the original's record and a replay's evidence both say them:
/// the loss, the gradient norm and (where the record has them) the parameters.
std::string step_bits(const std::string& loss, const std::string& grad_norm, const std::string& params) {
  return "loss " + loss + ", gradient norm " + grad_norm + ", parameters " + params;
}

/// The original's bits of `step`.
std::string original_bits(const Record& r, int64_t step) {
  const auto row = std::find_if(r.steps.begin(), r.steps.end(), [&](const StepMetrics& m) { return m.step == step; });
  const auto sums =
      std::find_if(r.checksums.begin(), r.checksums.end(), [&](const ChecksumRow& c) { return c.step == step; });
  return step_bits(row == r.steps.end() ? "(none)" : double_bits(row->loss),
                   row == r.steps.end() ? "(none)" : double_bits(row->grad_norm),
                   sums == r.checksums.end() ? "(not recorded)" : hex16(sums->params));
}

/// A replay's step `step` has the original's bits: its loss and gradient norm, and its
/// parameters where the record has them (train.checksum_every).
bool same_as_original(const Record& r, int64_t step, const StepEvidenceFile& e) {
  const auto row = std::find_if(r.steps.begin(), r.steps.end(), [&](const StepMetrics& m) { return m.step == step; });
  const auto sums =
      std::find_if(r.checksums.begin(), r.checksums.end(), [&](const ChecksumRow& c) { return c.step == step; });
  return row != r.steps.end() && e.loss == double_bits(row->loss) && e.grad_norm == double_bits(row->grad_norm) &&
         (sums == r.checksums.end() || e.params == hex16(sums->params));
}

}  // namespace

const char* diagnose_class_name(DiagnoseClass c) {
  switch (c) {
    case DiagnoseClass::data_or_program:
      return "data or program";
    case DiagnoseClass::transient:
      return "transient";
    case DiagnoseClass::rank:
      return "rank";
    case DiagnoseClass::inconclusive:
      break;
  }
  return "inconclusive";
}

StepEvidenceFile read_step_evidence(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot read the step's evidence");
  StepEvidenceFile e;
  std::string text;
  int n = 1;
  if (!std::getline(in, text) || text != kEvidenceMagic)
    throw ConfigError(line_of(path, 1) + ": expected '" + kEvidenceMagic + "', got '" + printable(text) + "'");
  while (std::getline(in, text)) {
    ++n;
    std::istringstream ls(text);
    std::string key;
    ls >> key;
    if (key == "step") {
      ls >> e.step;
    } else if (key == "world_size") {
      ls >> e.world;
    } else if (key == "loss") {
      ls >> e.loss;
    } else if (key == "grad_norm") {
      ls >> e.grad_norm;
    } else if (key == "params") {
      ls >> e.params;
    } else if (key == "share") {
      // share J rank R digest D loss L1,L2 samples S1,S2
      size_t j = 0;
      std::string w1, w2, w3, w4, losses, samples;
      ShareEvidence s;
      ls >> j >> w1 >> s.rank >> w2 >> s.digest >> w3 >> losses >> w4 >> samples;
      if (w1 != "rank" || w2 != "digest" || w3 != "loss" || w4 != "samples" || j != e.shares.size())
        throw ConfigError(line_of(path, n) + ": expected 'share " + std::to_string(e.shares.size()) +
                          " rank R digest D loss L samples S', got '" + printable(text) + "'");
      s.losses = split(losses, ',');
      s.samples = split(samples, ',');
      for (const std::string& l : s.losses) s.finite = s.finite && finite_bits(l);
      e.shares.push_back(std::move(s));
    } else if (key == "tensor") {
      std::string digest, name;
      ls >> digest >> name;
      e.tensors.emplace_back(name, digest);
    } else if (key == "nonfinite") {
      e.nonfinite = text.substr(std::min(text.size(), key.size() + 1));
    } else if (key != "accum" && key != "rotate") {
      throw ConfigError(line_of(path, n) + ": unknown line '" + printable(text) + "'");
    }
    if (ls.fail()) throw ConfigError(line_of(path, n) + ": cannot read '" + printable(text) + "'");
  }
  return e;
}

DiagnoseResult classify_replays(int64_t step, const std::vector<bool>& original_same,
                                const std::vector<StepEvidenceFile>& replays, const std::vector<std::string>& hosts) {
  DiagnoseResult r;
  const std::string head = "diagnose step " + std::to_string(step) + ": ";
  for (size_t i = 0; i < replays.size(); ++i)
    r.evidence.push_back(std::string(kReplayNames[i]) + ": loss " + replays[i].loss + ", gradient norm " +
                         replays[i].grad_norm + ", parameters " + replays[i].params + ": " +
                         (original_same[i] ? "the original's bits" : "not the original's bits"));
  const StepEvidenceFile &own = replays[0], &rotated = replays[1], &one = replays[2];
  if (std::all_of(original_same.begin(), original_same.end(), [](bool b) { return b; })) {
    r.verdict = DiagnoseClass::data_or_program;
    r.line = head + "data or program: every replay (own layout, shares rotated, one rank) has the original's bits";
    std::vector<std::string> bad;
    for (size_t j = 0; j < one.shares.size(); ++j)
      if (!one.shares[j].finite) bad.push_back(std::to_string(j) + " (samples " + join(one.shares[j].samples) + ")");
    if (!bad.empty()) r.line += "; non-finite loss in share " + join(bad);
    if (!own.nonfinite.empty()) r.line += "; " + own.nonfinite;  // where the run itself saw it
    return r;
  }
  if (std::none_of(original_same.begin(), original_same.end(), [](bool b) { return b; }) && same_step(own, rotated) &&
      same_step(own, one)) {
    r.verdict = DiagnoseClass::transient;
    r.line = head +
             "transient: every replay differs from the original and all agree with each other (a fault that did not "
             "repeat: hardware or environment)";
    return r;
  }
  // Whose shares: each share of the two multi-rank replays against the one-rank replay's.
  std::set<int> own_ranks, rotated_ranks;
  const std::vector<size_t> own_diff = differing_shares(own, one, &own_ranks);
  const std::vector<size_t> rotated_diff = differing_shares(rotated, one, &rotated_ranks);
  r.evidence.push_back("shares unlike the one-rank replay's: " + share_list(own_diff, own) + " on the own layout, " +
                       share_list(rotated_diff, rotated) + " with shares rotated");
  if (own_ranks.size() == 1 && own_ranks == rotated_ranks) {
    const int bad = *own_ranks.begin();
    std::set<std::string> distinct(hosts.begin(), hosts.end());
    const std::string host =
        distinct.size() > 1 && size_t(bad) < hosts.size() ? " (host " + printable(hosts[size_t(bad)]) + ")" : "";
    r.verdict = DiagnoseClass::rank;
    r.line = head + "rank " + std::to_string(bad) + host + ": shares differ from the one-rank replay exactly where " +
             "rank " + std::to_string(bad) + " computes them (share " + share_list(own_diff, own) +
             " on the own layout, share " + share_list(rotated_diff, rotated) + " with shares rotated)";
    return r;
  }
  r.verdict = DiagnoseClass::inconclusive;
  r.line = head +
           "inconclusive: the replays differ, but not as the data, a transient fault or one rank would make them (" +
           r.evidence.back() + ")";
  return r;
}

DiagnoseResult diagnose(const DiagnoseOptions& opt, ProcessRunner& runner) {
  // Everything is checked before anything is written.
  std::error_code ec;
  const std::string run_dir = opt.run_dir, record_path = (fs::path(run_dir) / "record.h5").string();
  if (!fs::is_directory(run_dir, ec) || !fs::exists(record_path, ec))
    throw ConfigError(printable(run_dir) + ": not a run directory (no record.h5 in it)");
  const Record original = read_run_record(record_path);
  const auto row = std::find_if(original.steps.begin(), original.steps.end(),
                                [&](const StepMetrics& m) { return m.step == opt.step; });
  if (row == original.steps.end())
    throw ConfigError("--step " + std::to_string(opt.step) + ": " + printable(record_path) + " has no such step (" +
                      (original.steps.empty() ? std::string("it has none")
                                              : "it has steps " + std::to_string(original.steps.front().step) + "-" +
                                                    std::to_string(original.steps.back().step)) +
                      ")");
  const RunConfig config = reproduce_config(original, 0, 0, 0, {});
  if (config.dist.world_size < 2)
    throw ConfigError(printable(run_dir) +
                      ": the run had one rank, so no share can be computed by another rank (diagnose needs "
                      "dist.world_size 2 or more; `sweep reproduce` replays a one-rank run)");
  if (config.native_reduction())
    throw ConfigError(printable(run_dir) +
                      ": the run reduced gradients natively (dist.reduction native or train.deterministic false), "
                      "so its bits depend on the layout and replays cannot be compared exactly");
  if (!original.env("program").empty())
    throw ConfigError(printable(run_dir) + ": the run is a grid program's (" + printable(original.env("program")) +
                      "), which writes no per-step evidence (dist.diagnose_step is sweep-train's)");
  if (!fs::exists(opt.launch.train_binary, ec))
    throw ConfigError("trainer '" + printable(opt.launch.train_binary) + "' not found (build it, or pass --trainer)");
  if (!fs::exists(opt.launch.mpiexec, ec))
    throw ConfigError("mpiexec '" + printable(opt.launch.mpiexec) + "' not found; the replays on " +
                      std::to_string(config.dist.world_size) + " ranks need it (pass --mpiexec)");
  int64_t from = 0;
  for (const auto& [s, dir] : complete_checkpoints(run_dir))
    if (s < opt.step) from = std::max(from, s);
  if (from == 0)
    throw ConfigError("--step " + std::to_string(opt.step) + ": " + printable(run_dir) +
                      " has no complete checkpoint before it to replay it from (train.checkpoint_every, "
                      "train.keep_checkpoints)");

  DiagnoseResult res;
  const fs::path base = fs::path(run_dir) / "diagnose";
  check_real_directory(base.string());  // never through a link the run's program planted
  fs::create_directories(base);
  for (int n = 1;; ++n)  // create_directory is atomic: two diagnoses get different n
    if (fs::create_directory(base / std::to_string(n))) {
      res.out_dir = (base / std::to_string(n)).string();
      break;
    }
  // Each replay's evidence of every step from the checkpoint to S: a fault that struck a
  // step before S makes the replays start S from other parameters, so the verdict is taken
  // at the first step where any replay departs from the original or from the others.
  std::vector<std::string> failed;
  for (int i = 0; i < 3; ++i) {
    ReproduceOptions ro;
    ro.source = record_path;
    ro.world_size = i == 2 ? 1 : 0;
    ro.from_step = from;
    ro.stop_at = opt.step;
    ro.out_dir = res.out_dir + "/" + kReplayDirs[i];
    ro.launch = opt.launch;
    ro.trainer_given = opt.trainer_given;
    if (i < 2) ro.hosts = opt.hosts, ro.mpi_args = opt.mpi_args;
    ro.set = {"dist.diagnose_step=" + std::to_string(opt.step)};
    if (i == 1) ro.set.push_back("dist.diagnose_rotate=1");
    ro.set.insert(ro.set.end(), opt.set.begin(), opt.set.end());
    const ReproduceResult rr = reproduce(ro, runner);
    if (!fs::exists(evidence_path(ro.out_dir, opt.step), ec))
      failed.push_back(std::string(kReplayNames[i]) + " replay left no evidence of step " + std::to_string(opt.step) +
                       " (" + ro.out_dir + "/logs/rank0.log" + (rr.lines.empty() ? "" : ": " + rr.lines.front()) + ")");
  }
  int64_t at = opt.step;  // the step the verdict is taken at
  if (!failed.empty()) {
    res.verdict = DiagnoseClass::inconclusive;
    res.line = "diagnose step " + std::to_string(opt.step) + ": inconclusive: " + join(failed, "; ");
  } else {
    std::vector<StepEvidenceFile> replays;
    std::vector<bool> same;
    for (int64_t s = from + 1; s <= opt.step; ++s) {
      replays.clear(), same.clear();
      for (int i = 0; i < 3; ++i)
        replays.push_back(read_step_evidence(evidence_path(res.out_dir + "/" + kReplayDirs[i], s)));
      for (const StepEvidenceFile& e : replays) same.push_back(same_as_original(original, s, e));
      at = s;
      const bool alike = same_step(replays[0], replays[1]) && same_step(replays[0], replays[2]);
      if (!alike || std::find(same.begin(), same.end(), false) != same.end()) break;
    }
    const DiagnoseResult c = classify_replays(at, same, replays, split(original.env("rank_hosts"), ','));
    res.verdict = c.verdict, res.evidence = c.evidence, res.line = c.line;
    if (at != opt.step)  // said of the step asked about, with where the replays first departed
      res.line = "diagnose step " + std::to_string(opt.step) + c.line.substr(c.line.find(':')) +
                 " (the replays depart first at step " + std::to_string(at) + ")";
  }
  res.evidence.insert(res.evidence.begin(), "original at step " + std::to_string(at) + ": " +
                                                original_bits(original, at) +
                                                "; replays from the checkpoint after step " + std::to_string(from));
  const std::string path = res.out_dir + "/verdict.txt";
  std::ofstream out(path + ".partial", std::ios::binary);
  out << kVerdictMagic << "\nstep " << opt.step << "\ncheckpoint " << from << "\nverdict "
      << diagnose_class_name(res.verdict) << "\nline " << res.line << "\n";
  for (const std::string& e : res.evidence) out << "evidence " << e << "\n";
  if (!out.flush()) throw std::runtime_error(path + ".partial: cannot write the verdict");
  out.close();
  fs::rename(path + ".partial", path);
  return res;
}

}  // namespace sweep
