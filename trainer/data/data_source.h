// Token sources and the distributed-ready sampler. A step's samples are a function of
// (seed, step, global micro-batch, row) only, so splitting a step over ranks, changing
// accumulation or the number of prefetch workers never changes what is trained on.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "run_config.h"

namespace sweep {

/// Where sequences come from.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  /// Sequences per epoch.
  virtual int64_t samples() const = 0;
  /// Writes sequence `sample` (< samples()) of `len` tokens into `out`.
  virtual void sequence(int64_t sample, int64_t len, int64_t* out) const = 0;
  /// Best achievable loss in nats when known (synthetic), else NaN.
  virtual double entropy_floor() const;
  /// One line for the log and the record, e.g. "tokens file data.bin (1048576 tokens)".
  virtual std::string describe() const = 0;
};

/// Opens the source of `cfg.data`; throws ConfigError naming data.path and the file when
/// it is missing, too short for one sequence of seq_len + 1 tokens, or holds a token id
/// outside [0, model.vocab).
std::unique_ptr<TokenSource> open_token_source(const RunConfig& cfg);

/// The training and held-out sources of a run. Without held-out data (cfg.evaluates()
/// false) `train` is `all` and `eval` is null. With data.eval_path, `eval` is that file,
/// read whole. With data.eval_fraction f, h = ceil(f x samples) sequences are held out:
/// synthetic data holds out the h sequences past data.samples (the training data is
/// unchanged); a file (tokens, text, hdf5) its last h windows, and training stops one
/// window before them (consecutive windows share a boundary token, so no token is in
/// both); a program's source its last h sequences. Throws ConfigError when too little
/// remains on either side.
struct DataSplit {
  std::shared_ptr<const TokenSource> train, eval;
};
DataSplit split_held_out(std::shared_ptr<const TokenSource> all, const RunConfig& cfg);

/// The sequences of held-out evaluation `batch` (0-based; each of world x accum
/// micro-batches of micro_batch rows) in a fixed order: global micro-batch j row b is
/// sequence (batch x micro_batches + j) x micro_batch + b of `eval`. Layout-free like the
/// training order, and without shuffling: every evaluation sees the same sequences.
void fill_eval(const TokenSource& eval, const RunConfig& cfg, int64_t batch, int64_t j, int64_t micro_batches,
               int64_t* out);

/// Maps (step, global micro-batch j, row b) to a sample: a per-epoch shuffle from
/// (train.seed, epoch). Thread-safe.
class Sampler {
 public:
  Sampler(const RunConfig& cfg, const TokenSource& source);
  /// Fills `out` (micro_batch rows of seq_len + 1 tokens) for 0-based `step` and global
  /// micro-batch `j` of `micro_batches` per step.
  void fill(int64_t step, int64_t j, int64_t micro_batches, int64_t* out) const;
  /// The samples (indices into the source) whose sequences fill() puts in that micro-batch,
  /// row by row: what a message names when the micro-batch went wrong.
  std::vector<int64_t> samples(int64_t step, int64_t j, int64_t micro_batches) const;
  /// The samples of the whole global batch of `step`, in order: the same on every layout.
  std::vector<int64_t> batch_samples(int64_t step, int64_t micro_batches) const;

 private:
  using Perm = std::shared_ptr<const std::vector<int64_t>>;
  Perm permutation(int64_t epoch) const;
  uint64_t seed_;
  int64_t micro_batch_, len_;
  const TokenSource& source_;
  mutable std::mutex mu_;  // guards the cache of the two most recent epochs' permutations
  mutable int64_t cached_epoch_[2] = {-1, -1};
  mutable Perm cached_perm_[2];
};

}  // namespace sweep
