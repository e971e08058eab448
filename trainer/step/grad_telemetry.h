// Gradient telemetry (results/SCHEMA.md, /telemetry and /ranks/grad_norm): each parameter
// tensor's gradient norm, bit-identical on every layout; which steps take a row (every
// train.telemetry_every steps, the last, and any step whose loss or gradient norm spiked or
// went non-finite); and each rank's own gradient before the reduction.
// LibTorch-free: the loop hands it the flat buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "communicator.h"  // Communicator
#include "record.h"        // ParamInfo, StepMetrics

namespace sweep {

/// The L2 norm of each tensor of `table` in the reduced gradient, in table order. The rank
/// holds `size` floats of it from flat element `begin` (all n, or its ZeRO 2/3 shard when
/// `sharded`): slice_sums_of_squares, so the same bits for any sharding. Collective when
/// sharded (one all-gather).
std::vector<double> tensor_grad_norms(Communicator& comm, const float* grad, size_t begin, size_t size,
                                      const std::vector<ParamInfo>& table, bool sharded);

/// Why step `m.step` takes a telemetry row ("every", "last", "spike", "nonfinite",
/// comma-separated), or "" when it does not. `history`: the steps before it. Its loss is
/// tested against theirs, and its gradient norm too when `norm_agreed` (every rank holds
/// the same norm: not so for the native reduction's own sum below ZeRO 2), so that every
/// rank decides alike; `grad_finite`: every element of the reduced gradient is finite (as
/// every rank agrees). `every` 0: only spikes, non-finite steps and the last.
std::string telemetry_reason(const StepMetrics& m, const std::vector<StepMetrics>& history, int64_t every,
                             int64_t last_step, bool norm_agreed, bool grad_finite);

}  // namespace sweep
