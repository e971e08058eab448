#include "record.h"

#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <sys/stat.h>

namespace sweep {
namespace {

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
  explicit operator bool() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

void check(herr_t rc, const std::string& path, const char* what) {
  if (rc < 0) throw RecordError(path + ": HDF5 failed to " + what);
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
  H5 a(H5Acreate2(obj, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  H5Awrite(a.get(), H5T_NATIVE_INT64, &value);
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
  for (const auto& v : values) ptrs.push_back(v.c_str());
  if (n) H5Dwrite(d.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data());
}

template <class T>
hid_t native_type();
template <>
hid_t native_type<double>() { return H5T_NATIVE_DOUBLE; }
template <>
hid_t native_type<int64_t>() { return H5T_NATIVE_INT64; }
template <>
hid_t native_type<uint64_t>() { return H5T_NATIVE_UINT64; }

template <class T>
hid_t file_type();
template <>
hid_t file_type<double>() { return H5T_IEEE_F64LE; }
template <>
hid_t file_type<int64_t>() { return H5T_STD_I64LE; }
template <>
hid_t file_type<uint64_t>() { return H5T_STD_U64LE; }

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
    H5 space(H5Screate_simple(rank, dims, maxdims), H5Sclose);
    H5 plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(plist.get(), rank, chunk);
    d_ = H5(H5Dcreate2(parent, name, file_type<T>(), space.get(), H5P_DEFAULT, plist.get(), H5P_DEFAULT), H5Dclose);
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
  hsize_t rows_ = 0;
  std::vector<T> pending_;
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
  H5 file, metrics, checksums;
#define X(name) std::unique_ptr<Column<double>> name;
  SWEEP_DOUBLE_METRICS(X)
#undef X
#define X(name) std::unique_ptr<Column<int64_t>> name;
  SWEEP_INT_METRICS(X)
#undef X
  std::unique_ptr<Column<int64_t>> ck_step;
  std::unique_ptr<Column<uint64_t>> ck_params, ck_tensors;
  std::unique_ptr<Column<double>> rank_times;
  H5 ranks, summary;
  size_t n_tensors = 0, world = 1;
  bool finished = false;  // completed, or abandoned: no further writes
  // The trainer's watchdog thread may abandon the record while the main thread writes it.
  std::mutex mu;
  void flush();
};

RecordWriter::RecordWriter(const std::string& path, const RecordHeader& h) : impl_(new Impl) {
  Impl& m = *impl_;
  m.path = path;
  m.partial = path + kPartialSuffix;
  if (exists(path)) throw RecordError(path + ": a completed record is already there; it is never overwritten");
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  m.file = H5(H5Fcreate(m.partial.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!m.file) throw RecordError(m.partial + ": cannot create the record file (" + std::strerror(errno) + ")");
  hid_t f = m.file.get();
  write_i64_attr(f, "schema_version", kSchemaVersion);
  write_str_attr(f, "run_id", h.run_id);
  write_str_attr(f, "sweep_id", h.sweep_id);
  write_str_attr(f, "status", "running");
  write_str_attr(f, "failure", "");

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
  m.world = size_t(std::max<int64_t>(1, h.world_size));
  write_i64_attr(f, "world_size", int64_t(m.world));
  m.ranks = H5(H5Gcreate2(f, "ranks", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  m.rank_times = std::make_unique<Column<double>>(m.ranks.get(), "step_time_s", m.world);
  m.summary = H5(H5Gcreate2(f, "summary", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  m.flush();
}

RecordWriter::~RecordWriter() {
  if (!impl_) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->finished && impl_->file) {
    try {
      impl_->flush();
    } catch (...) {
    }
  }
}

void RecordWriter::append_step(const StepMetrics& s) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
#define X(name) m.name->push(s.name);
  SWEEP_DOUBLE_METRICS(X)
  SWEEP_INT_METRICS(X)
#undef X
}

void RecordWriter::append_checksum(const ChecksumRow& c) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (c.tensors.size() != m.n_tensors)
    throw RecordError(m.partial + ": checksum row has " + std::to_string(c.tensors.size()) + " tensor hashes, the parameter table has " +
                      std::to_string(m.n_tensors));
  m.ck_step->push(c.step);
  m.ck_params->push(c.params);
  if (m.ck_tensors) m.ck_tensors->push_row(c.tensors);
}

void RecordWriter::append_rank_times(const std::vector<double>& seconds) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (seconds.size() != m.world)
    throw RecordError(m.partial + ": " + std::to_string(seconds.size()) + " rank step times for a world of " + std::to_string(m.world));
  m.rank_times->push_row(seconds);
}

void RecordWriter::set_memory(const RankMemory& mem) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  write_fixed_list(m.ranks.get(), "params_bytes", mem.params);
  write_fixed_list(m.ranks.get(), "grads_bytes", mem.grads);
  write_fixed_list(m.ranks.get(), "optimizer_bytes", mem.optimizer);
}

void RecordWriter::set_summary(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  write_str_attr(impl_->summary.get(), key.c_str(), value);
}

void RecordWriter::flush() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->finished) impl_->flush();
}

void RecordWriter::Impl::flush() {
  Impl& m = *this;
  m.rank_times->flush();
#define X(name) m.name->flush();
  SWEEP_DOUBLE_METRICS(X)
  SWEEP_INT_METRICS(X)
#undef X
  m.ck_step->flush();
  m.ck_params->flush();
  if (m.ck_tensors) m.ck_tensors->flush();
  check(H5Fflush(m.file.get(), H5F_SCOPE_GLOBAL), m.partial, "flush the record");
}

void RecordWriter::finish(const std::string& status, const std::string& failure, bool test_crash_before_rename) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.finished) throw RecordError(m.partial + ": the record was already marked failed; it is not completed");
  m.flush();
  write_str_attr(m.file.get(), "status", status);
  write_str_attr(m.file.get(), "failure", failure);
  m.rank_times.reset();
  m.metrics.reset(), m.checksums.reset(), m.ranks.reset(), m.summary.reset();
#define X(name) m.name.reset();
  SWEEP_DOUBLE_METRICS(X)
  SWEEP_INT_METRICS(X)
#undef X
  m.ck_step.reset(), m.ck_params.reset(), m.ck_tensors.reset();
  m.file.reset();
  m.finished = true;
  if (test_crash_before_rename) ::_exit(1);  // a crash at the worst moment: the file is whole but still .partial
  // link() fails when the target exists, so a completed record is never replaced.
  if (::link(m.partial.c_str(), m.path.c_str()) != 0)
    throw RecordError(m.path + ": cannot complete the record (" + std::strerror(errno) + ")");
  ::unlink(m.partial.c_str());
}

void RecordWriter::abandon(const std::string& failure) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.finished || !m.file) return;
  try {
    m.flush();
  } catch (const RecordError&) {
    // Keep going: recording the cause matters more than the last buffered rows.
  }
  write_str_attr(m.file.get(), "status", "failed");
  write_str_attr(m.file.get(), "failure", failure);
  H5Fflush(m.file.get(), H5F_SCOPE_GLOBAL);
  m.finished = true;
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

herr_t collect_attr(hid_t loc, const char* name, const H5A_info_t*, void* out) {
  (*static_cast<std::map<std::string, std::string>*>(out))[name] = read_str_attr(loc, name);
  return 0;
}

}  // namespace

Record read_record(const std::string& path) {
  const std::string suffix = kPartialSuffix;
  if (path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
    throw RecordError(path + ": this record is partial (its run never finished); re-run it or read a completed record.h5");
  if (!exists(path)) {
    if (exists(path + suffix))
      throw RecordError(path + ": the run has not finished; only " + path + suffix + " exists (re-run the point to complete it)");
    throw RecordError(path + ": no such record");
  }
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  H5 file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file) throw RecordError(path + ": not a readable HDF5 file (truncated or corrupt); re-run the point to replace it");
  hid_t f = file.get();
  Record r;
  r.path = path;
  if (H5Aexists(f, "schema_version") <= 0) throw RecordError(path + ": not a sweep record (no schema_version attribute)");
  {
    H5 a(H5Aopen(f, "schema_version", H5P_DEFAULT), H5Aclose);
    check(H5Aread(a.get(), H5T_NATIVE_INT64, &r.schema_version), path, "read schema_version");
  }
  if (r.schema_version > kSchemaVersion || r.schema_version < 1)
    throw RecordError(path + ": record schema version " + std::to_string(r.schema_version) + " is not supported (this sweep reads version " +
                      std::to_string(kSchemaVersion) + "); use the sweep release that wrote it");
  r.run_id = read_str_attr(f, "run_id");
  r.sweep_id = read_str_attr(f, "sweep_id");
  r.status = read_str_attr(f, "status");
  r.failure = read_str_attr(f, "failure");

  H5 cfg = open_group(f, "config", path);
  r.config_yaml = read_str_scalar(cfg.get(), "yaml", path);
  auto keys = read_str_list(cfg.get(), "keys", path);
  auto values = read_str_list(cfg.get(), "values", path);
  for (size_t i = 0; i < keys.size() && i < values.size(); ++i) r.config[keys[i]] = values[i];

  H5 env = open_group(f, "environment", path);
  H5Aiterate2(env.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attr, &r.environment);

  H5 params = open_group(f, "params", path);
  auto names = read_str_list(params.get(), "name", path);
  auto shapes = read_str_list(params.get(), "shape", path);
  auto offsets = read_list<int64_t>(params.get(), "offset", path);
  auto numels = read_list<int64_t>(params.get(), "numel", path);
  // A damaged table is a RecordError like any other damage, not a stray std::out_of_range.
  if (shapes.size() != names.size() || offsets.size() != names.size() || numels.size() != names.size())
    throw RecordError(path + ": the /params datasets differ in length; the record is damaged");
  for (size_t i = 0; i < names.size(); ++i) {
    std::vector<int64_t> shape;
    try {
      shape = parse_shape(shapes[i]);
    } catch (const std::logic_error&) {  // std::stoll's invalid_argument and out_of_range
      throw RecordError(path + ": /params/shape '" + shapes[i] + "' is not a shape such as 64x256; the record is damaged");
    }
    r.params.push_back({names[i], shape, offsets[i], numels[i]});
  }

  H5 metrics = open_group(f, "metrics", path);
  // Every column has the length of "step"; the X loop below reads "step" itself.
  r.steps.resize(size_t(extent(open_dataset(metrics.get(), "step", path).get())));
#define X(name)                                                                  \
  {                                                                              \
    auto col = read_list<std::remove_reference_t<decltype(r.steps[0].name)>>(metrics.get(), #name, path); \
    if (col.size() != r.steps.size()) throw RecordError(path + ": metric '" #name "' has a different length than 'step'"); \
    for (size_t i = 0; i < col.size(); ++i) r.steps[i].name = col[i];          \
  }
  SWEEP_DOUBLE_METRICS(X)
  SWEEP_INT_METRICS(X)
#undef X

  if (H5Aexists(f, "world_size") > 0) {
    H5 a(H5Aopen(f, "world_size", H5P_DEFAULT), H5Aclose);
    check(H5Aread(a.get(), H5T_NATIVE_INT64, &r.world_size), path, "read world_size");
  }
  H5 ranks = open_group(f, "ranks", path);
  auto times = read_list<double>(ranks.get(), "step_time_s", path);
  const size_t w = size_t(std::max<int64_t>(1, r.world_size));
  for (size_t i = 0; i + w <= times.size(); i += w) r.rank_step_time_s.emplace_back(times.begin() + i, times.begin() + i + w);
  if (H5Lexists(ranks.get(), "params_bytes", H5P_DEFAULT) > 0) {
    r.memory.params = read_list<int64_t>(ranks.get(), "params_bytes", path);
    r.memory.grads = read_list<int64_t>(ranks.get(), "grads_bytes", path);
    r.memory.optimizer = read_list<int64_t>(ranks.get(), "optimizer_bytes", path);
  }
  H5 summary = open_group(f, "summary", path);
  H5Aiterate2(summary.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attr, &r.summary);

  H5 ck = open_group(f, "checksums", path);
  auto ck_step = read_list<int64_t>(ck.get(), "step", path);
  auto ck_params = read_list<uint64_t>(ck.get(), "params", path);
  std::vector<uint64_t> ck_tensors;
  if (!r.params.empty()) ck_tensors = read_list<uint64_t>(ck.get(), "tensors", path);
  size_t nt = r.params.size();
  for (size_t i = 0; i < ck_step.size() && i < ck_params.size(); ++i) {
    ChecksumRow row{ck_step[i], ck_params[i], {}};
    if (nt && ck_tensors.size() >= (i + 1) * nt) row.tensors.assign(ck_tensors.begin() + i * nt, ck_tensors.begin() + (i + 1) * nt);
    r.checksums.push_back(std::move(row));
  }
  return r;
}

RecordStatus read_record_status(const std::string& path) {
  RecordStatus st;
  st.partial = !exists(path) && exists(path + kPartialSuffix);
  st.path = st.partial ? path + kPartialSuffix : path;
  if (!exists(st.path)) throw RecordError(path + ": no such record");
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  H5 file(H5Fopen(st.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  // A run still writing its partial holds HDF5's file lock, so this also covers "busy".
  if (!file) throw RecordError(st.path + ": cannot be opened (truncated, corrupt, or still being written)");
  st.run_id = read_str_attr(file.get(), "run_id");
  st.sweep_id = read_str_attr(file.get(), "sweep_id");
  st.status = read_str_attr(file.get(), "status");
  st.failure = read_str_attr(file.get(), "failure");
  return st;
}

bool mark_partial_failed(const std::string& path, const std::string& failure) {
  const std::string partial = path + kPartialSuffix;
  if (exists(path) || !exists(partial)) return false;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  H5 file(H5Fopen(partial.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  if (!file) return false;
  const std::string status = read_str_attr(file.get(), "status");
  if (status != "running" && status != "failed") return false;
  write_str_attr(file.get(), "status", "failed");
  write_str_attr(file.get(), "failure", failure);
  return H5Fflush(file.get(), H5F_SCOPE_GLOBAL) >= 0;
}

std::string hdf5_version() {
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  return std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel);
}

}  // namespace sweep
