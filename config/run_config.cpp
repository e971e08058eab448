#include "run_config.h"

#include <sys/stat.h>
#include <xxhash.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "model_schema.h"  // registered model kinds, canonical_real

namespace sweep {
namespace {

struct IntRange {
  int64_t min, max;
};
struct RealRange {
  double min, max;
  bool min_exclusive = false;
};
using Choices = std::vector<std::string>;
struct Text {
  size_t max_len;
};
/// model.kind of a registered kind: applied before the table is walked (it decides the
/// table), so visitors only list and spell it.
struct Kind {};

constexpr IntRange kVocab{2, 1 << 20}, kSeqLen{2, 1 << 20};

/// The one table of keys: every visitor (apply, list, flatten) walks it in this order.
/// The decoder's model keys come first as they always did, without model.kind, so its
/// canonical text and run ids are those of the time before other kinds; a registered
/// kind has model.kind, the shared vocab and seq_len, then its own keys.
template <class Visitor>
void visit_fields(RunConfig& c, Visitor&& v) {
  if (c.model.kind == kDecoderKind) {
    v("model.layers", c.model.layers, IntRange{1, 256});
    v("model.d_model", c.model.d_model, IntRange{8, 65536});
    v("model.heads", c.model.heads, IntRange{1, 1024});
    v("model.vocab", c.model.vocab, kVocab);
    v("model.seq_len", c.model.seq_len, kSeqLen);
    v("model.ffn_mult", c.model.ffn_mult, IntRange{1, 64});
    v("model.moe.experts", c.model.moe_experts, IntRange{0, 4096});
    v("model.moe.top_k", c.model.moe_top_k, IntRange{1, 64});
    v("model.moe.shared_experts", c.model.moe_shared_experts, IntRange{0, 64});
    v("model.moe.expert_hidden", c.model.moe_expert_hidden, IntRange{0, 1 << 20});
  } else {
    const ModelSchema* schema = find_model_schema(c.model.kind);
    if (!schema || schema->keys.size() != c.model.values.size())
      throw ConfigError("model.kind '" + printable(c.model.kind) + "' is not registered in this process");
    const std::vector<std::string>& keys = model_schema_keys(c.model.kind);
    v(keys[0].c_str(), c.model.kind, Kind{});
    v(keys[1].c_str(), c.model.vocab, kVocab);
    v(keys[2].c_str(), c.model.seq_len, kSeqLen);
    for (size_t i = 0; i < schema->keys.size(); ++i) v(keys[i + 3].c_str(), c.model.values[i].second, schema->keys[i]);
  }
  v("data.kind", c.data.kind, Choices{"synthetic", "tokens", "text", "hdf5", "program"});
  v("data.path", c.data.path, Text{4096});
  v("data.dataset", c.data.dataset, Text{1024});
  v("data.seed", c.data.seed, IntRange{0, INT64_MAX});
  v("data.branching", c.data.branching, IntRange{1, 1 << 20});
  // Each epoch's order is an int64 permutation of all samples: 2^28 of them is 2 GiB.
  v("data.samples", c.data.samples, IntRange{1, int64_t(1) << 28});
  v("data.workers", c.data.workers, IntRange{0, 64});
  v("train.steps", c.train.steps, IntRange{1, int64_t(1) << 40});
  v("train.micro_batch", c.train.micro_batch, IntRange{1, 1 << 20});
  v("train.accum", c.train.accum, IntRange{1, 1 << 20});
  v("train.lr", c.train.lr, RealRange{0, 10, true});
  v("train.schedule", c.train.schedule, Choices{"constant", "linear", "cosine"});
  v("train.warmup", c.train.warmup, IntRange{0, int64_t(1) << 40});
  v("train.min_lr", c.train.min_lr, RealRange{0, 10});
  v("train.beta1", c.train.beta1, RealRange{0, 0.999999});
  v("train.beta2", c.train.beta2, RealRange{0, 0.999999});
  v("train.eps", c.train.eps, RealRange{0, 1, true});
  v("train.weight_decay", c.train.weight_decay, RealRange{0, 10});
  v("train.clip_norm", c.train.clip_norm, RealRange{0, 1e9});
  v("train.on_nan", c.train.on_nan, Choices{"stop", "skip_step"});
  v("train.seed", c.train.seed, IntRange{0, INT64_MAX});
  v("train.threads", c.train.threads, IntRange{1, 1024});
  v("train.precision", c.train.precision, Choices{"fp32", "bf16", "fp16"});
  v("train.loss_scale_init", c.train.loss_scale_init, RealRange{1, 1e30});
  v("train.loss_scale_interval", c.train.loss_scale_interval, IntRange{1, int64_t(1) << 40});
  v("train.loss_scale_growth", c.train.loss_scale_growth, RealRange{1, 1024});
  v("train.loss_scale_backoff", c.train.loss_scale_backoff, RealRange{0, 1, true});
  v("train.log_every", c.train.log_every, IntRange{1, int64_t(1) << 40});
  v("train.checksum_every", c.train.checksum_every, IntRange{1, int64_t(1) << 40});
  v("train.checkpoint_every", c.train.checkpoint_every, IntRange{0, int64_t(1) << 40});
  v("train.keep_checkpoints", c.train.keep_checkpoints, IntRange{1, 1000000});
  v("dist.world_size", c.dist.world_size, IntRange{1, 1 << 20});
  v("dist.reduction", c.dist.reduction, Choices{"canonical", "native"});
  v("dist.zero_stage", c.dist.zero_stage, IntRange{0, 3});
  v("dist.find_unused", c.dist.find_unused, Choices{"zero", "error"});
  v("dist.timeout_s", c.dist.timeout_s, RealRange{0, 1e7});
  v("fault.inf_grad_step", c.fault.inf_grad_step, IntRange{0, int64_t(1) << 40});
  v("fault.desync_step", c.fault.desync_step, IntRange{0, int64_t(1) << 40});
  v("fault.desync_rank", c.fault.desync_rank, IntRange{0, 1 << 20});
  v("fault.kill_step", c.fault.kill_step, IntRange{0, int64_t(1) << 40});
  v("fault.kill_rank", c.fault.kill_rank, IntRange{0, 1 << 20});
  v("fault.hang_step", c.fault.hang_step, IntRange{0, int64_t(1) << 40});
  v("fault.hang_rank", c.fault.hang_rank, IntRange{0, 1 << 20});
  // Test-only, like every fault.* key: see FaultConfig.
  v("fault.nan_step", c.fault.nan_step, IntRange{0, int64_t(1) << 40});
  v("fault.slow_ms", c.fault.slow_ms, IntRange{0, 600000});
  v("fault.slow_rank", c.fault.slow_rank, IntRange{0, 1 << 20});
  v("fault.crash_in_checkpoint_step", c.fault.crash_in_checkpoint_step, IntRange{0, int64_t(1) << 40});
  v("fault.crash_in_record", c.fault.crash_in_record, IntRange{0, 1});
}

std::string format_int(int64_t x) { return std::to_string(x); }

/// Shortest text that reads back as the same double: "0.001", "1e-08", "3".
std::string format_real(double x) { return canonical_real(x); }

std::string at(const ConfigValue& v) { return v.where.empty() ? "" : v.where + ": "; }

[[noreturn]] void bad_value(const std::string& key, const ConfigValue& v, const std::string& expected) {
  throw ConfigError(at(v) + "key '" + printable(key) + "': expected " + expected + ", got '" + printable(v.text) + "'");
}

struct Applier {
  const FlatConfig& values;
  size_t used = 0;

  const ConfigValue* find(const char* key) {
    auto it = values.find(key);
    if (it == values.end()) return nullptr;
    ++used;
    if (!it->second.is_scalar) bad_value(key, it->second, "a single value, not a map or list");
    return &it->second;
  }
  static int64_t parse(const char* key, const ConfigValue& v, IntRange r) {
    const std::string& s = v.text;
    int64_t x = 0;
    auto res = std::from_chars(s.data(), s.data() + s.size(), x);
    std::string range = "an integer in [" + format_int(r.min) + ", " + format_int(r.max) + "]";
    if (s.empty() || res.ec != std::errc() || res.ptr != s.data() + s.size()) bad_value(key, v, range);
    if (x < r.min || x > r.max) bad_value(key, v, range);
    return x;
  }
  static double parse(const char* key, const ConfigValue& v, RealRange r) {
    const std::string& s = v.text;
    double x = 0;
    auto res = std::from_chars(s.data(), s.data() + s.size(), x);
    std::string range = std::string("a number in ") + (r.min_exclusive ? "(" : "[") + format_real(r.min) + ", " +
                        format_real(r.max) + "]";
    if (s.empty() || res.ec != std::errc() || res.ptr != s.data() + s.size() || !std::isfinite(x))
      bad_value(key, v, range);
    if (x < r.min || (r.min_exclusive && x == r.min) || x > r.max) bad_value(key, v, range);
    // -0 and 0 are the same setting; without this "-0" would get its own run id.
    return x == 0 ? 0.0 : x;
  }
  static const std::string& parse(const char* key, const ConfigValue& v, const Choices& choices) {
    if (std::find(choices.begin(), choices.end(), v.text) == choices.end())
      bad_value(key, v, "one of " + join(choices, " | "));
    return v.text;
  }
  void operator()(const char* key, int64_t& field, IntRange r) {
    if (const ConfigValue* v = find(key)) field = parse(key, *v, r);
  }
  void operator()(const char* key, double& field, RealRange r) {
    if (const ConfigValue* v = find(key)) field = parse(key, *v, r);
  }
  void operator()(const char* key, std::string& field, const Choices& choices) {
    if (const ConfigValue* v = find(key)) field = parse(key, *v, choices);
  }
  /// A registered kind's key: checked as a built-in key of its type, kept as canonical text.
  void operator()(const char* key, std::string& field, const ModelKey& k) {
    const ConfigValue* v = find(key);
    if (!v) return;
    switch (k.type) {
      case ModelKey::Type::integer:
        field = format_int(parse(key, *v, IntRange{k.int_min, k.int_max}));
        break;
      case ModelKey::Type::real:
        field = format_real(parse(key, *v, RealRange{k.real_min, k.real_max, k.min_exclusive}));
        break;
      case ModelKey::Type::choice:
        field = parse(key, *v, k.choices);
        break;
    }
  }
  void operator()(const char* key, std::string&, Kind) { (void)find(key); }  // applied before the walk
  void operator()(const char* key, std::string& field, Text t) {
    const ConfigValue* v = find(key);
    if (!v) return;
    if (v->text.size() > t.max_len) bad_value(key, *v, "at most " + std::to_string(t.max_len) + " characters");
    if (v->text.find('\0') != std::string::npos) bad_value(key, *v, "text without NUL characters");
    if (!valid_utf8(v->text)) bad_value(key, *v, "valid UTF-8 text");  // records store UTF-8 strings
    field = v->text;
  }
};

struct Lister {
  std::vector<std::string>* keys;
  template <class T, class S>
  void operator()(const char* key, T&, const S&) {
    keys->push_back(key);
  }
};

struct Flattener {
  std::vector<std::pair<std::string, std::string>>* out;
  void operator()(const char* key, int64_t& f, IntRange) { out->emplace_back(key, format_int(f)); }
  void operator()(const char* key, double& f, RealRange) { out->emplace_back(key, format_real(f)); }
  void operator()(const char* key, std::string& f, const Choices&) { out->emplace_back(key, f); }
  void operator()(const char* key, std::string& f, Text) { out->emplace_back(key, f); }
  void operator()(const char* key, std::string& f, const ModelKey&) { out->emplace_back(key, f); }
  void operator()(const char* key, std::string& f, Kind) { out->emplace_back(key, f); }
};

/// Double-quoted YAML scalar: any text (paths with ': ', '#', quotes) reads back unchanged.
std::string yaml_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += char(ch);
    } else if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    } else {
      out += char(ch);
    }
  }
  return out + "\"";
}

/// "file:line:col: " of the first of `keys` given in `values`, so a message about two
/// keys points at one of them.
std::string at_any(const FlatConfig& values, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = values.find(k);
    if (it != values.end()) return at(it->second);
  }
  return "";
}

std::string where_of(const std::string& source, const YAML::Node& n) {
  return source_location(source, n.Mark().line, n.Mark().column);
}

/// Nodes flatten_node may visit: far more than any real config has keys, but a bound,
/// because YAML aliases can nest one small mapping into exponentially many paths.
constexpr size_t kMaxConfigNodes = 10000;
/// Parts of the longest dotted key flattened; deeper mappings become one (unknown) key.
/// Run-config keys have at most 3 ("model.moe.experts"), and an alias can make a
/// mapping contain itself, which would otherwise recurse forever.
constexpr int kMaxKeyParts = 4;

void flatten_node(const YAML::Node& node, const std::string& prefix, const std::string& source, FlatConfig& out,
                  size_t& visited, int parts = 1) {
  for (const auto& kv : node) {
    std::string key = kv.first.Scalar();
    std::string full = prefix.empty() ? key : prefix + "." + key;
    const YAML::Node& v = kv.second;
    if (++visited > kMaxConfigNodes)
      throw ConfigError(where_of(source, kv.first) + ": more than " + std::to_string(kMaxConfigNodes) +
                        " keys and values; a run config has " + std::to_string(run_config_keys().size()) +
                        " (does a YAML alias repeat a mapping?)");
    // An empty value's mark is wherever the parser went next (often the next line), so
    // point at its key instead.
    auto m = v.IsNull() ? kv.first.Mark() : v.Mark();
    std::string where = source_location(source, m.line, m.column);
    if (v.IsMap() && parts < kMaxKeyParts) {
      flatten_node(v, full, source, out, visited, parts + 1);
    } else {
      ConfigValue cv;
      cv.where = where;
      cv.is_scalar = v.IsScalar() || v.IsNull();
      cv.text = v.IsScalar() ? v.Scalar() : "";
      if (!cv.is_scalar) cv.text = v.IsMap() ? "<map>" : "<list>";
      // yaml-cpp 0.7 keeps a mapping's repeated keys without a word: a repeated section
      // merges, a repeated key is an error here.
      if (!out.emplace(full, cv).second) throw ConfigError(where + ": key '" + printable(full) + "' is given twice");
    }
  }
}

}  // namespace

const std::vector<std::string>& run_config_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    RunConfig c;
    visit_fields(c, Lister{&k});
    return k;
  }();
  return keys;
}

namespace {

/// `m` becomes a model of `kind` with that kind's defaults for its own keys.
void select_kind(ModelConfig& m, const std::string& kind) {
  m.kind = kind;
  m.values.clear();
  if (const ModelSchema* s = find_model_schema(kind))
    for (const ModelKey& k : s->keys) m.values.emplace_back(k.name, k.default_value);
}

}  // namespace

const std::vector<std::string>& config_keys(const std::string& kind) {
  if (kind == kDecoderKind) return run_config_keys();
  static std::map<std::string, std::vector<std::string>> by_kind;  // kinds are registered at start-up
  auto it = by_kind.find(kind);
  if (it != by_kind.end()) return it->second;
  RunConfig c;
  select_kind(c.model, kind);
  std::vector<std::string> keys;
  visit_fields(c, Lister{&keys});  // throws for an unknown kind
  return by_kind.emplace(kind, std::move(keys)).first->second;
}

namespace {

/// Sets model.kind from `v`; another kind than base's starts from its own defaults.
void apply_kind(RunConfig& base, const ConfigValue& v) {
  if (!v.is_scalar) bad_value("model.kind", v, "a single value, not a map or list");
  if (v.text == base.model.kind) return;
  const std::vector<std::string> kinds = model_kinds();
  if (std::find(kinds.begin(), kinds.end(), v.text) == kinds.end())
    throw ConfigError(at(v) + "key 'model.kind': unknown model kind '" + printable(v.text) + "'" +
                      did_you_mean(v.text, kinds) + "; registered kinds: " + join(kinds) +
                      (kinds.size() == 1 ? " (a model of your own: name the program that registers it with "
                                           "launch.trainer or --trainer)"
                                         : ""));
  select_kind(base.model, v.text);
}

}  // namespace

RunConfig apply_run_values(RunConfig base, const FlatConfig& values) {
  if (auto it = values.find("model.kind"); it != values.end()) apply_kind(base, it->second);
  const auto& keys = config_keys(base.model.kind);
  for (const auto& [key, v] : values) {
    if (std::find(keys.begin(), keys.end(), key) != keys.end() || key == "model.kind") continue;
    std::string msg = at(v) + "unknown key '" + printable(key) + "'";
    if (base.model.kind != kDecoderKind && key.rfind("model.", 0) == 0) msg += " for model.kind " + base.model.kind;
    throw ConfigError(msg + did_you_mean(key, keys));
  }
  visit_fields(base, Applier{values});
  return base;
}

namespace {

/// Each rank holds the whole fp32 parameter vector and its gradient, and a micro-batch its
/// logits and attention scores: past 2^34 elements (64 GiB) any of them is not a run
/// this trainer can hold, however the ranges of the single keys allow it.
void check_sizes(const RunConfig& c, const FlatConfig& values) {
  const double limit = double(int64_t(1) << 34), d = double(c.model.d_model);
  const double ffn = double(c.model.ffn_mult) * d * 2 / 3;
  const double eh = c.model.moe_expert_hidden > 0 ? double(c.model.moe_expert_hidden)
                                                  : ffn / double(c.model.moe_top_k + c.model.moe_shared_experts);
  const double mlp = c.model.moe_experts > 0 ? 3 * d * eh * double(c.model.moe_experts + c.model.moe_shared_experts) +
                                                   d * double(c.model.moe_experts)
                                             : 3 * d * ffn;
  const double params = 2 * double(c.model.vocab) * d + double(c.model.layers) * (4 * d * d + mlp);
  const double B = double(c.train.micro_batch), L = double(c.model.seq_len);
  const auto fail = [&](std::initializer_list<const char*> keys, const std::string& what, double n) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", n);
    throw ConfigError(at_any(values, keys) + "key '" + *keys.begin() + "': " + what + " would be " + buf +
                      ", more than 2^34; this is not a run one rank can hold");
  };
  // A registered kind's sizes are its own business: only the decoder's are known here.
  const bool decoder = c.model.kind == kDecoderKind;
  if (decoder && params > limit)
    fail({"model.d_model", "model.layers", "model.vocab", "model.moe.experts"}, "the parameter count", params);
  if (decoder && B * L * double(c.model.vocab) > limit)
    fail({"train.micro_batch", "model.seq_len", "model.vocab"},
         "one micro-batch's logits (micro_batch x seq_len x vocab)", B * L * double(c.model.vocab));
  if (decoder && B * double(c.model.heads) * L * L > limit)
    fail({"model.seq_len", "train.micro_batch", "model.heads"},
         "one micro-batch's attention scores (micro_batch x heads x seq_len^2)", B * double(c.model.heads) * L * L);
  // Token counts are int64 products in the trainer; 2^40 per step also keeps them exact.
  const double tokens = double(c.dist.world_size) * double(c.train.accum) * B * L;
  if (tokens > double(int64_t(1) << 40))
    throw ConfigError(
        at_any(values, {"train.accum", "dist.world_size", "train.micro_batch"}) +
        "key 'train.accum': a step of world_size x accum x micro_batch x seq_len tokens would be more than 2^40");
}

}  // namespace

void check_run_config(const RunConfig& c, const FlatConfig& values) {
  const bool decoder = c.model.kind == kDecoderKind;
  if (decoder && c.model.d_model % c.model.heads != 0)
    throw ConfigError(at_any(values, {"model.heads", "model.d_model"}) +
                      "key 'model.heads': must divide model.d_model (" + format_int(c.model.d_model) + "), got " +
                      format_int(c.model.heads));
  if (decoder && (c.model.d_model / c.model.heads) % 2 != 0)
    throw ConfigError(at_any(values, {"model.heads", "model.d_model"}) +
                      "key 'model.heads': model.d_model / model.heads must be even for rotary positions, got " +
                      format_int(c.model.d_model / c.model.heads));
  if (c.data.branching > c.model.vocab)
    throw ConfigError(at_any(values, {"data.branching", "model.vocab"}) +
                      "key 'data.branching': must be <= model.vocab (" + format_int(c.model.vocab) + ")");
  if (c.train.warmup > c.train.steps)
    throw ConfigError(at_any(values, {"train.warmup", "train.steps"}) + "key 'train.warmup': must be <= train.steps (" +
                      format_int(c.train.steps) + ")");
  if (c.train.min_lr > c.train.lr)
    throw ConfigError(at_any(values, {"train.min_lr", "train.lr"}) + "key 'train.min_lr': must be <= train.lr");
  if (c.dist.zero_stage == 3 && c.dist.world_size < 2)
    throw ConfigError(at_any(values, {"dist.zero_stage", "dist.world_size"}) +
                      "key 'dist.zero_stage': stage 3 shards parameters and needs dist.world_size >= 2");
  if (c.data.kind != "synthetic" && c.data.kind != "program" && c.data.path.empty())
    throw ConfigError(at_any(values, {"data.path", "data.kind"}) + "key 'data.path': required when data.kind is " +
                      c.data.kind);
  if (c.data.kind == "text" && c.model.vocab < 256)
    throw ConfigError(at_any(values, {"model.vocab", "data.kind"}) +
                      "key 'model.vocab': data.kind text needs vocab >= 256 (one token per byte), got " +
                      format_int(c.model.vocab));
  if (decoder && c.model.moe_experts > 0 && c.model.moe_top_k > c.model.moe_experts)
    throw ConfigError(at_any(values, {"model.moe.top_k", "model.moe.experts"}) +
                      "key 'model.moe.top_k': must be <= model.moe.experts (" + format_int(c.model.moe_experts) + ")");
  check_sizes(c, values);
  const int64_t crash = c.fault.crash_in_checkpoint_step;
  if (crash > 0 && (c.train.checkpoint_every == 0 || crash % c.train.checkpoint_every != 0 || crash >= c.train.steps))
    throw ConfigError(at_any(values, {"fault.crash_in_checkpoint_step"}) +
                      "key 'fault.crash_in_checkpoint_step': must be a step that writes a checkpoint (a multiple of "
                      "train.checkpoint_every, before train.steps)");
}

RunConfig apply_run_config(RunConfig base, const FlatConfig& values) {
  base = apply_run_values(std::move(base), values);
  check_run_config(base, values);
  return base;
}

FlatConfig flatten_yaml(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source_location(source, e.mark.line, e.mark.column) + ": invalid YAML: " + e.msg);
  }
  if (root.IsNull()) return {};
  if (!root.IsMap()) throw ConfigError(source + ": expected a mapping of config sections at the top level");
  return flatten_yaml_node(root, source);
}

FlatConfig flatten_yaml_node(const YAML::Node& map, const std::string& source) {
  FlatConfig out;
  size_t visited = 0;
  flatten_node(map, "", source, out, visited);
  return out;
}

RunConfig load_run_config(const std::string& path) {
  // Look before opening: a FIFO would block the open, a directory would read as empty.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw ConfigError(path + ": cannot open the run config file: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw ConfigError(path + ": is a directory, expected a run config file (YAML)");
  if (!S_ISREG(st.st_mode)) throw ConfigError(path + ": not a regular file, expected a run config file (YAML)");
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open the run config file: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) throw ConfigError(path + ": cannot read the run config file");
  // An empty file is a mistake (a truncated copy, the wrong path), not "all defaults":
  // an explicit `{}` asks for those.
  if (YAML::Node root =
          [&] {
            try {
              return YAML::Load(ss.str());
            } catch (const YAML::Exception&) {
              return YAML::Node(YAML::NodeType::Map);  // flatten_yaml reports the syntax error with its line
            }
          }();
      root.IsNull())
    throw ConfigError(path +
                      ": the run config is empty; expected a mapping with sections model, data, train, dist "
                      "(write {} for all defaults)");
  return apply_run_config(RunConfig{}, flatten_yaml(ss.str(), path));
}

std::vector<std::pair<std::string, std::string>> to_flat(const RunConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  RunConfig copy = c;
  visit_fields(copy, Flattener{&out});
  return out;
}

std::string to_yaml(const RunConfig& c) {
  // Keys come grouped by section in canonical order; within a section, keys with a
  // further dot ("moe.experts") are written as flow-free nested maps. Text fields are
  // always double-quoted so any path reads back unchanged.
  static const std::vector<std::string> text_keys = [] {
    std::vector<std::string> k;
    RunConfig probe;
    visit_fields(probe, [&](const char* key, auto&, const auto& spec) {
      if constexpr (std::is_same_v<std::decay_t<decltype(spec)>, Text>) k.push_back(key);
    });
    return k;
  }();
  std::string out, section, sub;
  for (const auto& [key, raw] : to_flat(c)) {
    bool text = std::find(text_keys.begin(), text_keys.end(), key) != text_keys.end();
    std::string value = text ? yaml_quote(raw) : raw;
    auto dot = key.find('.');
    std::string sec = key.substr(0, dot), rest = key.substr(dot + 1);
    if (sec != section) out += sec + ":\n", section = sec, sub.clear();
    auto dot2 = rest.find('.');
    if (dot2 == std::string::npos) {
      sub.clear();
      out += "  " + rest + ": " + value + "\n";
    } else {
      std::string s = rest.substr(0, dot2);
      if (s != sub) out += "  " + s + ":\n", sub = s;
      out += "    " + rest.substr(dot2 + 1) + ": " + value + "\n";
    }
  }
  return out;
}

std::string math_id(const RunConfig& c) {
  RunConfig m = c;
  const RunConfig defaults;
  m.train.accum = c.dist.world_size * c.train.accum;
  m.dist.world_size = 1;
  m.dist.zero_stage = 0;
  m.dist.timeout_s = defaults.dist.timeout_s;
  m.data.workers = 0;
  m.train.log_every = defaults.train.log_every;
  m.train.checksum_every = defaults.train.checksum_every;
  m.train.checkpoint_every = defaults.train.checkpoint_every;
  m.train.keep_checkpoints = defaults.train.keep_checkpoints;
  m.fault.kill_step = 0, m.fault.kill_rank = 0, m.fault.hang_step = 0, m.fault.hang_rank = 0;
  m.fault.slow_ms = 0, m.fault.slow_rank = 0, m.fault.crash_in_checkpoint_step = 0, m.fault.crash_in_record = 0;
  return run_id(m);
}

std::string run_id(const RunConfig& c) {
  std::string text = to_yaml(c);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(XXH3_64bits(text.data(), text.size())));
  return buf;
}

}  // namespace sweep
