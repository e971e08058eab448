#include "checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "checksum.h"   // flat_checksum, run_id_of_config (XXH3 of a text)
#include "run_files.h"  // create_exclusive, write_all, checkpoint_dir, complete_checkpoints

namespace fs = std::filesystem;

namespace sweep {
namespace {

constexpr char kMagic[8] = {'S', 'W', 'P', 'C', 'K', 'P', 'T', '\n'};

/// Writes a new file: created exclusively, never through a symbolic link; every error
/// (ENOSPC above all) names the file and the errno text.
class Writer {
 public:
  explicit Writer(const std::string& path) : path_(path), fd_(create_exclusive(path)) {}
  ~Writer() {
    if (fd_ >= 0) ::close(fd_);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  void raw(const void* p, size_t n) {
    buf_.append(static_cast<const char*>(p), n);
    if (buf_.size() >= (size_t(1) << 20)) drain();
  }
  template <class T>
  void pod(const T& x) {
    raw(&x, sizeof x);
  }
  template <class T>
  void vec(const std::vector<T>& v) {
    pod(uint64_t(v.size()));
    raw(v.data(), v.size() * sizeof(T));
  }
  void str(const std::string& s) {
    pod(uint64_t(s.size()));
    raw(s.data(), s.size());
  }
  /// Writes what is buffered, syncs and closes.
  void close() {
    drain();
    if (::fsync(fd_) != 0) throw std::runtime_error(path_ + ": writing the checkpoint failed: " + std::strerror(errno));
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) throw std::runtime_error(path_ + ": writing the checkpoint failed: " + std::strerror(errno));
  }

 private:
  void drain() {
    write_all(fd_, buf_.data(), buf_.size(), path_);
    buf_.clear();
  }
  std::string path_;
  int fd_ = -1;
  std::string buf_;
};

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw std::runtime_error(path + ": cannot read the checkpoint");
  }
  void raw(void* p, size_t n) {
    in_.read(static_cast<char*>(p), std::streamsize(n));
    if (!in_) throw std::runtime_error(path_ + ": checkpoint is truncated");
  }
  template <class T>
  T pod() {
    T x;
    raw(&x, sizeof x);
    return x;
  }
  template <class T>
  std::vector<T> vec() {
    uint64_t n = pod<uint64_t>();
    if (n > (uint64_t(1) << 40)) throw std::runtime_error(path_ + ": checkpoint is corrupt (impossible length)");
    std::vector<T> v(n);
    raw(v.data(), n * sizeof(T));
    return v;
  }
  std::string str() {
    auto v = vec<char>();
    return std::string(v.begin(), v.end());
  }

 private:
  std::string path_;
  std::ifstream in_;
};

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

void save_checkpoint(const std::string& run_dir, const TrainState& s, int keep, bool test_crash_midway) {
  const fs::path dir = checkpoint_dir(run_dir, s.step);
  fs::remove_all(dir);  // a leftover without DONE from a crash
  fs::create_directories(dir);
  const std::string state = (dir / "state.bin").string();
  Writer w(state);
  w.raw(kMagic, sizeof kMagic);
  w.pod(kCheckpointVersion);
  w.str(s.run_id);
  w.str(s.math_id);
  w.pod(s.step);
  w.vec(s.params);
  if (test_crash_midway) {  // test-only: a torn state.bin without DONE, as a crash leaves it
    w.close();
    ::_exit(1);
  }
  w.vec(s.m);
  w.vec(s.v);
  w.pod(s.loss_scale);
  w.pod(s.clean_steps);
  w.str(s.rng);
  w.vec(s.metrics);  // StepMetrics is plain data: int64 and double fields only
  w.pod(uint64_t(s.checksums.size()));
  for (const auto& c : s.checksums) {
    w.pod(c.step);
    w.pod(c.params);
    w.vec(c.tensors);
  }
  w.vec(s.evals);         // version 3; EvalRow is plain data too
  w.str(s.lineage.kind);  // version 4
  w.str(s.lineage.parent_run_id);
  w.pod(s.lineage.parent_step);
  w.pod(uint64_t(s.decisions.size()));  // version 5
  for (const auto& d : s.decisions) {
    w.pod(d.step);
    w.str(d.action);
    w.pod(d.back_to);
    w.pod(d.undone);
    w.pod(d.loss);
    w.pod(d.median);
  }
  for (const auto& d : s.decisions) w.pod(d.rise), w.pod(d.skip);  // version 6
  w.pod(uint64_t(s.kept.size()));
  for (const auto& k : s.kept) {
    w.pod(k.step);
    w.pod(k.updates);
    w.vec(k.params);
    w.vec(k.m);
    w.vec(k.v);
    w.pod(k.loss_scale);
    w.pod(k.clean_steps);
    w.str(k.rng);
  }
  w.close();
  // What a fork continues from, hashed: the same in every directory that trained the same
  // bits (state.bin also holds each step's wall time), so a pbt search names the checkpoint
  // a member forks from by it (kCheckpointDigestFile).
  {
    char line[160];
    std::snprintf(line, sizeof line, "params %016llx adam_m %016llx adam_v %016llx rng %s step %lld\n",
                  (unsigned long long)flat_checksum(s.params.data(), s.params.size()),
                  (unsigned long long)flat_checksum(s.m.data(), s.m.size()),
                  (unsigned long long)flat_checksum(s.v.data(), s.v.size()), run_id_of_config(s.rng).c_str(),
                  (long long)s.step);
    Writer digest((dir / kCheckpointDigestFile).string());
    digest.raw(line, std::strlen(line));
    digest.close();
  }
  // The marker goes last: a crash before this line leaves an incomplete checkpoint
  // that every reader skips.
  {
    Writer done((dir / "DONE").string());
    const std::string text = std::to_string(s.step) + "\n";
    done.raw(text.data(), text.size());
    done.close();
  }
  fsync_path(dir.string());
  auto all = complete_checkpoints(run_dir);
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i) fs::remove_all(all[i].second);
}

namespace {

TrainState read_state(const std::string& path, const std::string& run_id, const std::string& math_id,
                      bool any_math = false) {
  Reader r(path);
  char magic[sizeof kMagic];
  r.raw(magic, sizeof magic);
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) throw std::runtime_error(path + ": not a sweep checkpoint");
  auto version = r.pod<uint32_t>();
  if (version > kCheckpointVersion || version < 1)
    throw std::runtime_error(path + ": checkpoint version " + std::to_string(version) +
                             " is not supported (this build reads versions 1 to " + std::to_string(kCheckpointVersion) +
                             ")");
  TrainState s;
  s.run_id = r.str();
  if (version >= 2) s.math_id = r.str();
  const bool same_run = s.run_id == run_id, same_math = !s.math_id.empty() && s.math_id == math_id;
  if (!same_run && !same_math && !any_math)
    throw CheckpointOfOtherMath(path + ": checkpoint of run " + s.run_id + ", whose math differs from run " + run_id +
                                    "'s (only the layout may change: world size and accum at the same global batch, "
                                    "ZeRO stage, workers); refusing to resume",
                                path);
  s.step = r.pod<int64_t>();
  s.params = r.vec<float>();
  s.m = r.vec<float>();
  s.v = r.vec<float>();
  s.loss_scale = r.pod<double>();
  s.clean_steps = r.pod<int64_t>();
  s.rng = r.str();
  s.metrics = r.vec<StepMetrics>();
  auto rows = r.pod<uint64_t>();
  for (uint64_t i = 0; i < rows; ++i) {
    ChecksumRow c;
    c.step = r.pod<int64_t>();
    c.params = r.pod<uint64_t>();
    c.tensors = r.vec<uint64_t>();
    s.checksums.push_back(std::move(c));
  }
  if (version >= 3) s.evals = r.vec<EvalRow>();
  if (version >= 4) {
    s.lineage.kind = r.str();
    s.lineage.parent_run_id = r.str();
    s.lineage.parent_step = r.pod<int64_t>();
  }
  if (version >= 5) {
    const auto n = r.pod<uint64_t>();
    for (uint64_t i = 0; i < n; ++i) {
      SpikeDecision d;
      d.step = r.pod<int64_t>();
      d.action = r.str();
      d.back_to = r.pod<int64_t>();
      d.undone = r.pod<int64_t>();
      d.loss = r.pod<double>();
      d.median = r.pod<double>();
      s.decisions.push_back(std::move(d));
    }
  }
  if (version >= 6) {
    for (auto& d : s.decisions) d.rise = r.pod<int64_t>(), d.skip = r.pod<int64_t>();
    const auto n = r.pod<uint64_t>();
    for (uint64_t i = 0; i < n; ++i) {
      KeptState k;
      k.step = r.pod<int64_t>();
      k.updates = r.pod<int64_t>();
      k.params = r.vec<float>();
      k.m = r.vec<float>();
      k.v = r.vec<float>();
      k.loss_scale = r.pod<double>();
      k.clean_steps = r.pod<int64_t>();
      k.rng = r.str();
      s.kept.push_back(std::move(k));
    }
  }
  return s;
}

}  // namespace

std::optional<TrainState> load_latest_checkpoint(const std::string& run_dir, const std::string& run_id,
                                                 const std::string& math_id) {
  auto all = complete_checkpoints(run_dir);
  if (all.empty()) return std::nullopt;
  return read_state((fs::path(all.back().second) / "state.bin").string(), run_id, math_id);
}

TrainState load_checkpoint_at(const std::string& path, const std::string& run_id, const std::string& math_id,
                              bool any_math) {
  std::error_code ec;
  if (fs::exists(fs::path(path) / "state.bin", ec)) {
    if (!fs::exists(fs::path(path) / "DONE", ec))
      throw std::runtime_error(path + ": the checkpoint is incomplete (no DONE marker)");
    return read_state((fs::path(path) / "state.bin").string(), run_id, math_id, any_math);
  }
  // A run directory, or its checkpoints/ directory.
  fs::path run = fs::path(path).lexically_normal();
  if (run.filename().empty()) run = run.parent_path();  // a trailing '/'
  if (run.filename() == "checkpoints") run = run.parent_path();
  auto all = complete_checkpoints(run.string());
  if (all.empty())
    throw std::runtime_error(path +
                             ": no complete checkpoint there (expected a run directory, its checkpoints/, or "
                             "checkpoints/step_N)");
  return read_state((fs::path(all.back().second) / "state.bin").string(), run_id, math_id, any_math);
}

}  // namespace sweep
