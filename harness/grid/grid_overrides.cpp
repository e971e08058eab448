// Command-line overrides: parsed here, applied to a parsed grid before it is checked, and
// written back into the grid's YAML as the sweep ran it.
#include "grid_overrides.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>

#include "grid_values.h"  // generated_values
#include "text.h"         // printable, did_you_mean, join
#include "yaml_read.h"    // next_to_grid

namespace fs = std::filesystem;

namespace sweep {
namespace {

const std::vector<std::string> kFunctions = {"choice", "range", "linspace", "logspace"};
const std::vector<std::string> kSections = {"model", "data", "train", "dist", "fault"};
/// The grid file's own top-level keys, which no override sets.
const std::vector<std::string> kGridKeys = {"name",  "grid",        "zip",    "exclude", "include",
                                            "seeds", "constraints", "launch", "program", "search"};
/// What the syntax is, for messages about a malformed override.
const char* kForms = "expected key=value, key=v1,v2 or key=range(start,stop,step)";

bool is_data_path(const std::string& key) { return key == "data.path" || key == "data.eval_path"; }

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

/// The comma-separated elements of `s`. A quoted element ('a,b' or "a,b") is what stands
/// between its quotes, commas and all; spaces around an unquoted one are dropped.
std::vector<std::string> split_elements(const std::string& s, const std::string& at) {
  std::vector<std::string> out;
  size_t i = 0;
  for (;;) {
    while (i < s.size() && s[i] == ' ') ++i;
    if (i < s.size() && (s[i] == '\'' || s[i] == '"')) {
      const char q = s[i];
      const size_t close = s.find(q, i + 1);
      if (close == std::string::npos) throw ConfigError(at + "the quote " + q + " is not closed");
      out.push_back(s.substr(i + 1, close - i - 1));
      i = close + 1;
      while (i < s.size() && s[i] == ' ') ++i;
      if (i < s.size() && s[i] != ',')
        throw ConfigError(at + "text after a closing quote; expected ',' or the end of the value");
    } else {
      const size_t comma = std::min(s.find(',', i), s.size());
      const std::string e = trim(s.substr(i, comma - i));
      if (e.empty()) throw ConfigError(at + "an empty value (a ',' with nothing before or after it)");
      if (e.front() == '[' || e.front() == '{')
        throw ConfigError(at + "a list or mapping is no run-config value; values to sweep are key=v1,v2");
      out.push_back(e);
      i = comma;
    }
    if (i >= s.size()) return out;
    if (++i >= s.size()) throw ConfigError(at + "an empty value (a ',' with nothing after it)");
  }
}

/// `name(args)` when `value` is written as a call, else false.
bool as_call(const std::string& value, std::string* name, std::string* args) {
  const size_t open = value.find('(');
  if (open == std::string::npos || open == 0 || value.back() != ')') return false;
  for (size_t i = 0; i < open; ++i)
    if (!std::isalpha(static_cast<unsigned char>(value[i])) && value[i] != '_') return false;
  *name = value.substr(0, open);
  *args = value.substr(open + 1, value.size() - open - 2);
  return true;
}

GridOverride parse_one(const std::string& arg) {
  GridOverride o;
  o.text = arg;
  o.where = "override '" + printable(arg) + "'";
  const std::string at = o.where + ": ";
  if (!arg.empty() && (arg[0] == '+' || arg[0] == '~'))
    throw ConfigError(at + "no +key or ~key here: every run-config key exists with its default; " + kForms);
  const size_t eq = arg.find('=');
  if (eq == std::string::npos) throw ConfigError(at + "no '='; " + kForms);
  o.key = arg.substr(0, eq);
  const std::string value = arg.substr(eq + 1);
  if (o.key.empty()) throw ConfigError(at + "no key before '='; " + kForms);
  bool ok = o.key.front() != '.' && o.key.back() != '.' && o.key.find("..") == std::string::npos;
  for (char c : o.key) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
  if (!ok) throw ConfigError(at + "'" + printable(o.key) + "' is not a dotted key such as train.lr; " + kForms);
  if (value.empty()) throw ConfigError(at + "no value after '='; " + kForms);
  if (const std::string top = o.key.substr(0, o.key.find('.'));
      std::find(kGridKeys.begin(), kGridKeys.end(), top) != kGridKeys.end())
    throw ConfigError(at + "key '" + printable(o.key) +
                      "' is the grid file's own; an override sets a run-config key (" + join(kSections) +
                      "); --name names the sweep and --parallel sets launch.parallel");
  std::string fn, inner;
  std::vector<std::string> texts;
  if (as_call(value, &fn, &inner)) {
    if (std::find(kFunctions.begin(), kFunctions.end(), fn) == kFunctions.end())
      throw ConfigError(at + "unknown sweep '" + printable(fn) + "(...)'" + did_you_mean(fn, kFunctions) +
                        "; expected " + join(kFunctions) + " (quote a value with parentheses: key='" +
                        printable(value) + "')");
    if (trim(inner).empty()) throw ConfigError(at + fn + "() with nothing in it");
    texts = split_elements(inner, at + fn + "(...): ");
    o.axis = true;
    if (fn != "choice") {
      o.values = generated_values(fn, texts, o.where, o.key);
      for (auto& v : o.values) v.where = o.where;
      return o;
    }
  } else {
    texts = split_elements(value, at);
    o.axis = texts.size() > 1;
  }
  for (const auto& t : texts) o.values.push_back({t, o.where, true});
  return o;
}

/// "grid at x.yaml:21:3": which part of the grid sweeps `key`, and where; "" for none.
/// `*grid_axis` is set to the `grid:` axis of the key, if that is what sweeps it.
std::string sweeper(SweepSpec& spec, const std::string& key, GridAxis** grid_axis) {
  *grid_axis = nullptr;
  for (const auto& z : spec.zips)
    for (const auto& a : z.axes)
      if (a.key == key) return z.section + " at " + a.where;
  if (key == "train.seed" && !spec.seeds.values.empty()) return "seeds at " + spec.seeds.where;
  if (key == spec.constraints.derive) return "constraints.derive at " + spec.constraints.where;
  for (auto& a : spec.axes)
    if (a.key == key) return *grid_axis = &a, "grid at " + a.where;
  return "";
}

}  // namespace

GridOverrides parse_overrides(const std::vector<std::string>& args, const std::string& name) {
  GridOverrides out;
  out.name = name;
  for (const std::string& arg : args) {
    GridOverride o = parse_one(arg);
    for (const auto& earlier : out.keys)
      if (earlier.key == o.key)
        throw ConfigError(o.where + ": key '" + printable(o.key) + "' is given twice (also " + earlier.where +
                          "); give its values once: " + printable(o.key) + "=v1,v2");
    // A path on a command line means what it means where the command was typed.
    if (is_data_path(o.key))
      for (auto& v : o.values)
        if (!v.text.empty() && v.text.front() != '/' && v.text.find('\0') == std::string::npos)
          v.text = fs::absolute(v.text).lexically_normal().string();
    out.keys.push_back(std::move(o));
  }
  return out;
}

void apply_overrides(SweepSpec& spec, const GridOverrides& o) {
  if (!o.name.empty()) {
    if (!valid_sweep_name(o.name))
      throw ConfigError("--name '" + printable(o.name) +
                        "': expected letters, digits, '-', '_' or '.' (not leading); " + "a name is 1 to " +
                        std::to_string(kMaxSweepName) + " characters");
    spec.name = o.name;
  }
  for (const GridOverride& ov : o.keys) {
    GridAxis* axis = nullptr;
    const std::string by = sweeper(spec, ov.key, &axis);
    const std::string at = ov.where + ": key '" + printable(ov.key) + "' ";
    if (!by.empty() && !axis)
      throw ConfigError(at + "is swept by " + by + "; an override cannot change it (edit the grid file)");
    if (axis && !ov.axis)
      throw ConfigError(at + "is an axis of the grid (" + by + "), which would override this one value; " +
                        "to replace the axis give values: " + printable(ov.key) + "=v1,v2 (or choice(" +
                        printable(ov.values.front().text) + ") for one)");
    if (axis) {
      axis->values = ov.values;
      axis->where = ov.where;
    } else if (ov.axis) {
      if (spec.search.kind != "grid" && !spec.search.space.empty())
        throw ConfigError(at + "cannot be an axis: search.kind " + spec.search.kind + " (" + spec.search.where +
                          ") draws every point from search.space; give one value, or edit the space");
      spec.axes.push_back({ov.key, ov.values, ov.where});
    } else {
      spec.base[ov.key] = ov.values.front();
    }
  }
}

namespace {

/// Sets dotted `key` where `map` (whose keys are dotted under `prefix`) spells it, as
/// `train: {lr: 1}` or `model: {moe.experts: 4}` for model.moe.experts; false when it
/// spells it nowhere.
bool set_in_place(YAML::Node map, const std::string& prefix, const std::string& key, const std::string& value) {
  for (auto kv : map) {
    const std::string full = prefix + kv.first.Scalar();
    if (full == key) return map[kv.first.Scalar()] = value, true;
    if (kv.second.IsMap() && key.rfind(full + ".", 0) == 0 && set_in_place(kv.second, full + ".", key, value))
      return true;
  }
  return false;
}

YAML::Node flow_list(const std::vector<ConfigValue>& values) {
  YAML::Node list(YAML::NodeType::Sequence);
  list.SetStyle(YAML::EmitterStyle::Flow);
  for (const auto& v : values) list.push_back(v.text);
  return list;
}

/// `node` (a path, or a list of paths, as the grid file wrote them) made absolute next to
/// grid file `source`; `keep` says which elements are no path.
void absolute_paths(
    YAML::Node node, const std::string& source,
    bool (*keep)(const std::string&, size_t) = [](const std::string&, size_t) { return false; }) {
  auto fix = [&](YAML::Node n, size_t i) {
    if (!n.IsScalar()) return;
    const std::string p = n.Scalar();
    if (p.empty() || p.front() == '/' || keep(p, i)) return;
    n = fs::absolute(next_to_grid(source, p)).lexically_normal().string();
  };
  if (node.IsSequence())
    for (size_t i = 0; i < node.size(); ++i) fix(node[i], i);
  else
    fix(node, 0);
}

/// data.path and data.eval_path wherever a mapping of dotted keys spells them: `base:`
/// (nested), `grid:`, a `zip:` group, an `include:` or `exclude:` entry.
void absolute_data_paths(const YAML::Node& map, const std::string& prefix, const std::string& source) {
  if (!map.IsMap()) return;
  for (auto kv : map) {
    const std::string full = prefix + kv.first.Scalar();
    if (is_data_path(full))
      absolute_paths(kv.second, source);
    else if (kv.second.IsMap())
      absolute_data_paths(kv.second, full + ".", source);
  }
}

/// Every relative path of the grid made absolute (next to `source`), as its parser resolves
/// them: the copy means the same in another directory.
void absolute_grid_paths(YAML::Node root, const std::string& source) {
  if (YAML::Node base = root["base"]) absolute_data_paths(base, "", source);
  if (YAML::Node grid = root["grid"]) absolute_data_paths(grid, "", source);
  for (const char* list : {"zip", "include", "exclude"})
    if (YAML::Node entries = root[list]) {
      if (entries.IsMap()) absolute_data_paths(entries, "", source);
      if (entries.IsSequence())
        for (auto e : entries) absolute_data_paths(e, "", source);
    }
  if (YAML::Node launch = root["launch"]; launch && launch.IsMap()) {
    for (const char* key : {"trainer", "hostfile"})
      if (YAML::Node p = launch[key]) absolute_paths(p, source);
  }
  YAML::Node program = root["program"];
  if (!program || !program.IsMap()) return;
  // argv[0] without a '/' is found on PATH; a later element is a path when it has a '/'
  // and does not start with '-' (program.cpp, resolve_element).
  if (YAML::Node argv = program["argv"])
    absolute_paths(argv, source, [](const std::string& e, size_t i) {
      return e.find('/') == std::string::npos || (i > 0 && e.front() == '-');
    });
  for (const char* key : {"files", "writes", "data"})
    if (YAML::Node p = program[key]) absolute_paths(p, source);
  // Without cwd, a run starts in the grid file's directory: the copy names it.
  if (!program["cwd"]) program["cwd"] = ".";
  absolute_paths(program["cwd"], source);
}

}  // namespace

SweepSpec load_overridden_grid(const std::string& path, const std::string& trainer, const GridOverrides& o) {
  std::string text;
  SweepSpec spec = load_grid(
      path, trainer, [&](SweepSpec& s) { apply_overrides(s, o); }, &text);
  spec.resolved = resolved_grid(text, spec, o);
  return spec;
}

std::string resolved_grid(const std::string& text, const SweepSpec& spec, const GridOverrides& o) {
  YAML::Node root = YAML::Load(text);
  if (!o.name.empty()) root["name"] = o.name;
  for (const GridOverride& ov : o.keys) {
    if (ov.axis) {
      if (!root["grid"] || !root["grid"].IsMap()) root["grid"] = YAML::Node(YAML::NodeType::Map);
      root["grid"][ov.key] = flow_list(ov.values);  // in place when the grid has the axis
      continue;
    }
    if (!root["base"] || !root["base"].IsMap()) root["base"] = YAML::Node(YAML::NodeType::Map);
    YAML::Node base = root["base"];
    if (set_in_place(base, "", ov.key, ov.values.front().text)) continue;
    const size_t dot = ov.key.find('.');
    const std::string section = ov.key.substr(0, dot), rest = ov.key.substr(dot + 1);
    if (!base[section] || !base[section].IsMap()) base[section] = YAML::Node(YAML::NodeType::Map);
    base[section][rest] = ov.values.front().text;
  }
  absolute_grid_paths(root, spec.source);
  YAML::Emitter out;
  out << root;
  std::string args;
  for (const auto& ov : o.keys) args += " " + printable(ov.text);
  if (!o.name.empty()) args += " --name " + printable(o.name);
  std::string head = "# The grid this sweep ran: " + printable(spec.source) + (args.empty() ? "" : " with" + args) +
                     ".\n# Its relative paths are made absolute; `sweep plan` of this file lists the same runs.\n";
  return head + out.c_str() + "\n";
}

}  // namespace sweep
