// Parameter checksums that do not depend on how the parameters are laid out or sharded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sweep/record_format.h"  // flat_checksum, tensor_checksum

namespace sweep {

/// Elements per checksum block. Fixed forever for a schema version: changing it changes
/// every recorded checksum.
inline constexpr size_t kChecksumBlock = 65536;

/// XXH3-64 of each kChecksumBlock-element block of `data` (the last block may be short).
std::vector<uint64_t> block_hashes(const float* data, size_t n);

/// The run checksum of a flat fp32 vector: XXH3-64 of its block hashes.
uint64_t combine_block_hashes(const std::vector<uint64_t>& blocks);

/// A run's id: XXH3-64 of its config file's text, as 16 lowercase hex digits (what the
/// driver names runs/<id> after; include/sweep/record_writer.h's run_id_of_text).
std::string run_id_of_config(const std::string& config_text);

// flat_checksum (block_hashes then combine_block_hashes) and tensor_checksum are declared
// in the public sweep/record_format.h.

}  // namespace sweep
