#include "program.h"

#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "config_error.h"  // ConfigError
#include "model_schema.h"  // describe_models_yaml, parse_models_yaml, validate_model_schema, canonical_real
#include "process.h"       // resolve_program
#include "text.h"          // printable, did_you_mean
#include "yaml_read.h"     // YamlMap, yaml_where, next_to_grid

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

void finish(ProgramSpec& p, const std::string& what) {
  try {
    validate_model_schema(p.schema);
    register_model_schema(p.schema);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(what + ": " + e.what());
  }
  p.json = json_string_array(p.argv);
  p.digest = program_digest(p.argv);
  p.keys = describe_models_yaml(ModelsDescription{{p.schema.kind}, {p.schema}});
}

}  // namespace

ProgramSpec parse_program(const YAML::Node& node, const std::string& source) {
  ProgramSpec p;
  p.where = yaml_where(source, node);
  YamlMap m(node, source, "program", {"argv", "kind", "help", "keys", "writes", "confine"});
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

std::string recorded_writes(const ProgramSpec& p) { return p.confine ? json_string_array(p.writes) : "off"; }

ProgramSpec recorded_program(const std::string& json, const std::string& keys, const std::string& writes,
                             const std::string& what) {
  ProgramSpec p;
  p.argv = parse_json_string_array(json);
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

std::vector<std::string> program_files(const std::vector<std::string>& argv) {
  std::vector<std::string> files;
  for (const std::string& a : argv)
    if (a.find('/') != std::string::npos && regular_file(a)) files.push_back(a);
  return files;
}

std::string program_digest(const std::vector<std::string>& argv) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  std::vector<char> buf(1 << 16);
  for (const std::string& a : program_files(argv)) {
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

std::string json_string_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    out += i ? ", \"" : "\"";
    for (unsigned char c : items[i]) {
      if (c == '"' || c == '\\') {
        out += '\\', out += char(c);
      } else if (c < 0x20 || c == 0x7f) {
        char esc[8];
        std::snprintf(esc, sizeof esc, "\\u%04x", c);
        out += esc;
      } else {
        out += char(c);  // UTF-8 bytes as they are
      }
    }
    out += '"';
  }
  return out + "]";
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
          const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
          if (d < 0) throw bad("a bad \\u escape");
          v = v * 16 + unsigned(d);
        }
        if (v >= 0x80) throw bad("a \\u escape beyond ASCII");  // json_string_array writes none
        s += char(v), i += 4;
      } else if (e == '"' || e == '\\' || e == '/') {
        s += e;
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

std::vector<std::string> program_environment(const ProgramSpec& p, const std::string& run_dir,
                                             const std::string& run_id, int64_t threads) {
  const std::string t = std::to_string(threads);
  return {"SWEEP_CONFIG=" + run_dir + "/config.yaml",
          "SWEEP_RUN_DIR=" + run_dir,
          "SWEEP_RUN_ID=" + run_id,
          "SWEEP_PROGRAM=" + p.json,
          "SWEEP_PROGRAM_DIGEST=" + p.digest,
          "SWEEP_PROGRAM_KEYS=" + p.keys,
          "SWEEP_PROGRAM_WRITES=" + recorded_writes(p),
          "PYTHONHASHSEED=0",
          "PYTHONUNBUFFERED=1",  // a Python program's log follows it line by line
          "OMP_NUM_THREADS=" + t,
          "OPENBLAS_NUM_THREADS=" + t,
          "MKL_NUM_THREADS=" + t,
          "CUBLAS_WORKSPACE_CONFIG=:4096:8"};
}

}  // namespace sweep
