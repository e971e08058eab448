// The one-rank communicator (no MPI): its collectives are copies, the canonical reduction
// and the sharded norm over it give what one process computes, and only a launcher's
// variables make sweep-train start MPI instead.
#include "solo_communicator.h"

#include <gtest/gtest.h>
#include <stdlib.h>  // setenv, unsetenv

#include <cstring>
#include <vector>

#include "canonical_allreduce.h"
#include "optimizer.h"

namespace sweep {
namespace {

TEST(SoloCommunicator, CollectivesOfOneRankAreCopies) {
  SoloCommunicator c;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  c.barrier();
  const char host[] = "node-a";
  char got[sizeof host] = {};
  c.allgather(host, sizeof host, got);
  EXPECT_STREQ(got, "node-a");
  std::vector<float> a = {1, 2, 3}, b(3);
  c.sendrecv(a.data(), 12, 0, b.data(), 12, 0);
  EXPECT_EQ(a, b);
  EXPECT_THROW(c.sendrecv(a.data(), 12, 1, b.data(), 12, 0), std::logic_error);
  EXPECT_THROW(c.sendrecv(a.data(), 12, 0, b.data(), 8, 0), std::logic_error);
  int64_t counts[2] = {5, 7};
  c.allreduce_sum_i64(counts, 2);
  EXPECT_EQ(counts[1], 7);
  double m = 2.5;
  c.allreduce_max_double(&m, 1);
  EXPECT_EQ(m, 2.5);
}

TEST(SoloCommunicator, TheCanonicalReductionAndNormOfOneRankAreItsOwn) {
  SoloCommunicator c;
  const size_t n = 3 * kNormBlock + 11;
  std::vector<float> g(n), out(n);
  for (size_t i = 0; i < n; ++i) g[i] = float(i % 97) * 0.37f - 11.0f;
  const ShardLayout layout = shard_layout(n, 1);
  canonical_allreduce(c, g.data(), out.data(), n, layout);
  EXPECT_EQ(std::memcmp(out.data(), g.data(), n * sizeof(float)), 0);
  const double norm = sharded_sum_of_squares(c, g.data(), layout), whole = sum_of_squares(g.data(), n);
  EXPECT_EQ(std::memcmp(&norm, &whole, sizeof norm), 0);
}

TEST(SoloCommunicator, OnlyALaunchersVariablesMakeAProcessAnMpiRank) {
  const char* vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
  std::vector<std::string> saved;
  for (const char* v : vars) {
    const char* s = std::getenv(v);
    saved.push_back(s ? s : "");
    ::unsetenv(v);
  }
  EXPECT_FALSE(started_as_mpi_rank());
  for (const char* v : vars) {
    ::setenv(v, "0", 1);
    EXPECT_TRUE(started_as_mpi_rank()) << v;
    ::setenv(v, "", 1);  // empty: not set
    EXPECT_FALSE(started_as_mpi_rank()) << v;
    ::unsetenv(v);
  }
  for (size_t i = 0; i < saved.size(); ++i)
    if (!saved[i].empty()) ::setenv(vars[i], saved[i].c_str(), 1);
}

}  // namespace
}  // namespace sweep
