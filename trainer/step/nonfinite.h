// Where a step's first non-finite value came from: the rank, micro-batch and samples of
// the first non-finite leaf loss, and the first non-finite parameter gradient in flat
// order, and the first module whose output went non-finite, in words for the failure, the log line and the record. Runs
// only on the step that went non-finite, so it costs nothing on a healthy step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "communicator.h"  // Communicator
#include "record.h"        // ParamInfo

namespace sweep {

/// What locate_nonfinite reads of a step.
struct NonfiniteStep {
  /// Every leaf loss of the step in rank order: rank r's `accum x leaves_per_micro_batch`
  /// losses (the allgather of each rank's), so leaf k is on rank k / (accum x lpm).
  const std::vector<double>* leaf_losses = nullptr;
  int64_t accum = 1, leaves_per_micro_batch = 1;
  /// The samples of global micro-batch j (Sampler::samples of this step).
  std::function<std::vector<int64_t>(int64_t j)> samples;
  /// The reduced gradient this rank holds: `size` floats from flat element `begin`.
  const float* grad = nullptr;
  size_t size = 0;
  int64_t begin = 0;
  const std::vector<ParamInfo>* table = nullptr;
  /// This rank's "first non-finite module: ..." (MicroBatchPasses::nonfinite_module), or
  /// empty / null.
  const std::string* module = nullptr;
};

/// "rank 1, its micro-batch 1 (global micro-batch 3 of 4; samples 7, 12), loss nan; first
/// non-finite gradient: layers.0.attn.wq[17] = inf; first non-finite module: embed (...)"
/// (the parts that apply; the module is the one the rank of the first non-finite loss
/// found). Collective: every rank calls it on the same step (two allgathers: an integer
/// and kModuleTextBytes per rank).
constexpr size_t kModuleTextBytes = 512;
std::string locate_nonfinite(const NonfiniteStep& s, Communicator& comm);

}  // namespace sweep
