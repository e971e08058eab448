// Expanding a SweepSpec into points. Built to plan 100,000 points in well under a
// second: every axis value is resolved once, points are formed incrementally (only the
// dimensions that changed are re-applied), and the run id is hashed from the canonical
// pieces of the base with the swept keys' pieces substituted, which is byte for byte
// what to_yaml() writes (each piece depends on its own key only). A point with a key
// that has no effect (reset_idle_keys) or a train.min_lr_ratio (min_lr follows lr) is
// hashed from its whole to_yaml() instead.
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <new>
#include <set>
#include <unordered_set>

#include "grid.h"
#include "halving_plan.h"  // check_halving
#include "pbt_plan.h"      // check_pbt

namespace sweep {
namespace {

/// Most points a product may have before anything is formed (memory, not policy).
constexpr double kMaxPoints = 20e6;

/// canonical_pieces(c) of the base, with the piece of every key.
class CanonicalLines {
 public:
  explicit CanonicalLines(const RunConfig& base) : lines_(canonical_pieces(base)) {
    const auto& keys = config_keys(base.model.kind);
    for (size_t i = 0; i < keys.size(); ++i) index_[keys[i]] = i;
  }
  /// False for an input-only key (train.min_lr_ratio): it has no piece of its own.
  bool has(const std::string& key) const { return index_.count(key) != 0; }
  size_t line_of(const std::string& key) const { return index_.at(key); }
  size_t size() const { return lines_.size(); }
  const std::string& base_line(size_t i) const { return lines_[i]; }
  /// The piece of `key` in the canonical text of `c`.
  std::string line(const RunConfig& c, const std::string& key) const { return canonical_pieces(c)[line_of(key)]; }

 private:
  std::vector<std::string> lines_;
  std::map<std::string, size_t> index_;
};

/// The run id of canonical text hashed to `h`: 16 hex digits, as run_id() spells it.
std::string hex_id(uint64_t h) {
  static const char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) s[size_t(i)] = digits[h & 15];
  return s;
}

/// One dimension of the product: a grid axis, a zip group or the seeds.
struct Dim {
  std::vector<std::string> keys;
  std::vector<FlatConfig> patch;                ///< [value] key -> value as written
  std::vector<std::vector<std::string>> lines;  ///< [value][key] canonical YAML line
  std::vector<std::vector<std::string>> canon;  ///< [value][key] canonical value
  std::vector<std::vector<std::string>> shown;  ///< [value][key] value as written
  std::vector<int64_t> seeds;                   ///< the `seeds` dimension: train.seed per value
  size_t size() const { return patch.size(); }
};

/// `key`'s value in `flat`; as written (`v`) for a key with no canonical text of its own
/// (train.min_lr_ratio) or one left out at its default.
std::string canonical_of(const std::vector<std::pair<std::string, std::string>>& flat, const std::string& key,
                         const ConfigValue& v) {
  for (const auto& [k, val] : flat)
    if (k == key) return val;
  return v.text;
}

Dim make_dim(const std::vector<const GridAxis*>& axes, const RunConfig& base, const CanonicalLines& cl) {
  Dim d;
  for (const GridAxis* a : axes) d.keys.push_back(a->key);
  const size_t n = axes[0]->values.size();
  for (size_t i = 0; i < n; ++i) {
    FlatConfig patch;
    std::vector<std::string> shown;
    for (const GridAxis* a : axes) patch[a->key] = a->values[i], shown.push_back(a->values[i].text);
    RunConfig c = apply_run_values(base, patch);
    auto text = canonical_pieces(c);
    auto flat = to_flat(c);
    std::vector<std::string> lines, canon;
    for (const auto& k : d.keys) {
      lines.push_back(cl.has(k) ? text[cl.line_of(k)] : std::string());
      canon.push_back(canonical_of(flat, k, patch.at(k)));
    }
    d.patch.push_back(std::move(patch));
    d.lines.push_back(std::move(lines));
    d.canon.push_back(std::move(canon));
    d.shown.push_back(std::move(shown));
  }
  return d;
}

/// Canonical value of `v` for `key` (so "1e-3" matches "0.001").
std::string canonical_of(const RunConfig& base, const std::string& key, const ConfigValue& v) {
  return canonical_of(to_flat(apply_run_values(base, FlatConfig{{key, v}})), key, v);
}

/// One condition of an exclude entry, resolved against the dimensions.
struct Cond {
  int dim = -1;                     ///< dimension that sets the key, or -1
  std::vector<char> match;          ///< dim >= 0: per value index
  bool derived = false;             ///< the key is constraints.derive: compare after deriving
  std::vector<std::string> values;  ///< derived: canonical values matched
  bool constant = false;            ///< dim < 0 and not derived: the base value matches or not
};

class Expander {
 public:
  /// `sink`, when given, takes each point instead of Expansion::points.
  explicit Expander(const SweepSpec& s, const std::function<void(GridPoint&&)>* sink = nullptr)
      : spec_(s), sink_(sink), base_(apply_run_values(RunConfig{}, s.base)), lines_(base_) {
    for (const auto& a : s.axes) dims_.push_back(make_dim({&a}, base_, lines_));
    for (const auto& z : s.zips) {
      std::vector<const GridAxis*> axes;
      for (const auto& a : z.axes) axes.push_back(&a);
      dims_.push_back(make_dim(axes, base_, lines_));
    }
    if (!s.seeds.values.empty()) {
      // Seeds are the fastest dimension, so nearly every point changes only the seed: set
      // the field directly instead of re-applying a patch (the bulk of a 100k-point plan).
      Dim d = make_dim({&s.seeds}, base_, lines_);
      for (const auto& patch : d.patch) d.seeds.push_back(apply_run_values(base_, patch).train.seed);
      dims_.push_back(std::move(d));
    }
    for (const auto& ex : s.excludes) excludes_.push_back(resolve(ex));
    // Only a key the grid writes can hold a value without effect: a grid that writes none
    // of the keys that do not always apply skips reset_idle_keys at every point.
    std::set<std::string> conditional;
    for (const KeyDoc& k : describe_keys(base_.model.kind))
      if (!k.applies.empty()) conditional.insert(k.key);
    auto written = [&](const std::string& key) {
      whole_text_ |= key == "train.min_lr_ratio";
      may_idle_ |= conditional.count(key) != 0;
    };
    for (const auto& [k, v] : s.base) written(k);
    for (const auto& a : s.axes) written(a.key);
    for (const auto& z : s.zips)
      for (const auto& a : z.axes) written(a.key);
    if (!s.program.empty()) {
      // A program's config holds what its grid sets; it keeps its own default for the rest.
      whole_text_ = true;
      std::set<std::string> set;
      for (const ModelKey& k : s.program.schema.keys) set.insert("model." + k.name);
      for (const auto& [k, v] : s.base) set.insert(k);
      for (const Dim& d : dims_) set.insert(d.keys.begin(), d.keys.end());
      if (!s.constraints.derive.empty() && s.constraints.global_batch > 0) set.insert(s.constraints.derive);
      given_ = program_given_keys(std::move(set));
    }
    for (const auto& inc : s.includes)
      for (const auto& a : inc.keys) written(a.key);
    // A program that says which built-in keys it reads (program.honours) is the judge of
    // when they apply: sweep-train's rules (train.eval_every only with held-out data, ...)
    // are not its.
    if (!s.program.empty() && s.program.honours_declared) may_idle_ = false;
  }

  Expansion run() {
    double total = 1;
    for (const auto& d : dims_) total *= double(d.size());
    if (total > kMaxPoints)
      throw ConfigError(spec_.source + ": the grid has " + std::to_string((long long)total) + " points; at most " +
                        std::to_string((long long)kMaxPoints) + " are supported");
    try {
      if (!sink_) out_.points.reserve(size_t(total) + spec_.includes.size());
      seen_.reserve(size_t(total) + spec_.includes.size());
      product();
      for (const auto& inc : spec_.includes) include(inc);
    } catch (const std::bad_alloc&) {
      // A grid too big for this process's memory is the grid's fault, said like any other
      // bad grid (exit 2), not a driver crash: what was formed is freed first.
      out_ = Expansion{};
      decltype(seen_)().swap(seen_);
      throw ConfigError(spec_.source + ": the grid's " + std::to_string((long long)total) +
                        " points do not fit in this process's memory; narrow an axis, split the grid, or draw a " +
                        "random search over the same keys");
    }
    return std::move(out_);
  }

 private:
  std::vector<Cond> resolve(const PointPattern& p) {
    std::vector<Cond> conds;
    for (const auto& key : p.keys) {
      Cond c;
      std::vector<std::string> want;
      for (const auto& v : key.values) want.push_back(canonical_of(base_, key.key, v));
      auto matches = [&](const std::string& canon) { return std::find(want.begin(), want.end(), canon) != want.end(); };
      for (size_t d = 0; d < dims_.size() && c.dim < 0; ++d)
        for (size_t k = 0; k < dims_[d].keys.size(); ++k)
          if (dims_[d].keys[k] == key.key) {
            c.dim = int(d);
            for (size_t i = 0; i < dims_[d].size(); ++i) c.match.push_back(matches(dims_[d].canon[i][k]));
          }
      if (c.dim < 0 && key.key == spec_.constraints.derive) {
        c.derived = true;
        c.values = want;
      } else if (c.dim < 0) {
        for (const auto& [k, v] : to_flat(base_))
          if (k == key.key) c.constant = matches(v);
      }
      conds.push_back(std::move(c));
    }
    return conds;
  }

  bool excluded(const std::vector<size_t>& idx, const RunConfig& c) const {
    for (const auto& conds : excludes_) {
      bool all = true;
      for (const auto& cond : conds) {
        bool m = cond.dim >= 0  ? bool(cond.match[idx[cond.dim]])
                 : cond.derived ? std::find(cond.values.begin(), cond.values.end(), std::to_string(derived_value(c))) !=
                                      cond.values.end()
                                : cond.constant;
        if (!m) {
          all = false;
          break;
        }
      }
      if (all) return true;
    }
    return false;
  }

  int64_t derived_value(const RunConfig& c) const {
    return spec_.constraints.derive == "train.accum" ? c.train.accum : c.train.micro_batch;
  }

  static std::string describe(const std::vector<std::pair<std::string, std::string>>& values) {
    std::string s;
    for (const auto& [k, v] : values) s += (s.empty() ? "" : " ") + k + "=" + v;
    return s.empty() ? "(base)" : s;
  }

  /// Applies constraints.derive and checks global_batch; returns "" or why the point
  /// breaks the constraint.
  std::string apply_constraints(GridPoint& p) const {
    const Constraints& k = spec_.constraints;
    if (k.global_batch <= 0) return "";
    TrainConfig& t = p.config.train;
    const int64_t w = p.config.dist.world_size;
    if (!k.derive.empty()) {
      int64_t other = w * (k.derive == "train.accum" ? t.micro_batch : t.accum);
      if (k.global_batch % other == 0) {
        (k.derive == "train.accum" ? t.accum : t.micro_batch) = k.global_batch / other;
        p.values.emplace_back(k.derive, std::to_string(k.global_batch / other));
        return "";
      }
      return k.where + ": key 'constraints.global_batch': " + std::to_string(k.global_batch) + " is not divisible by " +
             std::string(k.derive == "train.accum" ? "micro_batch" : "accum") +
             " x world_size = " + std::to_string(other) + " at point " + describe(p.values) +
             " (or set on_mismatch: skip)";
    }
    int64_t product = t.micro_batch * t.accum * w;
    if (product == k.global_batch) return "";
    return k.where + ": key 'constraints.global_batch': micro_batch " + std::to_string(t.micro_batch) + " x accum " +
           std::to_string(t.accum) + " x world_size " + std::to_string(w) + " = " + std::to_string(product) + ", not " +
           std::to_string(k.global_batch) + ", at point " + describe(p.values) +
           " (set constraints.derive, or on_mismatch: skip)";
  }

  /// Constraints, then exclusion; false when the point is dropped. A point that is
  /// excluded anyway never fails the constraint.
  bool keep(GridPoint& p, const std::vector<size_t>* idx) {
    std::string broken = apply_constraints(p);
    if (idx && excluded(*idx, p.config)) return ++out_.excluded, false;
    if (broken.empty()) return true;
    if (spec_.constraints.skip_mismatch) return ++out_.mismatched, false;
    throw ConfigError(broken);
  }

  /// check_run_config, re-run with every value's file:line when it fails, so the
  /// message names the line that set the offending key.
  template <class Values>
  void check(const GridPoint& p, const Values& values) {
    // The leaf step is sweep-train's (and a program's built on sweep/trainer.h): a grid's
    // program: would get the key and train the micro-batch's own bits.
    if (p.config.train.leaf > 0 && !spec_.program.empty()) {
      const FlatConfig v = values();
      const auto it = v.find("train.leaf");
      throw ConfigError((it == v.end() ? spec_.source : it->second.where) +
                        ": key 'train.leaf': the leaf step (micro_batch as layout) is sweep-train's and a program's "
                        "built on sweep/trainer.h (launch.trainer); a grid's program: trains its own way (at point " +
                        describe(p.values) + ")");
    }
    try {
      check_run_config(p.config);
    } catch (const ConfigError&) {
      try {
        check_run_config(p.config, values());
      } catch (const ConfigError& e) {
        throw ConfigError(std::string(e.what()) + " (at point " + describe(p.values) + ")");
      }
    }
  }

  /// reset_idle_keys on the point, with a warning for each key the first time it is idle,
  /// at the line that set it; returns the keys it reset.
  template <class Values>
  std::vector<IdleKey> reset_idle(GridPoint& p, const Values& values) {
    if (!may_idle_) return {};
    std::vector<IdleKey> idle = reset_idle_keys(p.config);
    for (const IdleKey& k : idle) {
      if (!warned_idle_.insert(k.key).second) continue;
      const FlatConfig v = values();
      auto it = v.find(k.key);
      if (it == v.end() && k.key == "train.min_lr") it = v.find("train.min_lr_ratio");
      const std::string where = it == v.end() || it->second.where.empty() ? spec_.source : it->second.where;
      out_.warnings.push_back(where + ": warning: key '" + k.key + "' has no effect with " + k.reason +
                              "; it is ignored and does not change run ids");
    }
    return idle;
  }

  void add(GridPoint&& p, uint64_t hash) {
    if (!seen_.insert(hash).second) {
      ++out_.duplicates;
      return;
    }
    if (sink_)
      (*sink_)(std::move(p));
    else
      out_.points.push_back(std::move(p));
  }

  /// Full values of the current product point, for messages only.
  FlatConfig point_values(const std::vector<size_t>& idx) const {
    FlatConfig v = spec_.base;
    for (size_t d = 0; d < dims_.size(); ++d)
      for (const auto& [k, val] : dims_[d].patch[idx[d]]) v[k] = val;
    return v;
  }

  void product() {
    const size_t n = dims_.size();
    std::vector<size_t> idx(n, 0);
    // level[d] = base with dimensions 0..d applied; an odometer step re-applies only the
    // dimensions at and after the one that moved.
    std::vector<RunConfig> level(n);
    std::vector<const std::string*> line(lines_.size());
    for (size_t i = 0; i < lines_.size(); ++i) line[i] = &lines_.base_line(i);
    // [dimension] (piece, key of the dimension): the pieces a dimension's value replaces.
    std::vector<std::vector<std::pair<size_t, size_t>>> dim_lines(n);
    for (size_t d = 0; d < n; ++d)
      for (size_t k = 0; k < dims_[d].keys.size(); ++k)
        if (lines_.has(dims_[d].keys[k])) dim_lines[d].emplace_back(lines_.line_of(dims_[d].keys[k]), k);
    const bool derive = spec_.constraints.global_batch > 0 && !spec_.constraints.derive.empty();
    const size_t derive_line = derive ? lines_.line_of(spec_.constraints.derive) : 0;
    std::map<int64_t, std::string> derived_lines;
    std::string text;
    size_t from = 0;  // first dimension whose value changed
    while (true) {
      for (size_t d = from; d < n; ++d) {
        if (!dims_[d].seeds.empty()) {
          level[d] = d == 0 ? base_ : level[d - 1];
          level[d].train.seed = dims_[d].seeds[idx[d]];
        } else {
          level[d] = apply_run_values(d == 0 ? base_ : level[d - 1], dims_[d].patch[idx[d]]);
        }
        for (const auto& [piece, k] : dim_lines[d]) line[piece] = &dims_[d].lines[idx[d]][k];
      }
      GridPoint p;
      p.config = n ? level[n - 1] : base_;
      p.values.reserve(n + 1);
      for (size_t d = 0; d < n; ++d)
        for (size_t k = 0; k < dims_[d].keys.size(); ++k)
          p.values.emplace_back(dims_[d].keys[k], dims_[d].shown[idx[d]][k]);
      if (keep(p, &idx)) {
        // Only a failing or warned point pays for the file:line lookups.
        check(p, [&] { return point_values(idx); });
        const std::vector<IdleKey> idle = reset_idle(p, [&] { return point_values(idx); });
        if (whole_text_) {
          give(p.config, given_, idle);
          text = to_yaml(p.config);
        } else {
          // The derived key's piece and an idle key's (its default's, the same at every
          // point) stand in for the ones substituted above, for this point only.
          std::vector<std::pair<size_t, const std::string*>> saved;
          auto put = [&](size_t i, const std::string* piece) {
            saved.emplace_back(i, line[i]);
            line[i] = piece;
          };
          if (derive) {
            int64_t v = derived_value(p.config);
            auto it = derived_lines.find(v);
            if (it == derived_lines.end())
              it = derived_lines.emplace(v, lines_.line(p.config, spec_.constraints.derive)).first;
            put(derive_line, &it->second);
          }
          for (const IdleKey& k : idle) {
            const size_t i = lines_.line_of(k.key);
            auto it = idle_pieces_.find(i);
            if (it == idle_pieces_.end()) it = idle_pieces_.emplace(i, lines_.line(p.config, k.key)).first;
            put(i, &it->second);
          }
          text.clear();
          for (const std::string* l : line) text += *l;
          for (auto it = saved.rbegin(); it != saved.rend(); ++it) line[it->first] = it->second;
        }
        const uint64_t h = XXH3_64bits(text.data(), text.size());
        p.id = hex_id(h);
        add(std::move(p), h);
      }
      if (!next(idx, from)) return;
    }
  }

  /// Odometer increment, last dimension fastest; `from` becomes the first dimension that
  /// moved. False after the last point.
  bool next(std::vector<size_t>& idx, size_t& from) const {
    size_t d = idx.size();
    while (d > 0) {
      --d;
      if (++idx[d] < dims_[d].size()) break;
      idx[d] = 0;
      if (d == 0) return false;
    }
    if (idx.empty()) return false;
    from = d;
    return true;
  }

  void include(const PointPattern& inc) {
    bool sets_seed = false;
    for (const auto& k : inc.keys) sets_seed |= k.key == "train.seed";
    std::vector<ConfigValue> seeds =
        sets_seed || spec_.seeds.values.empty() ? std::vector<ConfigValue>{ConfigValue{}} : spec_.seeds.values;
    for (const auto& seed : seeds) {
      FlatConfig values = spec_.base;
      GridPoint p;
      for (const auto& k : inc.keys) values[k.key] = k.values[0], p.values.emplace_back(k.key, k.values[0].text);
      if (!seed.text.empty()) values["train.seed"] = seed, p.values.emplace_back("train.seed", seed.text);
      p.config = apply_run_values(RunConfig{}, values);
      if (!keep(p, nullptr)) continue;
      check(p, [&] { return values; });
      const std::vector<IdleKey> idle = reset_idle(p, [&] { return values; });
      if (!spec_.program.empty()) {
        std::set<std::string> set = given_;
        for (const auto& k : inc.keys) set.insert(k.key);
        if (!seed.text.empty()) set.insert("train.seed");
        give(p.config, program_given_keys(std::move(set)), idle);
      }
      p.id = run_id(p.config);
      std::string text = to_yaml(p.config);
      add(std::move(p), XXH3_64bits(text.data(), text.size()));
    }
  }

  /// `c` as its program is given it: the keys of `given` less the ones reset as idle.
  static void give(RunConfig& c, const std::set<std::string>& given, const std::vector<IdleKey>& idle) {
    c.given.assign(given.begin(), given.end());
    for (const IdleKey& k : idle) c.given.erase(std::remove(c.given.begin(), c.given.end(), k.key), c.given.end());
  }

  const SweepSpec& spec_;
  const std::function<void(GridPoint&&)>* sink_;
  RunConfig base_;
  CanonicalLines lines_;
  std::vector<Dim> dims_;
  std::vector<std::vector<Cond>> excludes_;
  Expansion out_;
  std::unordered_set<uint64_t> seen_;
  std::set<std::string> warned_idle_;
  std::map<size_t, std::string> idle_pieces_;  ///< piece -> an idle key's piece at its default
  bool may_idle_ = false;                      ///< the grid writes a key that does not always apply
  bool whole_text_ = false;  ///< the grid writes train.min_lr_ratio (min_lr follows each point's lr), or a program's
  std::set<std::string> given_;  ///< a program's grid: the keys every point's config holds (RunConfig::given)
};

}  // namespace

namespace {

/// Whether a program that declared program.honours reads `key`: its own keys (model.*),
/// the ranks (dist.world_size), its threads (train.threads) and where its data comes from
/// (data.kind) always, built-in keys when listed (train.min_lr_ratio with train.min_lr).
bool honoured(const ProgramSpec& p, const std::string& key) {
  const auto listed = [&](const std::string& k) {
    return std::find(p.honours.begin(), p.honours.end(), k) != p.honours.end();
  };
  // train.min_lr_ratio is handed over as the train.min_lr it derives.
  return key.rfind("model.", 0) == 0 || key == "dist.world_size" || key == "train.threads" || key == "data.kind" ||
         listed(key) || (key == "train.min_lr_ratio" && listed("train.min_lr"));
}

/// `spec` without the built-in keys its program does not honour, each said once as a
/// warning at the line that set it: such a key would split run ids that train the same bits.
SweepSpec honoured_only(const SweepSpec& spec, std::vector<std::string>* warnings) {
  SweepSpec s = spec;
  std::set<std::string> said;
  auto ignore = [&](const std::string& key, const std::string& where) {
    if (honoured(s.program, key)) return false;
    if (said.insert(key).second)
      warnings->push_back((where.empty() ? spec.source : where) + ": warning: key '" + key +
                          "' is not one the program honours (program.honours); it is ignored and does not change "
                          "run ids");
    return true;
  };
  for (auto it = s.base.begin(); it != s.base.end();)
    it = ignore(it->first, it->second.where) ? s.base.erase(it) : ++it;
  const auto drop_axes = [&](std::vector<GridAxis>& axes) {
    axes.erase(std::remove_if(axes.begin(), axes.end(), [&](const GridAxis& a) { return ignore(a.key, a.where); }),
               axes.end());
  };
  drop_axes(s.axes);
  for (auto& z : s.zips) drop_axes(z.axes);
  s.zips.erase(std::remove_if(s.zips.begin(), s.zips.end(), [](const ZipGroup& z) { return z.axes.empty(); }),
               s.zips.end());
  for (auto& p : s.includes) drop_axes(p.keys);
  for (auto& p : s.excludes) drop_axes(p.keys);
  if (!s.seeds.values.empty() && ignore("train.seed", s.seeds.where)) s.seeds = GridAxis{};
  for (const SearchDim& d : s.search.space)
    if (!honoured(s.program, d.key))
      throw ConfigError(d.where + ": key '" + d.key +
                        "': a search over a key the program does not honour (program.honours) would draw runs that "
                        "train the same bits; list it there, or search another key");
  return s;
}

}  // namespace

namespace {

Expansion expand_into(const SweepSpec& spec, const std::function<void(GridPoint&&)>* sink) {
  std::vector<std::string> warnings;
  const bool trim = !spec.program.empty() && spec.program.honours_declared;
  const SweepSpec trimmed = trim ? honoured_only(spec, &warnings) : SweepSpec{};
  const SweepSpec& s = trim ? trimmed : spec;
  // Searches that check their points as a whole see them all before any is handed on.
  const bool whole = spec.search.halves() || spec.search.kind == "pbt";
  Expansion e = Expander(s, whole ? nullptr : sink).run();
  e.warnings.insert(e.warnings.begin(), warnings.begin(), warnings.end());
  if (whole) {
    if (spec.search.halves()) check_halving(s, e.points);
    if (spec.search.kind == "pbt") check_pbt(s, e.points);
    if (sink) {
      for (GridPoint& p : e.points) (*sink)(std::move(p));
      e.points.clear();
    }
  }
  return e;
}

}  // namespace

Expansion expand_grid(const SweepSpec& spec) { return expand_into(spec, nullptr); }

Expansion expand_grid_each(const SweepSpec& spec, const std::function<void(GridPoint&&)>& sink) {
  return expand_into(spec, &sink);
}

}  // namespace sweep
