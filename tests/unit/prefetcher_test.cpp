// trainer/data/prefetcher.h: worker threads fill micro-batches ahead of the consumer;
// whatever their number, the consumer sees the sampler's micro-batches in order. Under
// ThreadSanitizer (scripts/check-sanitize-fuzz) these are the prefetcher's race tests.
#include "prefetcher.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
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

namespace {

/// A source that throws for one sample (as a program's DataSource may, in a worker thread).
class ThrowingSource : public sweep::TokenSource {
 public:
  explicit ThrowingSource(int64_t bad) : bad_(bad) {}
  int64_t samples() const override { return 64; }
  void sequence(int64_t sample, int64_t len, int64_t* out) const override {
    if (sample == bad_) throw std::runtime_error("bad sample " + std::to_string(sample));
    for (int64_t i = 0; i < len; ++i) out[i] = (sample + i) % 32;
  }
  std::string describe() const override { return "throwing"; }

 private:
  int64_t bad_;
};

}  // namespace

TEST(Prefetcher, WhatAWorkerThrowsIsRethrownByNextInTheConsumer) {
  const sweep::RunConfig cfg = small_config();
  const ThrowingSource source(17);
  const sweep::Sampler sampler(cfg, source);
  const size_t elems = size_t(cfg.train.micro_batch * (cfg.model.seq_len + 1));
  for (int64_t workers : {0, 1, 3}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    sweep::Prefetcher p(sampler, workers, 0, 100, 0, 1, 1, elems);
    std::string what;
    try {
      for (int i = 0; i < 100; ++i) p.next();
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    EXPECT_EQ(what, "bad sample 17");  // the epoch's shuffle reaches every sample in 100 x 3 rows
  }
}
