// The run config: canonical text, run identity, and the messages of every kind of bad input.
#include "run_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "test_util.h"  // EXPECT_CONTAINS, thrown_message

namespace sweep {
namespace {

/// Parses `text` as if read from x.yaml and applies it to the defaults.
RunConfig parse(const std::string& text) { return apply_run_config(RunConfig{}, flatten_yaml(text, "x.yaml")); }

/// The message of the ConfigError that parsing `text` throws ("" when none is thrown).
std::string error_of(const std::string& text) {
  return sweep_test::thrown_message<ConfigError>([&] { parse(text); });
}

TEST(RunConfig, DefaultsRoundTripThroughYaml) {
  RunConfig c;
  std::string text = to_yaml(c);
  RunConfig back = apply_run_config(RunConfig{}, flatten_yaml(text, "defaults.yaml"));
  EXPECT_EQ(to_yaml(back), text);
  EXPECT_EQ(run_id(back), run_id(c));
  // The canonical text names every key once, but for the keys added after run ids were
  // published, which are left out at their default: held-out evaluation's, train.leaf,
  // train.deterministic, the NaN fault's place, the spike fault, dist.straggler_ratio,
  // train.telemetry_every, the spike policy's, the lr switch's, sweep fork's and the hang
  // that does not repeat (fault.hang_once), the sample-keyed NaN, corrupt-rank and
  // transient faults, the spike threshold, rewind ring and skipped window, diagnose's
  // evidence step and share rotation, where the slow fault sleeps and the corrupt host.
  const std::set<std::string> added = {
      "train.leaf",         "train.deterministic",  "fault.nan_rank",           "fault.nan_micro_batch",
      "fault.spike_step",   "dist.straggler_ratio", "train.telemetry_every",    "train.spike_policy",
      "train.spike_limit",  "train.lr_switch_step", "train.lr_before_switch",   "train.fork_parent",
      "train.fork_step",    "fault.hang_once",      "fault.nan_sample_step",    "fault.nan_sample",
      "fault.corrupt_from", "fault.corrupt_rank",   "fault.transient_step",     "fault.transient_rank",
      "train.spike_factor", "train.spike_window",   "train.spike_rewind_steps", "train.spike_skip",
      "fault.spike_lr",     "fault.spike_steps",    "dist.diagnose_step",       "dist.diagnose_rotate",
      "fault.slow_in",      "fault.corrupt_host"};
  const FlatConfig flat = flatten_yaml(text, "defaults.yaml");
  EXPECT_EQ(flat.size(), run_config_keys().size() - 34);
  for (const auto& key : run_config_keys())
    EXPECT_EQ(flat.count(key), key.find("eval_") == std::string::npos && !added.count(key) ? 1u : 0u) << key;
}

TEST(RunConfig, NonDefaultValuesRoundTripExactly) {
  RunConfig c;
  c.train.min_lr = 1.0 / 3.0;  // needs all 17 digits to read back
  c.train.lr = 0.7;
  c.train.eps = 1e-12;
  c.train.schedule = "linear";
  c.train.steps = 1234567;
  c.model.d_model = 96;
  c.model.heads = 6;
  c.dist.reduction = "native";
  c.data.seed = 9007199254740993;  // not representable as a double: must not go through one
  RunConfig back = parse(to_yaml(c));
  EXPECT_EQ(back.train.min_lr, c.train.min_lr);
  EXPECT_EQ(back.train.lr, 0.7);
  EXPECT_EQ(back.train.eps, 1e-12);
  EXPECT_EQ(back.train.schedule, "linear");
  EXPECT_EQ(back.train.steps, 1234567);
  EXPECT_EQ(back.model.heads, 6);
  EXPECT_EQ(back.dist.reduction, "native");
  EXPECT_EQ(back.data.seed, 9007199254740993);
  EXPECT_EQ(to_yaml(back), to_yaml(c));
}

TEST(RunConfig, CanonicalYamlLooksAsDocumented) {
  std::string text = to_yaml(RunConfig{});
  EXPECT_EQ(text.rfind("model:\n  layers: 2\n", 0), 0u) << text;
  EXPECT_CONTAINS(text, "\ntrain:\n  steps: 100\n");
  EXPECT_CONTAINS(text, "  lr: 0.001\n");
  EXPECT_CONTAINS(text, "  eps: 1e-08\n");
  EXPECT_CONTAINS(text, "  schedule: cosine\n");
  EXPECT_CONTAINS(text, "\ndist:\n  world_size: 1\n  reduction: canonical\n");
}

TEST(RunConfig, RunIdIsStableAndSixteenHexDigits) {
  RunConfig a, b;
  EXPECT_EQ(run_id(a), run_id(b));
  std::string id = run_id(a);
  ASSERT_EQ(id.size(), 16u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
}

TEST(RunConfig, RunIdDoesNotDependOnNumberSpelling) {
  std::string a = run_id(parse("train:\n  lr: 1e-3\n"));
  EXPECT_EQ(run_id(parse("train:\n  lr: 0.001\n")), a);
  EXPECT_EQ(run_id(parse("train:\n  lr: 1.0e-3\n")), a);
  EXPECT_EQ(run_id(parse("train:\n  lr: 1E-3\n")), a);
  EXPECT_EQ(run_id(parse("train:\n  lr: \"0.0010\"\n")), a);
  // 1e-3 is the default, so all of them are the default run.
  EXPECT_EQ(a, run_id(RunConfig{}));
}

TEST(RunConfig, NegativeZeroIsTheSameSettingAsZero) {
  RunConfig c = parse("train:\n  min_lr: -0.0\n  weight_decay: -0\n");
  EXPECT_FALSE(std::signbit(c.train.min_lr));
  EXPECT_EQ(run_id(c), run_id(RunConfig{}));
}

TEST(RunConfig, RunIdDoesNotDependOnKeyOrder) {
  std::string a = "train:\n  lr: 0.01\n  seed: 7\nmodel:\n  layers: 3\n";
  std::string b = "model:\n  layers: 3\ntrain:\n  seed: 7\n  lr: 0.01\n";
  EXPECT_EQ(run_id(parse(a)), run_id(parse(b)));
  EXPECT_NE(run_id(parse(a)), run_id(RunConfig{}));
}

TEST(RunConfig, RunIdChangesWithEveryKey) {
  RunConfig base;
  RunConfig seed = base;
  seed.train.seed = 1;
  EXPECT_NE(run_id(seed), run_id(base));
  RunConfig data_seed = base;
  data_seed.data.seed = 1;
  EXPECT_NE(run_id(data_seed), run_id(base));
  EXPECT_NE(run_id(data_seed), run_id(seed));  // same value, different key
  RunConfig world = base;
  world.dist.world_size = 2;
  EXPECT_NE(run_id(world), run_id(base));
}

// Benchmark mode: its own run id, the native reduction whatever dist.reduction says (the
// key is idle there), and only true or false accepted.
TEST(RunConfig, TrainDeterministicFalseIsBenchmarkModeWithTheNativeReduction) {
  const RunConfig det = parse("{}"), bench = parse("train:\n  deterministic: false\n");
  EXPECT_TRUE(det.deterministic());
  EXPECT_FALSE(det.native_reduction());
  EXPECT_FALSE(bench.deterministic());
  EXPECT_TRUE(bench.native_reduction());
  EXPECT_NE(run_id(bench), run_id(det));
  EXPECT_EQ(run_id(parse("train:\n  deterministic: true\n")), run_id(det));  // the default, as before the key
  EXPECT_CONTAINS(to_yaml(bench), "deterministic: false");
  EXPECT_EQ(run_id(parse("train:\n  deterministic: false\ndist:\n  reduction: native\n")), run_id(bench));
  EXPECT_TRUE(parse("dist:\n  reduction: native\n").native_reduction());
  EXPECT_CONTAINS(error_of("train:\n  deterministic: yes\n"),
                  "x.yaml:2:18: key 'train.deterministic': expected one of true | false, got 'yes'");
}

TEST(RunConfig, ClosestKeySuggestsTheIntendedKey) {
  const auto& keys = run_config_keys();
  EXPECT_EQ(closest_key("train.lrr", keys), "train.lr");
  EXPECT_EQ(closest_key("lr", keys), "train.lr");
  EXPECT_EQ(closest_key("warmup", keys), "train.warmup");
  EXPECT_EQ(closest_key("train.stesp", keys), "train.steps");
  EXPECT_EQ(closest_key("modle.layers", keys), "model.layers");
  EXPECT_EQ(closest_key("dist.worldsize", keys), "dist.world_size");
  EXPECT_EQ(closest_key("completely.unrelated", keys), "");
  EXPECT_EQ(closest_key("train.learning_rat", keys), "");
}

TEST(RunConfig, UnknownKeyNamesFileLineAndSuggestion) {
  std::string msg = error_of("train:\n  lrr: 0.1\n");
  EXPECT_CONTAINS(msg, "x.yaml:2:");
  EXPECT_CONTAINS(msg, "unknown key 'train.lrr'");
  EXPECT_CONTAINS(msg, "(did you mean 'train.lr'?)");

  msg = error_of("lr: 0.1\n");
  EXPECT_CONTAINS(msg, "x.yaml:1:");
  EXPECT_CONTAINS(msg, "unknown key 'lr'");
  EXPECT_CONTAINS(msg, "did you mean 'train.lr'");

  // Too far from every key for a suggestion: the message must not invent one.
  // (closest_key("train.learning_rat") is "": "learning_rat" is 10 edits from "lr".)
  msg = error_of("train:\n  learning_rat: 0.1\n");
  EXPECT_CONTAINS(msg, "x.yaml:2:");
  EXPECT_CONTAINS(msg, "unknown key 'train.learning_rat'");
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
}

TEST(RunConfig, WrongTypeNamesKeyAndPlace) {
  std::string msg = error_of("train:\n  steps: abc\n");
  EXPECT_CONTAINS(msg, "x.yaml:2:10: key 'train.steps': expected an integer");
  EXPECT_CONTAINS(msg, "got 'abc'");
  EXPECT_CONTAINS(error_of("train:\n  steps: 10.5\n"), "key 'train.steps'");
  EXPECT_CONTAINS(error_of("train:\n  steps: 1e3\n"), "key 'train.steps'");
  // An empty value points at its key, not at the line after it.
  EXPECT_CONTAINS(error_of("train:\n  steps:\nmodel:\n  layers: 2\n"), "x.yaml:2:3: key 'train.steps'");
  EXPECT_CONTAINS(error_of("train:\n  steps:\n"), "x.yaml:2:3: key 'train.steps'");
  EXPECT_CONTAINS(error_of("train:\n  lr: fast\n"), "x.yaml:2:7: key 'train.lr': expected a number");
  EXPECT_CONTAINS(error_of("train:\n  lr: 0.1x\n"), "key 'train.lr'");
}

TEST(RunConfig, OutOfRangeNamesKeyAndPlace) {
  struct Case {
    const char* yaml;
    const char* expect;
  } cases[] = {
      {"train:\n  steps: 0\n", "x.yaml:2:10: key 'train.steps'"},
      {"train:\n  accum: 0\n", "x.yaml:2:10: key 'train.accum'"},
      {"train:\n  lr: -1\n", "x.yaml:2:7: key 'train.lr'"},
      {"train:\n  lr: 0\n", "x.yaml:2:7: key 'train.lr'"},  // exclusive lower bound
      {"train:\n  lr: .nan\n", "x.yaml:2:7: key 'train.lr'"},
      {"train:\n  lr: nan\n", "x.yaml:2:7: key 'train.lr'"},
      {"train:\n  lr: inf\n", "x.yaml:2:7: key 'train.lr'"},
      {"train:\n  lr: .inf\n", "x.yaml:2:7: key 'train.lr'"},
      {"train:\n  beta1: 1\n", "x.yaml:2:10: key 'train.beta1'"},
      {"train:\n  steps: 99999999999999999999\n", "key 'train.steps'"},
      {"model:\n  layers: -2\n", "x.yaml:2:11: key 'model.layers'"},
      {"data:\n  seed: -1\n", "x.yaml:2:9: key 'data.seed'"},
  };
  for (const auto& c : cases) EXPECT_CONTAINS(error_of(c.yaml), c.expect);
  EXPECT_CONTAINS(error_of("train:\n  steps: 0\n"), "expected an integer in [1, ");
  EXPECT_CONTAINS(error_of("train:\n  lr: -1\n"), "expected a number in (0, 10]");
}

TEST(RunConfig, UnknownChoiceListsTheChoices) {
  std::string msg = error_of("train:\n  schedule: cosin\n");
  EXPECT_CONTAINS(msg, "x.yaml:2:13: key 'train.schedule': expected one of constant | linear | cosine, got 'cosin'");
  EXPECT_CONTAINS(error_of("dist:\n  reduction: ring\n"), "key 'dist.reduction'");
}

TEST(RunConfig, ListOrMapWhereAScalarIsExpected) {
  std::string msg = error_of("train:\n  lr: [0.1, 0.2]\n");
  EXPECT_CONTAINS(msg, "x.yaml:2:7: key 'train.lr': expected a single value, not a map or list");
  // A map one level too deep becomes an unknown dotted key.
  EXPECT_CONTAINS(error_of("train:\n  lr:\n    peak: 0.1\n"), "unknown key 'train.lr.peak'");
}

TEST(RunConfig, DuplicateKeyNamesTheSecondOne) {
  std::string msg = error_of("train:\n  lr: 0.1\n  lr: 0.2\n");
  EXPECT_CONTAINS(msg, "x.yaml:3:");
  EXPECT_CONTAINS(msg, "key 'train.lr' is given twice");
  // The same key through a repeated section.
  msg = error_of("train:\n  lr: 0.1\nmodel:\n  layers: 1\ntrain:\n  lr: 0.2\n");
  EXPECT_CONTAINS(msg, "x.yaml:6:");
  EXPECT_CONTAINS(msg, "key 'train.lr' is given twice");
}

TEST(RunConfig, ConstraintsBetweenKeysNameKeyAndPlace) {
  std::string msg = error_of("model:\n  d_model: 64\n  heads: 5\n");
  EXPECT_CONTAINS(msg, "x.yaml:3:10: key 'model.heads': must divide model.d_model (64), got 5");
  // Only d_model given: the message points at it, still naming the constrained key.
  msg = error_of("model:\n  d_model: 66\n");
  EXPECT_CONTAINS(msg, "x.yaml:2:12: key 'model.heads'");
  msg = error_of("model:\n  d_model: 24\n  heads: 8\n");  // head dim 3 is odd
  EXPECT_CONTAINS(msg, "x.yaml:3:10: key 'model.heads': model.d_model / model.heads must be even");
  msg = error_of("train:\n  steps: 10\n  warmup: 11\n");
  EXPECT_CONTAINS(msg, "x.yaml:3:11: key 'train.warmup': must be <= train.steps (10)");
  msg = error_of("train:\n  steps: 10\n");  // default warmup 0: fine
  EXPECT_EQ(msg, "");
  msg = error_of("model:\n  vocab: 3\n");  // default branching 4
  EXPECT_CONTAINS(msg, "x.yaml:2:10: key 'data.branching': must be <= model.vocab (3)");
  msg = error_of("train:\n  lr: 0.001\n  min_lr: 0.01\n");
  EXPECT_CONTAINS(msg, "x.yaml:3:11: key 'train.min_lr': must be <= train.lr");
}

TEST(RunConfig, ConstraintWithoutSourceHasNoPlace) {
  RunConfig c;
  c.train.warmup = 200;
  try {
    check_run_config(c);
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "key 'train.warmup': must be <= train.steps (100)");
  }
  // apply_run_values leaves constraints to the caller.
  FlatConfig v = flatten_yaml("train:\n  warmup: 200\n", "x.yaml");
  EXPECT_EQ(apply_run_values(RunConfig{}, v).train.warmup, 200);
  EXPECT_THROW(apply_run_config(RunConfig{}, v), ConfigError);
}

TEST(RunConfig, InvalidYamlGivesFileLineColumn) {
  std::string msg = error_of("train:\n  lr: [0.1, 0.2\nmodel:\n  layers: 2\n");
  EXPECT_CONTAINS(msg, "x.yaml:");
  EXPECT_CONTAINS(msg, ": invalid YAML: ");
  msg = error_of("train:\n  lr: 0.1\n   steps: 3\n");  // bad indentation on line 3
  EXPECT_CONTAINS(msg, "x.yaml:3:");
  EXPECT_CONTAINS(msg, "invalid YAML");
  msg = error_of("train: [1, 2]\n");  // a section given as a list
  EXPECT_CONTAINS(msg, "x.yaml:1:8: unknown key 'train'");
  msg = error_of("- 1\n- 2\n");
  EXPECT_CONTAINS(msg, "x.yaml: expected a mapping");
}

TEST(RunConfig, EmptyDocumentIsTheDefaults) {
  EXPECT_EQ(run_id(parse("")), run_id(RunConfig{}));
  EXPECT_EQ(run_id(parse("# only a comment\n")), run_id(RunConfig{}));
}

TEST(RunConfig, LoadRunConfigNamesMissingFile) {
  EXPECT_CONTAINS(
      sweep_test::thrown_message<ConfigError>([] { load_run_config("/nonexistent/dir/run.yaml"); }, "no ConfigError"),
      "/nonexistent/dir/run.yaml: cannot open");
}

}  // namespace
}  // namespace sweep

TEST(RunConfig, MathDifferencesNameTheKeysAndTheGlobalBatchNeverTheLayout) {
  sweep::RunConfig was;
  was.dist.world_size = 2, was.train.accum = 4, was.train.micro_batch = 2;
  sweep::RunConfig layout = was;  // the same math on another layout
  layout.dist.world_size = 4, layout.train.accum = 2, layout.dist.zero_stage = 3;
  EXPECT_EQ(sweep::math_id(was), sweep::math_id(layout));
  EXPECT_TRUE(sweep::math_differences(was, layout).empty());

  sweep::RunConfig now = layout;
  now.train.weight_decay = 0.1, now.train.accum = 1;
  const std::vector<std::string> d = sweep::math_differences(was, now);
  ASSERT_EQ(d.size(), 2u) << ::testing::PrintToString(d);
  EXPECT_EQ(d[0], "the global batch (dist.world_size x train.accum x train.micro_batch): 16 there, 8 here");
  EXPECT_EQ(d[1], "train.weight_decay: 0 there, 0.1 here");
  // Whatever differs, the lists agree with the ids.
  EXPECT_NE(sweep::math_id(was), sweep::math_id(now));
}
