#include "model_schema.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <deque>
#include <stdexcept>

#include "config_error.h"  // ConfigError
#include "text.h"          // join, printable

namespace sweep {

std::string canonical_real(double x) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

ModelKey int_key(std::string name, int64_t default_value, int64_t min, int64_t max, std::string help) {
  ModelKey k;
  k.name = std::move(name), k.type = ModelKey::Type::integer, k.default_value = std::to_string(default_value);
  k.int_min = min, k.int_max = max, k.help = std::move(help);
  return k;
}

ModelKey real_key(std::string name, double default_value, double min, double max, std::string help,
                  bool min_exclusive) {
  ModelKey k;
  k.name = std::move(name), k.type = ModelKey::Type::real, k.default_value = canonical_real(default_value);
  k.real_min = min, k.real_max = max, k.min_exclusive = min_exclusive, k.help = std::move(help);
  return k;
}

ModelKey choice_key(std::string name, std::string default_value, std::vector<std::string> choices, std::string help) {
  ModelKey k;
  k.name = std::move(name), k.type = ModelKey::Type::choice, k.default_value = std::move(default_value);
  k.choices = std::move(choices), k.help = std::move(help);
  return k;
}

namespace {

constexpr size_t kMaxName = 64;

/// [a-z][a-z0-9_]* (keys) or [a-z][a-z0-9_-]* (kinds), at most kMaxName characters.
bool good_name(const std::string& s, bool dash) {
  if (s.empty() || s.size() > kMaxName || s[0] < 'a' || s[0] > 'z') return false;
  return std::all_of(s.begin(), s.end(), [dash](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || (dash && c == '-');
  });
}

struct Entry {
  ModelSchema schema;
  std::vector<std::string> keys;  // dotted, model_schema_keys order
};

std::deque<Entry>& registry() {
  static std::deque<Entry> r;  // a deque: entries never move, so key lists handed out stay valid
  return r;
}

bool same(const ModelKey& a, const ModelKey& b) {
  return a.name == b.name && a.type == b.type && a.default_value == b.default_value && a.int_min == b.int_min &&
         a.int_max == b.int_max && a.real_min == b.real_min && a.real_max == b.real_max &&
         a.min_exclusive == b.min_exclusive && a.choices == b.choices && a.help == b.help;
}

bool same(const ModelSchema& a, const ModelSchema& b) {
  return a.kind == b.kind && a.help == b.help && a.keys.size() == b.keys.size() &&
         std::equal(a.keys.begin(), a.keys.end(), b.keys.begin(),
                    [](const auto& x, const auto& y) { return same(x, y); });
}

const char* type_name(ModelKey::Type t) {
  switch (t) {
    case ModelKey::Type::integer:
      return "int";
    case ModelKey::Type::real:
      return "real";
    case ModelKey::Type::choice:
      return "choice";
  }
  return "?";
}

}  // namespace

void validate_model_schema(const ModelSchema& s) {
  const std::string who = "model '" + printable(s.kind) + "'";
  auto fail = [&](const std::string& what) { throw std::invalid_argument(who + ": " + what); };
  if (!good_name(s.kind, true)) fail("a kind is 1 to 64 characters of a-z, 0-9, _ and -, starting with a letter");
  if (s.kind == kDecoderKind) fail("the built-in decoder has this kind; choose another");
  std::vector<std::string> seen;
  for (const ModelKey& k : s.keys) {
    const std::string key = "key '" + printable(k.name) + "': ";
    if (!good_name(k.name, false))
      fail(key + "a key name is 1 to 64 characters of a-z, 0-9 and _, starting with a letter");
    if (k.name == "kind" || k.name == "vocab" || k.name == "seq_len")
      fail(key + "collides with the built-in key model." + k.name + ", which every model has");
    if (std::find(seen.begin(), seen.end(), k.name) != seen.end()) fail(key + "declared twice");
    seen.push_back(k.name);
    const std::string& d = k.default_value;
    switch (k.type) {
      case ModelKey::Type::integer: {
        if (k.int_min > k.int_max) fail(key + "the range is empty (min > max)");
        int64_t x = 0;
        auto r = std::from_chars(d.data(), d.data() + d.size(), x);
        if (d.empty() || r.ec != std::errc() || r.ptr != d.data() + d.size() || std::to_string(x) != d)
          fail(key + "the default '" + printable(d) + "' is not an integer spelled canonically");
        if (x < k.int_min || x > k.int_max) fail(key + "the default " + d + " is outside its range");
        break;
      }
      case ModelKey::Type::real: {
        if (!std::isfinite(k.real_min) || !std::isfinite(k.real_max) || k.real_min > k.real_max)
          fail(key + "the range must be finite and min <= max");
        double x = 0;
        auto r = std::from_chars(d.data(), d.data() + d.size(), x);
        if (d.empty() || r.ec != std::errc() || r.ptr != d.data() + d.size() || !std::isfinite(x) ||
            canonical_real(x) != d)
          fail(key + "the default '" + printable(d) + "' is not a finite number spelled canonically");
        if (x < k.real_min || (k.min_exclusive && x == k.real_min) || x > k.real_max)
          fail(key + "the default " + d + " is outside its range");
        break;
      }
      case ModelKey::Type::choice: {
        if (k.choices.empty()) fail(key + "a choice key needs at least one choice");
        for (const auto& c : k.choices)
          if (c.empty() || c.size() > kMaxName || c.find_first_of(" \t\n\r\"'#:,[]{}\\") != std::string::npos ||
              !valid_utf8(c))
            fail(key + "choice '" + printable(c) + "': 1 to 64 characters, no spaces, quotes or YAML punctuation");
        if (std::find(k.choices.begin(), k.choices.end(), d) == k.choices.end())
          fail(key + "the default '" + printable(d) + "' is not one of its choices");
        break;
      }
    }
  }
}

void register_model_schema(const ModelSchema& s) {
  validate_model_schema(s);
  for (const Entry& e : registry())
    if (e.schema.kind == s.kind) {
      if (same(e.schema, s)) return;
      throw std::invalid_argument("model '" + s.kind + "': registered twice, with different keys");
    }
  Entry e{s, {"model.kind", "model.vocab", "model.seq_len"}};
  for (const ModelKey& k : s.keys) e.keys.push_back("model." + k.name);
  registry().push_back(std::move(e));
}

const ModelSchema* find_model_schema(const std::string& kind) {
  for (const Entry& e : registry())
    if (e.schema.kind == kind) return &e.schema;
  return nullptr;
}

std::vector<std::string> model_kinds() {
  std::vector<std::string> out{kDecoderKind};
  for (const Entry& e : registry()) out.push_back(e.schema.kind);
  return out;
}

const std::vector<std::string>& model_schema_keys(const std::string& kind) {
  static const std::vector<std::string> none;
  for (const Entry& e : registry())
    if (e.schema.kind == kind) return e.keys;
  return none;
}

std::string describe_models_yaml(const ModelsDescription& d) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "offers" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const auto& k : d.offers) out << k;
  out << YAML::EndSeq;
  out << YAML::Key << "models" << YAML::Value << YAML::BeginSeq;
  for (const ModelSchema& s : d.models) {
    out << YAML::BeginMap << YAML::Key << "kind" << YAML::Value << s.kind;
    out << YAML::Key << "help" << YAML::Value << YAML::DoubleQuoted << s.help;
    out << YAML::Key << "keys" << YAML::Value << YAML::BeginSeq;
    for (const ModelKey& k : s.keys) {
      out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << k.name;
      out << YAML::Key << "type" << YAML::Value << type_name(k.type);
      out << YAML::Key << "default" << YAML::Value << YAML::DoubleQuoted << k.default_value;
      if (k.type == ModelKey::Type::integer) {
        out << YAML::Key << "min" << YAML::Value << YAML::DoubleQuoted << std::to_string(k.int_min);
        out << YAML::Key << "max" << YAML::Value << YAML::DoubleQuoted << std::to_string(k.int_max);
      } else if (k.type == ModelKey::Type::real) {
        out << YAML::Key << "min" << YAML::Value << YAML::DoubleQuoted << canonical_real(k.real_min);
        out << YAML::Key << "max" << YAML::Value << YAML::DoubleQuoted << canonical_real(k.real_max);
        out << YAML::Key << "min_exclusive" << YAML::Value << k.min_exclusive;
      } else {
        out << YAML::Key << "choices" << YAML::Value << YAML::Flow << YAML::BeginSeq;
        for (const auto& c : k.choices) out << YAML::DoubleQuoted << c;
        out << YAML::EndSeq;
      }
      out << YAML::Key << "help" << YAML::Value << YAML::DoubleQuoted << k.help << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

ModelsDescription parse_models_yaml(const std::string& text, const std::string& source) {
  auto bad = [&](const std::string& what) -> ConfigError {
    return ConfigError(source + ": not a --describe-models document: " + what);
  };
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw bad("invalid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap() || !root["models"] || !root["models"].IsSequence() || !root["offers"] ||
      !root["offers"].IsSequence())
    throw bad("expected lists 'offers' and 'models'");
  ModelsDescription d;
  std::vector<ModelSchema>& out = d.models;
  try {
    d.offers = root["offers"].as<std::vector<std::string>>();
    for (const YAML::Node& m : root["models"]) {
      if (!m.IsMap() || !m["kind"] || !m["keys"] || !m["keys"].IsSequence())
        throw bad("each model needs 'kind' and a list 'keys'");
      ModelSchema s;
      s.kind = m["kind"].as<std::string>();
      s.help = m["help"] ? m["help"].as<std::string>() : "";
      for (const YAML::Node& k : m["keys"]) {
        if (!k.IsMap() || !k["name"] || !k["type"] || !k["default"])
          throw bad("model '" + printable(s.kind) + "': each key needs name, type and default");
        ModelKey key;
        key.name = k["name"].as<std::string>();
        key.default_value = k["default"].as<std::string>();
        key.help = k["help"] ? k["help"].as<std::string>() : "";
        const std::string type = k["type"].as<std::string>();
        if (type == "int") {
          key.type = ModelKey::Type::integer;
          key.int_min = k["min"].as<int64_t>(), key.int_max = k["max"].as<int64_t>();
        } else if (type == "real") {
          key.type = ModelKey::Type::real;
          key.real_min = k["min"].as<double>(), key.real_max = k["max"].as<double>();
          key.min_exclusive = k["min_exclusive"] && k["min_exclusive"].as<bool>();
        } else if (type == "choice") {
          key.type = ModelKey::Type::choice;
          key.choices = k["choices"].as<std::vector<std::string>>();
        } else {
          throw bad("model '" + printable(s.kind) + "': key '" + printable(key.name) + "': type '" + printable(type) +
                    "', expected int, real or choice");
        }
        s.keys.push_back(std::move(key));
      }
      out.push_back(std::move(s));
    }
  } catch (const YAML::Exception& e) {
    throw bad(e.msg + " at line " + std::to_string(e.mark.line + 1));
  }
  for (const ModelSchema& s : out) {
    validate_model_schema(s);
    if (std::find(d.offers.begin(), d.offers.end(), s.kind) == d.offers.end())
      throw bad("model '" + printable(s.kind) + "' has a schema but is not in 'offers'");
  }
  return d;
}

}  // namespace sweep
