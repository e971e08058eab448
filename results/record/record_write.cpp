// The record's writer: RecordWriter (a partial file made whole and renamed on finish) and
// mark_partial_failed, which a driver uses on a run that ended without finishing its record.
#include "record.h"
#include "record_hdf5.h"
#include "run_status.h"  // status_is

namespace sweep {

using namespace record_hdf5;  // this library's own helpers (record_hdf5.h)

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
  if ((status_is(status, RunStatus::completed) || status_is(status, RunStatus::diverged)) && m.health_judge &&
      back.summary.count("health") == 0) {
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
  if (!status_is(status, RunStatus::running) && !status_is(status, RunStatus::failed)) return false;
  write_str_attr(file.get(), "status", "failed");
  write_str_attr(file.get(), "failure", failure);
  if (hang) write_hang(file.get(), *hang);
  return H5Fflush(file.get(), H5F_SCOPE_GLOBAL) >= 0;
}

}  // namespace sweep
