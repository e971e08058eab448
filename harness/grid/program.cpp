#include "program.h"

#include <arpa/inet.h>
#include <glob.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "config_error.h"    // ConfigError
#include "data_file.h"       // identify_data_file, sweep_cache_dir
#include "model_schema.h"    // describe_models_yaml, parse_models_yaml, validate_model_schema, canonical_real
#include "process.h"         // resolve_program
#include "run_config.h"      // config_keys, kDecoderKind
#include "run_files.h"       // regular_file_problem
#include "text.h"            // printable, did_you_mean, join
#include "timing_metrics.h"  // timing_declaration_problem
#include "yaml_read.h"       // YamlMap, yaml_where, next_to_grid

namespace fs = std::filesystem;

namespace sweep {
namespace {

bool regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// One declared key: `name: {type: int|real|choice, default, min, max, choices, help}`.
ModelKey parse_key(const std::string& name, const YAML::Node& node, const std::string& source) {
  const std::string context = "program.keys." + name;
  YamlMap m(node, source, context, {"type", "default", "min", "max", "min_exclusive", "choices", "help"});
  ModelKey k;
  k.name = name;
  k.help = m.text("help", "");
  const std::string type = m.choice("type", "", {"int", "real", "choice"});
  if (!m.has("default")) throw ConfigError(m.where("type") + ": key '" + context + ".default': required");
  const std::string def = m.text("default", "");
  auto need = [&](const char* key) {
    if (!m.has(key))
      throw ConfigError(m.where("type") + ": key '" + context + "." + key + "': required for type " + type);
  };
  if (type == "int") {
    need("min"), need("max");
    k.type = ModelKey::Type::integer;
    k.int_min = m.integer("min", 0, INT64_MIN, INT64_MAX);
    k.int_max = m.integer("max", 0, INT64_MIN, INT64_MAX);
    k.default_value = std::to_string(m.integer("default", 0, k.int_min, k.int_max));
  } else if (type == "real") {
    need("min"), need("max");
    k.type = ModelKey::Type::real;
    k.real_min = m.number("min", 0, -1e308, 1e308);
    k.real_max = m.number("max", 0, -1e308, 1e308);
    k.min_exclusive = m.boolean("min_exclusive", false);
    k.default_value = canonical_real(m.number("default", 0, k.real_min, k.real_max));
  } else {
    need("choices");
    k.type = ModelKey::Type::choice;
    k.choices = m.texts("choices");
    k.default_value = def;
  }
  return k;
}

/// An argv element as the grid names it: argv[0] on PATH or next to the grid, later
/// path-like elements next to the grid; each must exist.
std::string resolve_element(const std::string& given, size_t i, const std::string& source, const std::string& where) {
  const std::string at = where + ": key 'program.argv[" + std::to_string(i) + "]': '" + printable(given) + "'";
  if (given.empty()) throw ConfigError(at + ": an empty argument");
  if (given.find('\0') != std::string::npos) throw ConfigError(at + ": holds a NUL byte");
  if (i == 0) {
    std::string path = given;
    if (given.find('/') != std::string::npos) {
      path = fs::absolute(next_to_grid(source, given)).lexically_normal().string();
    } else {
      path = resolve_program(given);
      if (path.empty()) throw ConfigError(at + ": not found on PATH; expected a program to run");
      path = fs::absolute(path).lexically_normal().string();
    }
    if (!regular_file(path) || ::access(path.c_str(), X_OK) != 0)
      throw ConfigError(at + (path == given ? "" : " (" + printable(path) + ")") +
                        ": not found or not executable; expected a program to run");
    // The run's command is `env NAME=VALUE... PROGRAM ...`: a '=' would make it a variable.
    if (path.find('=') != std::string::npos)
      throw ConfigError(at + ": a program path with '=' in it cannot be started; rename or link it");
    return path;
  }
  if (given.find('/') == std::string::npos || given.front() == '-') return given;
  std::string path = fs::absolute(next_to_grid(source, given)).lexically_normal().string();
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw ConfigError(at + (path == given ? "" : " (" + printable(path) + ")") +
                      ": no such file; an argument with a '/' is a path, relative to the grid file");
  return path;
}

/// Most files `program.files` may name: a directory of a whole checkout would make every
/// plan hash gigabytes.
constexpr size_t kMaxProgramFiles = 5000;

/// The regular files of `dir`, recursively, leaving out hidden entries (.git, .venv) and
/// __pycache__.
void files_under(const fs::path& dir, std::vector<std::string>* out) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.front() == '.' || name == "__pycache__") {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec)) out->push_back(it->path().lexically_normal().string());
    if (out->size() > kMaxProgramFiles) return;
  }
}

}  // namespace

std::vector<std::string> files_of_pattern(const std::string& pattern) {
  std::error_code ec;
  std::vector<std::string> found;
  if (fs::is_directory(pattern, ec)) {
    files_under(pattern, &found);
  } else if (fs::is_regular_file(pattern, ec)) {
    found.push_back(pattern);
  } else {
    glob_t g{};
    if (::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        if (fs::is_directory(g.gl_pathv[i], ec))
          files_under(g.gl_pathv[i], &found);
        else if (fs::is_regular_file(g.gl_pathv[i], ec))
          found.push_back(fs::path(g.gl_pathv[i]).lexically_normal().string());
      }
    ::globfree(&g);
  }
  std::sort(found.begin(), found.end());
  return found;
}

namespace {

/// `program.files`: each entry a file, a directory or a glob, relative to the grid file.
/// The entries that are a directory or a glob go to *trees (absolute): what they name
/// may grow, so the stale check expands them again.
std::vector<std::string> expand_files(const YamlMap& m, const std::string& source, std::vector<std::string>* trees) {
  std::vector<std::string> out;
  for (const std::string& given : m.texts("files")) {
    const std::string pattern = fs::absolute(next_to_grid(source, given)).lexically_normal().string();
    const std::vector<std::string> found = files_of_pattern(pattern);
    if (found.empty())
      throw ConfigError(m.at("files") + "'" + printable(given) +
                        "' names no file (a file, a directory or a glob, relative to the grid file)");
    if (std::error_code ec; !fs::is_regular_file(pattern, ec)) trees->push_back(pattern);
    out.insert(out.end(), found.begin(), found.end());
    if (out.size() > kMaxProgramFiles)
      throw ConfigError(m.at("files") + "more than " + std::to_string(kMaxProgramFiles) +
                        " files; name the program's source, not a whole tree");
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

/// "<hash> <path>" of each file, as a JSON array (hashes cached like data files').
std::string hashed_files(const std::vector<std::string>& files, const std::string& what) {
  std::vector<std::string> items;
  for (const std::string& f : files) {
    try {
      items.push_back(identify_data_file(f, sweep_cache_dir()).hash + " " + f);
    } catch (const std::runtime_error& e) {
      throw ConfigError(what + ": " + e.what());
    }
  }
  return json_string_array(items);
}

void finish(ProgramSpec& p, const std::string& what) {
  try {
    validate_model_schema(p.schema);
    register_model_schema(p.schema);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(what + ": " + e.what());
  }
  p.json = json_string_array(p.argv);
  p.digest = program_digest(p.argv, p.files, p.cwd);
  std::vector<std::string> sources = program_files(p.argv, p.cwd);
  sources.insert(sources.end(), p.files.begin(), p.files.end());
  p.file_hashes = hashed_files(sources, what);
  p.data_hashes = p.data.empty() ? "" : hashed_files(p.data, what);
  p.keys = describe_models_yaml(ModelsDescription{{p.schema.kind}, {p.schema}});
}

}  // namespace

ProgramSpec parse_program(const YAML::Node& node, const std::string& source) {
  ProgramSpec p;
  p.where = yaml_where(source, node);
  YamlMap m(node, source, "program",
            {"argv", "kind", "help", "keys", "writes", "confine", "cwd", "files", "data", "stop", "honours",
             "pass_args", "timing_metrics", "accum", "steps", "single_rank_env"});
  if (!m.has("argv") || !m.node("argv").IsSequence() || m.node("argv").size() == 0)
    throw ConfigError(p.where + ": key 'program.argv': required, a list such as [python3, train.py]");
  size_t i = 0;
  for (const YAML::Node& a : m.node("argv")) {
    if (!a.IsScalar()) throw ConfigError(yaml_where(source, a) + ": key 'program.argv': expected a list of strings");
    p.argv.push_back(resolve_element(a.Scalar(), i++, source, yaml_where(source, a)));
  }
  if (!m.has("kind"))
    throw ConfigError(p.where + ": key 'program.kind': required, the model.kind the program trains (e.g. my-lm)");
  p.schema.kind = m.text("kind", "");
  p.schema.help = m.text("help", "");
  if (m.has("keys")) {
    const YAML::Node keys = m.node("keys");
    if (!keys.IsMap())
      throw ConfigError(m.at("keys") + "expected a mapping of key names to {type, default, min, max, choices}");
    for (const auto& kv : keys) p.schema.keys.push_back(parse_key(kv.first.Scalar(), kv.second, source));
  }
  p.confine = m.boolean("confine", true);
  for (const std::string& w : m.texts("writes")) {
    if (!p.confine) throw ConfigError(m.at("writes") + "confine is false: the program may write anywhere already");
    const std::string dir = fs::absolute(next_to_grid(source, w)).lexically_normal().string();
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      throw ConfigError(m.at("writes") + "'" + printable(w) + "'" + (dir == w ? "" : " (" + printable(dir) + ")") +
                        ": not a directory; expected directories the program may write (relative to the grid file)");
    p.writes.push_back(dir);
  }
  const std::string cwd = m.text("cwd", ".");
  p.cwd = fs::absolute(next_to_grid(source, cwd)).lexically_normal().string();
  if (std::error_code ec; !fs::is_directory(p.cwd, ec))
    throw ConfigError(m.at("cwd") + "'" + printable(cwd) + "'" + (p.cwd == cwd ? "" : " (" + printable(p.cwd) + ")") +
                      ": not a directory; expected where each run starts (relative to the grid file)");
  if (p.cwd.find('=') != std::string::npos)
    throw ConfigError(m.at("cwd") + "a directory with '=' in its name cannot be given to env(1); rename or link it");
  p.files = expand_files(m, source, &p.trees);
  for (const std::string& d : m.texts("data")) {
    const std::string path = fs::absolute(next_to_grid(source, d)).lexically_normal().string();
    if (const std::string why = regular_file_problem(path); !why.empty())
      throw ConfigError(m.at("data") + "'" + printable(d) + "'" + (path == d ? "" : " (" + printable(path) + ")") +
                        ": " + why + "; expected the data files the program reads (relative to the grid file)");
    p.data.push_back(path);
  }
  p.stop = m.boolean("stop", false);
  p.pass_args = m.boolean("pass_args", true);
  p.honours_declared = m.has("honours");
  p.honours = m.texts("honours");
  for (std::string& k : p.honours) {
    const auto& known = config_keys(kDecoderKind);
    if (k == "train.min_lr_ratio") k = "train.min_lr";  // what the program is handed
    if (k.rfind("model.", 0) == 0 || std::find(known.begin(), known.end(), k) == known.end())
      throw ConfigError(m.at("honours") + "'" + printable(k) + "': not a built-in key (train.*, data.*, dist.*)" +
                        did_you_mean(k, known) + "; the program's own keys are model.* under program.keys");
  }
  const auto convention = [&](const char* key, const std::vector<std::string>& allowed, const char* meaning) {
    std::string v = m.text(key, allowed.front());
    if (std::find(allowed.begin(), allowed.end(), v) == allowed.end())
      throw ConfigError(m.at(key) + "'" + printable(v) + "': expected " + join(allowed, " or ") + " (" + meaning + ")");
    return v;
  };
  p.accum = convention("accum", {"per_rank", "global"},
                       "what the program's accumulation key counts: micro-batches per rank, or of the whole world");
  p.steps = convention("steps", {"count", "plus_one"},
                       "what its step key says: the steps it trains, or the last iteration counted from 0");
  p.single_rank_env = m.boolean("single_rank_env", false);
  p.timing_metrics = m.texts("timing_metrics");
  for (const std::string& name : p.timing_metrics) {
    if (const std::string why = timing_declaration_problem(name); !why.empty())
      throw ConfigError(m.at("timing_metrics") + "'" + printable(name) + "': " + why);
  }
  finish(p, p.where + ": key 'program'");
  return p;
}

std::vector<std::string> confine_args(const ProgramSpec& p, const std::string& run_dir) {
  // The scratch places and /dev are granted unless they hold the run directory (which
  // would grant its neighbours: the sweep's files, other runs); sweep-confine decides that
  // on the node the program runs on, on the files themselves, and gives the run a TMPDIR
  // of its own when it withholds one.
  std::vector<std::string> args = {"--run", run_dir, "--scratch", "/tmp", "--scratch", "/var/tmp", "--devices"};
  for (const std::string& w : p.writes) args.insert(args.end(), {"--write", w});
  return args;
}

std::set<std::string> program_given_keys(std::set<std::string> set) {
  if (set.erase("train.min_lr_ratio")) set.insert("train.min_lr");  // handed the min_lr it derives
  set.insert({"model.kind", "dist.world_size", "train.threads", "train.checksum_every", "train.telemetry_every"});
  return set;
}

std::string ProgramSpec::conventions() const {
  return "accum=" + accum + " steps=" + steps + " rank_env=" + (single_rank_env ? "always" : "ranks");
}

std::string recorded_writes(const ProgramSpec& p) { return p.confine ? json_string_array(p.writes) : "off"; }

namespace {

/// The paths of a recorded `program.files` or `program.data` (a JSON array of "<hash>
/// <path>"), without their hashes; none for "".
std::vector<std::string> hashed_paths(const std::string& hashed) {
  std::vector<std::string> out;
  if (!hashed.empty())
    for (const std::string& item : parse_json_string_array(hashed)) out.push_back(item.substr(item.find(' ') + 1));
  return out;
}

}  // namespace

ProgramSpec recorded_program(const std::string& json, const std::string& keys, const std::string& writes,
                             const std::string& what, const std::string& files, const std::string& data,
                             const std::string& cwd, const std::string& pass_args) {
  ProgramSpec p;
  p.pass_args = pass_args != "false";
  p.argv = parse_json_string_array(json);
  if (std::error_code ec; !cwd.empty() && fs::is_directory(cwd, ec)) p.cwd = cwd;
  const std::vector<std::string> argv_files = program_files(p.argv, p.cwd);
  for (const std::string& f : hashed_paths(files))
    if (std::find(argv_files.begin(), argv_files.end(), f) == argv_files.end()) p.files.push_back(f);
  p.data = hashed_paths(data);
  p.confine = writes != "off";
  if (p.confine && !writes.empty()) p.writes = parse_json_string_array(writes);
  if (p.argv.empty()) throw ConfigError(what + ": the recorded program is an empty command");
  if (!regular_file(p.argv[0]) || ::access(p.argv[0].c_str(), X_OK) != 0)
    throw ConfigError(what + ": the recorded program '" + printable(p.argv[0]) + "' is not found or not executable");
  ModelsDescription d = parse_models_yaml(keys, what + " (program.keys)");
  if (d.models.size() != 1) throw ConfigError(what + ": program.keys: expected the schema of one model kind");
  p.schema = d.models.front();
  finish(p, what);
  return p;
}

std::vector<std::string> program_files(const std::vector<std::string>& argv, const std::string& cwd) {
  std::vector<std::string> files;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.find('/') != std::string::npos) {
      if (regular_file(a)) files.push_back(a);
    } else if (i > 0 && !cwd.empty() && !a.empty() && a.front() != '-') {
      // `python3 train.py`: the run starts in cwd, where the bare name is that file.
      const std::string path = (fs::path(cwd) / a).lexically_normal().string();
      if (regular_file(path)) files.push_back(path);
    }
  }
  return files;
}

std::string program_digest(const std::vector<std::string>& argv, const std::vector<std::string>& files,
                           const std::string& cwd) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  std::vector<char> buf(1 << 16);
  std::vector<std::string> all = program_files(argv, cwd);
  all.insert(all.end(), files.begin(), files.end());
  for (const std::string& a : all) {
    std::ifstream in(a, std::ios::binary);
    while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0)
      XXH3_64bits_update(st, buf.data(), size_t(in.gcount()));
  }
  const unsigned long long h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  char out[32];
  std::snprintf(out, sizeof out, "xxh3:%016llx", h);
  return out;
}

std::vector<std::string> parse_json_string_array(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return ConfigError("program '" + printable(text.substr(0, 200)) + "': " + why +
                       "; expected a JSON array of strings");
  };
  std::vector<std::string> out;
  size_t i = 0;
  auto skip = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) ++i;
  };
  skip();
  if (i >= text.size() || text[i++] != '[') throw bad("no '['");
  skip();
  const bool none = i < text.size() && text[i] == ']';
  while (!none) {
    skip();
    if (i >= text.size() || text[i++] != '"') throw bad("an element is not a string");
    std::string s;
    for (;;) {
      if (i >= text.size()) throw bad("an unterminated string");
      const char c = text[i++];
      if (c == '"') break;
      if (c != '\\') {
        s += c;
        continue;
      }
      if (i >= text.size()) throw bad("an unterminated escape");
      const char e = text[i++];
      if (e == 'u') {
        if (i + 4 > text.size()) throw bad("a short \\u escape");
        unsigned v = 0;
        for (size_t k = i; k < i + 4; ++k) {
          const char h = text[k];
          const int d = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
          if (d < 0) throw bad("a bad \\u escape");
          v = v * 16 + unsigned(d);
        }
        i += 4;
        // As UTF-8 (json_quoted writes \\ufffd for a byte that was not); a surrogate half
        // alone is no character.
        if (v >= 0xd800 && v <= 0xdfff) throw bad("a \\u escape of a UTF-16 surrogate");
        if (v < 0x80) {
          s += char(v);
        } else if (v < 0x800) {
          s += char(0xc0 | (v >> 6)), s += char(0x80 | (v & 0x3f));
        } else {
          s += char(0xe0 | (v >> 12)), s += char(0x80 | ((v >> 6) & 0x3f)), s += char(0x80 | (v & 0x3f));
        }
      } else if (e == '"' || e == '\\' || e == '/') {
        s += e;
      } else if (e == 'n' || e == 'r' || e == 't' || e == 'b' || e == 'f') {
        s += e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e == 'b' ? '\b' : '\f';
      } else {
        throw bad(std::string("the escape \\") + e);
      }
    }
    out.push_back(std::move(s));
    skip();
    if (i < text.size() && text[i] == ',') {
      ++i;
      continue;
    }
    if (i < text.size() && text[i] == ']') break;
    throw bad("no ',' or ']' after an element");
  }
  ++i;
  skip();
  if (i != text.size()) throw bad("text after ']'");
  return out;
}

namespace {

/// The hash of the first "<hash> <path>" of a JSON array of them; "" for none.
std::string first_hash(const std::string& hashed) {
  if (hashed.empty()) return "";
  const auto items = parse_json_string_array(hashed);
  return items.empty() ? "" : items.front().substr(0, items.front().find(' '));
}

}  // namespace

std::string AcceptedHashes::current(const std::string& path, const std::string& hash) const {
  std::string h = hash;
  // A chain ends within as many links as there are; a cycle (hand-made) stops there too.
  for (size_t n = 0; n < to.size(); ++n) {
    const auto it = to.find({path, h});
    if (it == to.end()) break;
    h = it->second;
  }
  return h;
}

std::string FileChange::text() const {
  if (now.empty()) return printable(path) + " (removed since the run)";
  return printable(path) + " (was " + was + (accepted.empty() ? "" : ", accepted as " + accepted) + ", now " + now +
         ")";
}

std::vector<FileChange> changed_files(const std::string& recorded, const AcceptedHashes& accepted) {
  std::vector<FileChange> out;
  for (const std::string& item : parse_json_string_array(recorded)) {
    const auto space = item.find(' ');
    if (space == std::string::npos) throw ConfigError("'" + printable(item) + "': expected \"<hash> <path>\"");
    FileChange c;
    c.was = item.substr(0, space), c.path = item.substr(space + 1);
    std::error_code ec;
    if (!fs::exists(c.path, ec)) {
      // Gone from a directory that is here: removed since the run. A directory that is not
      // here either is a compute node's path: the run itself checks it.
      if (fs::is_directory(fs::path(c.path).parent_path(), ec)) out.push_back(c);
      continue;
    }
    try {
      c.now = identify_data_file(c.path, sweep_cache_dir()).hash;
    } catch (const std::runtime_error&) {
      c.now = "unreadable";
    }
    const std::string taken = accepted.current(c.path, c.was);
    if (taken != c.was) c.accepted = taken;
    if (c.now != taken) out.push_back(c);
  }
  return out;
}

std::vector<std::string> added_files(const std::string& trees, const std::string& recorded) {
  const std::vector<std::string> recorded_paths = hashed_paths(recorded);
  const std::set<std::string> had(recorded_paths.begin(), recorded_paths.end());
  std::vector<std::string> out;
  for (const std::string& pattern : parse_json_string_array(trees))
    for (const std::string& f : files_of_pattern(pattern))
      if (!had.count(f)) out.push_back(printable(f) + " (added since the run, in " + printable(pattern) + ")");
  return out;
}

std::vector<std::string> program_environment(const ProgramSpec& p, const std::string& run_dir,
                                             const std::string& run_id, int64_t threads, const Rendezvous& rendezvous) {
  const std::string t = std::to_string(threads);
  std::vector<std::string> env = {
      "SWEEP_CONFIG=" + run_dir + "/config.yaml", "SWEEP_RUN_DIR=" + run_dir, "SWEEP_RUN_ID=" + run_id,
      "SWEEP_PROGRAM=" + p.json, "SWEEP_PROGRAM_DIGEST=" + p.digest, "SWEEP_PROGRAM_KEYS=" + p.keys,
      "SWEEP_PROGRAM_WRITES=" + recorded_writes(p), "SWEEP_PROGRAM_FILES=" + p.file_hashes,
      "SWEEP_PROGRAM_TREES=" + (p.trees.empty() ? std::string() : json_string_array(p.trees)),
      "SWEEP_PROGRAM_CWD=" + p.cwd, std::string("SWEEP_PROGRAM_PASS_ARGS=") + (p.pass_args ? "true" : "false"),
      "SWEEP_PROGRAM_TIMING_METRICS=" + join(p.timing_metrics, " "), "SWEEP_DATA_FILES=" + p.data_hashes,
      // The first data file as data.file and data.hash, as sweep-train records data.path.
      "SWEEP_DATA_FILE=" + (p.data.empty() ? std::string() : p.data.front()),
      "SWEEP_DATA_HASH=" + first_hash(p.data_hashes), "PYTHONHASHSEED=0",
      "PYTHONUNBUFFERED=1",  // a Python program's log follows it line by line
      "OMP_NUM_THREADS=" + t, "OPENBLAS_NUM_THREADS=" + t, "MKL_NUM_THREADS=" + t, "CUBLAS_WORKSPACE_CONFIG=:4096:8"};
  env.push_back("SWEEP_PROGRAM_CONVENTIONS=" + p.conventions());
  // One rank: no sweep-rank to set torch.distributed's variables, and none unless the
  // program asks (a script that detects DDP from RANK then runs plain).
  if (rendezvous.world > 1 || p.single_rank_env) {
    env.push_back("MASTER_ADDR=" + rendezvous.addr);
    if (!rendezvous.port.empty()) env.push_back("MASTER_PORT=" + rendezvous.port);
  }
  if (rendezvous.world == 1 && p.single_rank_env)
    env.insert(env.end(), {"RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1"});
  return env;
}

std::string free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  std::string port;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = std::to_string(ntohs(a.sin_port));
  ::close(fd);
  return port;
}

}  // namespace sweep
