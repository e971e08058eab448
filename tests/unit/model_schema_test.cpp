// A model kind of one's own in the run config: its keys get the validation, did-you-mean,
// canonical spelling and run-id hashing of the built-in ones; a schema that collides with
// the keys every model has is refused when it is registered; --describe-models' YAML
// reads back to the same schema.
#include "model_schema.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "run_config.h"
#include "test_util.h"  // EXPECT_CONTAINS, thrown_message

namespace sweep {
namespace {

ModelSchema toy() {
  return ModelSchema{"toy-lm",
                     "a test model",
                     {int_key("hidden", 16, 4, 1024, "width"), real_key("dropout", 0.0, 0.0, 1.0, "dropout rate"),
                      choice_key("norm", "layer", {"layer", "rms"}, "normalisation")}};
}

/// Registers toy() once for this process (the registry is process-wide).
void use_toy() { register_model_schema(toy()); }

RunConfig parse(const std::string& text) { return apply_run_config(RunConfig{}, flatten_yaml(text, "x.yaml")); }
std::string error_of(const std::string& text) {
  return sweep_test::thrown_message<ConfigError>([&] { parse(text); });
}
std::string schema_error(const ModelSchema& s) {
  return sweep_test::thrown_message<std::invalid_argument>([&] { register_model_schema(s); });
}

TEST(ModelSchema, OwnKeysAreValidatedSpelledCanonicallyAndHashed) {
  use_toy();
  RunConfig c = parse("model: {kind: toy-lm, vocab: 64, seq_len: 8, hidden: 32, dropout: 1.0e-1}\n");
  EXPECT_EQ(c.model.kind, "toy-lm");
  ASSERT_EQ(c.model.values.size(), 3u);
  EXPECT_EQ(c.model.values[0], (std::pair<std::string, std::string>{"hidden", "32"}));
  EXPECT_EQ(c.model.values[1].second, "0.1");    // canonical spelling: 1.0e-1 and 0.1 are one run
  EXPECT_EQ(c.model.values[2].second, "layer");  // the default
  const std::string yaml = to_yaml(c);
  EXPECT_CONTAINS(yaml,
                  "model:\n  kind: toy-lm\n  vocab: 64\n  seq_len: 8\n  hidden: 32\n  dropout: 0.1\n  norm: layer\n");
  EXPECT_EQ(yaml.find("layers:"), std::string::npos) << "the decoder's keys are not in a toy-lm config";
  // The canonical text reads back to the same config and id.
  RunConfig back = apply_run_config(RunConfig{}, flatten_yaml(yaml, "back.yaml"));
  EXPECT_EQ(to_yaml(back), yaml);
  EXPECT_EQ(run_id(back), run_id(c));
  EXPECT_EQ(run_id(parse("model: {kind: toy-lm, vocab: 64, seq_len: 8, hidden: 32, dropout: 0.1}\n")), run_id(c));
  // Every own key is part of the run id.
  EXPECT_NE(run_id(parse("model: {kind: toy-lm, vocab: 64, seq_len: 8, hidden: 33, dropout: 0.1}\n")), run_id(c));
  EXPECT_NE(run_id(parse("model: {kind: toy-lm, vocab: 64, seq_len: 8, hidden: 32, dropout: 0.1, norm: rms}\n")),
            run_id(c));
  EXPECT_EQ(config_keys("toy-lm").front(), "model.kind");
  EXPECT_EQ(to_flat(c).front(), (std::pair<std::string, std::string>{"model.kind", "toy-lm"}));
}

TEST(ModelSchema, BadValuesOfOwnKeysAreNamedWithTheirRange) {
  use_toy();
  EXPECT_CONTAINS(error_of("model: {kind: toy-lm, hidden: 2}\n"),
                  "x.yaml:1:31: key 'model.hidden': expected an integer in [4, 1024], got '2'");
  EXPECT_CONTAINS(error_of("model: {kind: toy-lm, dropout: 2}\n"), "key 'model.dropout': expected a number in [0, 1]");
  EXPECT_CONTAINS(error_of("model: {kind: toy-lm, norm: batch}\n"), "key 'model.norm': expected one of layer | rms");
  // The decoder's keys are not toy-lm's; the message says so and offers the nearest own key.
  EXPECT_CONTAINS(error_of("model: {kind: toy-lm, layers: 2}\n"), "unknown key 'model.layers' for model.kind toy-lm");
  EXPECT_CONTAINS(error_of("model: {kind: toy-lm, hiden: 2}\n"), "(did you mean 'model.hidden'?)");
}

TEST(ModelSchema, AnUnknownKindNamesTheRegisteredOnes) {
  use_toy();
  const std::string e = error_of("model: {kind: toy-ln}\n");
  EXPECT_CONTAINS(e, "x.yaml:1:15: key 'model.kind': unknown model kind 'toy-ln' (did you mean 'toy-lm'?)");
  EXPECT_CONTAINS(e, "registered kinds: decoder, toy-lm");
  // The decoder by name is the default config, with the run id of a config that does not
  // name it (run ids from before there were kinds hold).
  EXPECT_EQ(run_id(parse("model: {kind: decoder}\n")), run_id(RunConfig{}));
  EXPECT_EQ(to_yaml(parse("model: {kind: decoder}\n")), to_yaml(RunConfig{}));
}

TEST(ModelSchema, RegistrationRefusesCollisionsAndMalformedKeys) {
  auto with_key = [](ModelKey k) { return ModelSchema{"bad", "", {k}}; };
  for (const char* shared : {"vocab", "seq_len", "kind"})
    EXPECT_CONTAINS(schema_error(with_key(int_key(shared, 1, 1, 2, ""))),
                    "model 'bad': key '" + std::string(shared) + "': collides with the built-in key model." + shared);
  EXPECT_CONTAINS(schema_error(ModelSchema{"decoder", "", {}}), "the built-in decoder has this kind");
  EXPECT_CONTAINS(schema_error(ModelSchema{"Bad Kind", "", {}}), "a kind is 1 to 64 characters");
  EXPECT_CONTAINS(schema_error(with_key(int_key("n.layers", 1, 1, 2, ""))), "a key name is 1 to 64 characters");
  EXPECT_CONTAINS(schema_error(ModelSchema{"bad", "", {int_key("a", 1, 1, 2, ""), int_key("a", 1, 1, 2, "")}}),
                  "key 'a': declared twice");
  EXPECT_CONTAINS(schema_error(with_key(int_key("a", 5, 1, 2, ""))), "the default 5 is outside its range");
  EXPECT_CONTAINS(schema_error(with_key(choice_key("a", "x", {"y"}, ""))), "is not one of its choices");
  // Another schema under a registered kind is refused; the same one again is not.
  use_toy();
  EXPECT_NO_THROW(register_model_schema(toy()));
  ModelSchema other = toy();
  other.keys.pop_back();
  EXPECT_CONTAINS(schema_error(other), "model 'toy-lm': registered twice, with different keys");
}

TEST(ModelSchema, DescribeYamlReadsBackToTheSameSchemas) {
  ModelSchema s = toy();
  s.keys.push_back(real_key("lr_mult", 1e-8, 0, 10, "a \"quoted\" help: with colon", true));
  const std::string text = describe_models_yaml({{"decoder", "toy-lm"}, {s}});
  const ModelsDescription back = parse_models_yaml(text, "prog --describe-models");
  EXPECT_EQ(back.offers, (std::vector<std::string>{"decoder", "toy-lm"}));
  ASSERT_EQ(back.models.size(), 1u);
  EXPECT_EQ(describe_models_yaml(back), text);
  EXPECT_EQ(back.models[0].keys[3].default_value, "1e-08");
  EXPECT_TRUE(back.models[0].keys[3].min_exclusive);
  EXPECT_EQ(back.models[0].keys[3].help, "a \"quoted\" help: with colon");
  EXPECT_CONTAINS(sweep_test::thrown_message<ConfigError>([] { parse_models_yaml("hello", "prog"); }),
                  "prog: not a --describe-models document: expected lists 'offers' and 'models'");
  EXPECT_CONTAINS(sweep_test::thrown_message<ConfigError>(
                      [] { parse_models_yaml("offers: []\nmodels: [{kind: x, keys: []}]\n", "prog"); }),
                  "model 'x' has a schema but is not in 'offers'");
  EXPECT_CONTAINS(
      sweep_test::thrown_message<std::invalid_argument>([] {
        parse_models_yaml(
            "offers: [x]\nmodels: [{kind: x, keys: [{name: vocab, type: int, default: '1', min: '1', max: '2'}]}]",
            "p");
      }),
      "collides with the built-in key model.vocab");
}

}  // namespace
}  // namespace sweep
