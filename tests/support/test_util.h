// What test files here share instead of each keeping a copy: EXPECT_CONTAINS and
// reading a whole file.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

/// Expects `needle` in `hay`, and prints `hay` when it is not there.
#define EXPECT_CONTAINS(hay, needle) EXPECT_NE(std::string(hay).find(needle), std::string::npos) << "in: " << (hay)

namespace sweep_test {

/// The whole file, byte for byte; "" when it cannot be read.
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace sweep_test
