// The record's reader: every group of a record, checked as it is read and hashed in the
// order results/SCHEMA.md ("Integrity") gives, and the quick reads of its status and of a
// partial record's progress.
#include "record.h"
#include "record_hdf5.h"

namespace sweep {

using namespace record_hdf5;  // this library's own helpers (record_hdf5.h)

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

/// The file's attributes: schema version (refused past this reader's), ids, status, world
/// size and lineage.
void read_identity(hid_t f, const std::string& path, Record& r, Digest& d) {
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
}

/// /config, /environment and the parameter table /params.
void read_config_and_params(hid_t f, const std::string& path, Record& r, Digest& d) {
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
}

/// The step metrics, each rank's step times and memory, /summary and /checksums.
void read_steps_and_ranks(hid_t f, const std::string& path, Record& r, Digest& d) {
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
}

/// Version 3: held-out evaluations; version 4: a program's own figures.
void read_evals_and_program_figures(hid_t f, const std::string& path, Record& r, Digest& d) {
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
}

/// Version 5: each rank's gradient norm and the gradient telemetry.
void read_telemetry(hid_t f, const std::string& path, Record& r, Digest& d) {
  H5 ranks = open_group(f, "ranks", path);
  const size_t w = size_t(std::max<int64_t>(1, r.world_size));
  // Hashed only when present. A row of NaN stands for a step that gave no rank norms.
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
}

/// Reads the record at `path` whatever its name; `digest` gets its contents' digest.
Record read_record_file(const std::string& path, std::string* digest) {
  if (std::string why = regular_file_problem(path); !why.empty()) throw RecordError(path + ": " + why);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  H5 file = open_for_reading(path, /*chunk_cache=*/false);
  if (!file)
    throw RecordError(path + ": not a readable HDF5 file (truncated or corrupt); re-run the point to replace it");
  const hid_t f = file.get();
  Record r;
  r.path = path;
  Digest d;  // each part hashes what it reads, in the order of results/SCHEMA.md
  read_identity(f, path, r, d);
  read_config_and_params(f, path, r, d);
  read_steps_and_ranks(f, path, r, d);
  read_evals_and_program_figures(f, path, r, d);
  read_telemetry(f, path, r, d);
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

std::string hdf5_version() {
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  return std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel);
}

}  // namespace sweep
