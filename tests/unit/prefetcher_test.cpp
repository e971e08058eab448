// trainer/data/prefetcher.h: worker threads fill micro-batches ahead of the consumer;
// whatever their number, the consumer sees the sampler's micro-batches in order. Under
// ThreadSanitizer (scripts/check-sanitize-fuzz) these are the prefetcher's race tests.
#include "prefetcher.h"

#include <gtest/gtest.h>

#include <vector>

#include "data_source.h"
#include "run_config.h"

namespace {

sweep::RunConfig small_config() {
  sweep::RunConfig c;
  c.model.seq_len = 8;
  c.model.vocab = 32;
  c.train.micro_batch = 3;
  return c;
}

/// Every micro-batch rank `rank` consumes for steps [first, steps), in order.
std::vector<std::vector<int64_t>> consume(const sweep::Sampler& sampler, int64_t workers, int64_t first, int64_t steps,
                                          int64_t rank, int64_t accum, int64_t micro_batches, size_t elems) {
  sweep::Prefetcher p(sampler, workers, first, steps, rank, accum, micro_batches, elems);
  std::vector<std::vector<int64_t>> out;
  for (int64_t i = 0; i < (steps - first) * accum; ++i) {
    const int64_t* b = p.next();
    out.emplace_back(b, b + elems);
  }
  return out;
}

}  // namespace

TEST(Prefetcher, AnyWorkerCountHandsOutTheSamplersMicroBatchesInOrder) {
  const sweep::RunConfig cfg = small_config();
  auto source = sweep::open_token_source(cfg);
  const sweep::Sampler sampler(cfg, *source);
  const size_t elems = size_t(cfg.train.micro_batch * (cfg.model.seq_len + 1));
  const int64_t accum = 2, micro_batches = 4, rank = 1, first = 3, steps = 40;
  // What the consumer must see: step s, global micro-batch rank * accum + k.
  std::vector<std::vector<int64_t>> want;
  for (int64_t s = first; s < steps; ++s)
    for (int64_t k = 0; k < accum; ++k) {
      std::vector<int64_t> b(elems);
      sampler.fill(s, rank * accum + k, micro_batches, b.data());
      want.push_back(b);
    }
  for (int64_t workers : {0, 1, 2, 4, 7}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    EXPECT_EQ(consume(sampler, workers, first, steps, rank, accum, micro_batches, elems), want);
  }
}

TEST(Prefetcher, StopsCleanlyWhenDestroyedBeforeEverythingIsConsumed) {
  const sweep::RunConfig cfg = small_config();
  auto source = sweep::open_token_source(cfg);
  const sweep::Sampler sampler(cfg, *source);
  const size_t elems = size_t(cfg.train.micro_batch * (cfg.model.seq_len + 1));
  for (int64_t workers : {1, 3, 8}) {
    for (int consumed : {0, 1, 5}) {
      sweep::Prefetcher p(sampler, workers, 0, 1000, 0, 1, 1, elems);
      for (int i = 0; i < consumed; ++i) ASSERT_NE(p.next(), nullptr);
    }  // the destructor joins workers that may be waiting for a free slot
  }
}
