// The HDF5 helpers of the record's writer (record_write.cpp) and reader
// (record_read.cpp): identifiers that close themselves, attributes, string and number
// lists, extendible columns, and the reads that turn HDF5 errors into RecordError. Internal
// to results/record/: nothing outside it includes this header.
#pragma once

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

namespace sweep::record_hdf5 {

// HDF5 1.10 closes every file still open when the process exits; a file whose close
// failed (a full disk) is still open, and that pass then crashes inside H5F__close_cb,
// turning a clean "No space left on device" into a segfault. Every file here is closed
// explicitly, so the pass is not needed. It must be turned off before HDF5 starts up,
// hence a static initializer.
/// The ballast of a record being written (RecordWriter::Impl::reserve).
inline constexpr off_t kReserveBytes = 256 << 10;

inline const bool kNoHdf5AtExit = [] {
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
inline bool exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

/// Opens a record file read-only without taking HDF5's file lock. Readers never lock: a
/// shared lock held by `sweep report` or `sweep status` at the moment the writer reopens
/// its partial file to finish it would make that reopen fail and lose the run. (A
/// completed record never changes; a partial one is read as of its last flush.)
inline H5 open_for_reading(const std::string& path, bool chunk_cache = true) {
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
inline H5 reopen_for_writing(const std::string& path, std::chrono::milliseconds patience = std::chrono::seconds(10)) {
  const auto until = std::chrono::steady_clock::now() + patience;
  for (;;) {
    H5 f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    if (f || !exists(path) || std::chrono::steady_clock::now() >= until) return f;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// Throws when `rc` says an HDF5 call failed, with the errno text of the I/O error
/// behind it when there is one (callers clear errno first).
inline void check(herr_t rc, const std::string& path, const char* what) {
  if (rc < 0)
    throw RecordError(path + ": HDF5 failed to " + what +
                      (errno ? std::string(" (") + std::strerror(errno) + ")" : ""));
}

inline H5 str_type() {
  H5 t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

inline void write_str_attr(hid_t obj, const char* name, const std::string& value) {
  H5 t = str_type();
  H5 space(H5Screate(H5S_SCALAR), H5Sclose);
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  H5 a(H5Acreate2(obj, name, t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const char* p = value.c_str();
  H5Awrite(a.get(), t.get(), &p);
}

inline void write_i64_attr(hid_t obj, const char* name, int64_t value) {
  H5 space(H5Screate(H5S_SCALAR), H5Sclose);
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  H5 a(H5Acreate2(obj, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  H5Awrite(a.get(), H5T_NATIVE_INT64, &value);
}

// Raises the record's schema_version to `version`, never lowers it: a program's first own
// figure (4) can come after its first telemetry row (5).
inline void raise_schema_version(hid_t file, int64_t version) {
  int64_t now = 0;
  if (H5Aexists(file, "schema_version") > 0) {
    H5 a(H5Aopen(file, "schema_version", H5P_DEFAULT), H5Aclose);
    if (H5Aread(a.get(), H5T_NATIVE_INT64, &now) < 0) now = 0;
  }
  if (version > now) write_i64_attr(file, "schema_version", version);
}

inline void write_str_scalar(hid_t parent, const char* name, const std::string& value) {
  H5 t = str_type();
  H5 space(H5Screate(H5S_SCALAR), H5Sclose);
  H5 d(H5Dcreate2(parent, name, t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  const char* p = value.c_str();
  H5Dwrite(d.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p);
}

inline void write_str_list(hid_t parent, const char* name, const std::vector<std::string>& values) {
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
inline hid_t native_type();
template <>
inline hid_t native_type<double>() {
  return H5T_NATIVE_DOUBLE;
}
template <>
inline hid_t native_type<int64_t>() {
  return H5T_NATIVE_INT64;
}
template <>
inline hid_t native_type<uint64_t>() {
  return H5T_NATIVE_UINT64;
}

template <class T>
inline hid_t file_type();
template <>
inline hid_t file_type<double>() {
  return H5T_IEEE_F64LE;
}
template <>
inline hid_t file_type<int64_t>() {
  return H5T_STD_I64LE;
}
template <>
inline hid_t file_type<uint64_t>() {
  return H5T_STD_U64LE;
}

template <class T>
inline void write_fixed_list(hid_t parent, const char* name, const std::vector<T>& values) {
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

inline std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

inline std::vector<int64_t> parse_shape(const std::string& s) {
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

inline std::string read_str_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return "";
  H5 a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  H5 t = str_type();
  char* p = nullptr;
  if (H5Aread(a.get(), t.get(), &p) < 0 || !p) return "";
  std::string s(p);
  H5free_memory(p);
  return s;
}

inline hsize_t extent(hid_t d, int dim = 0) {
  H5 s(H5Dget_space(d), H5Sclose);
  hsize_t dims[2] = {0, 0};
  H5Sget_simple_extent_dims(s.get(), dims, nullptr);
  return dims[dim];
}

inline H5 open_dataset(hid_t parent, const char* name, const std::string& path) {
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
inline std::vector<T> read_list(hid_t parent, const char* name, const std::string& path) {
  H5 d = open_dataset(parent, name, path);
  H5 s(H5Dget_space(d.get()), H5Sclose);
  std::vector<T> out(H5Sget_simple_extent_npoints(s.get()));
  if (!out.empty()) check(H5Dread(d.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), path, name);
  return out;
}

inline std::vector<std::string> read_str_list(hid_t parent, const char* name, const std::string& path) {
  H5 d = open_dataset(parent, name, path);
  H5 t = str_type();
  std::vector<char*> ptrs(extent(d.get()));
  std::vector<std::string> out;
  if (ptrs.empty()) return out;
  check(H5Dread(d.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), path, name);
  for (char* p : ptrs) out.emplace_back(p ? p : ""), H5free_memory(p);
  return out;
}

inline std::string read_str_scalar(hid_t parent, const char* name, const std::string& path) {
  H5 d = open_dataset(parent, name, path);
  H5 t = str_type();
  char* p = nullptr;
  check(H5Dread(d.get(), t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p), path, name);
  std::string s(p ? p : "");
  H5free_memory(p);
  return s;
}

inline H5 open_group(hid_t f, const char* name, const std::string& path) {
  H5 g(H5Gopen2(f, name, H5P_DEFAULT), H5Gclose);
  if (!g) throw RecordError(path + ": group '/" + name + "' is missing; the record is damaged");
  return g;
}

inline herr_t collect_link_name(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

inline herr_t collect_attr(hid_t loc, const char* name, const H5A_info_t*, void* out) {
  (*static_cast<std::map<std::string, std::string>*>(out))[name] = read_str_attr(loc, name);
  return 0;
}

}  // namespace sweep::record_hdf5

/// The double-valued metric columns, declared once for the writer and the reader.
#define SWEEP_DOUBLE_METRICS(X) \
  X(loss) X(lr) X(grad_norm) X(clip_coef) X(loss_scale) X(step_time_s) X(tokens_per_s) X(record_time_s)
#define SWEEP_INT_METRICS(X) X(step) X(skipped) X(tokens) X(unused_params)
