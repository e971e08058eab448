// Host and device share one definition of the arithmetic (arith.h): each CUDA kernel in
// trainer/numerics/cuda/device_numerics.cu is one call of an arith.h function per thread.
// These tests run those kernel bodies over every thread index on the CPU, as the device
// grid would, and check them bit for bit against the host's own loops (optimizer.cpp's
// vectorized clones, TreeAccumulator's stack, canonical_sum). A host loop that drifts from
// arith.h, or a kernel decomposition that sums in another order, fails here.
#include "arith.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "canonical_reduce.h"
#include "optimizer.h"
#include "order_sensitive_values.h"

namespace sweep {
namespace {

std::vector<float> values(size_t n, uint64_t seed) { return order_sensitive_values(n, seed); }

template <class T>
bool same_bits(const T* a, const T* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(T)) == 0;
}

// The device's sum_of_squares: one thread per block, then one thread over the blocks.
double device_sum_of_squares(const std::vector<float>& g) {
  std::vector<double> blocks(norm_blocks(g.size()));
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = norm_block_sum(g.data(), g.size(), b);
  return sum_in_order(blocks.data(), blocks.size());
}

TEST(Arith, CanonicalSplitIsTheLargestPowerOfTwoBelowTheCount) {
  const int64_t expect[][2] = {{2, 1}, {3, 2}, {4, 2}, {5, 4}, {6, 4}, {8, 4}, {9, 8}, {16, 8}, {17, 16}, {1000, 512}};
  for (const auto& e : expect) EXPECT_EQ(canonical_split(e[0]), e[1]) << e[0];
}

TEST(Arith, TheDeviceTreeKernelBodyGivesTheHostTreeForEveryLeafCount) {
  const size_t n = 1031;
  for (int leaves = 1; leaves <= 40; ++leaves) {
    const std::vector<float> pieces = values(n * size_t(leaves), uint64_t(leaves));
    TreeAccumulator acc(n);
    for (int k = 0; k < leaves; ++k) acc.push(pieces.data() + size_t(k) * n);
    std::vector<float> host(n), device(n);
    acc.finish(host.data());
    for (size_t i = 0; i < n; ++i) device[i] = tree_element(pieces.data(), n, i, 0, leaves);
    ASSERT_TRUE(same_bits(device.data(), host.data(), n)) << leaves << " leaves";
  }
}

TEST(Arith, TheDeviceNormKernelsGiveTheHostSumOfSquares) {
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(8), kNormBlock - 1, kNormBlock, kNormBlock + 1,
                   3 * kNormBlock + 5, size_t(1) << 20}) {
    const std::vector<float> g = values(n, n + 3);
    const double host = sum_of_squares(g.data(), n), device = device_sum_of_squares(g);
    EXPECT_TRUE(same_bits(&device, &host, 1)) << n << " floats: device " << device << ", host " << host;
  }
}

TEST(Arith, TheDeviceAdamwKernelBodyGivesTheHostAdamw) {
  const size_t n = 100003;
  std::vector<float> p = values(n, 11), m(n, 0.0f), v(n, 0.0f);
  std::vector<float> dp = p, dm = m, dv = v;
  TrainConfig t;
  for (int step = 1; step <= 3; ++step) {
    t.weight_decay = step == 2 ? 0.1 : 0.0;
    AdamWStep s = AdamWStep::at(t, 1e-3 * step, step);
    s.grad_scale = step == 3 ? 0.37f : 1.0f;
    const std::vector<float> g = values(n, 100 + uint64_t(step));
    adamw(p.data(), g.data(), m.data(), v.data(), n, s);
    const AdamWConsts k = s.consts();  // what the host hands the kernel
    for (size_t i = 0; i < n; ++i) adamw_element(dp[i], g[i], dm[i], dv[i], k);
    ASSERT_TRUE(same_bits(dp.data(), p.data(), n)) << "parameters, step " << step;
    ASSERT_TRUE(same_bits(dm.data(), m.data(), n)) << "first moments, step " << step;
    ASSERT_TRUE(same_bits(dv.data(), v.data(), n)) << "second moments, step " << step;
  }
}

TEST(Arith, TheDeviceFiniteCheckAgreesWithTheHost) {
  for (float special : {0.0f, 1e38f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()}) {
    std::vector<float> g = values(4099, 5);
    g[4097] = special;
    bool device = true;  // the kernel's flag, set by any thread that sees a non-finite value
    for (float x : g) {
      uint32_t bits;
      std::memcpy(&bits, &x, sizeof bits);
      if (!finite_bits(bits)) device = false;
    }
    EXPECT_EQ(device, all_finite(g.data(), g.size())) << special;
    EXPECT_EQ(device, std::isfinite(special)) << special;
  }
}

// Teeth: the checks above could not pass by accident. For these inputs, another order of
// the same additions gives other bits, so a decomposition that drifted would be seen.
TEST(Arith, OrderMattersForTheseInputs) {
  const std::vector<float> g = values(size_t(1) << 20, 7);
  std::vector<double> blocks(norm_blocks(g.size()));
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = norm_block_sum(g.data(), g.size(), b);
  double reversed = 0;
  for (size_t b = blocks.size(); b-- > 0;) reversed += blocks[b];
  const double host = sum_of_squares(g.data(), g.size());
  EXPECT_FALSE(same_bits(&reversed, &host, 1)) << "the block order leaves these bits alone";
  const double unblocked = lane_dot<double>(g.data(), g.data(), g.size());
  EXPECT_FALSE(same_bits(&unblocked, &host, 1)) << "the blocks leave these bits alone";
  const double one_lane = lane_dot<double>(g.data(), g.data(), kNormBlock);  // 8 lanes vs 1
  double sequential = 0;
  for (size_t i = 0; i < kNormBlock; ++i) sequential += double(g[i]) * double(g[i]);
  EXPECT_FALSE(same_bits(&one_lane, &sequential, 1)) << "the lane order leaves these bits alone";

  const size_t n = 257, leaves = 5;
  const std::vector<float> pieces = values(n * leaves, 9);
  size_t differ = 0;
  for (size_t i = 0; i < n; ++i) {
    float left_to_right = 0;
    for (size_t k = 0; k < leaves; ++k) left_to_right += pieces[k * n + i];
    const float tree = tree_element(pieces.data(), n, i, 0, int64_t(leaves));
    differ += !same_bits(&left_to_right, &tree, 1);
  }
  EXPECT_GT(differ, 0u) << "a left-to-right sum of 5 leaves matched the tree everywhere";
}

}  // namespace
}  // namespace sweep
