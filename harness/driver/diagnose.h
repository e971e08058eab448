// `sweep diagnose RUN --step S`: is a bad step the data (or the program), a transient
// fault, or one rank? Step S is replayed from the newest complete checkpoint before it
// (reproduce.h's machinery) three times: on the run's own layout, with every rank computing
// another rank's shares (dist.diagnose_rotate), and on one rank; the trainer writes each replay's
// evidence of the step (dist.diagnose_step: digests, trainer/step/step_evidence.h), and the
// replays are compared with the original and with each other bit for bit, never within a
// tolerance. The replays and the verdict go under <run>/diagnose/<n>/; the record is not
// touched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "diagnosis_file.h"  // newest_diagnosis (show, status)
#include "launch.h"          // LocalLaunch
#include "process.h"         // ProcessRunner

namespace sweep {

/// What to diagnose and how to start the replays.
struct DiagnoseOptions {
  std::string run_dir;           ///< a run directory holding a completed record.h5
  int64_t step = 0;              ///< the step to replay (1-based)
  LocalLaunch launch;            ///< sweep-train binary and mpiexec
  bool trainer_given = false;    ///< launch.train_binary was chosen (--trainer)
  std::vector<std::string> set;  ///< test-only KEY=VALUE overrides of every replay's config
  /// The own-layout and rotated replays start their ranks on these hosts, with these extra
  /// mpiexec arguments (ReproduceOptions::hosts): the run's own nodes, so that a bad node
  /// computes the shares it is handed there; the one-rank replay runs on this host.
  /// Empty = every replay here.
  std::vector<std::string> hosts;
  std::vector<std::string> mpi_args;
};

/// One share of a step (a micro-batch of the global batch) as one replay computed it.
struct ShareEvidence {
  int rank = 0;                      ///< the rank that computed it
  std::string digest;                ///< its gradient's digest, 16 hex digits
  std::vector<std::string> losses;   ///< its leaves' losses, as bits (16 hex digits)
  std::vector<std::string> samples;  ///< its samples
  bool finite = true;                ///< every loss of it finite
};

/// A replay's evidence file (evidence_step<S>.txt), read back.
struct StepEvidenceFile {
  int64_t step = 0;
  int world = 0;
  std::string loss, grad_norm, params;                       ///< bits / digest, 16 hex digits
  std::vector<ShareEvidence> shares;                         ///< in share order
  std::vector<std::pair<std::string, std::string>> tensors;  ///< (name, reduced gradient digest)
  std::string nonfinite;                                     ///< where the step went non-finite, as the trainer said
};

/// Reads `path`; ConfigError naming the path and line when it is not evidence of this format.
StepEvidenceFile read_step_evidence(const std::string& path);

/// The verdict's words and the exit code they map to.
enum class DiagnoseClass { data_or_program, transient, rank, inconclusive };
const char* diagnose_class_name(DiagnoseClass c);

/// What `sweep diagnose` found.
struct DiagnoseResult {
  std::string out_dir;  ///< <run>/diagnose/<n>
  DiagnoseClass verdict = DiagnoseClass::inconclusive;
  std::string line;                   ///< the one line printed, also the verdict file's `line`
  std::vector<std::string> evidence;  ///< the lines that support it (the verdict file's body)
  int exit_code() const { return verdict == DiagnoseClass::inconclusive ? 1 : 0; }
};

/// The three replays' findings, compared: the classification alone (no I/O), so tests can
/// break it on purpose. `original_same[i]`: replay i has the original's loss, gradient
/// norm and parameters after the step; `replays`: own layout, rotated, one rank;
/// `hosts`: rank r's host at r (empty when unknown).
DiagnoseResult classify_replays(int64_t step, const std::vector<bool>& original_same,
                                const std::vector<StepEvidenceFile>& replays, const std::vector<std::string>& hosts);

/// Checks the input (ConfigError / RecordError: exit 2, nothing written), runs the three
/// replays through `runner` and writes <run>/diagnose/<n>/verdict.txt.
DiagnoseResult diagnose(const DiagnoseOptions& opt, ProcessRunner& runner);

}  // namespace sweep
