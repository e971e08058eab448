// Run under mpiexec at several world sizes (tests/mpi/CMakeLists.txt). Every test is
// collective: all ranks run the same tests in the same order, so no assertion may skip a
// communication call (EXPECT_, not ASSERT_, around collectives). Only rank 0 prints the
// gtest report; other ranks print just their failures. The exit status is non-zero when
// any rank failed.
#include "canonical_allreduce.h"  // canonical_allreduce, shard_layout, sharded_sum_of_squares

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "canonical_reduce.h"   // TreeAccumulator: the single-process reference
#include "mpi_communicator.h"   // MpiCommunicator
#include "optimizer.h"          // kNormBlock, sum_of_squares
#include "solo_communicator.h"  // SoloCommunicator

namespace sweep {
namespace {

Communicator* g_comm = nullptr;

using Leaves = std::vector<std::vector<float>>;

// Identical on every rank: a fixed seed per leaf, magnitudes spread over 2^-12 .. 2^12 so
// that the summation order changes the bits.
Leaves make_leaves(size_t m, size_t n, uint64_t seed) {
  Leaves leaves(m, std::vector<float>(n));
  for (size_t j = 0; j < m; ++j) {
    std::mt19937_64 rng(seed * 1000003u + j);
    for (float& x : leaves[j]) {
      uint64_t bits = rng();
      double mantissa = double(bits >> 40) / double(uint64_t(1) << 24) * 2.0 - 1.0;  // [-1, 1)
      int exponent = int((bits >> 8) % 25) - 12;
      x = float(std::ldexp(mantissa, exponent));
    }
  }
  return leaves;
}

// TreeAccumulator over leaves [lo, hi): what one process computes.
std::vector<float> tree_sum(const Leaves& leaves, size_t lo, size_t hi) {
  size_t n = leaves.front().size();
  TreeAccumulator acc(n);
  for (size_t j = lo; j < hi; ++j) acc.push(leaves[j].data());
  std::vector<float> out(n);
  acc.finish(out.data());
  return out;
}

uint64_t bits_of(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

bool same_bits(const float* a, const float* b, size_t n) { return n == 0 || std::memcmp(a, b, n * sizeof(float)) == 0; }

// M = W*A leaves with A a power of two: 8 when W divides 8, else 2W (W = 3 -> 6).
size_t leaves_for(int w) { return 8 % w == 0 ? 8 : size_t(2 * w); }

const size_t kSizes[] = {10007, 3 * kNormBlock + 5, 7};

TEST(ShardLayout, CoversAlignedBalanced) {
  for (size_t n : {size_t(0), size_t(1), size_t(7), kNormBlock, kNormBlock + 1, size_t(10007), 3 * kNormBlock + 5,
                   size_t(100000)}) {
    for (int w : {1, 2, 3, 4, 5, 8}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " W=" + std::to_string(w));
      ShardLayout l = shard_layout(n, w);
      ASSERT_EQ(l.world(), w);
      EXPECT_EQ(l.n, n);
      EXPECT_EQ(l.begin(0), 0u);
      EXPECT_EQ(l.end(w - 1), n);
      size_t most = 0, least = SIZE_MAX;
      for (int s = 0; s < w; ++s) {
        EXPECT_LE(l.begin(s), l.end(s));
        EXPECT_TRUE(l.end(s) % kNormBlock == 0 || l.end(s) == n) << "boundary " << l.end(s);
        size_t blocks = (l.size(s) + kNormBlock - 1) / kNormBlock;
        most = std::max(most, blocks);
        least = std::min(least, blocks);
      }
      EXPECT_LE(most - least, 1u);
    }
  }
  EXPECT_EQ(shard_layout(12345, 1).offsets, (std::vector<size_t>{0, 12345}));
  EXPECT_EQ(shard_layout(7, 4).offsets, (std::vector<size_t>{0, 7, 7, 7, 7}));
  EXPECT_EQ(shard_layout(3 * kNormBlock + 5, 2).offsets, (std::vector<size_t>{0, 2 * kNormBlock, 3 * kNormBlock + 5}));
  EXPECT_EQ(shard_layout(10, 3, 4).offsets, (std::vector<size_t>{0, 4, 8, 10}));
  EXPECT_THROW(shard_layout(10, 0), std::invalid_argument);
  EXPECT_THROW(shard_layout(10, 2, 0), std::invalid_argument);
}

TEST(CanonicalAllreduce, BitIdenticalToOneProcessTree) {
  Communicator& comm = *g_comm;
  const int w = comm.size(), r = comm.rank();
  const size_t m = leaves_for(w), a = m / size_t(w);
  ASSERT_EQ(a & (a - 1), 0u) << "A must be a power of two";
  for (size_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n) + " W=" + std::to_string(w) + " M=" + std::to_string(m));
    Leaves leaves = make_leaves(m, n, 1);
    std::vector<float> reference = tree_sum(leaves, 0, m);
    std::vector<float> partial = tree_sum(leaves, size_t(r) * a, size_t(r) * a + a);
    std::vector<float> out(n, -1.0f);
    canonical_allreduce(comm, partial.data(), out.data(), n, shard_layout(n, w));
    EXPECT_TRUE(same_bits(out.data(), reference.data(), n)) << "rank " << r;

    // Teeth: on this data a left-to-right sum has other bits, so the check above can fail.
    if (n > 1000) {
      std::vector<float> sequential = leaves[0];
      for (size_t j = 1; j < m; ++j)
        for (size_t i = 0; i < n; ++i) sequential[i] = sequential[i] + leaves[j][i];
      EXPECT_FALSE(same_bits(sequential.data(), reference.data(), n));
    }
  }
}

// Any number of leaves per rank, power of two or not (W=2 x A=3 = 6 leaves, W=4 x 3 = 12,
// W=1 x 5): each rank pushes its leaves into a NodeAccumulator (the canonical cover of its
// range) and the node form combines the covers with the bits of one process's tree.
TEST(CanonicalAllreduce, NodesOfAnyLayoutGiveTheBitsOfOneProcessTree) {
  Communicator& comm = *g_comm;
  const int w = comm.size(), r = comm.rank();
  std::vector<float> workspace;
  for (size_t per_rank : {3, 5, 1, 6}) {
    const size_t m = per_rank * size_t(w);
    for (size_t n : kSizes) {
      SCOPED_TRACE("n=" + std::to_string(n) + " W=" + std::to_string(w) + " per rank " + std::to_string(per_rank));
      Leaves leaves = make_leaves(m, n, 3);
      std::vector<float> reference = tree_sum(leaves, 0, m);
      NodeAccumulator acc(n, int64_t(m));
      for (size_t j = size_t(r) * per_rank; j < size_t(r + 1) * per_rank; ++j)
        acc.push({int64_t(j), 1}, leaves[j].data());
      std::vector<std::vector<TreeNode>> nodes;
      for (int s = 0; s < w; ++s)
        nodes.push_back(canonical_cover(int64_t(m), int64_t(size_t(s) * per_rank), int64_t(size_t(s + 1) * per_rank)));
      std::vector<std::vector<float>> mine;
      std::vector<const float*> partials;
      for (size_t i = 0; i < acc.size(); ++i) mine.emplace_back(acc.sum(i), acc.sum(i) + n);
      for (const auto& v : mine) partials.push_back(v.data());
      EXPECT_EQ(partials.size(), nodes[size_t(r)].size());
      std::vector<float> out(n, -1.0f);
      canonical_allreduce(comm, partials, nodes, int64_t(m), out.data(), n, shard_layout(n, w), true, &workspace);
      EXPECT_TRUE(same_bits(out.data(), reference.data(), n)) << "rank " << r;
      // In place into the first partial.
      canonical_allreduce(comm, partials, nodes, int64_t(m), mine[0].data(), n, shard_layout(n, w), true, &workspace);
      EXPECT_TRUE(same_bits(mine[0].data(), reference.data(), n)) << "rank " << r << " (in place)";
    }
  }
}

TEST(CanonicalAllreduce, InPlaceAndReusedWorkspace) {
  Communicator& comm = *g_comm;
  const int w = comm.size(), r = comm.rank();
  const size_t m = leaves_for(w), a = m / size_t(w);
  std::vector<float> workspace;
  for (size_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    Leaves leaves = make_leaves(m, n, 2);
    std::vector<float> reference = tree_sum(leaves, 0, m);
    std::vector<float> buf = tree_sum(leaves, size_t(r) * a, size_t(r) * a + a);
    canonical_allreduce(comm, buf.data(), buf.data(), n, shard_layout(n, w), true, &workspace);
    EXPECT_TRUE(same_bits(buf.data(), reference.data(), n)) << "rank " << r;
  }
}

TEST(CanonicalAllreduce, NoGatherWritesOnlyOwnShard) {
  Communicator& comm = *g_comm;
  const int w = comm.size(), r = comm.rank();
  const size_t m = leaves_for(w), a = m / size_t(w);
  const float sentinel = -12345.0f;
  for (size_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    Leaves leaves = make_leaves(m, n, 3);
    std::vector<float> reference = tree_sum(leaves, 0, m);
    std::vector<float> partial = tree_sum(leaves, size_t(r) * a, size_t(r) * a + a);
    std::vector<float> out(n, sentinel);
    ShardLayout layout = shard_layout(n, w);
    canonical_allreduce(comm, partial.data(), out.data(), n, layout, /*gather=*/false);
    size_t lo = layout.begin(r), hi = layout.end(r);
    EXPECT_TRUE(same_bits(out.data() + lo, reference.data() + lo, hi - lo)) << "rank " << r;
    size_t untouched = 0;
    for (size_t i = 0; i < n; ++i) untouched += (i < lo || i >= hi) && out[i] == sentinel;
    EXPECT_EQ(untouched, n - (hi - lo)) << "rank " << r << " wrote outside its shard";
  }
}

TEST(CanonicalAllreduce, RejectsForeignLayout) {
  Communicator& comm = *g_comm;
  std::vector<float> v(100);
  EXPECT_THROW(canonical_allreduce(comm, v.data(), v.data(), 100, shard_layout(100, comm.size() + 1)),
               std::invalid_argument);
  EXPECT_THROW(canonical_allreduce(comm, v.data(), v.data(), 100, shard_layout(99, comm.size())),
               std::invalid_argument);
  EXPECT_THROW(sharded_sum_of_squares(comm, v.data(), shard_layout(100, comm.size(), 1000)), std::invalid_argument);
}

TEST(ShardedSumOfSquares, BitIdenticalToSumOfSquares) {
  Communicator& comm = *g_comm;
  for (size_t n : {size_t(10007), 3 * kNormBlock + 5, size_t(7), size_t(0), 50 * kNormBlock + 123}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> g = make_leaves(1, n, 4)[0];
    double expected = sum_of_squares(g.data(), n);
    // Only this rank's shard is read: poison the rest to prove it.
    ShardLayout layout = shard_layout(n, comm.size());
    for (size_t i = 0; i < n; ++i)
      if (i < layout.begin(comm.rank()) || i >= layout.end(comm.rank())) g[i] = std::numeric_limits<float>::quiet_NaN();
    double got = sharded_sum_of_squares(comm, g.data(), layout);
    EXPECT_EQ(bits_of(got), bits_of(expected)) << got << " vs " << expected;
  }
  // Teeth: the block order matters for these bits.
  std::vector<float> g = make_leaves(1, 50 * kNormBlock + 123, 4)[0];
  double forward = 0, backward = 0;
  std::vector<double> blocks;
  for (size_t lo = 0; lo < g.size(); lo += kNormBlock)
    blocks.push_back(sum_of_squares(g.data() + lo, std::min(kNormBlock, g.size() - lo)));
  for (double b : blocks) forward += b;
  for (size_t k = blocks.size(); k-- > 0;) backward += blocks[k];
  EXPECT_EQ(bits_of(forward), bits_of(sum_of_squares(g.data(), g.size())));
  EXPECT_NE(bits_of(forward), bits_of(backward));
}

TEST(SliceSumsOfSquares, EachTensorsNormHasTheSameBitsHeldWholeOrSharded) {
  Communicator& comm = *g_comm;
  const size_t n = 7 * kNormBlock + 321;
  // Tensors that start and end inside blocks, span several, fit in one, and one of 0.
  const std::vector<Slice> slices = {{0, 10},
                                     {10, kNormBlock - 10},
                                     {kNormBlock, 3 * kNormBlock + 17},
                                     {4 * kNormBlock + 17, 0},
                                     {4 * kNormBlock + 17, n - 4 * kNormBlock - 17}};
  std::vector<float> g = make_leaves(1, n, 9)[0];
  SoloCommunicator solo;
  const std::vector<double> whole = slice_sums_of_squares(solo, g.data(), 0, n, slices, false);
  // The reference, piece by piece in flat order, with the plain sum of squares.
  for (size_t t = 0; t < slices.size(); ++t) {
    double expected = 0;
    for (size_t a = slices[t].offset; a < slices[t].offset + slices[t].size;) {
      const size_t b = std::min(slices[t].offset + slices[t].size, (a / kNormBlock + 1) * kNormBlock);
      expected += sum_of_squares(g.data() + a, b - a);
      a = b;
    }
    EXPECT_EQ(bits_of(whole[t]), bits_of(expected)) << "slice " << t;
  }
  // Sharded: this rank passes only its shard (the rest poisoned), and gets the same bits.
  const ShardLayout layout = shard_layout(n, comm.size());
  const size_t lo = layout.begin(comm.rank()), hi = layout.end(comm.rank());
  std::vector<float> shard(g.begin() + std::ptrdiff_t(lo), g.begin() + std::ptrdiff_t(hi));
  const std::vector<double> sharded = slice_sums_of_squares(comm, shard.data(), lo, hi - lo, slices, true);
  ASSERT_EQ(sharded.size(), whole.size());
  for (size_t t = 0; t < whole.size(); ++t) EXPECT_EQ(bits_of(sharded[t]), bits_of(whole[t])) << "slice " << t;
  // Teeth: where the pieces are cut matters. The last slice blocked from its own start
  // (as a rank summing "its" tensor would) gives other bits.
  EXPECT_NE(bits_of(sum_of_squares(g.data() + slices[4].offset, slices[4].size)), bits_of(whole[4]));
  // Held whole but asked for elements it does not hold: refused, not read.
  EXPECT_THROW(slice_sums_of_squares(solo, g.data(), 0, 5, slices, false), std::invalid_argument);
}

TEST(NativeAllreduce, CloseToCanonical) {
  Communicator& comm = *g_comm;
  const int w = comm.size(), r = comm.rank();
  const size_t m = leaves_for(w), a = m / size_t(w), n = 10007;
  Leaves leaves = make_leaves(m, n, 5);
  std::vector<float> partial = tree_sum(leaves, size_t(r) * a, size_t(r) * a + a);
  std::vector<float> canonical(n), native = partial;
  canonical_allreduce(comm, partial.data(), canonical.data(), n, shard_layout(n, w));
  comm.allreduce_sum_native(native.data(), n);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; ++i) {
    diff += (double(native[i]) - canonical[i]) * (double(native[i]) - canonical[i]);
    norm += double(canonical[i]) * canonical[i];
  }
  double rel = std::sqrt(diff / norm);
  EXPECT_LE(rel, 1e-5);
  if (r == 0)
    std::printf("[ info     ] native vs canonical, W=%d: relative L2 difference %.3g, bit-identical: %s\n", w, rel,
                same_bits(native.data(), canonical.data(), n) ? "yes" : "no");
}

TEST(MpiCommunicator, ScalarsAndAllgather) {
  Communicator& comm = *g_comm;
  const int w = comm.size(), r = comm.rank();
  int64_t sum[2] = {r + 1, int64_t(1) << 40};
  comm.allreduce_sum_i64(sum, 2);
  EXPECT_EQ(sum[0], int64_t(w) * (w + 1) / 2);
  EXPECT_EQ(sum[1], int64_t(w) << 40);
  double most[2] = {double(r), -double(r)};
  comm.allreduce_max_double(most, 2);
  EXPECT_EQ(most[0], double(w - 1));
  EXPECT_EQ(most[1], 0.0);
  int32_t mine[2] = {r, 100 * r};
  std::vector<int32_t> all(2 * size_t(w));
  comm.allgather(mine, sizeof mine, all.data());
  for (int s = 0; s < w; ++s) {
    EXPECT_EQ(all[2 * size_t(s)], s);
    EXPECT_EQ(all[2 * size_t(s) + 1], 100 * s);
  }
  comm.barrier();
}

// A second communicator on the same MPI with 64-byte messages drives every chunking path.
TEST(MpiCommunicator, ChunkedTransfersGiveTheSameResults) {
  MpiCommunicator small(nullptr, nullptr, MpiOptions{64});
  EXPECT_FALSE(small.owns_mpi());
  const int w = small.size(), r = small.rank();
  const size_t m = leaves_for(w), a = m / size_t(w);
  for (size_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    Leaves leaves = make_leaves(m, n, 6);
    std::vector<float> reference = tree_sum(leaves, 0, m);
    std::vector<float> partial = tree_sum(leaves, size_t(r) * a, size_t(r) * a + a);
    std::vector<float> out(n);
    canonical_allreduce(small, partial.data(), out.data(), n, shard_layout(n, w));
    EXPECT_TRUE(same_bits(out.data(), reference.data(), n)) << "rank " << r;
  }
  std::vector<int64_t> counts(100);
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = int64_t(i) * (r + 1);
  small.allreduce_sum_i64(counts.data(), counts.size());
  for (size_t i = 0; i < counts.size(); ++i) EXPECT_EQ(counts[i], int64_t(i) * w * (w + 1) / 2);
  std::vector<char> mine(150, char('a' + r)), all(150 * size_t(w));
  small.allgather(mine.data(), mine.size(), all.data());
  for (int s = 0; s < w; ++s) EXPECT_EQ(all[150 * size_t(s) + 149], char('a' + s));
  EXPECT_EQ(std::count(all.begin(), all.end(), 'a'), 150);
}

// Ranks other than 0 stay quiet except for their failures, which carry the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary());
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace sweep

int main(int argc, char** argv) {
  sweep::MpiCommunicator comm(&argc, &argv);
  sweep::g_comm = &comm;
  ::testing::InitGoogleTest(&argc, argv);
  if (comm.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new sweep::FailurePrinter(comm.rank()));
  }
  int64_t failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  comm.allreduce_sum_i64(&failed, 1);
  if (comm.rank() == 0 && failed)
    std::fprintf(stderr, "mpi_test: %lld of %d ranks failed\n", static_cast<long long>(failed), comm.size());
  return failed ? 1 : 0;
}
