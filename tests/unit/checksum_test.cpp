// Parameter checksums: defined on fixed blocks, so any block-aligned sharding gives the
// same run checksum, and any single bit flip changes it.
#include "checksum.h"

#include <gtest/gtest.h>

#define XXH_INLINE_ALL  // the reference below hashes with xxHash directly, privately
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

namespace sweep {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

void flip_bit(float& x, int bit) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u ^= uint32_t(1) << bit;
  std::memcpy(&x, &u, 4);
}

const size_t kSizes[] = {0, 1, kChecksumBlock - 1, kChecksumBlock, kChecksumBlock + 1, 200000};

TEST(Checksum, FlatIsCombineOfBlockHashes) {
  for (size_t n : kSizes) {
    auto x = random_floats(n, uint32_t(n));
    auto blocks = block_hashes(x.data(), n);
    EXPECT_EQ(blocks.size(), (n + kChecksumBlock - 1) / kChecksumBlock) << n;
    EXPECT_EQ(combine_block_hashes(blocks), flat_checksum(x.data(), n)) << n;
  }
}

TEST(Checksum, DefinitionIsPinned) {
  // The on-disk meaning: XXH3-64 of each 65536-float block's bytes, then XXH3-64 of the
  // array of those hashes. Changing either changes every recorded checksum.
  EXPECT_EQ(kChecksumBlock, 65536u);
  auto x = random_floats(200000, 9);
  std::vector<uint64_t> want;
  for (size_t lo = 0; lo < x.size(); lo += 65536)
    want.push_back(XXH3_64bits(x.data() + lo, std::min<size_t>(65536, x.size() - lo) * sizeof(float)));
  EXPECT_EQ(block_hashes(x.data(), x.size()), want);
  EXPECT_EQ(flat_checksum(x.data(), x.size()), XXH3_64bits(want.data(), want.size() * sizeof(uint64_t)));
  EXPECT_EQ(tensor_checksum(x.data(), 1000), XXH3_64bits(x.data(), 1000 * sizeof(float)));
  // A literal value too, so a different xxHash or a changed byte order is caught.
  std::vector<float> ramp(100000);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = float(i) * 0.5f;
  EXPECT_EQ(flat_checksum(ramp.data(), ramp.size()), 0xc218d8553f2ea514ull)
      << std::hex << flat_checksum(ramp.data(), ramp.size());
}

TEST(Checksum, BlockAlignedShardsConcatenate) {
  const size_t n = 200000;
  auto x = random_floats(n, 5);
  auto whole = block_hashes(x.data(), n);
  for (size_t cut : {kChecksumBlock, 2 * kChecksumBlock, 3 * kChecksumBlock}) {
    auto a = block_hashes(x.data(), cut), b = block_hashes(x.data() + cut, n - cut);
    std::vector<uint64_t> joined = a;
    joined.insert(joined.end(), b.begin(), b.end());
    EXPECT_EQ(joined, whole) << "cut " << cut;
    EXPECT_EQ(combine_block_hashes(joined), flat_checksum(x.data(), n)) << "cut " << cut;
  }
}

TEST(Checksum, AnySingleBitFlipChangesIt) {
  const size_t n = 200000;
  auto x = random_floats(n, 6);
  const uint64_t base = flat_checksum(x.data(), n);
  std::mt19937 rng(7);
  std::vector<size_t> positions = {0, 1, kChecksumBlock - 1, kChecksumBlock, 2 * kChecksumBlock - 1, n - 1};
  for (int i = 0; i < 20; ++i) positions.push_back(rng() % n);
  for (size_t pos : positions)
    for (int bit : {0, 1, 22, 23, 30, 31}) {
      flip_bit(x[pos], bit);
      EXPECT_NE(flat_checksum(x.data(), n), base) << "element " << pos << " bit " << bit;
      flip_bit(x[pos], bit);
    }
  EXPECT_EQ(flat_checksum(x.data(), n), base);
  // Every bit of a one-element vector.
  float one = 1.5f;
  const uint64_t h1 = flat_checksum(&one, 1);
  for (int bit = 0; bit < 32; ++bit) {
    float y = one;
    flip_bit(y, bit);
    EXPECT_NE(flat_checksum(&y, 1), h1) << bit;
    EXPECT_NE(tensor_checksum(&y, 1), tensor_checksum(&one, 1)) << bit;
  }
  // +0 and -0 are different bits, hence different checksums: checksums compare bits.
  float pz = 0.0f, nz = -0.0f;
  EXPECT_NE(flat_checksum(&pz, 1), flat_checksum(&nz, 1));
}

TEST(Checksum, LengthMatters) {
  std::vector<float> zeros(kChecksumBlock + 1, 0.0f);
  EXPECT_NE(flat_checksum(zeros.data(), kChecksumBlock), flat_checksum(zeros.data(), kChecksumBlock + 1));
  EXPECT_NE(flat_checksum(zeros.data(), 0), flat_checksum(zeros.data(), 1));
}

}  // namespace
}  // namespace sweep
