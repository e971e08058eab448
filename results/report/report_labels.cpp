// How the report names groups where space is short: short key names for headers and
// legends, aliases for long values, legend labels that say only what sets a curve apart,
// the key that splits a crowded chart into small multiples, and which keys change
// throughput by design.
#include <algorithm>  // sort, count, min, max
#include <cstdint>    // SIZE_MAX
#include <cstdio>     // snprintf
#include <cstdlib>    // strtod
#include <map>
#include <set>

#include "report.h"
#include "text.h"  // significant

namespace sweep {
namespace {

// The last `parts` dotted parts of `key` (all of it when it has fewer).
std::string suffix(const std::string& key, size_t parts) {
  size_t at = key.size();
  for (size_t p = 0; p < parts; ++p) {
    const size_t dot = at == 0 ? std::string::npos : key.rfind('.', at - 1);
    if (dot == std::string::npos) return key;
    at = dot;
  }
  return key.substr(at + 1);
}

// Whether `key` changes together with `other` over the whole sweep (AxisEffect).
bool confounded(const ReportModel& m, const std::string& key, const std::string& other) {
  for (const auto& e : m.effects)
    if (e.key == key)
      return std::find(e.confounded_with.begin(), e.confounded_with.end(), other) != e.confounded_with.end();
  return false;
}

}  // namespace

bool throughput_key(const std::string& key) {
  static const std::set<std::string> keys = {
      "train.precision", "train.deterministic", "train.threads",   "train.micro_batch", "train.accum",   "train.leaf",
      "dist.world_size", "dist.reduction",      "dist.zero_stage", "data.workers",      "model.kind",    "model.layers",
      "model.d_model",   "model.heads",         "model.vocab",     "model.seq_len",     "model.ffn_mult"};
  return keys.count(key) > 0 || key.rfind("model.moe.", 0) == 0;
}

std::vector<std::string> short_key_names(const std::vector<std::string>& keys) {
  std::vector<size_t> parts(keys.size(), 1);
  for (bool clash = true; clash;) {
    clash = false;
    std::map<std::string, std::vector<size_t>> by_name;
    for (size_t i = 0; i < keys.size(); ++i) by_name[suffix(keys[i], parts[i])].push_back(i);
    for (const auto& [name, which] : by_name) {
      if (which.size() < 2) continue;
      for (size_t i : which)
        if (suffix(keys[i], parts[i]) != keys[i]) ++parts[i], clash = true;
    }
  }
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) out.push_back(suffix(keys[i], parts[i]));
  return out;
}

std::string shown_value(const ReportModel& m, const std::string& key, const std::string& value) {
  if (value.size() <= kLongValue) return value;
  for (const auto& l : m.long_values)
    if (l.key == key && l.value == value) return l.alias;
  return value;
}

std::vector<LongValue> long_values(const ReportModel& m) {
  std::vector<LongValue> out;
  for (const auto& key : m.columns) {
    std::set<std::string> seen;
    std::vector<std::string> values;
    for (const auto& g : m.groups)
      for (const auto& [k, v] : g.values)
        if (k == key && v.size() > kLongValue && seen.insert(v).second) values.push_back(v);
    std::sort(values.begin(), values.end(), value_less);
    for (const auto& v : values) out.push_back({key, v, "#" + std::to_string(out.size() + 1)});
  }
  return out;
}

std::vector<std::string> legend_labels(const ReportModel& m, const std::vector<size_t>& groups) {
  std::vector<std::string> out;
  if (groups.empty()) return out;
  const size_t keys = m.columns.size();
  // The keys that differ between these groups, less those that follow an earlier one.
  std::vector<size_t> named;
  for (size_t k = 0; k < keys; ++k) {
    bool differs = false;
    for (size_t g : groups) differs = differs || m.groups[g].values[k].second != m.groups[groups[0]].values[k].second;
    if (!differs) continue;
    bool follows = false;
    for (size_t j : named) follows = follows || confounded(m, m.columns[k], m.columns[j]);
    if (!follows) named.push_back(k);
  }
  // A continuous key's value in three significant digits, enough to tell draws apart (the
  // tooltip and the tables have it whole).
  std::vector<bool> binned(keys, false);
  for (const auto& e : m.effects)
    for (size_t k = 0; k < keys; ++k) binned[k] = binned[k] || (e.binned && e.key == m.columns[k]);
  const auto name_of = [&](size_t g, size_t k) {
    const auto& [key, value] = m.groups[g].values[k];
    std::string shown = shown_value(m, key, value);
    if (binned[k]) {
      shown = significant(std::strtod(value.c_str(), nullptr), 3);
    }
    return (k < m.short_columns.size() ? m.short_columns[k] : key) + "=" + shown;
  };
  // The most common value of each named key (ties: the first in natural order), and how
  // many keys each group leaves it in.
  std::vector<std::string> mode(keys);
  for (size_t k : named) {
    std::map<std::string, size_t> n;
    for (size_t g : groups) ++n[m.groups[g].values[k].second];
    std::vector<std::string> values;
    values.reserve(n.size());
    for (const auto& kv : n) values.push_back(kv.first);
    std::sort(values.begin(), values.end(), value_less);
    for (const auto& v : values)
      if (mode[k].empty() || n[v] > n[mode[k]]) mode[k] = v;
  }
  double off = 0;
  for (size_t g : groups)
    for (size_t k : named) off += m.groups[g].values[k].second != mode[k] ? 1 : 0;
  // A base and a few changes each: name only the changes.
  const bool from_base = named.size() >= 3 && off / double(groups.size()) <= double(named.size()) / 3;
  for (size_t g : groups) {
    std::string label;
    for (size_t k : named)
      if (!from_base || m.groups[g].values[k].second != mode[k]) label += (label.empty() ? "" : ", ") + name_of(g, k);
    if (label.empty()) label = from_base ? "base" : groups.size() == 1 ? "all runs" : "-";
    out.push_back(label);
  }
  return out;
}

std::string facet_key(const ReportModel& m) {
  if (m.groups.size() <= kCurvesPerChart) return "";
  std::string best;
  size_t best_panels = 0, best_largest = 0;
  for (size_t k = 0; k < m.columns.size(); ++k) {
    bool follows = false;
    for (size_t j = 0; j < k; ++j) follows = follows || confounded(m, m.columns[k], m.columns[j]);
    if (follows || m.columns[k] == "train.seed") continue;
    std::map<std::string, size_t> sizes;
    for (const auto& g : m.groups) ++sizes[g.values[k].second];
    size_t largest = 0, smallest = SIZE_MAX;
    for (const auto& [v, n] : sizes) largest = std::max(largest, n), smallest = std::min(smallest, n);
    // Panels of a few curves each, all alike: the key crosses the others, as in a full
    // grid (a base with one change per knob is not split: its changes would scatter).
    if (sizes.size() < 2 || sizes.size() > 8 || largest > kCurvesPerChart || smallest != largest) continue;
    if (best.empty() || sizes.size() < best_panels || (sizes.size() == best_panels && largest < best_largest))
      best = m.columns[k], best_panels = sizes.size(), best_largest = largest;
  }
  return best;
}

}  // namespace sweep
