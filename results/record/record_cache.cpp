#include "record_cache.h"

#include <fcntl.h>
#include <sys/random.h>  // getrandom
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdlib>  // getenv
#include <cstring>  // memcpy, strerror
#include <ctime>    // clock_gettime
#include <memory>   // unique_ptr
#include <type_traits>

#include "record.h"     // Record
#include "run_files.h"  // write_all

namespace sweep {
namespace {

/// First bytes of an entry; another version's entries are refused and written anew.
constexpr char kMagic[] = "sweep-record-cache 1\n";
constexpr size_t kMagicLen = sizeof(kMagic) - 1;
/// magic, identity (5 x 8), payload length, XXH3-128 of the payload, tag.
constexpr size_t kHeaderLen = kMagicLen + size_t{5 * 8 + 8 + 16 + 8};
/// An entry larger than this is not read (a record of a million steps is ~200 MB).
constexpr int64_t kMaxEntryBytes = int64_t(1) << 30;
constexpr const char* kCacheDir = "record-cache";

// The cache copies these structs byte for byte: a change to them must change kMagic.
static_assert(std::is_trivially_copyable_v<StepMetrics> && sizeof(StepMetrics) == size_t{12} * 8);
static_assert(std::is_trivially_copyable_v<EvalRow> && sizeof(EvalRow) == size_t{4} * 8);
#if defined(__GLIBCXX__) && defined(__x86_64__)
// A field added to Record must be added to encode_record and decode_record (and to
// tests/unit/record_cache_test.cpp's every_field record), and kMagic's version raised.
static_assert(sizeof(Record) == 896, "Record changed: update encode_record, decode_record and kMagic");
#endif

uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

uint64_t load_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

class Writer {
 public:
  std::string out;
  void u64(uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
  void i64(int64_t v) { u64(uint64_t(v)); }
  void str(const std::string& s) {
    u64(s.size());
    out += s;
  }
  template <class T>
  void pods(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    u64(v.size());
    if (!v.empty()) out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  template <class Map>
  void strings(const Map& m) {
    u64(m.size());
    for (const auto& [k, v] : m) str(k), str(v);
  }
  template <class T>
  void nested(const std::vector<std::vector<T>>& v) {
    u64(v.size());
    for (const auto& row : v) pods(row);
  }
};

class Reader {
 public:
  Reader(const char* p, size_t n) : p_(p), end_(p + n) {}
  bool ok() const { return ok_; }
  bool done() const { return ok_ && p_ == end_; }
  uint64_t u64() {
    uint64_t v = 0;
    if (!take(8)) return 0;
    std::memcpy(&v, p_ - 8, 8);
    return v;
  }
  int64_t i64() { return int64_t(u64()); }
  std::string str() {
    const uint64_t n = u64();
    if (!take(n)) return {};
    return std::string(p_ - n, n);
  }
  template <class T>
  std::vector<T> pods() {
    const uint64_t n = u64();
    std::vector<T> v;
    if (!ok_ || n > size_t(end_ - p_) / sizeof(T) || !take(n * sizeof(T))) return fail(v);
    v.resize(n);
    if (n) std::memcpy(v.data(), p_ - n * sizeof(T), n * sizeof(T));  // (an empty one's data() may be null)
    return v;
  }
  template <class Map>
  void strings(Map* m) {
    const uint64_t n = count(16);
    for (uint64_t i = 0; ok_ && i < n; ++i) {
      std::string k = str();
      m->emplace_hint(m->end(), std::move(k), str());
    }
  }
  template <class T>
  std::vector<std::vector<T>> nested() {
    std::vector<std::vector<T>> v(count(8));
    for (auto& row : v) row = pods<T>();
    return v;
  }
  /// Passes over what nested<T>() would read.
  template <class T>
  void skip_nested() {
    const uint64_t rows = count(8);
    for (uint64_t i = 0; ok_ && i < rows; ++i) {
      const uint64_t n = u64();
      if (!ok_ || n > size_t(end_ - p_) / sizeof(T)) return void(fail(0));
      take(n * sizeof(T));
    }
  }
  /// A count of items of at least `min_bytes` each; 0 and failed when more than could fit.
  uint64_t count(size_t min_bytes) {
    const uint64_t n = u64();
    if (n > size_t(end_ - p_) / min_bytes) return fail(uint64_t(0));
    return n;
  }

 private:
  bool take(uint64_t n) {
    if (!ok_ || n > size_t(end_ - p_)) return fail(false);
    p_ += n;
    return true;
  }
  template <class T>
  T fail(T v) {
    ok_ = false;
    p_ = end_;
    return v;
  }
  const char* p_;
  const char* end_;
  bool ok_ = true;
};

std::string hex_key(const unsigned char* k) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 16; ++i) s += d[k[i] >> 4], s += d[k[i] & 15];
  return s;
}

bool unhex_key(const std::string& s, std::string* key) {
  if (s.size() != 33 || s[32] != '\n') return false;
  key->clear();
  for (size_t i = 0; i < 32; i += 2) {
    int v = 0;
    for (size_t j = i; j < i + 2; ++j) {
      const char c = s[j];
      v = v * 16 + (c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1000);
    }
    if (v < 0) return false;
    *key += char(v);
  }
  return true;
}

bool read_fd(int fd, char* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, out + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += size_t(r);
  }
  return true;
}

/// write_all of `text` to `fd`, false where it failed (the caches never throw for I/O).
bool written(int fd, const std::string& text, const std::string& path) {
  try {
    write_all(fd, text.data(), text.size(), path);
    return true;
  } catch (const RecordError&) {
    return false;
  }
}

/// The identity an entry's header holds at `h` (5 x 8 bytes), and putting it there.
FileIdentity identity_at(const char* h) {
  FileIdentity f;
  std::memcpy(&f.dev, h, 8), std::memcpy(&f.ino, h + 8, 8), std::memcpy(&f.size, h + 16, 8);
  std::memcpy(&f.mtime_ns, h + 24, 8), std::memcpy(&f.ctime_ns, h + 32, 8);
  return f;
}
void put_identity(char* h, const FileIdentity& f) {
  std::memcpy(h, &f.dev, 8), std::memcpy(h + 8, &f.ino, 8), std::memcpy(h + 16, &f.size, 8);
  std::memcpy(h + 24, &f.mtime_ns, 8), std::memcpy(h + 32, &f.ctime_ns, 8);
}

/// The key file's text if `path` is the user's own regular file of mode 0600 holding a
/// key; "" with `*why` otherwise (ENOENT in `*err` when there is none).
std::string read_key_file(const std::string& path, std::string* why, int* err) {
  // Non-blocking: a FIFO planted here is refused by the fstat below, not waited on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *err = errno;
    *why = path + ": " + std::strerror(errno);
    return "";
  }
  struct stat st {};
  std::string text(33, '\0'), key;
  const bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 077) == 0 &&
                  st.st_size == 33 && read_fd(fd, text.data(), 33) && unhex_key(text, &key);
  ::close(fd);
  *err = ok ? 0 : EINVAL;
  if (ok) why->clear();
  if (!ok) *why = path + ": not a key sweep made (32 hex digits in a file of your own, mode 0600)";
  return ok ? key : "";
}

}  // namespace

FileIdentity file_identity(const struct stat& st) {
  FileIdentity f;
  f.dev = uint64_t(st.st_dev);
  f.ino = uint64_t(st.st_ino);
  f.size = int64_t(st.st_size);
  f.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  f.ctime_ns = int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return f;
}

bool settled(const FileIdentity& f) { return now_ns() - std::max(f.mtime_ns, f.ctime_ns) >= kSettleS * 1000000000; }

uint64_t siphash24(const unsigned char key[16], const void* data, size_t n) {
  const uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
  uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
  uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
  const auto round = [&] {
    v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);
    v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);
  };
  const auto absorb = [&](uint64_t m) {
    v3 ^= m;
    round(), round();
    v0 ^= m;
  };
  const auto* p = static_cast<const unsigned char*>(data);
  const size_t whole = n - n % 8;
  for (size_t i = 0; i < whole; i += 8) absorb(load_le64(p + i));
  uint64_t last = uint64_t(n & 0xff) << 56;
  for (size_t i = whole; i < n; ++i) last |= uint64_t(p[i]) << (8 * (i - whole));
  absorb(last);
  v2 ^= 0xff;
  round(), round(), round(), round();
  return v0 ^ v1 ^ v2 ^ v3;
}

std::string user_key(std::string* why) {
  why->clear();
  std::string base;
  const char* state = std::getenv("XDG_STATE_HOME");
  const char* home = std::getenv("HOME");
  if (state && state[0] == '/') {
    base = state;
  } else if (home && home[0] == '/') {
    base = std::string(home) + "/.local/state";
  } else {
    *why = "no HOME (or XDG_STATE_HOME) to keep the caches' key in";
    return "";
  }
  const std::string dir = base + "/sweep", path = dir + "/key";
  int err = 0;
  std::string key = read_key_file(path, why, &err);
  if (err != ENOENT) return key;
  // None yet: make one, and take whichever a racing process linked first.
  for (const std::string& d : {base.substr(0, base.rfind('/')), base, dir})
    if (!d.empty() && ::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
      *why = d + ": " + std::strerror(errno);
      return "";
    }
  unsigned char k[16];
  if (::getrandom(k, sizeof k, 0) != ssize_t(sizeof k)) {
    *why = std::string("getrandom: ") + std::strerror(errno);
    return "";
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = tmp + ": " + std::strerror(errno);
    return "";
  }
  const std::string text = hex_key(k) + "\n";
  const bool wrote = written(fd, text, path) && ::fsync(fd) == 0;
  ::close(fd);
  const bool linked = wrote && ::link(tmp.c_str(), path.c_str()) == 0;
  const int link_err = errno;
  ::unlink(tmp.c_str());
  if (!linked && (!wrote || link_err != EEXIST)) {
    *why = path + ": " + std::strerror(wrote ? link_err : EIO);
    return "";
  }
  return read_key_file(path, why, &err);
}

std::string encode_record(const Record& r) {
  Writer w;
  w.out.reserve(4096 + r.steps.size() * sizeof(StepMetrics) + r.checksums.size() * (24 + 8 * (r.params.size() + 1)));
  w.i64(r.schema_version);
  w.str(r.run_id), w.str(r.sweep_id), w.str(r.status), w.str(r.failure), w.str(r.config_yaml);
  w.strings(r.config), w.strings(r.environment);
  w.pods(r.steps), w.pods(r.evals);
  for (const auto* extra : {&r.step_extra, &r.eval_extra}) {
    w.u64(extra->size());
    for (const auto& [name, values] : *extra) w.str(name), w.pods(values);
  }
  w.u64(r.checksums.size());
  for (const ChecksumRow& c : r.checksums) w.i64(c.step), w.u64(c.params), w.pods(c.tensors);
  w.u64(r.params.size());
  for (const ParamInfo& p : r.params) w.str(p.name), w.pods(p.shape), w.i64(p.offset), w.i64(p.numel);
  w.i64(r.world_size);
  w.str(r.lineage.kind), w.str(r.lineage.parent_run_id), w.i64(r.lineage.parent_step);
  w.nested(r.rank_step_time_s), w.nested(r.rank_grad_norm);
  w.u64(r.telemetry.size());
  for (const TelemetryRow& t : r.telemetry)
    w.i64(t.step), w.str(t.why), w.pods(t.tensor_grad_norm), w.pods(t.routed_tokens);
  w.i64(r.moe_layers), w.i64(r.moe_experts);
  const RankMemory& m = r.memory;
  for (const auto* v : {&m.params, &m.grads, &m.optimizer, &m.step_peak, &m.peak_rss}) w.pods(*v);
  w.strings(r.summary);
  w.str(r.digest), w.str(r.computed_digest), w.u64(r.verified ? 1 : 0);
  return std::move(w.out);
}

bool decode_record(const char* data, size_t n, Record* r, bool per_rank_rows) {
  Reader in(data, n);
  r->schema_version = in.i64();
  r->run_id = in.str(), r->sweep_id = in.str(), r->status = in.str(), r->failure = in.str();
  r->config_yaml = in.str();
  in.strings(&r->config), in.strings(&r->environment);
  r->steps = in.pods<StepMetrics>(), r->evals = in.pods<EvalRow>();
  for (auto* extra : {&r->step_extra, &r->eval_extra}) {
    const uint64_t k = in.count(16);
    for (uint64_t i = 0; in.ok() && i < k; ++i) {
      std::string name = in.str();
      extra->emplace_hint(extra->end(), std::move(name), in.pods<double>());
    }
  }
  r->checksums.resize(in.count(24));
  for (ChecksumRow& c : r->checksums) c.step = in.i64(), c.params = in.u64(), c.tensors = in.pods<uint64_t>();
  r->params.resize(in.count(32));
  for (ParamInfo& p : r->params)
    p.name = in.str(), p.shape = in.pods<int64_t>(), p.offset = in.i64(), p.numel = in.i64();
  r->world_size = in.i64();
  r->lineage.kind = in.str(), r->lineage.parent_run_id = in.str(), r->lineage.parent_step = in.i64();
  if (per_rank_rows) {
    r->rank_step_time_s = in.nested<double>(), r->rank_grad_norm = in.nested<double>();
  } else {
    in.skip_nested<double>(), in.skip_nested<double>();
  }
  r->telemetry.resize(in.count(32));
  for (TelemetryRow& t : r->telemetry)
    t.step = in.i64(), t.why = in.str(), t.tensor_grad_norm = in.pods<double>(), t.routed_tokens = in.pods<int64_t>();
  r->moe_layers = in.i64(), r->moe_experts = in.i64();
  RankMemory& m = r->memory;
  for (auto* v : {&m.params, &m.grads, &m.optimizer, &m.step_peak, &m.peak_rss}) *v = in.pods<int64_t>();
  in.strings(&r->summary);
  r->digest = in.str(), r->computed_digest = in.str();
  r->verified = in.u64() == 1;
  return in.done();
}

namespace {

/// The tag of an entry: SipHash-2-4 under the user's key over what the entry vouches for.
uint64_t entry_tag(const std::string& key, const std::string& id, const char* header_after_magic) {
  std::string msg = kMagic + id + '\0';
  msg.append(header_after_magic, 5 * 8 + 8 + 16);
  return siphash24(reinterpret_cast<const unsigned char*>(key.data()), msg.data(), msg.size());
}

}  // namespace

RecordCache::RecordCache(const std::string& dir) : dir_(dir + "/" + kCacheDir) { key_ = user_key(&why_off_); }

bool RecordCache::get(const std::string& id, const FileIdentity& now, Record* r, bool per_rank_rows) {
  if (key_.empty()) return false;
  const std::string path = dir_ + "/" + id;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;  // none yet
  struct stat st {};
  const bool sized =
      ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= int64_t(kHeaderLen) && st.st_size <= kMaxEntryBytes;
  const size_t size = sized ? size_t(st.st_size) : 0;
  // One buffer per thread, kept: a fresh one per entry costs a page fault per 4 KB.
  thread_local std::unique_ptr<char[]> buffer;
  thread_local size_t capacity = 0;
  if (size > capacity) buffer.reset(new char[capacity = size]);  // (not zeroed: it is read over)
  const bool read = sized && read_fd(fd, buffer.get(), size);
  ::close(fd);
  // A refused entry is removed (where this user may), so that it is said once: the reader
  // reads the record instead and enters it anew when it is good.
  const auto refuse = [&] {
    ++refused_;
    ::unlink(path.c_str());
    return false;
  };
  if (!read || std::memcmp(buffer.get(), kMagic, kMagicLen) != 0) return refuse();
  const char* h = buffer.get() + kMagicLen;
  if (!(identity_at(h) == now)) return false;  // the record changed since: an ordinary miss
  uint64_t length = 0, tag = 0;
  std::memcpy(&length, h + 40, 8), std::memcpy(&tag, h + 64, 8);
  const char* payload = buffer.get() + kHeaderLen;
  const XXH128_hash_t sum = XXH3_128bits(payload, size - kHeaderLen);
  if (length != size - kHeaderLen || std::memcmp(&sum.low64, h + 48, 8) != 0 ||
      std::memcmp(&sum.high64, h + 56, 8) != 0 || tag != entry_tag(key_, id, h))
    return refuse();
  Record decoded;
  if (!decode_record(payload, length, &decoded, per_rank_rows)) return refuse();
  decoded.path = r->path;
  *r = std::move(decoded);
  ++hits_;
  return true;
}

void RecordCache::put(const std::string& id, const FileIdentity& file, const Record& r) {
  if (key_.empty() || !writable_ || !settled(file)) return;
  struct stat st {};
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) return void(writable_ = false);
  if (::lstat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return void(writable_ = false);  // a link: never through it
  const std::string payload = encode_record(r);
  std::string bytes = kMagic;
  bytes.resize(kHeaderLen);
  char* h = bytes.data() + kMagicLen;
  put_identity(h, file);
  const uint64_t length = payload.size();
  const XXH128_hash_t sum = XXH3_128bits(payload.data(), payload.size());
  std::memcpy(h + 40, &length, 8), std::memcpy(h + 48, &sum.low64, 8), std::memcpy(h + 56, &sum.high64, 8);
  const uint64_t tag = entry_tag(key_, id, h);
  std::memcpy(h + 64, &tag, 8);
  const std::string path = dir_ + "/" + id, tmp = dir_ + "/." + id + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return void(writable_ = false);
  // (No fsync: an entry torn by a crash fails its checksum and the record is read again.)
  const bool wrote = written(fd, bytes, path) && written(fd, payload, path);
  const bool closed = ::close(fd) == 0;
  if (!wrote || !closed || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    writable_ = false;
  }
}

std::string RecordCache::note() const {
  if (!why_off_.empty()) return dir_ + ": not used: " + why_off_;
  if (!refused_) return "";
  return dir_ + ": " + std::to_string(refused_) + (refused_ == 1 ? " entry" : " entries") +
         " damaged, edited or made under another key; read from the records instead (the cache is only a copy "
         "of them)";
}

}  // namespace sweep
