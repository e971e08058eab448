// Parsing a grid file into a SweepSpec. Expansion is in grid_expand.cpp.
#include "grid.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "grid_values.h"    // axis_values
#include "search_metric.h"  // kProgramMetricPrefix
#include "yaml_read.h"      // yaml_where, YamlMap

namespace sweep {
namespace {

const std::vector<std::string> kTopKeys = {"name",  "base",        "grid",   "zip",     "exclude", "include",
                                           "seeds", "constraints", "launch", "program", "search"};
const std::vector<std::string> kSections = {"model", "data", "train", "dist", "fault"};

}  // namespace

bool valid_sweep_name(const std::string& s) {
  if (s.empty() || s.size() > kMaxSweepName || s[0] == '.' || s[0] == '-') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

namespace {

/// The grid file's own `name:` (`node`), unless the command line replaced it.
void check_name(const std::string& name, const YAML::Node& node, const std::string& source) {
  if (!node || !node.IsScalar())
    throw ConfigError(source + ": key 'name': required, a sweep name such as 'quickstart'");
  if (!valid_sweep_name(name))
    throw ConfigError(yaml_where(source, node) +
                      ": key 'name': expected letters, digits, '-', '_' or '.' (not leading), got '" + printable(name) +
                      "'; a name is 1 to " + std::to_string(kMaxSweepName) + " characters" +
                      (name.size() > kMaxSweepName ? ", this one " + std::to_string(name.size()) : ""));
}

/// Checks each value alone against the base, so a bad value is named at its own line
/// before the (possibly large) product is formed. Constraints between keys wait for
/// expansion: an axis may fix what the base alone breaks. model.kind is never an axis: it
/// decides which model keys exist.
void check_values(const RunConfig& base, const GridAxis& axis) {
  if (axis.key == "model.kind")
    throw ConfigError(axis.where +
                      ": key 'model.kind' cannot be swept: it decides which model keys exist (set it "
                      "in base; one grid per model kind)");
  for (const auto& v : axis.values) (void)apply_run_values(base, FlatConfig{{axis.key, v}});
}

/// train.min_lr and train.min_lr_ratio set the same value: a grid whose base, grid and zip
/// spell both would give some point both. (An include is base + its own keys, checked as
/// such when it is applied.)
void check_one_min_lr(const SweepSpec& spec) {
  std::string min_lr, ratio;  // where each is first given
  auto see = [&](const std::string& key, const std::string& where) {
    if (key == "train.min_lr" && min_lr.empty()) min_lr = where;
    if (key == "train.min_lr_ratio" && ratio.empty()) ratio = where;
  };
  for (const auto& [k, v] : spec.base) see(k, v.where);
  for (const auto& a : spec.axes) see(a.key, a.where);
  for (const auto& z : spec.zips)
    for (const auto& a : z.axes) see(a.key, a.where);
  if (!min_lr.empty() && !ratio.empty())
    throw ConfigError(ratio + ": key 'train.min_lr_ratio': give either train.min_lr (at " + min_lr +
                      ") or train.min_lr_ratio, not both");
}

/// Remembers which section sweeps each key, so no key is swept twice.
class KeyOwners {
 public:
  void claim(const std::string& key, const std::string& where, const std::string& section) {
    for (const auto& [k, w] : owners_)
      if (k == key)
        throw ConfigError(where + ": key '" + printable(key) + "' is swept twice (" + section + " here, and at " + w +
                          ")");
    owners_.emplace_back(key, where);
  }

 private:
  std::vector<std::pair<std::string, std::string>> owners_;
};

std::vector<GridAxis> parse_axes(const YAML::Node& map, const std::string& source, const std::string& context) {
  std::vector<GridAxis> axes;
  for (const auto& kv : map) {
    GridAxis axis;
    axis.key = kv.first.Scalar();
    axis.where = yaml_where(source, kv.first);
    for (const auto& other : axes)
      if (other.key == axis.key)
        throw ConfigError(axis.where + ": key '" + context + "." + printable(axis.key) + "' is given twice");
    axis.values = axis_values(kv.second, source, context + "." + printable(axis.key));
    axes.push_back(std::move(axis));
  }
  return axes;
}

std::vector<ZipGroup> parse_zips(const YAML::Node& node, const std::string& source) {
  std::vector<ZipGroup> zips;
  std::vector<YAML::Node> groups;
  if (node.IsMap()) {
    groups.push_back(node);  // one group may be written without the list
  } else if (node.IsSequence()) {
    for (const auto& g : node) groups.push_back(g);
  } else {
    throw ConfigError(yaml_where(source, node) +
                      ": key 'zip': expected a list of mappings of keys to equally long lists");
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    const YAML::Node& g = groups[i];
    std::string context = "zip[" + std::to_string(i) + "]";
    if (!g.IsMap() || g.size() == 0)
      throw ConfigError(yaml_where(source, g) + ": key '" + context +
                        "': expected a mapping of keys to equally long lists");
    ZipGroup z;
    z.where = yaml_where(source, g);
    z.axes = parse_axes(g, source, context);
    for (const auto& a : z.axes)
      if (a.values.size() != z.axes[0].values.size())
        throw ConfigError(a.where + ": key '" + context + "." + printable(a.key) + "': has " +
                          std::to_string(a.values.size()) + " values but '" + printable(z.axes[0].key) + "' has " +
                          std::to_string(z.axes[0].values.size()) +
                          "; zipped lists advance together and must be equally long");
    zips.push_back(std::move(z));
  }
  return zips;
}

/// `exclude:` / `include:` entries: a list of mappings. Exclude values may be lists
/// (match any of them); include values are single values.
std::vector<PointPattern> parse_patterns(const YAML::Node& node, const std::string& source,
                                         const std::string& section) {
  if (!node.IsSequence())
    throw ConfigError(yaml_where(source, node) + ": key '" + section +
                      "': expected a list of mappings of keys to values");
  std::vector<PointPattern> out;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node& e = node[i];
    std::string context = section + "[" + std::to_string(i) + "]";
    if (!e.IsMap() || e.size() == 0)
      throw ConfigError(yaml_where(source, e) + ": key '" + context + "': expected a mapping of keys to values");
    PointPattern p;
    p.where = yaml_where(source, e);
    for (const auto& kv : e) {
      if (section == "include" && !kv.second.IsScalar())
        throw ConfigError(yaml_where(source, kv.second) + ": key '" + context + "." + printable(kv.first.Scalar()) +
                          "': expected a single value (an include entry is one point)");
      GridAxis a;
      a.key = kv.first.Scalar();
      a.where = yaml_where(source, kv.first);
      if (kv.second.IsScalar())
        a.values = {{kv.second.Scalar(), yaml_where(source, kv.second), true}};
      else
        a.values = axis_values(kv.second, source, context + "." + printable(a.key));
      p.keys.push_back(std::move(a));
    }
    out.push_back(std::move(p));
  }
  return out;
}

/// `seeds: [0, 1]`, `seeds: {range: [0, 5]}` or `seeds: N` (= 0 .. N-1).
GridAxis parse_seeds(const YAML::Node& node, const std::string& source) {
  GridAxis a;
  a.key = "train.seed";
  a.where = yaml_where(source, node);
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    long long n = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), n);
    if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || n < 1 || n > 100000)
      throw ConfigError(
          a.where + ": key 'seeds': expected a count in [1, 100000], a list of seeds or a generator, got '" + s + "'");
    for (long long i = 0; i < n; ++i) a.values.push_back({std::to_string(i), a.where, true});
    return a;
  }
  a.values = axis_values(node, source, "seeds");
  return a;
}

Constraints parse_constraints(const YAML::Node& node, const std::string& source) {
  YamlMap m(node, source, "constraints", {"global_batch", "derive", "on_mismatch"});
  Constraints c;
  c.where = m.where("global_batch");
  c.global_batch = m.integer("global_batch", 0, 1, int64_t(1) << 40);
  if (!m.has("global_batch"))
    throw ConfigError(yaml_where(source, node) +
                      ": key 'constraints.global_batch': required (sequences per optimizer step)");
  if (m.has("derive")) c.derive = m.choice("derive", "", {"train.micro_batch", "train.accum"});
  c.skip_mismatch = m.choice("on_mismatch", "error", {"error", "skip"}) == "skip";
  return c;
}

/// 1-based lines where the YAML documents of `text` start: a `---` line always starts
/// one; other content starts one only when none is open (at the top, or after `...`).
/// Read from the text: yaml-cpp 0.7's LoadAll loops forever on some malformed input
/// (found by the grid fuzzer: `',)',)aa`), so only YAML::Load parses.
std::vector<int> document_starts(const std::string& text) {
  bool open = false;
  std::vector<int> starts;
  int line = 1;
  for (size_t at = 0; at < text.size(); ++line) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string l = text.substr(at, end - at);
    at = end + 1;
    auto is_marker = [&](const char* m) {
      return l.rfind(m, 0) == 0 && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    };
    const size_t first = l.find_first_not_of(" \t\r");
    const bool content = first != std::string::npos && l[first] != '#' && l[0] != '%';
    if (is_marker("...")) {
      open = false;
    } else if (is_marker("---") || (content && !open)) {
      open = true;
      starts.push_back(line);
    }
  }
  return starts;
}

/// The one document of a grid file; YAML::Load would drop any after the first silently.
YAML::Node load_one_document(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source_location(source, e.mark.line, e.mark.column) + ": invalid YAML: " + e.msg);
  }
  const std::vector<int> starts = document_starts(text);
  if (starts.size() > 1)
    throw ConfigError(source + ":" + std::to_string(starts[1]) + ": holds " + std::to_string(starts.size()) +
                      " YAML documents; a grid is one (the second starts on this line)");
  return root;
}

/// Data files a grid names by a relative path are next to the grid file, wherever sweep
/// runs from: each such value becomes the absolute path (the run's config, and so its id,
/// holds that). Every place a value is written is rewritten alike, so an exclude still
/// matches the point it names.
void resolve_data_paths(SweepSpec& spec) {
  auto fix = [&](const std::string& key, ConfigValue& v) {
    // A value with a NUL is left as written: the key's own check names it.
    if ((key == "data.path" || key == "data.eval_path") && v.is_scalar && !v.text.empty() && v.text.front() != '/' &&
        v.text.find('\0') == std::string::npos)
      v.text = std::filesystem::absolute(next_to_grid(spec.source, v.text)).lexically_normal().string();
  };
  for (auto& [key, v] : spec.base) fix(key, v);
  auto fix_axes = [&](std::vector<GridAxis>& axes) {
    for (auto& a : axes)
      for (auto& v : a.values) fix(a.key, v);
  };
  fix_axes(spec.axes);
  for (auto& z : spec.zips) fix_axes(z.axes);
  for (auto& p : spec.excludes) fix_axes(p.keys);
  for (auto& p : spec.includes) fix_axes(p.keys);
}

/// A search that decides on a metric (tpe, halving) cannot name one the program derives
/// from the clock (`program.timing_metrics`): as tokens_per_s, it would not replay.
void refuse_timing_program_metrics(const SweepSpec& spec) {
  const SearchSpec& s = spec.search;
  if (s.kind != "tpe" && !s.halves() && s.kind != "pbt") return;
  std::vector<std::pair<std::string, std::string>> named;  // (metric, where)
  for (const auto& m : s.metrics) named.emplace_back(m, s.metric_where);
  for (const auto& c : s.constraints) named.emplace_back(c.metric, s.where);
  for (const auto& [metric, where] : named)
    for (const auto& t : spec.program.timing_metrics)
      if (metric == kProgramMetricPrefix + t)
        throw ConfigError(where + ": key 'search.metric': '" + metric + "' is one of program.timing_metrics (" +
                          "derived from the clock): it differs between two runs of the same bits, so a search " +
                          "deciding on it would not replay");
}

/// Each top-level key once, and one of kTopKeys.
void check_top_keys(const YAML::Node& root, const std::string& source) {
  std::vector<std::string> seen;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    // YAML leaves a repeated key to the reader; here the second would be lost silently.
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      throw ConfigError(yaml_where(source, kv.first) + ": top-level key '" + printable(key) + "' is given twice");
    seen.push_back(key);
    if (std::find(kTopKeys.begin(), kTopKeys.end(), key) == kTopKeys.end()) {
      std::string msg = yaml_where(source, kv.first) + ": unknown top-level key '" + printable(key) + "'";
      throw ConfigError(msg + did_you_mean(key, kTopKeys) + "; expected " + join(kTopKeys));
    }
  }
}

/// A random or tpe search's draws, as a zip of its own: every point is drawn from
/// search.space (a tpe search starts with its random draws; later trials are added as it
/// learns).
void draw_search_points(const YAML::Node& root, SweepSpec* spec) {
  const std::string& source = spec->source;
  if (spec->search.kind != "grid" && !spec->search.space.empty()) {
    // Every point is drawn: listed values would be a second, competing way to set them.
    for (const char* listed : {"grid", "zip", "include"})
      if (const YAML::Node n = root[listed])
        throw ConfigError(yaml_where(source, n) + ": key '" + listed + "': search.kind " + spec->search.kind +
                          " draws every point from search.space; write a listed key there as {choice: [...]}");
    // A tpe search starts with its random draws; later trials are added as it learns.
    const int64_t drawn = spec->search.kind == "tpe" ? spec->search.startup : spec->search.samples;
    ZipGroup draws;
    draws.where = spec->search.where;
    draws.section = "search.space";
    for (const SearchDim& d : spec->search.space) {
      GridAxis a;
      a.key = d.key;
      a.where = d.where;
      for (int64_t i = 0; i < drawn; ++i) a.values.push_back(draw(d, spec->search.seed, i));
      draws.axes.push_back(std::move(a));
    }
    spec->zips.push_back(std::move(draws));
  }
}

/// The training program (program:, --trainer or launch.trainer) and the model kinds it
/// offers, before any model key is checked; how messages name it ("" for sweep-train).
std::string read_program(const YAML::Node& root, const std::string& trainer, const DescribeModels& describe,
                         SweepSpec* spec, std::vector<std::string>* offers) {
  const std::string& source = spec->source;
  std::string program;
  if (const YAML::Node p = root["program"]) {
    const std::string at = yaml_where(source, p) + ": key 'program': ";
    if (!trainer.empty())
      throw ConfigError(at + "the grid names its program; --trainer cannot replace it (edit program.argv)");
    if (!spec->launch.trainer.empty())
      throw ConfigError(at + "launch.trainer names a training program too; keep one of them");
    spec->program = parse_program(p, source);
    refuse_timing_program_metrics(*spec);
    program = "program '" + printable(spec->program.argv.front()) + "'";
    *offers = {spec->program.schema.kind};
    // The program's kind is the grid's: base need not spell it.
    if (spec->base.find("model.kind") == spec->base.end())
      spec->base["model.kind"] = ConfigValue{spec->program.schema.kind, spec->program.where};
  } else if (!trainer.empty()) {
    spec->launch.trainer = std::filesystem::absolute(trainer).lexically_normal().string();
    program = "--trainer '" + printable(trainer) + "'";
    *offers = describe(spec->launch.trainer, program);
  } else if (!spec->launch.trainer.empty()) {
    const std::string given = spec->launch.trainer;
    // Absolute: the runs start it from other directories (Slurm: --chdir to the sweep).
    spec->launch.trainer = std::filesystem::absolute(next_to_grid(source, given)).lexically_normal().string();
    program = "launch.trainer '" + printable(given) + "'";
    *offers = describe(spec->launch.trainer,
                       yaml_where(source, root["launch"]["trainer"]) + ": key 'launch.trainer': '" + printable(given) +
                           "'" + (given == spec->launch.trainer ? "" : " (" + printable(spec->launch.trainer) + ")"));
  }
  return program;
}

/// Every key and value on its own, at its own line, before any point is formed; the
/// program must train the grid's kind.
void check_keys_and_values(const SweepSpec& spec, const std::string& program, const std::vector<std::string>& offers) {
  const std::string& source = spec.source;
  RunConfig base = apply_run_values(RunConfig{}, spec.base);
  KeyOwners owners;
  for (const auto& a : spec.axes) owners.claim(a.key, a.where, "grid"), check_values(base, a);
  for (const auto& z : spec.zips)
    for (const auto& a : z.axes) owners.claim(a.key, a.where, z.section), check_values(base, a);
  if (!spec.seeds.values.empty()) owners.claim("train.seed", spec.seeds.where, "seeds"), check_values(base, spec.seeds);
  if (!spec.constraints.derive.empty())
    owners.claim(spec.constraints.derive, spec.constraints.where, "constraints.derive");
  check_one_min_lr(spec);
  for (const auto& p : spec.excludes)
    for (const auto& a : p.keys) check_values(base, a);
  for (const auto& p : spec.includes)
    for (const auto& a : p.keys) check_values(base, a);
  // The program must train the grid's kind (a program of one's own may not offer the decoder).
  if (!program.empty() && std::find(offers.begin(), offers.end(), base.model.kind) == offers.end()) {
    const auto it = spec.base.find("model.kind");
    throw ConfigError((it == spec.base.end() ? source : it->second.where) + ": key 'model.kind': " + program +
                      " does not train model.kind " + base.model.kind + "; it offers: " + join(offers));
  }
}

}  // namespace

SweepSpec parse_grid(const std::string& text, const std::string& source, const std::string& trainer,
                     DescribeModels describe, const GridAdjust& adjust) {
  const YAML::Node root = load_one_document(text, source);
  if (!root.IsMap()) throw ConfigError(source + ": expected a mapping with keys " + join(kTopKeys));
  SweepSpec spec;
  spec.source = source;
  check_top_keys(root, source);
  // The name is checked after the command line's adjustments: --name may replace it.
  const YAML::Node name = root["name"];
  if (name && name.IsScalar()) spec.name = name.Scalar();
  const std::string named = spec.name;

  if (const YAML::Node base = root["base"]) {
    if (!base.IsMap()) throw ConfigError(yaml_where(source, base) + ": key 'base': expected a mapping of sections");
    for (const auto& kv : base) {
      const std::string sec = kv.first.Scalar();
      if (std::find(kSections.begin(), kSections.end(), sec) == kSections.end()) {
        throw ConfigError(yaml_where(source, kv.first) + ": unknown section 'base." + printable(sec) + "'" +
                          did_you_mean(sec, kSections, "base."));
      }
    }
    spec.base = flatten_yaml_node(base, source);
  }
  if (const YAML::Node grid = root["grid"]) {
    if (!grid.IsMap())
      throw ConfigError(yaml_where(source, grid) + ": key 'grid': expected a mapping of dotted keys to lists");
    spec.axes = parse_axes(grid, source, "grid");
  }
  if (const YAML::Node zip = root["zip"]) spec.zips = parse_zips(zip, source);
  if (const YAML::Node ex = root["exclude"]) spec.excludes = parse_patterns(ex, source, "exclude");
  if (const YAML::Node in = root["include"]) spec.includes = parse_patterns(in, source, "include");
  if (const YAML::Node seeds = root["seeds"]) spec.seeds = parse_seeds(seeds, source);
  if (const YAML::Node c = root["constraints"]) spec.constraints = parse_constraints(c, source);
  if (const YAML::Node l = root["launch"]) spec.launch = parse_launch(l, source);
  if (const YAML::Node sr = root["search"]) {
    spec.search = parse_search(sr, source);
    draw_search_points(root, &spec);
  }
  // The training program's model kinds, before any model key is checked.
  std::vector<std::string> offers;
  const std::string program = read_program(root, trainer, describe, &spec, &offers);  // how messages name it

  // The command line's keys, before anything is checked: a bad one is named as itself.
  if (adjust) adjust(spec);
  if (spec.name == named) check_name(spec.name, name, source);
  resolve_data_paths(spec);
  check_keys_and_values(spec, program, offers);
  return spec;
}

std::string read_grid_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; fstat then
  // refuses it (and any other special file) before a single read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw ConfigError(path + ": cannot open the grid file");
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  if (!stat_ok || !S_ISREG(st.st_mode)) {
    ::close(fd);
    if (stat_ok && S_ISDIR(st.st_mode)) throw ConfigError(path + ": is a directory, expected a grid file");
    throw ConfigError(path + ": not a regular file, expected a grid file");
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, size_t(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw ConfigError(path + ": cannot read the grid file (" + why + ")");
    }
  }
  ::close(fd);
  return text;
}

namespace {

/// launch.hostfile must be a regular file that can be read: a FIFO would hang mpirun
/// before any rank starts (so no timeout applies), and a missing one would fail every run
/// as "crashed" with no cause. Checked like a data file, before anything starts.
void check_hostfile(const LaunchSpec& l) {
  if (l.hostfile.empty()) return;
  const std::string at = l.hostfile_where + ": key 'launch.hostfile': '" + printable(l.hostfile) + "': ";
  const int fd = ::open(l.hostfile.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO: no wait for a writer
  if (fd < 0) {
    const int err = errno;
    throw ConfigError(at + (err == ENOENT ? std::string("no such file") : std::strerror(err)) +
                      "; expected an Open MPI hostfile (one host a line), relative to the grid file");
  }
  struct stat st {};
  const bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  if (!ok) throw ConfigError(at + "not a regular file (a directory, FIFO or device); expected an Open MPI hostfile");
}

}  // namespace

SweepSpec load_grid(const std::string& path, const std::string& trainer, const GridAdjust& adjust, std::string* text) {
  const std::string read = read_grid_file(path);
  SweepSpec spec = parse_grid(read, path, trainer, load_trainer_models, adjust);
  if (text) *text = read;
  spec.launch.hostfile = next_to_grid(path, spec.launch.hostfile);
  check_hostfile(spec.launch);
  return spec;
}

std::vector<GridPoint> expand(const SweepSpec& spec) { return expand_grid(spec).points; }

}  // namespace sweep
