#include "data_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "hdf5_tokens.h"     // read_hdf5_tokens
#include "synthetic_data.h"  // MarkovSource, epoch_permutation

namespace sweep {

double TokenSource::entropy_floor() const { return std::nan(""); }

namespace {

class SyntheticSource : public TokenSource {
 public:
  explicit SyntheticSource(const RunConfig& c)
      : chain_(uint64_t(c.data.seed), c.model.vocab, c.data.branching), samples_(c.data.samples) {}
  int64_t samples() const override { return samples_; }
  void sequence(int64_t sample, int64_t len, int64_t* out) const override {
    chain_.sequence(uint64_t(sample), len, out);
  }
  double entropy_floor() const override { return chain_.entropy_floor(); }
  std::string describe() const override {
    return "synthetic Markov chain (" + std::to_string(samples_) + " sequences)";
  }

 private:
  MarkovSource chain_;
  int64_t samples_;
};

/// Read-only memory map of a whole file.
class MappedFile {
 public:
  MappedFile(const std::string& path, const std::string& key) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw ConfigError("key '" + key + "': cannot open '" + path + "': " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw ConfigError("key '" + key + "': '" + path + "' is not a regular file");
    }
    size_ = size_t(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      ::close(fd);
      if (p == MAP_FAILED) throw ConfigError("key '" + key + "': cannot map '" + path + "': " + std::strerror(errno));
      data_ = static_cast<const unsigned char*>(p);
    } else {
      ::close(fd);
    }
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

/// Consecutive non-overlapping windows of seq_len + 1 tokens over a flat token array;
/// `Token` reads element i.
template <class Tokens>
class WindowSource : public TokenSource {
 public:
  /// `key` and `path`: the config key that named the file, for messages.
  WindowSource(Tokens tokens, const RunConfig& c, const char* key, const std::string& path, std::string what)
      : tokens_(std::move(tokens)), seq_len_(c.model.seq_len), what_(std::move(what)) {
    const int64_t n = tokens_.size();
    if (n < seq_len_ + 1)
      throw ConfigError(std::string("key '") + key + "': '" + path + "' holds " + std::to_string(n) +
                        " tokens; one sequence needs " + std::to_string(seq_len_ + 1) + " (model.seq_len + 1)");
    for (int64_t i = 0; i < n; ++i) {
      int64_t t = tokens_[i];
      if (t < 0 || t >= c.model.vocab)
        throw ConfigError(std::string("key '") + key + "': '" + path + "' has token id " + std::to_string(t) +
                          " at position " + std::to_string(i) +
                          ", outside model.vocab = " + std::to_string(c.model.vocab));
    }
    samples_ = (n - 1) / seq_len_;
  }
  int64_t samples() const override { return samples_; }
  void sequence(int64_t sample, int64_t len, int64_t* out) const override {
    const int64_t start = sample * seq_len_;
    for (int64_t i = 0; i < len; ++i) out[i] = tokens_[start + i];
  }
  std::string describe() const override {
    return what_ + " (" + std::to_string(tokens_.size()) + " tokens, " + std::to_string(samples_) + " sequences)";
  }

 private:
  Tokens tokens_;
  int64_t seq_len_, samples_ = 0;
  std::string what_;
};

/// uint16 little-endian ids in a mapped file.
struct U16File {
  std::shared_ptr<MappedFile> file;
  int64_t size() const { return int64_t(file->size() / 2); }
  int64_t operator[](int64_t i) const { return int64_t(file->data()[2 * i]) | (int64_t(file->data()[2 * i + 1]) << 8); }
};
/// One token per byte.
struct ByteFile {
  std::shared_ptr<MappedFile> file;
  int64_t size() const { return int64_t(file->size()); }
  int64_t operator[](int64_t i) const { return file->data()[i]; }
};
struct IntVector {
  std::vector<int32_t> v;
  int64_t size() const { return int64_t(v.size()); }
  int64_t operator[](int64_t i) const { return v[size_t(i)]; }
};

/// Sequences [first, first + count) of another source, renumbered from 0.
class RangeSource : public TokenSource {
 public:
  RangeSource(std::shared_ptr<const TokenSource> base, int64_t first, int64_t count, std::string what)
      : base_(std::move(base)), first_(first), count_(count), what_(std::move(what)) {}
  int64_t samples() const override { return count_; }
  void sequence(int64_t sample, int64_t len, int64_t* out) const override {
    base_->sequence(first_ + sample, len, out);
  }
  double entropy_floor() const override { return base_->entropy_floor(); }
  std::string describe() const override { return base_->describe() + ", " + what_; }

 private:
  std::shared_ptr<const TokenSource> base_;
  int64_t first_, count_;
  std::string what_;
};

/// The file source of data.kind at `path`; `key` names it in messages.
std::unique_ptr<TokenSource> open_file_source(const RunConfig& c, const std::string& path, const char* key) {
  const std::string& kind = c.data.kind;
  if (kind == "tokens") {
    auto f = std::make_shared<MappedFile>(path, key);
    if (f->size() % 2)
      throw ConfigError(std::string("key '") + key + "': '" + path +
                        "' has an odd byte count; expected uint16 token ids");
    return std::make_unique<WindowSource<U16File>>(U16File{f}, c, key, path, "uint16 tokens file " + path);
  }
  if (kind == "text")
    return std::make_unique<WindowSource<ByteFile>>(ByteFile{std::make_shared<MappedFile>(path, key)}, c, key, path,
                                                    "text file " + path);
  std::vector<int32_t> tokens;
  try {
    tokens = read_hdf5_tokens(path, c.data.dataset);
  } catch (const std::runtime_error& e) {
    throw ConfigError(std::string("key '") + key + "': " + e.what());
  }
  return std::make_unique<WindowSource<IntVector>>(IntVector{std::move(tokens)}, c, key, path,
                                                   "hdf5 " + path + ":" + c.data.dataset);
}

std::string range_text(int64_t a, int64_t b) { return "[" + std::to_string(a) + ", " + std::to_string(b) + ")"; }

}  // namespace

std::unique_ptr<TokenSource> open_token_source(const RunConfig& c) {
  const std::string& kind = c.data.kind;
  if (kind == "synthetic") return std::make_unique<SyntheticSource>(c);
  if (kind == "program")  // the trainer adapts the model's own DataSource instead
    throw ConfigError("key 'data.kind': program data come from the training program's model, not a file");
  return open_file_source(c, c.data.path, "data.path");
}

DataSplit split_held_out(std::shared_ptr<const TokenSource> all, const RunConfig& c) {
  if (!c.evaluates()) return {std::move(all), nullptr};
  if (!c.data.eval_path.empty()) {
    std::shared_ptr<const TokenSource> eval = open_file_source(c, c.data.eval_path, "data.eval_path");
    return {std::move(all), std::move(eval)};
  }
  const int64_t n = all->samples();
  const auto h = int64_t(std::ceil(c.data.eval_fraction * double(n)));
  if (c.data.kind == "synthetic")  // sequences past data.samples: a function of their index like the rest
    return {all, std::make_shared<RangeSource>(all, n, h, "held out: sequences " + range_text(n, n + h))};
  // Consecutive windows of a file share their boundary token: training stops one window
  // short of the held-out ones.
  const int64_t gap = c.data.kind == "program" ? 0 : 1, train = n - h - gap;
  if (train < 1)
    throw ConfigError("key 'data.eval_fraction': " + std::to_string(c.data.eval_fraction) + " of " + std::to_string(n) +
                      " sequences holds out " + std::to_string(h) + (gap ? " and one more at the boundary" : "") +
                      ", which leaves none to train on");
  auto eval = std::make_shared<RangeSource>(all, n - h, h, "held out: sequences " + range_text(n - h, n));
  auto kept = std::make_shared<RangeSource>(all, 0, train, "training on sequences " + range_text(0, train));
  return {std::move(kept), std::move(eval)};
}

void fill_eval(const TokenSource& eval, const RunConfig& c, int64_t batch, int64_t j, int64_t micro_batches,
               int64_t* out) {
  const int64_t B = c.train.micro_batch, len = c.model.seq_len + 1;
  for (int64_t b = 0; b < B; ++b) eval.sequence((batch * micro_batches + j) * B + b, len, out + b * len);
}

Sampler::Sampler(const RunConfig& cfg, const TokenSource& source)
    : seed_(uint64_t(cfg.train.seed)),
      micro_batch_(cfg.train.micro_batch),
      len_(cfg.model.seq_len + 1),
      source_(source) {}

Sampler::Perm Sampler::permutation(int64_t epoch) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < 2; ++i)
    if (cached_epoch_[i] == epoch) return cached_perm_[i];
  // Keep the two most recent epochs: prefetch workers may straddle an epoch boundary.
  int slot = cached_epoch_[0] < cached_epoch_[1] ? 0 : 1;
  cached_epoch_[slot] = epoch;
  cached_perm_[slot] =
      std::make_shared<const std::vector<int64_t>>(epoch_permutation(seed_, uint64_t(epoch), source_.samples()));
  return cached_perm_[slot];
}

std::vector<int64_t> Sampler::samples(int64_t step, int64_t j, int64_t micro_batches) const {
  const int64_t n = source_.samples();
  std::vector<int64_t> out;
  for (int64_t b = 0; b < micro_batch_; ++b) {
    const int64_t g = (step * micro_batches + j) * micro_batch_ + b;  // as fill() does
    out.push_back((*permutation(g / n))[size_t(g % n)]);
  }
  return out;
}

std::vector<int64_t> Sampler::batch_samples(int64_t step, int64_t micro_batches) const {
  std::vector<int64_t> out;
  for (int64_t j = 0; j < micro_batches; ++j)
    for (int64_t x : samples(step, j, micro_batches)) out.push_back(x);
  return out;
}

void Sampler::fill(int64_t step, int64_t j, int64_t micro_batches, int64_t* out) const {
  const int64_t n = source_.samples();
  for (int64_t b = 0; b < micro_batch_; ++b) {
    const int64_t g = (step * micro_batches + j) * micro_batch_ + b;  // global sample position
    Perm perm = permutation(g / n);
    source_.sequence((*perm)[size_t(g % n)], len_, out + b * len_);
  }
}

}  // namespace sweep
