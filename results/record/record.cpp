#include "record.h"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <type_traits>

#include "collective_ring.h"  // HangForensics: the /hang group a hung run's partial record gets
#include "run_files.h"        // create_exclusive, regular_file_problem, sync_path

namespace sweep {
namespace {

// HDF5 1.10 closes every file still open when the process exits; a file whose close
// failed (a full disk) is still open, and that pass then crashes inside H5F__close_cb,
// turning a clean "No space left on device" into a segfault. Every file here is closed
// explicitly, so the pass is not needed. It must be turned off before HDF5 starts up,
// hence a static initializer.
/// The ballast of a record being written (RecordWriter::Impl::reserve).
constexpr off_t kReserveBytes = 256 << 10;

const bool kNoHdf5AtExit = [] {
  H5dont_atexit();
  return true;
}();

/// Owns one HDF5 identifier and closes it with the matching function.
class H5 {
 public:
  using Closer = herr_t (*)(hid_t);
  H5() = default;
  H5(hid_t id, Closer close) : id_(id), close_(close) {}
  H5(H5&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  H5& operator=(H5&& o) noexcept {
    reset();
    id_ = o.id_, close_ = o.close_, o.id_ = -1;
    return *this;
  }
  ~H5() { reset(); }
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }
  hid_t get() const { return id_; }
  /// Gives up ownership without closing (the caller closes and checks the result).
  hid_t release() {
    hid_t id = id_;
    id_ = -1;
    return id;
  }
  explicit operator bool() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

/// Anything at `p`, a dangling symbolic link included.
bool exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

/// Opens a record file read-only without taking HDF5's file lock. Readers never lock: a
/// shared lock held by `sweep report` or `sweep status` at the moment the writer reopens
/// its partial file to finish it would make that reopen fail and lose the run. (A
/// completed record never changes; a partial one is read as of its last flush.)
H5 open_for_reading(const std::string& path, bool chunk_cache = true) {
  H5 fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_file_locking(fapl.get(), false, true);
  // Each dataset is read once, whole: no chunk cache to set up and tear down per dataset
  // (at 1,000 records a plan spent more time there than reading).
  if (!chunk_cache) H5Pset_cache(fapl.get(), 0, 0, 0, 0.0);
  return H5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
}

/// Opens the writer's own partial file for writing again. Another program's reader that
/// does take HDF5's lock (h5py without HDF5_USE_FILE_LOCKING=FALSE) makes the open fail
/// while it holds the file: wait for it, up to `patience`, rather than lose the record.
H5 reopen_for_writing(const std::string& path, std::chrono::milliseconds patience = std::chrono::seconds(10)) {
  const auto until = std::chrono::steady_clock::now() + patience;
  for (;;) {
    H5 f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    if (f || !exists(path) || std::chrono::steady_clock::now() >= until) return f;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// Throws when `rc` says an HDF5 call failed, with the errno text of the I/O error
/// behind it when there is one (callers clear errno first).
void check(herr_t rc, const std::string& path, const char* what) {
  if (rc < 0)
    throw RecordError(path + ": HDF5 failed to " + what +
                      (errno ? std::string(" (") + std::strerror(errno) + ")" : ""));
}

H5 str_type() {
  H5 t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

void write_str_attr(hid_t obj, const char* name, const std::string& value) {
  H5 t = str_type();
  H5 space(H5Screate(H5S_SCALAR), H5Sclose);
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  H5 a(H5Acreate2(obj, name, t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const char* p = value.c_str();
  H5Awrite(a.get(), t.get(), &p);
}

void write_i64_attr(hid_t obj, const char* name, int64_t value) {
  H5 space(H5Screate(H5S_SCALAR), H5Sclose);
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  H5 a(H5Acreate2(obj, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  H5Awrite(a.get(), H5T_NATIVE_INT64, &value);
}

// Raises the record's schema_version to `version`, never lowers it: a program's first own
// figure (4) can come after its first telemetry row (5).
void raise_schema_version(hid_t file, int64_t version) {
  int64_t now = 0;
  if (H5Aexists(file, "schema_version") > 0) {
    H5 a(H5Aopen(file, "schema_version", H5P_DEFAULT), H5Aclose);
    if (H5Aread(a.get(), H5T_NATIVE_INT64, &now) < 0) now = 0;
  }
  if (version > now) write_i64_attr(file, "schema_version", version);
}

void write_str_scalar(hid_t parent, const char* name, const std::string& value) {
  H5 t = str_type();
  H5 space(H5Screate(H5S_SCALAR), H5Sclose);
  H5 d(H5Dcreate2(parent, name, t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  const char* p = value.c_str();
  H5Dwrite(d.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p);
}

void write_str_list(hid_t parent, const char* name, const std::vector<std::string>& values) {
  H5 t = str_type();
  hsize_t n = values.size();
  H5 space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  H5 d(H5Dcreate2(parent, name, t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  std::vector<const char*> ptrs;
  ptrs.reserve(values.size());
  for (const auto& v : values) ptrs.push_back(v.c_str());
  if (n) H5Dwrite(d.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data());
}

template <class T>
hid_t native_type();
template <>
hid_t native_type<double>() {
  return H5T_NATIVE_DOUBLE;
}
template <>
hid_t native_type<int64_t>() {
  return H5T_NATIVE_INT64;
}
template <>
hid_t native_type<uint64_t>() {
  return H5T_NATIVE_UINT64;
}

template <class T>
hid_t file_type();
template <>
hid_t file_type<double>() {
  return H5T_IEEE_F64LE;
}
template <>
hid_t file_type<int64_t>() {
  return H5T_STD_I64LE;
}
template <>
hid_t file_type<uint64_t>() {
  return H5T_STD_U64LE;
}

template <class T>
void write_fixed_list(hid_t parent, const char* name, const std::vector<T>& values) {
  hsize_t n = values.size();
  H5 space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  H5 d(H5Dcreate2(parent, name, file_type<T>(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  if (n) H5Dwrite(d.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
}

/// An extendable dataset of `cols` columns (1-D when cols == 0) that grows by rows.
template <class T>
class Column {
 public:
  Column(hid_t parent, const char* name, hsize_t cols = 0) : cols_(cols) {
    int rank = cols ? 2 : 1;
    hsize_t dims[2] = {0, cols}, maxdims[2] = {H5S_UNLIMITED, cols}, chunk[2] = {1024, cols ? cols : 1};
    if (cols) chunk[0] = std::max<hsize_t>(1, 8192 / cols);
    chunk_rows_ = chunk[0];
    H5 space(H5Screate_simple(rank, dims, maxdims), H5Sclose);
    H5 plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(plist.get(), rank, chunk);
    d_ = H5(H5Dcreate2(parent, name, file_type<T>(), space.get(), H5P_DEFAULT, plist.get(), H5P_DEFAULT), H5Dclose);
  }
  /// At most the bytes of file space the next flush() allocates: every chunk the pending
  /// rows touch, whole (a chunk is allocated in full however few rows it holds).
  size_t write_bound() const {
    if (pending_.empty()) return 0;
    const hsize_t width = cols_ ? cols_ : 1, end = rows_ + pending_.size() / width;
    const hsize_t chunks = (end + chunk_rows_ - 1) / chunk_rows_ - rows_ / chunk_rows_;
    return size_t(chunks * chunk_rows_ * width * sizeof(T));
  }
  void push(T v) { pending_.push_back(v); }
  void push_row(const std::vector<T>& row) { pending_.insert(pending_.end(), row.begin(), row.end()); }
  void flush() {
    if (pending_.empty()) return;
    int rank = cols_ ? 2 : 1;
    hsize_t width = cols_ ? cols_ : 1;
    hsize_t add = pending_.size() / width;
    hsize_t new_dims[2] = {rows_ + add, cols_};
    H5Dset_extent(d_.get(), new_dims);
    H5 fspace(H5Dget_space(d_.get()), H5Sclose);
    hsize_t start[2] = {rows_, 0}, count[2] = {add, cols_};
    H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
    H5 mspace(H5Screate_simple(rank, count, nullptr), H5Sclose);
    H5Dwrite(d_.get(), native_type<T>(), mspace.get(), fspace.get(), H5P_DEFAULT, pending_.data());
    rows_ += add;
    pending_.clear();
  }

 private:
  H5 d_;
  hsize_t cols_;
  hsize_t chunk_rows_ = 1;
  hsize_t rows_ = 0;
  std::vector<T> pending_;
};

/// An extendable 1-D dataset of variable-length UTF-8 strings, with Column's interface.
class StrColumn {
 public:
  StrColumn(hid_t parent, const char* name) {
    hsize_t dims = 0, maxdims = H5S_UNLIMITED, chunk = 256;
    H5 space(H5Screate_simple(1, &dims, &maxdims), H5Sclose);
    H5 plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(plist.get(), 1, &chunk);
    H5 t = str_type();
    d_ = H5(H5Dcreate2(parent, name, t.get(), space.get(), H5P_DEFAULT, plist.get(), H5P_DEFAULT), H5Dclose);
  }
  /// The chunks the pending strings' pointers touch plus the strings themselves (HDF5's
  /// global heap), generously.
  size_t write_bound() const {
    size_t bytes = 0;
    for (const auto& v : pending_) bytes += v.size() + 64;
    return pending_.empty() ? 0 : bytes + size_t(256) * 16;
  }
  void push(std::string v) { pending_.push_back(std::move(v)); }
  void flush() {
    if (pending_.empty()) return;
    hsize_t add = pending_.size(), new_dims = rows_ + add;
    H5Dset_extent(d_.get(), &new_dims);
    H5 fspace(H5Dget_space(d_.get()), H5Sclose);
    H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &rows_, nullptr, &add, nullptr);
    H5 mspace(H5Screate_simple(1, &add, nullptr), H5Sclose);
    std::vector<const char*> ptrs;
    for (const auto& v : pending_) ptrs.push_back(v.c_str());
    H5 t = str_type();
    H5Dwrite(d_.get(), t.get(), mspace.get(), fspace.get(), H5P_DEFAULT, ptrs.data());
    rows_ += add;
    pending_.clear();
  }

 private:
  H5 d_;
  hsize_t rows_ = 0;
  std::vector<std::string> pending_;
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

std::vector<int64_t> parse_shape(const std::string& s) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t x = s.find('x', pos);
    out.push_back(std::stoll(s.substr(pos, x - pos)));
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return out;
}

}  // namespace

/// The double-valued metric columns, declared once for the writer and the reader.
#define SWEEP_DOUBLE_METRICS(X) \
  X(loss) X(lr) X(grad_norm) X(clip_coef) X(loss_scale) X(step_time_s) X(tokens_per_s) X(record_time_s)
#define SWEEP_INT_METRICS(X) X(step) X(skipped) X(tokens) X(unused_params)

struct RecordWriter::Impl {
  std::string path, partial;
  HealthJudge health_judge = nullptr;  // the header's
  // Ballast: space taken at the start and given back when the disk fills up, so that
  // the record can still say it failed, and why.
  std::string reserve;
  void release_reserve() {
    if (!reserve.empty()) ::unlink(reserve.c_str()), reserve.clear();
  }
  H5 file, metrics, checksums;
#define X(name) std::unique_ptr<Column<double>> name;  // NOLINT(bugprone-macro-parentheses): a member name
  SWEEP_DOUBLE_METRICS(X)
#undef X
#define X(name) std::unique_ptr<Column<int64_t>> name;  // NOLINT(bugprone-macro-parentheses): a member name
  SWEEP_INT_METRICS(X)
#undef X
  std::unique_ptr<Column<int64_t>> ck_step;
  std::unique_ptr<Column<uint64_t>> ck_params, ck_tensors;
  std::unique_ptr<Column<double>> rank_times;
  H5 eval;  // /eval, when the run evaluates
  std::unique_ptr<Column<int64_t>> ev_step, ev_tokens;
  std::unique_ptr<Column<double>> ev_loss, ev_time;
  // A program's own figures: /metrics/extra and /eval/extra, created with their first
  // value (rows before it get NaN), the record then version 4.
  H5 step_extra_group, eval_extra_group;
  std::map<std::string, std::unique_ptr<Column<double>>> step_extra, eval_extra;
  size_t steps = 0, evals = 0;  // rows appended so far
  double flush_every_s = 0;     // the header's
  std::chrono::steady_clock::time_point last_flush{};
  int64_t last_eval_step = -1;
  /// Pushes one row of `extra` into `columns` (under /<group>/extra), `rows` rows already
  /// there; a metric new in this row gets NaN for the rows before it.
  void push_extra(const char* group, H5& extra_group, std::map<std::string, std::unique_ptr<Column<double>>>& columns,
                  size_t rows, const ExtraMetrics& extra);
  H5 ranks, summary;
  std::set<std::string> timing_metrics;  // declared: the summary's `timing_metrics`, sorted
  size_t n_tensors = 0, world = 1;
  // Version 5, created with their first row: each rank's gradient norm (/ranks/grad_norm,
  // `rank_norm_rows` rows so far) and the gradient telemetry (/telemetry).
  std::unique_ptr<Column<double>> rank_norms;
  size_t rank_norm_rows = 0;
  H5 telemetry;
  std::unique_ptr<Column<int64_t>> tm_step, tm_routed;
  std::unique_ptr<StrColumn> tm_why;
  std::unique_ptr<Column<double>> tm_norms;
  int64_t moe_layers = 0, moe_experts = 0, last_telemetry_step = -1;
  bool finished = false;  // completed, or abandoned: no further writes
  // The trainer's watchdog thread may abandon the record while the main thread writes it.
  std::mutex mu;
  void flush();
  /// Calls f on every column (each a Column<T> of its own T).
  template <class F>
  void each_column(F&& f);
  void mark_failed_fresh(const std::string& failure);
  /// Closes every dataset and group (the file stays open).
  void close_datasets();
};

RecordWriter::RecordWriter(const std::string& path, const RecordHeader& h) : impl_(new Impl) {
  Impl& m = *impl_;
  m.path = path;
  m.partial = path + kPartialSuffix;
  m.health_judge = h.health_judge;
  m.flush_every_s = h.flush_every_s;
  if (exists(path)) throw RecordError(path + ": a completed record is already there; it is never overwritten");
  // The caller holds the run's lock (run_files.h), so a partial here is a dead attempt's.
  // It is removed (a link is removed, never followed) and the new file created
  // exclusively: a link planted in between makes the create fail, not write through it.
  struct stat st;
  if (::lstat(m.partial.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw RecordError(m.partial + ": is not a regular file (a link or special file); refusing to write through it");
    if (::unlink(m.partial.c_str()) != 0)
      throw RecordError(m.partial + ": cannot remove the stale partial record: " + std::strerror(errno));
  }
  {
    const std::string reserve = path + ".reserve";
    if (::lstat(reserve.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(reserve.c_str());
    try {
      const int fd = create_exclusive(reserve);
      if (::posix_fallocate(fd, 0, kReserveBytes) == 0) m.reserve = reserve;
      ::close(fd);
      if (m.reserve.empty()) ::unlink(reserve.c_str());  // the disk is already too full: go on without
    } catch (const RecordError&) {
      // No ballast (the name is taken by a link or the directory is full): go on without.
    }
  }
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  errno = 0;
  m.file = H5(H5Fcreate(m.partial.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!m.file)
    throw RecordError(m.partial + ": cannot create the record file (" + (errno ? std::strerror(errno) : "HDF5 error") +
                      ")");
  hid_t f = m.file.get();
  write_i64_attr(f, "schema_version", 3);  // 4 once a program's own figure is written (push_extra)
  write_str_attr(f, "run_id", h.run_id);
  write_str_attr(f, "sweep_id", h.sweep_id);
  write_str_attr(f, "status", "running");
  write_str_attr(f, "failure", "");
  if (!h.lineage.kind.empty()) {
    write_str_attr(f, "lineage", h.lineage.kind);
    write_str_attr(f, "parent_run_id", h.lineage.parent_run_id);
    write_i64_attr(f, "parent_step", h.lineage.parent_step);
    raise_schema_version(f, 6);
  }

  H5 cfg(H5Gcreate2(f, "config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  write_str_scalar(cfg.get(), "yaml", h.config_yaml);
  std::vector<std::string> keys, values;
  for (const auto& [k, v] : h.config) keys.push_back(k), values.push_back(v);
  write_str_list(cfg.get(), "keys", keys);
  write_str_list(cfg.get(), "values", values);

  H5 env(H5Gcreate2(f, "environment", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  for (const auto& [k, v] : h.environment) write_str_attr(env.get(), k.c_str(), v);

  H5 params(H5Gcreate2(f, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  std::vector<std::string> names, shapes;
  std::vector<int64_t> offsets, numels;
  for (const auto& p : h.params) {
    names.push_back(p.name), shapes.push_back(shape_text(p.shape));
    offsets.push_back(p.offset), numels.push_back(p.numel);
  }
  write_str_list(params.get(), "name", names);
  write_str_list(params.get(), "shape", shapes);
  write_fixed_list(params.get(), "offset", offsets);
  write_fixed_list(params.get(), "numel", numels);
  m.n_tensors = h.params.size();

  m.metrics = H5(H5Gcreate2(f, "metrics", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
#define X(name) m.name = std::make_unique<Column<double>>(m.metrics.get(), #name);
  SWEEP_DOUBLE_METRICS(X)
#undef X
#define X(name) m.name = std::make_unique<Column<int64_t>>(m.metrics.get(), #name);
  SWEEP_INT_METRICS(X)
#undef X
  m.checksums = H5(H5Gcreate2(f, "checksums", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  m.ck_step = std::make_unique<Column<int64_t>>(m.checksums.get(), "step");
  m.ck_params = std::make_unique<Column<uint64_t>>(m.checksums.get(), "params");
  if (m.n_tensors) m.ck_tensors = std::make_unique<Column<uint64_t>>(m.checksums.get(), "tensors", m.n_tensors);
  if (h.moe_layers < 0 || h.moe_experts < 0 || (h.moe_layers == 0) != (h.moe_experts == 0))
    throw RecordError(m.partial + ": an MoE header needs both moe_layers and moe_experts (or neither), got " +
                      std::to_string(h.moe_layers) + " x " + std::to_string(h.moe_experts));
  m.moe_layers = h.moe_layers, m.moe_experts = h.moe_experts;
  m.world = size_t(std::max<int64_t>(1, h.world_size));
  write_i64_attr(f, "world_size", int64_t(m.world));
  m.ranks = H5(H5Gcreate2(f, "ranks", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  m.rank_times = std::make_unique<Column<double>>(m.ranks.get(), "step_time_s", m.world);
  m.summary = H5(H5Gcreate2(f, "summary", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (h.eval) {
    m.eval = H5(H5Gcreate2(f, "eval", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    m.ev_step = std::make_unique<Column<int64_t>>(m.eval.get(), "step");
    m.ev_loss = std::make_unique<Column<double>>(m.eval.get(), "loss");
    m.ev_tokens = std::make_unique<Column<int64_t>>(m.eval.get(), "tokens");
    m.ev_time = std::make_unique<Column<double>>(m.eval.get(), "time_s");
  }
  m.flush();
}

RecordWriter::~RecordWriter() {
  if (!impl_) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->release_reserve();
  if (!impl_->finished && impl_->file) {
    try {
      impl_->flush();
    } catch (...) {
    }
  }
}

bool valid_metric_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (unsigned char c : name)
    if (!std::isalnum(c) && c != '_' && c != '.' && c != '-') return false;
  return name != "." && name != "..";
}

void RecordWriter::Impl::push_extra(const char* group, H5& extra_group,
                                    std::map<std::string, std::unique_ptr<Column<double>>>& columns, size_t rows,
                                    const ExtraMetrics& extra) {
  std::map<std::string, double> row;
  for (const auto& [name, value] : extra) {
    if (!valid_metric_name(name))
      throw RecordError(partial + ": metric name '" + name +
                        "': expected 1-64 letters, digits, '_', '.' or '-' (it names a dataset)");
    if (!row.emplace(name, value).second) throw RecordError(partial + ": metric '" + name + "' given twice in one row");
  }
  for (const auto& [name, value] : row) {
    if (columns.count(name)) continue;
    if (!extra_group) {
      H5 parent(H5Gopen2(file.get(), group, H5P_DEFAULT), H5Gclose);
      extra_group = H5(H5Gcreate2(parent.get(), "extra", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      if (!extra_group) throw RecordError(partial + ": cannot create /" + group + "/extra");
      raise_schema_version(file.get(), 4);  // the first extra figure makes it version 4
    }
    auto col = std::make_unique<Column<double>>(extra_group.get(), name.c_str());
    for (size_t i = 0; i < rows; ++i) col->push(NAN);
    columns.emplace(name, std::move(col));
  }
  for (auto& [name, col] : columns) {
    const auto it = row.find(name);
    col->push(it == row.end() ? NAN : it->second);
  }
}

void RecordWriter::append_step(const StepMetrics& s, const ExtraMetrics& extra) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.finished) return;  // abandoned (maybe from the watchdog thread): nothing more is written
  if (!extra.empty() || !m.step_extra.empty())
    m.push_extra("metrics", m.step_extra_group, m.step_extra, m.steps, extra);
#define X(name) m.name->push(s.name);
  SWEEP_DOUBLE_METRICS(X)
  SWEEP_INT_METRICS(X)
#undef X
  ++m.steps;
  if (m.flush_every_s > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (m.steps == 1 || std::chrono::duration<double>(now - m.last_flush).count() >= m.flush_every_s) {
      m.flush();
      m.last_flush = now;
    }
  }
}

void RecordWriter::append_checksum(const ChecksumRow& c) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.finished) return;  // abandoned (maybe from the watchdog thread): nothing more is written
  if (c.tensors.size() != m.n_tensors)
    throw RecordError(m.partial + ": checksum row has " + std::to_string(c.tensors.size()) +
                      " tensor hashes, the parameter table has " + std::to_string(m.n_tensors));
  m.ck_step->push(c.step);
  m.ck_params->push(c.params);
  if (m.ck_tensors) m.ck_tensors->push_row(c.tensors);
}

void RecordWriter::append_eval(const EvalRow& e, const ExtraMetrics& extra) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.finished) return;  // abandoned (maybe from the watchdog thread): nothing more is written
  if (!m.eval) throw RecordError(m.partial + ": an evaluation row for a record whose header said no evaluation");
  if (e.step < m.last_eval_step)
    throw RecordError(m.partial + ": an evaluation at step " + std::to_string(e.step) + " after one at step " +
                      std::to_string(m.last_eval_step) + "; evaluations are recorded in step order");
  if (!extra.empty() || !m.eval_extra.empty()) m.push_extra("eval", m.eval_extra_group, m.eval_extra, m.evals, extra);
  ++m.evals;
  m.last_eval_step = e.step;
  m.ev_step->push(e.step);
  m.ev_loss->push(e.loss);
  m.ev_tokens->push(e.tokens);
  m.ev_time->push(e.time_s);
}

void RecordWriter::append_rank_times(const std::vector<double>& seconds) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.finished) return;  // abandoned (maybe from the watchdog thread): nothing more is written
  if (seconds.size() != m.world)
    throw RecordError(m.partial + ": " + std::to_string(seconds.size()) + " rank step times for a world of " +
                      std::to_string(m.world));
  m.rank_times->push_row(seconds);
}

void RecordWriter::append_rank_grad_norms(const std::vector<double>& norms) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.finished) return;  // abandoned (maybe from the watchdog thread): nothing more is written
  if (norms.size() != m.world)
    throw RecordError(m.partial + ": " + std::to_string(norms.size()) + " rank gradient norms for a world of " +
                      std::to_string(m.world));
  if (m.rank_norm_rows >= m.steps)
    throw RecordError(m.partial + ": rank gradient norms for a step with no /metrics row (append the step first)");
  if (!m.rank_norms) {
    m.rank_norms = std::make_unique<Column<double>>(m.ranks.get(), "grad_norm", m.world);
    raise_schema_version(m.file.get(), 5);
  }
  const std::vector<double> unknown(m.world, NAN);  // steps that gave none
  for (; m.rank_norm_rows + 1 < m.steps; ++m.rank_norm_rows) m.rank_norms->push_row(unknown);
  m.rank_norms->push_row(norms);
  ++m.rank_norm_rows;
}

void RecordWriter::append_telemetry(const TelemetryRow& row) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.finished) return;  // abandoned (maybe from the watchdog thread): nothing more is written
  if (row.tensor_grad_norm.size() != m.n_tensors)
    throw RecordError(m.partial + ": a telemetry row with " + std::to_string(row.tensor_grad_norm.size()) +
                      " tensor gradient norms; the parameter table has " + std::to_string(m.n_tensors));
  if (row.routed_tokens.size() != size_t(m.moe_layers * m.moe_experts))
    throw RecordError(m.partial + ": a telemetry row with " + std::to_string(row.routed_tokens.size()) +
                      " routed-token counts; the header says " + std::to_string(m.moe_layers) + " MoE layers x " +
                      std::to_string(m.moe_experts) + " experts");
  if (row.step <= m.last_telemetry_step)
    throw RecordError(m.partial + ": a telemetry row for step " + std::to_string(row.step) + " after one for step " +
                      std::to_string(m.last_telemetry_step) + "; rows are recorded in step order, once per step");
  if (!m.telemetry) {
    m.telemetry = H5(H5Gcreate2(m.file.get(), "telemetry", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    if (!m.telemetry) throw RecordError(m.partial + ": cannot create /telemetry");
    m.tm_step = std::make_unique<Column<int64_t>>(m.telemetry.get(), "step");
    m.tm_why = std::make_unique<StrColumn>(m.telemetry.get(), "why");
    if (m.n_tensors) m.tm_norms = std::make_unique<Column<double>>(m.telemetry.get(), "tensor_grad_norm", m.n_tensors);
    if (m.moe_layers) {
      write_fixed_list(m.telemetry.get(), "moe_shape", std::vector<int64_t>{m.moe_layers, m.moe_experts});
      m.tm_routed =
          std::make_unique<Column<int64_t>>(m.telemetry.get(), "routed_tokens", hsize_t(m.moe_layers * m.moe_experts));
    }
    raise_schema_version(m.file.get(), 5);
  }
  m.last_telemetry_step = row.step;
  m.tm_step->push(row.step);
  m.tm_why->push(row.why);
  if (m.tm_norms) m.tm_norms->push_row(row.tensor_grad_norm);
  if (m.tm_routed) m.tm_routed->push_row(row.routed_tokens);
}

void RecordWriter::set_memory(const RankMemory& mem) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.finished) return;  // abandoned (maybe from the watchdog thread): nothing more is written
  write_fixed_list(m.ranks.get(), "params_bytes", mem.params);
  write_fixed_list(m.ranks.get(), "grads_bytes", mem.grads);
  write_fixed_list(m.ranks.get(), "optimizer_bytes", mem.optimizer);
  write_fixed_list(m.ranks.get(), "step_peak_bytes", mem.step_peak);
  write_fixed_list(m.ranks.get(), "peak_rss_bytes", mem.peak_rss);
}

void RecordWriter::set_summary(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->finished) return;
  write_str_attr(impl_->summary.get(), key.c_str(), value);
}

void RecordWriter::declare_timing_metric(const std::string& name) {
  if (!valid_metric_name(name))
    throw RecordError(impl_->partial + ": timing metric name '" + name +
                      "': expected 1-64 letters, digits, '_', '.' or '-' (a metric's name)");
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->finished || !impl_->timing_metrics.insert(name).second) return;
  std::string names;
  for (const std::string& n : impl_->timing_metrics) names += (names.empty() ? "" : " ") + n;
  write_str_attr(impl_->summary.get(), "timing_metrics", names);
}

void RecordWriter::flush() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->finished) impl_->flush();
}

template <class F>
void RecordWriter::Impl::each_column(F&& f) {
  Impl& m = *this;
  f(*m.rank_times);
#define X(name) f(*m.name);
  SWEEP_DOUBLE_METRICS(X)
  SWEEP_INT_METRICS(X)
#undef X
  f(*m.ck_step);
  f(*m.ck_params);
  if (m.ck_tensors) f(*m.ck_tensors);
  if (m.eval) f(*m.ev_step), f(*m.ev_loss), f(*m.ev_tokens), f(*m.ev_time);
  for (auto& [name, col] : m.step_extra) f(*col);
  for (auto& [name, col] : m.eval_extra) f(*col);
  if (m.rank_norms) f(*m.rank_norms);
  if (m.tm_step) f(*m.tm_step), f(*m.tm_why);
  if (m.tm_norms) f(*m.tm_norms);
  if (m.tm_routed) f(*m.tm_routed);
}

void RecordWriter::Impl::flush() {
  Impl& m = *this;
  // A write that runs out of space part-way can leave HDF5's file unreadable (metadata
  // that points past the end the superblock records: "addr overflow"), so the last good
  // flush would be lost with it. A flush that may not fit is refused before HDF5 writes
  // a byte: the file stays as of the last good flush, and the ballast then gives back
  // room to mark it failed. The bound is every chunk the rows touch, whole, plus room for
  // the chunk indexes and object headers HDF5 updates.
  size_t bound = 16 << 10;
  size_t columns = 0;
  each_column([&](auto& c) { bound += c.write_bound() + 2048, ++columns; });
  struct statvfs fs;
  if (::statvfs(m.partial.c_str(), &fs) == 0) {
    const unsigned long long avail = static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize;
    if (avail < bound)
      throw RecordError(m.partial + ": cannot flush the record: " + std::strerror(ENOSPC) + " (" +
                        std::to_string(avail) + " bytes free, up to " + std::to_string(bound) + " needed for " +
                        std::to_string(columns) + " columns)");
  }
  each_column([](auto& c) { c.flush(); });
  errno = 0;
  check(H5Fflush(m.file.get(), H5F_SCOPE_GLOBAL), m.partial, "flush the record");
}

void RecordWriter::finish(const std::string& status, const std::string& failure, bool test_crash_before_rename) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.finished) throw RecordError(m.partial + ": the record was already marked failed; it is not completed");
  try {
    m.flush();
  } catch (const RecordError& e) {
    // A full disk at the end: the record stays partial and says why, in the space the
    // ballast gives back.
    m.release_reserve();
    m.finished = true;
    m.mark_failed_fresh(e.what());
    throw;
  }
  write_str_attr(m.file.get(), "status", status);
  write_str_attr(m.file.get(), "failure", failure);
  m.close_datasets();
  m.finished = true;  // from here on nothing else is written, whatever happens
  m.release_reserve();
  if (H5Fclose(m.file.release()) < 0)
    throw RecordError(m.partial + ": closing the record failed (" + std::strerror(errno) + ")");
  // Read back what is on disk: an unreadable file is never completed. Health flags for a
  // writer that did not store its own (a program's, through sweep/record_writer.h) are
  // judged from it, like every reader would; only then is it read again.
  Record back = read_record_unverified(m.partial);
  if ((status == "completed" || status == "diverged") && m.health_judge && back.summary.count("health") == 0) {
    H5 f = reopen_for_writing(m.partial);
    H5 summary(f ? H5Gopen2(f.get(), "summary", H5P_DEFAULT) : -1, H5Gclose);
    if (!summary) throw RecordError(m.partial + ": cannot reopen the record to store its health flags");
    for (const auto& [key, value] : m.health_judge(back)) write_str_attr(summary.get(), key.c_str(), value);
    summary.reset();
    if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0 || H5Fclose(f.release()) < 0)
      throw RecordError(m.partial + ": storing the record's health flags failed (" + std::strerror(errno) + ")");
    back = read_record_unverified(m.partial);
  }
  // Integrity: its digest, hashed as every reader will, is stored.
  const std::string digest = back.computed_digest;
  {
    H5 f = reopen_for_writing(m.partial);
    if (!f) throw RecordError(m.partial + ": cannot reopen the record to store its digest");
    write_str_attr(f.get(), "digest", digest);
    if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0 || H5Fclose(f.release()) < 0)
      throw RecordError(m.partial + ": storing the record's digest failed (" + std::strerror(errno) + ")");
  }
  if (read_record_digest(m.partial) != digest)
    throw RecordError(m.partial + ": the digest did not reach the disk; the record stays partial");
  sync_path(m.partial);
  if (test_crash_before_rename) ::_exit(1);  // a crash at the worst moment: the file is whole but still .partial
  // link() fails when the target exists, so a completed record is never replaced.
  if (::link(m.partial.c_str(), m.path.c_str()) != 0)
    throw RecordError(m.path + ": cannot complete the record (" + std::strerror(errno) + ")");
  ::unlink(m.partial.c_str());
  const auto slash = m.path.rfind('/');
  try {
    sync_path(slash == std::string::npos ? "." : m.path.substr(0, slash));
  } catch (const RecordError&) {
    // The record is complete and whole; only the directory entry's durability is less sure.
  }
}

void RecordWriter::Impl::close_datasets() {
  Impl& m = *this;
  m.rank_times.reset();
  m.metrics.reset(), m.checksums.reset(), m.ranks.reset(), m.summary.reset();
#define X(name) m.name.reset();
  SWEEP_DOUBLE_METRICS(X)
  SWEEP_INT_METRICS(X)
#undef X
  m.ck_step.reset(), m.ck_params.reset(), m.ck_tensors.reset();
  m.ev_step.reset(), m.ev_loss.reset(), m.ev_tokens.reset(), m.ev_time.reset(), m.eval.reset();
  m.step_extra.clear(), m.eval_extra.clear(), m.step_extra_group.reset(), m.eval_extra_group.reset();
  m.rank_norms.reset(), m.tm_step.reset(), m.tm_why.reset(), m.tm_norms.reset(), m.tm_routed.reset();
  m.telemetry.reset();
}

/// After a failed write (a full disk) HDF5's handle of the file cannot be trusted to
/// write anything more: drop it, reopen what is on disk (the state of the last good
/// flush) and mark that failed, in the space the ballast gave back.
void RecordWriter::Impl::mark_failed_fresh(const std::string& failure) {
  Impl& m = *this;
  m.close_datasets();
  H5Fclose(m.file.release());  // may fail again; the exit pass that would crash on it is off
  H5 f = reopen_for_writing(m.partial);
  if (!f) return;  // the file on disk is not readable: the driver's post-mortem says why
  write_str_attr(f.get(), "status", "failed");
  write_str_attr(f.get(), "failure", failure);
  H5Fflush(f.get(), H5F_SCOPE_GLOBAL);
}

void RecordWriter::abandon(const std::string& failure) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.finished || !m.file) return;
  m.release_reserve();
  m.finished = true;
  bool flushed = true;
  try {
    m.flush();
  } catch (const RecordError&) {
    flushed = false;  // keep going: recording the cause matters more than the last buffered rows
  }
  if (flushed) {
    write_str_attr(m.file.get(), "status", "failed");
    write_str_attr(m.file.get(), "failure", failure);
    if (H5Fflush(m.file.get(), H5F_SCOPE_GLOBAL) >= 0) return;
  }
  m.mark_failed_fresh(failure);
}

// ---------------------------------------------------------------------------- reading

namespace {

std::string read_str_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return "";
  H5 a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  H5 t = str_type();
  char* p = nullptr;
  if (H5Aread(a.get(), t.get(), &p) < 0 || !p) return "";
  std::string s(p);
  H5free_memory(p);
  return s;
}

hsize_t extent(hid_t d, int dim = 0) {
  H5 s(H5Dget_space(d), H5Sclose);
  hsize_t dims[2] = {0, 0};
  H5Sget_simple_extent_dims(s.get(), dims, nullptr);
  return dims[dim];
}

H5 open_dataset(hid_t parent, const char* name, const std::string& path) {
  H5 d(H5Dopen2(parent, name, H5P_DEFAULT), H5Dclose);
  if (!d) throw RecordError(path + ": dataset '" + name + "' is missing; the record is damaged");
  // What it declares must be what a writer can have stored: no compression packs more
  // than DEFLATE's 1032:1, so a dataset whose elements would take more memory than that
  // over the bytes it stores (chunks never written, a size edited by hand) is damaged,
  // and is refused before anything is allocated for it.
  H5 space(H5Dget_space(d.get()), H5Sclose);
  H5 type(H5Dget_type(d.get()), H5Tclose);
  const hssize_t n = space ? H5Sget_simple_extent_npoints(space.get()) : -1;
  const size_t elem = std::max<size_t>(type ? H5Tget_size(type.get()) : 0, sizeof(void*));
  const double stored = double(H5Dget_storage_size(d.get()));
  // And none is larger than 2 GiB in memory (10^8 steps of one figure; the largest record
  // sweep writes is far below): a file of 30 MB packing 30 GB of zeros is damage too, not
  // an allocation that wakes the OOM killer.
  if (n < 0 || double(n) * double(elem) > 1100.0 * stored + double(1 << 20) ||
      double(n) * double(elem) > double(int64_t(2) << 30))
    throw RecordError(path + ": dataset '" + name + "' declares " + std::to_string(n) + " elements but stores " +
                      std::to_string(static_cast<long long>(stored)) +
                      " bytes: more than any record can hold; the record is damaged");
  return d;
}

template <class T>
std::vector<T> read_list(hid_t parent, const char* name, const std::string& path) {
  H5 d = open_dataset(parent, name, path);
  H5 s(H5Dget_space(d.get()), H5Sclose);
  std::vector<T> out(H5Sget_simple_extent_npoints(s.get()));
  if (!out.empty()) check(H5Dread(d.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), path, name);
  return out;
}

std::vector<std::string> read_str_list(hid_t parent, const char* name, const std::string& path) {
  H5 d = open_dataset(parent, name, path);
  H5 t = str_type();
  std::vector<char*> ptrs(extent(d.get()));
  std::vector<std::string> out;
  if (ptrs.empty()) return out;
  check(H5Dread(d.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), path, name);
  for (char* p : ptrs) out.emplace_back(p ? p : ""), H5free_memory(p);
  return out;
}

std::string read_str_scalar(hid_t parent, const char* name, const std::string& path) {
  H5 d = open_dataset(parent, name, path);
  H5 t = str_type();
  char* p = nullptr;
  check(H5Dread(d.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p), path, name);
  std::string s(p ? p : "");
  H5free_memory(p);
  return s;
}

H5 open_group(hid_t f, const char* name, const std::string& path) {
  H5 g(H5Gopen2(f, name, H5P_DEFAULT), H5Gclose);
  if (!g) throw RecordError(path + ": group '/" + name + "' is missing; the record is damaged");
  return g;
}

herr_t collect_link_name(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

herr_t collect_attr(hid_t loc, const char* name, const H5A_info_t*, void* out) {
  (*static_cast<std::map<std::string, std::string>*>(out))[name] = read_str_attr(loc, name);
  return 0;
}

}  // namespace

namespace {

/// XXH64 over the record's contents in the order results/SCHEMA.md ("Integrity") gives:
/// each item is its name, a NUL, then its payload (numbers little-endian as stored,
/// strings as UTF-8 each followed by a NUL).
class Digest {
 public:
  Digest() : st_(XXH64_createState()) { XXH64_reset(st_, 0); }
  ~Digest() { XXH64_freeState(st_); }
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;
  void name(const std::string& n) { XXH64_update(st_, n.c_str(), n.size() + 1); }
  void str(const std::string& n, const std::string& v) { name(n), bytes(v.c_str(), v.size() + 1); }
  void strs(const std::string& n, const std::vector<std::string>& v) {
    name(n);
    for (const auto& x : v) bytes(x.c_str(), x.size() + 1);
  }
  void attrs(const std::string& n, const std::map<std::string, std::string>& m) {
    name(n);
    for (const auto& [k, v] : m) bytes(k.c_str(), k.size() + 1), bytes(v.c_str(), v.size() + 1);
  }
  template <class T>
  void nums(const std::string& n, const std::vector<T>& v) {
    static_assert(std::is_arithmetic_v<T> && sizeof(T) == 8, "64-bit numbers only");
    name(n);
    bytes(v.data(), v.size() * sizeof(T));  // x86-64 and aarch64 are little-endian, as the file is
  }
  std::string text() const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "xxh64:%016llx", static_cast<unsigned long long>(XXH64_digest(st_)));
    return buf;
  }

 private:
  void bytes(const void* p, size_t n) {
    if (n) XXH64_update(st_, p, n);
  }
  XXH64_state_t* st_;
};

/// Reads the record at `path` whatever its name; `digest` gets its contents' digest.
Record read_record_file(const std::string& path, std::string* digest) {
  if (std::string why = regular_file_problem(path); !why.empty()) throw RecordError(path + ": " + why);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  H5 file = open_for_reading(path, /*chunk_cache=*/false);
  if (!file)
    throw RecordError(path + ": not a readable HDF5 file (truncated or corrupt); re-run the point to replace it");
  hid_t f = file.get();
  Record r;
  r.path = path;
  if (H5Aexists(f, "schema_version") <= 0)
    throw RecordError(path + ": not a sweep record (no schema_version attribute)");
  {
    H5 a(H5Aopen(f, "schema_version", H5P_DEFAULT), H5Aclose);
    check(H5Aread(a.get(), H5T_NATIVE_INT64, &r.schema_version), path, "read schema_version");
  }
  if (r.schema_version > kSchemaVersion || r.schema_version < 1)
    throw RecordError(path + ": record schema version " + std::to_string(r.schema_version) +
                      " is not supported (this sweep reads version " + std::to_string(kSchemaVersion) +
                      "); use the sweep release that wrote it");
  Digest d;
  r.run_id = read_str_attr(f, "run_id");
  r.sweep_id = read_str_attr(f, "sweep_id");
  r.status = read_str_attr(f, "status");
  r.failure = read_str_attr(f, "failure");
  r.digest = read_str_attr(f, "digest");
  if (H5Aexists(f, "world_size") > 0) {
    H5 a(H5Aopen(f, "world_size", H5P_DEFAULT), H5Aclose);
    check(H5Aread(a.get(), H5T_NATIVE_INT64, &r.world_size), path, "read world_size");
  }
  d.nums("schema_version", std::vector<int64_t>{r.schema_version});
  d.str("run_id", r.run_id), d.str("sweep_id", r.sweep_id), d.str("status", r.status), d.str("failure", r.failure);
  d.nums("world_size", std::vector<int64_t>{r.world_size});
  if (H5Aexists(f, "lineage") > 0) {  // version 6: only a run started from another run's checkpoint
    r.lineage.kind = read_str_attr(f, "lineage");
    r.lineage.parent_run_id = read_str_attr(f, "parent_run_id");
    if (H5Aexists(f, "parent_step") > 0) {
      H5 a(H5Aopen(f, "parent_step", H5P_DEFAULT), H5Aclose);
      check(H5Aread(a.get(), H5T_NATIVE_INT64, &r.lineage.parent_step), path, "read parent_step");
    }
    d.str("lineage", r.lineage.kind), d.str("parent_run_id", r.lineage.parent_run_id);
    d.nums("parent_step", std::vector<int64_t>{r.lineage.parent_step});
  }

  H5 cfg = open_group(f, "config", path);
  r.config_yaml = read_str_scalar(cfg.get(), "yaml", path);
  auto keys = read_str_list(cfg.get(), "keys", path);
  auto values = read_str_list(cfg.get(), "values", path);
  for (size_t i = 0; i < keys.size() && i < values.size(); ++i) r.config[keys[i]] = values[i];
  d.str("config/yaml", r.config_yaml), d.strs("config/keys", keys), d.strs("config/values", values);

  H5 env = open_group(f, "environment", path);
  H5Aiterate2(env.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attr, &r.environment);
  d.attrs("environment", r.environment);

  H5 params = open_group(f, "params", path);
  auto names = read_str_list(params.get(), "name", path);
  auto shapes = read_str_list(params.get(), "shape", path);
  auto offsets = read_list<int64_t>(params.get(), "offset", path);
  auto numels = read_list<int64_t>(params.get(), "numel", path);
  d.strs("params/name", names), d.strs("params/shape", shapes), d.nums("params/offset", offsets),
      d.nums("params/numel", numels);
  // A damaged table is a RecordError like any other damage, not a stray std::out_of_range.
  if (shapes.size() != names.size() || offsets.size() != names.size() || numels.size() != names.size())
    throw RecordError(path + ": the /params datasets differ in length; the record is damaged");
  for (size_t i = 0; i < names.size(); ++i) {
    std::vector<int64_t> shape;
    try {
      shape = parse_shape(shapes[i]);
    } catch (const std::logic_error&) {  // std::stoll's invalid_argument and out_of_range
      throw RecordError(path + ": /params/shape '" + shapes[i] +
                        "' is not a shape such as 64x256; the record is damaged");
    }
    r.params.push_back({names[i], shape, offsets[i], numels[i]});
  }

  H5 metrics = open_group(f, "metrics", path);
  // Every column has the length of "step"; the X loop below reads "step" itself.
  r.steps.resize(size_t(extent(open_dataset(metrics.get(), "step", path).get())));
#define X(name)                                                                                           \
  {                                                                                                       \
    auto col = read_list<std::remove_reference_t<decltype(r.steps[0].name)>>(metrics.get(), #name, path); \
    if (col.size() != r.steps.size())                                                                     \
      throw RecordError(path + ": metric '" #name "' has a different length than 'step'");                \
    d.nums("metrics/" #name, col);                                                                        \
    for (size_t i = 0; i < col.size(); ++i) r.steps[i].name = col[i];                                     \
  }
  SWEEP_DOUBLE_METRICS(X)
  SWEEP_INT_METRICS(X)
#undef X

  H5 ranks = open_group(f, "ranks", path);
  auto times = read_list<double>(ranks.get(), "step_time_s", path);
  d.nums("ranks/step_time_s", times);
  const size_t w = size_t(std::max<int64_t>(1, r.world_size));
  for (size_t i = 0; i + w <= times.size(); i += w)
    r.rank_step_time_s.emplace_back(times.begin() + i, times.begin() + i + w);
  if (H5Lexists(ranks.get(), "params_bytes", H5P_DEFAULT) > 0) {
    r.memory.params = read_list<int64_t>(ranks.get(), "params_bytes", path);
    r.memory.grads = read_list<int64_t>(ranks.get(), "grads_bytes", path);
    r.memory.optimizer = read_list<int64_t>(ranks.get(), "optimizer_bytes", path);
    d.nums("ranks/params_bytes", r.memory.params), d.nums("ranks/grads_bytes", r.memory.grads);
    d.nums("ranks/optimizer_bytes", r.memory.optimizer);
  }
  if (H5Lexists(ranks.get(), "step_peak_bytes", H5P_DEFAULT) > 0) {
    r.memory.step_peak = read_list<int64_t>(ranks.get(), "step_peak_bytes", path);
    r.memory.peak_rss = read_list<int64_t>(ranks.get(), "peak_rss_bytes", path);
    d.nums("ranks/step_peak_bytes", r.memory.step_peak), d.nums("ranks/peak_rss_bytes", r.memory.peak_rss);
  }
  H5 summary = open_group(f, "summary", path);
  H5Aiterate2(summary.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attr, &r.summary);
  d.attrs("summary", r.summary);

  H5 ck = open_group(f, "checksums", path);
  auto ck_step = read_list<int64_t>(ck.get(), "step", path);
  auto ck_params = read_list<uint64_t>(ck.get(), "params", path);
  std::vector<uint64_t> ck_tensors;
  if (!r.params.empty()) ck_tensors = read_list<uint64_t>(ck.get(), "tensors", path);
  d.nums("checksums/step", ck_step), d.nums("checksums/params", ck_params), d.nums("checksums/tensors", ck_tensors);
  size_t nt = r.params.size();
  for (size_t i = 0; i < ck_step.size() && i < ck_params.size(); ++i) {
    ChecksumRow row{ck_step[i], ck_params[i], {}};
    if (nt && ck_tensors.size() >= (i + 1) * nt)
      row.tensors.assign(ck_tensors.begin() + i * nt, ck_tensors.begin() + (i + 1) * nt);
    r.checksums.push_back(std::move(row));
  }
  // Version 3: held-out evaluations, when the run had them. Hashed only when present, so
  // the digest of a record without them is what version 2 computed.
  if (H5Lexists(f, "eval", H5P_DEFAULT) > 0) {
    H5 ev = open_group(f, "eval", path);
    auto step = read_list<int64_t>(ev.get(), "step", path);
    auto loss = read_list<double>(ev.get(), "loss", path);
    auto tokens = read_list<int64_t>(ev.get(), "tokens", path);
    auto time = read_list<double>(ev.get(), "time_s", path);
    if (loss.size() != step.size() || tokens.size() != step.size() || time.size() != step.size())
      throw RecordError(path + ": the /eval datasets differ in length; the record is damaged");
    d.nums("eval/step", step), d.nums("eval/loss", loss), d.nums("eval/tokens", tokens), d.nums("eval/time_s", time);
    for (size_t i = 0; i < step.size(); ++i) r.evals.push_back({step[i], loss[i], tokens[i], time[i]});
  }
  // Version 4: a program's own figures, per step then per evaluation, each column in
  // name order; hashed only when present.
  for (const auto& [group, rows, out] :
       {std::tuple{"metrics", r.steps.size(), &r.step_extra}, std::tuple{"eval", r.evals.size(), &r.eval_extra}}) {
    if (H5Lexists(f, group, H5P_DEFAULT) <= 0) continue;
    H5 parent = open_group(f, group, path);
    if (H5Lexists(parent.get(), "extra", H5P_DEFAULT) <= 0) continue;
    H5 extra(H5Gopen2(parent.get(), "extra", H5P_DEFAULT), H5Gclose);
    if (!extra) throw RecordError(path + ": /" + group + "/extra is not a group; the record is damaged");
    std::vector<std::string> names;
    H5Literate(extra.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_link_name, &names);
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
      auto col = read_list<double>(extra.get(), name.c_str(), path);
      if (col.size() != rows)
        throw RecordError(path + ": /" + group + "/extra/" + name + " has " + std::to_string(col.size()) +
                          " values for " + std::to_string(rows) + " rows; the record is damaged");
      d.nums(std::string(group) + "/extra/" + name, col);
      (*out)[name] = std::move(col);
    }
  }
  // Version 5: each rank's gradient norm, then the gradient telemetry; hashed only when
  // present. A row of NaN stands for a step that gave no rank norms.
  if (H5Lexists(ranks.get(), "grad_norm", H5P_DEFAULT) > 0) {
    auto norms = read_list<double>(ranks.get(), "grad_norm", path);
    if (norms.size() % w != 0 || norms.size() / w > r.steps.size())
      throw RecordError(path + ": /ranks/grad_norm has " + std::to_string(norms.size()) + " values for " +
                        std::to_string(w) + " ranks and " + std::to_string(r.steps.size()) +
                        " steps; the record is damaged");
    d.nums("ranks/grad_norm", norms);
    for (size_t i = 0; i + w <= norms.size(); i += w)
      r.rank_grad_norm.emplace_back(norms.begin() + i, norms.begin() + i + w);
    r.rank_grad_norm.resize(r.steps.size(), std::vector<double>(w, NAN));
  }
  if (H5Lexists(f, "telemetry", H5P_DEFAULT) > 0) {
    H5 tm = open_group(f, "telemetry", path);
    auto step = read_list<int64_t>(tm.get(), "step", path);
    auto why = read_str_list(tm.get(), "why", path);
    std::vector<double> norms;
    if (!r.params.empty()) norms = read_list<double>(tm.get(), "tensor_grad_norm", path);
    std::vector<int64_t> shape, routed;
    if (H5Lexists(tm.get(), "moe_shape", H5P_DEFAULT) > 0) {
      shape = read_list<int64_t>(tm.get(), "moe_shape", path);
      if (shape.size() != 2 || shape[0] < 1 || shape[1] < 1)
        throw RecordError(path + ": /telemetry/moe_shape is not two positive counts; the record is damaged");
      routed = read_list<int64_t>(tm.get(), "routed_tokens", path);
      r.moe_layers = shape[0], r.moe_experts = shape[1];
    }
    const size_t nt = r.params.size(), nr = size_t(r.moe_layers * r.moe_experts);
    if (why.size() != step.size() || norms.size() != step.size() * nt || routed.size() != step.size() * nr)
      throw RecordError(path + ": the /telemetry datasets differ in length; the record is damaged");
    d.nums("telemetry/step", step), d.strs("telemetry/why", why), d.nums("telemetry/tensor_grad_norm", norms);
    if (!shape.empty()) d.nums("telemetry/moe_shape", shape), d.nums("telemetry/routed_tokens", routed);
    for (size_t i = 0; i < step.size(); ++i)
      r.telemetry.push_back({step[i], why[i], std::vector<double>(norms.begin() + i * nt, norms.begin() + (i + 1) * nt),
                             std::vector<int64_t>(routed.begin() + i * nr, routed.begin() + (i + 1) * nr)});
  }
  *digest = d.text();
  return r;
}

/// read_record_unverified in this process.
Record parse_record_here(const std::string& path) {
  std::string digest;
  Record r = read_record_file(path, &digest);
  r.computed_digest = digest;
  return r;
}

std::atomic<RecordParseHook> g_parse_hook{nullptr};

}  // namespace

void set_record_parse_hook(RecordParseHook hook) { g_parse_hook = hook; }

Record read_record_unverified(const std::string& path) {
  const RecordParseHook hook = g_parse_hook;
  return hook ? hook(path, parse_record_here) : parse_record_here(path);
}

std::string read_record_digest(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  H5 file = open_for_reading(path);
  return file ? read_str_attr(file.get(), "digest") : "";
}

Record read_record(const std::string& path) {
  const std::string suffix = kPartialSuffix;
  if (is_partial_path(path))
    throw RecordError(path +
                      ": this record is partial (its run never finished); re-run it or read a completed record.h5");
  if (!exists(path)) {
    if (exists(path + suffix))
      throw RecordError(path + ": the run has not finished; only " + path + suffix +
                        " exists (re-run the point to complete it)");
    throw RecordError(path + ": no such record");
  }
  // A run's record is checked byte for byte against what the driver accepted before any
  // HDF5 code parses it: a flipped bit can crash the HDF5 library, not only fail the digest.
  const std::string run_dir =
      path.size() > 10 && path.compare(path.size() - 10, 10, "/record.h5") == 0 ? path.substr(0, path.size() - 10) : "";
  if (const AcceptedRecord a = run_dir.empty() ? AcceptedRecord{} : read_accepted_record(run_dir); !a.bytes.empty()) {
    if (const std::string now = file_bytes_hash(path); now != a.bytes)
      throw RecordError(path + ": integrity check failed: its bytes are not those the driver accepted (" + a.bytes +
                        ", now " + now + ", record digest " + a.digest +
                        "); the file was changed or damaged after the run completed; move it "
                        "aside and re-run the point");
  }
  Record r = read_record_unverified(path);
  // Version 1 records predate the digest: they are read as they are, marked unverified.
  if (r.schema_version >= 2) {
    if (r.digest.empty())
      throw RecordError(
          path + ": the record has no digest (damaged, or not completed by sweep); move it aside and re-run the point");
    if (r.digest != r.computed_digest)
      throw RecordError(path +
                        ": integrity check failed: the contents no longer match the digest written at completion (" +
                        r.digest + ", now " + r.computed_digest +
                        "); the file was damaged after it was written; move it aside "
                        "and re-run the point");
    r.verified = true;
  }
  return r;
}

RecordStatus read_record_status(const std::string& path) {
  RecordStatus st;
  st.partial = !exists(path) && exists(path + kPartialSuffix);
  st.path = st.partial ? path + kPartialSuffix : path;
  if (!exists(st.path)) throw RecordError(path + ": no such record");
  if (std::string why = regular_file_problem(st.path); !why.empty()) throw RecordError(st.path + ": " + why);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  H5 file = open_for_reading(st.path);
  // A partial file is read as of the writer's last flush; one caught in the middle of a
  // flush may not open.
  if (!file) throw RecordError(st.path + ": cannot be opened (truncated, corrupt, or in the middle of a write)");
  st.run_id = read_str_attr(file.get(), "run_id");
  st.sweep_id = read_str_attr(file.get(), "sweep_id");
  st.status = read_str_attr(file.get(), "status");
  st.failure = read_str_attr(file.get(), "failure");
  return st;
}

RecordProgress read_partial_progress(const std::string& path) {
  const std::string partial = path + kPartialSuffix;
  if (std::string why = regular_file_problem(partial); !why.empty()) throw RecordError(partial + ": " + why);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  H5 file = open_for_reading(partial);
  if (!file) throw RecordError(partial + ": cannot be read right now");
  RecordProgress p;
  H5 cfg = open_group(file.get(), "config", partial);
  const auto keys = read_str_list(cfg.get(), "keys", partial);
  const auto values = read_str_list(cfg.get(), "values", partial);
  for (size_t i = 0; i < keys.size() && i < values.size(); ++i)
    if (keys[i] == "train.steps") p.steps = std::atoll(values[i].c_str());
  H5 metrics = open_group(file.get(), "metrics", partial);
  const auto steps = read_list<int64_t>(metrics.get(), "step", partial);
  const auto losses = read_list<double>(metrics.get(), "loss", partial);
  if (!steps.empty() && losses.size() >= steps.size()) p.step = steps.back(), p.loss = losses[steps.size() - 1];
  std::vector<double> times = read_list<double>(metrics.get(), "step_time_s", partial);
  if (times.size() > 20) times.erase(times.begin(), times.end() - 20);
  if (!times.empty()) {
    std::nth_element(times.begin(), times.begin() + long(times.size() / 2), times.end());
    p.step_time_s = times[times.size() / 2];
  }
  struct stat st;
  if (::stat(partial.c_str(), &st) == 0) p.written_at = double(st.st_mtim.tv_sec) + 1e-9 * double(st.st_mtim.tv_nsec);
  return p;
}

namespace {

void write_hang(hid_t file, const HangForensics& h) {
  if (H5Lexists(file, "hang", H5P_DEFAULT) > 0) H5Ldelete(file, "hang", H5P_DEFAULT);  // an earlier look's
  H5 g(H5Gcreate2(file, "hang", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!g) return;
  write_str_attr(g.get(), "verdict", h.verdict);
  write_str_attr(g.get(), "kind", h.kind);
  write_i64_attr(g.get(), "collective", h.collective);
  write_i64_attr(g.get(), "group", h.group);
  write_fixed_list(g.get(), "entered", std::vector<int64_t>(h.entered.begin(), h.entered.end()));
  write_fixed_list(g.get(), "missing", std::vector<int64_t>(h.missing.begin(), h.missing.end()));
  std::vector<int64_t> seq, group, step, peer, bytes;
  std::vector<double> start, end;
  std::vector<std::string> op;
  for (const RingEntry& e : h.rings) {
    seq.push_back(e.seq), group.push_back(e.group), step.push_back(e.step), peer.push_back(e.peer);
    bytes.push_back(e.bytes), start.push_back(e.start_s), end.push_back(e.end_s < 0 ? -1.0 : e.end_s);
    op.push_back(e.op);
  }
  write_fixed_list(g.get(), "ring_rank", std::vector<int64_t>(h.ring_rank.begin(), h.ring_rank.end()));
  write_fixed_list(g.get(), "ring_seq", seq);
  write_fixed_list(g.get(), "ring_group", group);
  write_fixed_list(g.get(), "ring_step", step);
  write_fixed_list(g.get(), "ring_peer", peer);
  write_fixed_list(g.get(), "ring_bytes", bytes);
  write_str_list(g.get(), "ring_op", op);
  write_fixed_list(g.get(), "ring_start_s", start);
  write_fixed_list(g.get(), "ring_end_s", end);
}

}  // namespace

bool mark_partial_failed(const std::string& path, const std::string& failure, const HangForensics* hang) {
  const std::string partial = path + kPartialSuffix;
  if (exists(path)) return false;
  struct stat st;
  if (::lstat(partial.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;  // never through a link
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  H5 file = reopen_for_writing(partial);
  if (!file) return false;
  const std::string status = read_str_attr(file.get(), "status");
  if (status != "running" && status != "failed") return false;
  write_str_attr(file.get(), "status", "failed");
  write_str_attr(file.get(), "failure", failure);
  if (hang) write_hang(file.get(), *hang);
  return H5Fflush(file.get(), H5F_SCOPE_GLOBAL) >= 0;
}

std::string hdf5_version() {
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  return std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel);
}

}  // namespace sweep
