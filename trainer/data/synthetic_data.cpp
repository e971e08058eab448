#include "synthetic_data.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sweep {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t mix_keys(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  return mix64(mix64(mix64(mix64(seed) ^ a) ^ b) ^ c);
}

MarkovSource::MarkovSource(uint64_t seed, int64_t vocab, int64_t branching)
    : seed_(seed), vocab_(vocab), branching_(branching), successors_(vocab * branching) {
  // Successors of a token must be distinct: a repeated one would be twice as likely and
  // put the entropy floor below ln(branching). Redraw (attempt in the high bits) on a repeat.
  for (int64_t t = 0; t < vocab; ++t) {
    int32_t* succ = &successors_[t * branching];
    for (int64_t k = 0; k < branching; ++k) {
      for (uint64_t attempt = 0;; ++attempt) {
        auto s = static_cast<int32_t>(mix_keys(seed, 1, t, uint64_t(k) | (attempt << 32)) % uint64_t(vocab));
        if (std::find(succ, succ + k, s) == succ + k) {
          succ[k] = s;
          break;
        }
      }
    }
  }
}

void MarkovSource::sequence(uint64_t sample, int64_t len, int64_t* out) const {
  if (len <= 0) return;
  uint64_t key = mix_keys(seed_, 2, sample);
  int64_t tok = static_cast<int64_t>(mix64(key) % uint64_t(vocab_));
  out[0] = tok;
  for (int64_t i = 1; i < len; ++i) {
    uint64_t r = mix64(key + uint64_t(i));
    tok = successors_[tok * branching_ + int64_t(r % uint64_t(branching_))];
    out[i] = tok;
  }
}

double MarkovSource::entropy_floor() const { return std::log(double(branching_)); }

std::vector<int64_t> epoch_permutation(uint64_t seed, uint64_t epoch, int64_t samples) {
  std::vector<int64_t> perm(samples);
  std::iota(perm.begin(), perm.end(), int64_t(0));
  for (int64_t i = samples - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(mix_keys(seed, 3, epoch, uint64_t(i)) % uint64_t(i + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

}  // namespace sweep
