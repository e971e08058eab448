// Parameter checksums: the record's rows of them, and the check that every rank's replica
// holds the same parameters (a desync ends the run naming the first differing tensor).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "communicator.h"  // Communicator
#include "record.h"        // ChecksumRow, ParamInfo
#include "run_config.h"    // RunConfig
#include "zero_shards.h"   // ZeroShards

namespace sweep {

/// The checksums after `step` of `params`, the flat vector (n floats) of the tensors in
/// `table`: the whole vector's and each tensor's.
ChecksumRow checksum_row(int64_t step, const float* params, const std::vector<ParamInfo>& table, int64_t n);

/// On a step that checksums (every train.checksum_every, and the last): the checksums of
/// the parameters, once every rank is known to hold the same; nullopt on other steps.
/// `params` is the whole flat vector, or null where ZeRO 3 keeps only the shard (then
/// it is gathered for the moment). Collective; throws on a desync.
std::optional<ChecksumRow> checksum_if_due(int64_t step, const RunConfig& cfg, Communicator& comm, const float* params,
                                           const std::vector<ParamInfo>& table, const ZeroShards& zero);

}  // namespace sweep
