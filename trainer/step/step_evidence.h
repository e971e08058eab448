// One step's evidence for `sweep diagnose` (dist.diagnose_step): the loss, each share's gradient
// digest and the rank that computed it, the reduced gradient's digest per tensor and the
// parameters' after the update, as one versioned text file beside the record. Digests, not
// values: two replays agree on a share exactly when its gradient has the same bits.
// LibTorch-free: the loop hands it the flat buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "communicator.h"  // Communicator
#include "record.h"        // ParamInfo

namespace sweep {

/// The file's first line; a reader rejects any other (harness/driver/diagnose.h reads it).
inline constexpr const char* kStepEvidenceMagic = "sweep-step-evidence 1";

/// What the loop knows of the step when it writes the file.
struct StepEvidence {
  int64_t step = 0;
  int world = 1, accum = 1;
  int64_t rotate = 0;                               ///< dist.diagnose_rotate mod world
  double loss = 0, grad_norm = 0;                   ///< the step's row, bit for bit
  uint64_t params = 0;                              ///< flat_checksum of the parameters after the update
  std::vector<uint64_t> shares;                     ///< share j's gradient digest, j = global micro-batch
  std::vector<int> share_ranks;                     ///< the rank that computed share j
  std::vector<std::vector<double>> share_losses;    ///< share j's leaves' losses
  std::vector<std::vector<int64_t>> share_samples;  ///< share j's samples
  std::vector<uint64_t> reduced;                    ///< tensor_checksum of each tensor of the reduced gradient
  std::string nonfinite;                            ///< where the step went non-finite; "" when it did not
};

/// The shares' digests of every rank at rank 0, in share order: rank r's `mine` (its
/// shares, in order) are the shares of rank (r + rotate) mod world. Collective.
std::vector<uint64_t> gather_share_digests(Communicator& comm, const std::vector<uint64_t>& mine, int64_t rotate,
                                           std::vector<int>* share_ranks);

/// The reduced gradient's digest per tensor of `table`; `g` is the whole flat vector.
std::vector<uint64_t> reduced_digests(const float* g, const std::vector<ParamInfo>& table);

/// Writes `e` to `path` (via `path`.partial and a rename). Throws std::runtime_error naming
/// the path when it cannot.
void write_step_evidence(const std::string& path, const StepEvidence& e, const std::vector<ParamInfo>& table);

}  // namespace sweep
