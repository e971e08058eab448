// Reading a 1-D integer dataset of token ids from any HDF5 file (data.kind: hdf5).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sweep {

/// Reads dataset `name` of `path` as int32 token ids. Throws std::runtime_error naming
/// the file and dataset when it is missing, not 1-D or not integer.
std::vector<int32_t> read_hdf5_tokens(const std::string& path, const std::string& name);

}  // namespace sweep
