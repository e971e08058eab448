#include "export_tensorboard.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "run_status.h"        // status_is
#include "telemetry_series.h"  // expert_load_at

namespace sweep {
namespace {

// ---------------------------------------------------------------- protobuf wire format

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) out.push_back(char(uint8_t(v) | 0x80)), v >>= 7;
  out.push_back(char(v));
}
void tag(std::string& out, int field, int wire) { varint(out, uint64_t(field) << 3 | uint64_t(wire)); }
void put_int(std::string& out, int field, int64_t v) { tag(out, field, 0), varint(out, uint64_t(v)); }
void put_double(std::string& out, int field, double v) {
  tag(out, field, 1);
  char b[8];
  std::memcpy(b, &v, 8);  // little-endian hosts only (x86-64, aarch64)
  out.append(b, 8);
}
void put_float(std::string& out, int field, float v) {
  tag(out, field, 5);
  char b[4];
  std::memcpy(b, &v, 4);
  out.append(b, 4);
}
void put_bytes(std::string& out, int field, const std::string& v) {
  tag(out, field, 2), varint(out, v.size());
  out += v;
}

// ------------------------------------------------------------------ messages

/// google.protobuf.Value: a number or a string.
std::string proto_value(const std::string& text) {
  std::string v;
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (!text.empty() && *end == '\0' && std::isfinite(x))
    put_double(v, 2, x);
  else
    put_bytes(v, 3, text);
  return v;
}

/// A Summary.Value carrying HParams plugin data (tag, metadata{plugin_data{name, content}}).
std::string hparams_value(const std::string& tag_name, const std::string& plugin_data) {
  std::string pd, meta, value;
  put_bytes(pd, 1, "hparams");
  put_bytes(pd, 2, plugin_data);
  put_bytes(meta, 1, pd);
  put_bytes(value, 1, tag_name);
  put_bytes(value, 9, meta);
  return value;
}

/// An Event holding one summary of the given Summary.Value messages.
std::string summary_event(double wall_time, int64_t step, const std::vector<std::string>& values) {
  std::string summary, event;
  for (const auto& v : values) put_bytes(summary, 1, v);
  put_double(event, 1, wall_time);
  put_int(event, 2, step);
  put_bytes(event, 5, summary);
  return event;
}

std::string scalar(const std::string& tag_name, double v) {
  std::string value;
  put_bytes(value, 1, tag_name);
  put_float(value, 2, float(v));
  return value;
}

/// A histogram Summary.Value (HistogramProto) of expert indices weighted by the tokens each
/// received: one bucket per expert (right edge e + 0.5), so TensorBoard draws the load.
std::string expert_histogram(const std::string& tag_name, const std::vector<double>& tokens) {
  double num = 0, sum = 0, squares = 0;
  int64_t lo = -1, hi = -1;
  for (size_t e = 0; e < tokens.size(); ++e) {
    num += tokens[e], sum += double(e) * tokens[e], squares += double(e) * double(e) * tokens[e];
    if (tokens[e] > 0) hi = int64_t(e), lo = lo < 0 ? int64_t(e) : lo;
  }
  std::string histo, limits, counts;
  put_double(histo, 1, double(std::max<int64_t>(lo, 0)));
  put_double(histo, 2, double(std::max<int64_t>(hi, 0)));
  put_double(histo, 3, num);
  put_double(histo, 4, sum);
  put_double(histo, 5, squares);
  for (size_t e = 0; e < tokens.size(); ++e) {
    const double edge = double(e) + 0.5;
    char b[8];
    std::memcpy(b, &edge, 8);
    limits.append(b, 8);
    std::memcpy(b, &tokens[e], 8);
    counts.append(b, 8);
  }
  put_bytes(histo, 6, limits);  // packed repeated double
  put_bytes(histo, 7, counts);
  std::string value;
  put_bytes(value, 1, tag_name);
  put_bytes(value, 5, histo);
  return value;
}

/// The telemetry scalars of step i of `r` (each rank's own gradient norm) and, when the
/// step has a /telemetry row (the next, `*row`), its tensor norms, each MoE layer's load
/// max/mean and entropy, and its tokens per expert as a histogram.
void telemetry_values(const Record& r, size_t i, size_t* row, std::vector<std::string>& values) {
  if (i < r.rank_grad_norm.size())
    for (size_t k = 0; k < r.rank_grad_norm[i].size(); ++k)
      values.push_back(scalar("telemetry/rank_grad_norm/rank_" + std::to_string(k), r.rank_grad_norm[i][k]));
  for (; *row < r.telemetry.size() && r.telemetry[*row].step <= r.steps[i].step; ++*row) {
    const TelemetryRow& t = r.telemetry[*row];
    if (t.step != r.steps[i].step) continue;  // (a row without its step: no event to carry it)
    for (size_t p = 0; p < t.tensor_grad_norm.size() && p < r.params.size(); ++p)
      values.push_back(scalar("telemetry/tensor_grad_norm/" + r.params[p].name, t.tensor_grad_norm[p]));
    if (t.routed_tokens.empty()) continue;
    for (int64_t l = 0; l < r.moe_layers; ++l) {
      const std::string layer = "layer_" + std::to_string(l);
      const ExpertLoad load = expert_load_at(r, *row, l);
      values.push_back(scalar("telemetry/expert_load/" + layer, load.max_over_mean));
      values.push_back(scalar("telemetry/routing_entropy/" + layer, load.entropy));
      std::vector<double> tokens;
      for (int64_t e = 0; e < r.moe_experts && size_t(l * r.moe_experts + e) < t.routed_tokens.size(); ++e)
        tokens.push_back(double(t.routed_tokens[size_t(l * r.moe_experts + e)]));
      values.push_back(expert_histogram("telemetry/routed_tokens/" + layer, tokens));
    }
  }
}

/// One TFRecord frame.
void frame(std::string& out, const std::string& data) {
  std::string len(8, '\0');
  const uint64_t n = data.size();
  std::memcpy(len.data(), &n, 8);
  auto u32 = [&](uint32_t c) {
    char b[4];
    std::memcpy(b, &c, 4);
    out.append(b, 4);
  };
  out += len;
  u32(masked_crc32c(len));
  out += data;
  u32(masked_crc32c(data));
}

bool numeric(const std::string& s) {
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  return !s.empty() && *end == '\0' && std::isfinite(x);
}

double mtime_s(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return double(st.st_mtim.tv_sec) + 1e-9 * double(st.st_mtim.tv_nsec);
}

constexpr const char* kEventFile = "events.out.tfevents.0.sweep";

/// An event file's first event: its wall time and file version.
std::string event_header(double wall_time) {
  std::string e;
  put_double(e, 1, wall_time);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

/// The experiment of the hparams plugin: every varying key and its domain, and the two
/// metrics.
std::string experiment_info(const SweepRecords& sweep, const std::vector<std::string>& keys) {
  std::string experiment;
  for (const auto& k : keys) {
    std::set<std::string> values;
    bool all_numbers = true;
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& r : sweep.runs) {
      const std::string v = report_value(r, k);
      values.insert(v);
      all_numbers &= numeric(v);
      if (numeric(v))
        lo = std::min(lo, std::strtod(v.c_str(), nullptr)), hi = std::max(hi, std::strtod(v.c_str(), nullptr));
    }
    std::string info;
    put_bytes(info, 1, k);
    put_int(info, 4, all_numbers ? 3 : 1);  // DATA_TYPE_FLOAT64 : DATA_TYPE_STRING
    if (all_numbers) {
      std::string interval;
      put_double(interval, 1, lo);
      put_double(interval, 2, hi);
      put_bytes(info, 6, interval);
    } else {
      std::string list;  // google.protobuf.ListValue: repeated Value values = 1
      for (const auto& v : values) {
        std::string value;
        put_bytes(value, 3, v);
        put_bytes(list, 1, value);
      }
      put_bytes(info, 5, list);
    }
    put_bytes(experiment, 4, info);
  }
  for (const auto& [name, dataset] : std::vector<std::pair<std::string, int>>{{"train/loss", 1}, {"eval/loss", 2}}) {
    std::string metric_name, metric;
    put_bytes(metric_name, 2, name);
    put_bytes(metric, 1, metric_name);
    put_int(metric, 5, dataset);
    put_bytes(experiment, 5, metric);
  }
  return experiment;
}

/// One run's event file, named by its run directory: its session's values, its steps and
/// evaluations in step order (each at the time it ended), its telemetry, its end.
std::pair<std::string, std::string> run_events(const Record& r, const std::vector<std::string>& keys) {
  double total = 0;
  for (const auto& s : r.steps) total += s.step_time_s;
  for (const auto& e : r.evals) total += e.time_s;
  const double end = mtime_s(r.path), start = end - total;
  std::string out;
  frame(out, event_header(start));
  // The session: its values, grouped with the runs that differ only in train.seed.
  std::string start_info, group;
  for (const auto& k : keys) {
    const std::string v = report_value(r, k);
    std::string entry;
    put_bytes(entry, 1, k);
    put_bytes(entry, 2, proto_value(v));
    put_bytes(start_info, 1, entry);
    if (k != "train.seed") group += (group.empty() ? "" : " ") + k + "=" + v;
  }
  put_bytes(start_info, 4, group.empty() ? "(base)" : group);
  put_double(start_info, 5, start);
  std::string start_data;
  put_int(start_data, 1, 0);
  put_bytes(start_data, 3, start_info);
  frame(out, summary_event(start, 0, {hparams_value("_hparams_/session_start_info", start_data)}));
  // Steps and evaluations in step order, each at the time it ended.
  double t = start;
  size_t e = 0, row = 0;  // the next evaluation and /telemetry row
  auto evals_through = [&](int64_t step) {
    for (; e < r.evals.size() && r.evals[e].step <= step; ++e) {
      t += r.evals[e].time_s;
      std::vector<std::string> values = {scalar("eval/loss", r.evals[e].loss)};
      for (const auto& [name, column] : r.eval_extra)  // a program's own figures
        if (!std::isnan(column[e])) values.push_back(scalar("eval/" + name, column[e]));
      frame(out, summary_event(t, r.evals[e].step, values));
    }
  };
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const StepMetrics& s = r.steps[i];
    t += s.step_time_s;
    std::vector<std::string> values = {scalar("train/loss", s.loss),
                                       scalar("train/lr", s.lr),
                                       scalar("train/grad_norm", s.grad_norm),
                                       scalar("train/clip_coef", s.clip_coef),
                                       scalar("train/loss_scale", s.loss_scale),
                                       scalar("train/step_time_s", s.step_time_s),
                                       scalar("train/tokens_per_s", s.tokens_per_s)};
    for (const auto& [name, column] : r.step_extra)
      if (!std::isnan(column[i])) values.push_back(scalar("train/" + name, column[i]));
    telemetry_values(r, i, &row, values);
    frame(out, summary_event(t, s.step, values));
    evals_through(s.step);
  }
  evals_through(INT64_MAX);
  const double ended = std::max(end, t);  // the sums of step times may round past the file's time
  std::string end_info, end_data;
  put_int(end_info, 1, status_is(r.status, RunStatus::completed) ? 1 : 2);  // STATUS_SUCCESS : STATUS_FAILURE
  put_double(end_info, 2, ended);
  put_int(end_data, 1, 0);
  put_bytes(end_data, 4, end_info);
  frame(out, summary_event(ended, r.steps.empty() ? 0 : r.steps.back().step,
                           {hparams_value("_hparams_/session_end_info", end_data)}));
  // Named by its run directory (a program's record could hold any run_id text).
  std::string dir = r.path;
  dir = dir.substr(0, dir.rfind('/'));
  return {dir.substr(dir.rfind('/') + 1) + "/" + kEventFile, out};
}

}  // namespace

uint32_t crc32c(const std::string& data) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xffffffffu;
  for (unsigned char b : data) c = table[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t masked_crc32c(const std::string& data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::vector<std::pair<std::string, std::string>> render_tensorboard(const SweepRecords& sweep) {
  std::vector<std::pair<std::string, std::string>> files;
  files.emplace_back(kTensorboardMarker,
                     "TensorBoard event files written by `sweep export --format tensorboard`; "
                     "`sweep export` replaces them when run again.\n");
  const std::vector<std::string> keys = varying_keys(sweep.runs);

  const std::string experiment = experiment_info(sweep, keys);
  {
    std::string plugin_data, top;
    put_int(plugin_data, 1, 0);
    put_bytes(plugin_data, 2, experiment);
    frame(top, event_header(0));
    frame(top, summary_event(0, 0, {hparams_value("_hparams_/experiment", plugin_data)}));
    files.emplace_back(kEventFile, top);
  }

  for (const Record& r : sweep.runs) files.push_back(run_events(r, keys));
  return files;
}

}  // namespace sweep
