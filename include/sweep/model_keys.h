// A model's own config keys, declared in the table form of the built-in ones: name, type,
// default, range and help. A grid's `model.<name>` keys for that model get the same
// validation, did-you-mean, canonical spelling and run-id hashing as every built-in key.
// Free of LibTorch: the `sweep` driver reads these tables from a trainer program
// (`--describe-models`) to check a grid before anything starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sweep {

/// One config key of a model: `model.<name>` in a run config or grid.
struct ModelKey {
  enum class Type { integer, real, choice };
  std::string name;  ///< [a-z][a-z0-9_]*, at most 64 characters; not kind, vocab or seq_len
  Type type = Type::integer;
  std::string default_value;  ///< canonical text of the default
  int64_t int_min = 0, int_max = 0;
  double real_min = 0, real_max = 0;
  bool min_exclusive = false;        ///< real: the minimum itself is not allowed
  std::vector<std::string> choices;  ///< choice: the allowed values
  std::string help;                  ///< one line for --describe-models and the docs
};

/// An integer key in [min, max].
ModelKey int_key(std::string name, int64_t default_value, int64_t min, int64_t max, std::string help);
/// A real key in [min, max] ((min, max] when min_exclusive), finite.
ModelKey real_key(std::string name, double default_value, double min, double max, std::string help,
                  bool min_exclusive = false);
/// A key whose value is one of `choices`.
ModelKey choice_key(std::string name, std::string default_value, std::vector<std::string> choices, std::string help);

/// A model kind and its keys. Every kind also has the keys shared by all models and read
/// by the data pipeline: model.vocab (token ids are in [0, vocab)) and model.seq_len
/// (each micro-batch is [micro_batch, seq_len + 1] tokens).
struct ModelSchema {
  std::string kind;  ///< model.kind; [a-z][a-z0-9_-]*, at most 64 characters
  std::string help;  ///< one line
  std::vector<ModelKey> keys;
};

}  // namespace sweep
