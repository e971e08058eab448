// A seeded token source with learnable structure: a sparse random Markov chain.
// Each token has `branching` equally likely successors, so the best achievable
// loss (the entropy floor) is exactly ln(branching) nats per token.
#pragma once

#include <cstdint>
#include <vector>

namespace sweep {

/// splitmix64: the one counter-based mixer every seeded choice in the trainer uses.
uint64_t mix64(uint64_t x);

/// Combines a seed with counters into one well-mixed 64-bit value.
uint64_t mix_keys(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0);

class MarkovSource {
 public:
  /// The chain depends only on (seed, vocab, branching).
  MarkovSource(uint64_t seed, int64_t vocab, int64_t branching);

  /// Writes sequence number `sample` (any 64-bit index) of `len` tokens into `out`.
  void sequence(uint64_t sample, int64_t len, int64_t* out) const;

  /// Entropy floor of next-token prediction in nats: ln(branching).
  double entropy_floor() const;

 private:
  uint64_t seed_;
  int64_t vocab_, branching_;
  std::vector<int32_t> successors_;  // vocab x branching
};

/// Per-epoch shuffle of `samples` indices from (seed, epoch): a Fisher-Yates permutation
/// driven by mix_keys, so it is the same on every rank and every run.
std::vector<int64_t> epoch_permutation(uint64_t seed, uint64_t epoch, int64_t samples);

}  // namespace sweep
