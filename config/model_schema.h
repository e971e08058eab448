// The model kinds this process knows and their keys: the built-in decoder, plus the
// schemas a trainer program registers (sweep::Models) or the driver reads from one
// (`PROGRAM --describe-models`). Register at start-up, before configs are read; lookups
// are not synchronised with registration.
#pragma once

#include <string>
#include <vector>

#include "sweep/model_keys.h"

namespace sweep {

/// model.kind of the built-in decoder, the default: its configs spell no model.kind, so
/// run ids from before there were other kinds still hold.
inline constexpr const char* kDecoderKind = "decoder";

/// Checks a schema: the kind's and keys' spelling, each type's range and default, no key
/// twice and none named like a key every model has (kind, vocab, seq_len). Throws
/// std::invalid_argument: "model 'KIND': key 'NAME': WHAT".
void validate_model_schema(const ModelSchema& s);

/// Registers `s` for this process. The same schema twice is one registration; another
/// schema of a registered kind, or the kind decoder, throws std::invalid_argument.
void register_model_schema(const ModelSchema& s);

/// The registered schema of `kind`; nullptr for the decoder and for unknown kinds.
const ModelSchema* find_model_schema(const std::string& kind);

/// Every kind this process knows: decoder first, then registration order.
std::vector<std::string> model_kinds();

/// The dotted config keys of `kind` ("model.kind", "model.vocab", "model.seq_len", then
/// "model.<name>" per key); empty for the decoder and unknown kinds.
const std::vector<std::string>& model_schema_keys(const std::string& kind);

/// What a training program offers: every kind it trains (the decoder among them when it
/// does), and the schemas of its kinds other than the decoder.
struct ModelsDescription {
  std::vector<std::string> offers;
  std::vector<ModelSchema> models;
};

/// `d` as the YAML that --describe-models prints and parse_models_yaml reads.
std::string describe_models_yaml(const ModelsDescription& d);

/// Reads describe_models_yaml's text; `source` names where it came from in messages.
/// Throws ConfigError for text that is not such a document, std::invalid_argument
/// (through validate_model_schema) for a bad schema in it.
ModelsDescription parse_models_yaml(const std::string& text, const std::string& source);

/// The shortest text that reads back as `x` ("0.001", "1e-08", "3"): how config values
/// and defaults of real keys are spelled.
std::string canonical_real(double x);

}  // namespace sweep
