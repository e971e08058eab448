// The key table's own metadata: a help line and the condition of every key (what `sweep
// keys` and docs/config.md show), keys without effect put back to their default so they do
// not split run ids, and the input-only train.min_lr_ratio.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "run_config.h"
#include "test_util.h"  // EXPECT_CONTAINS, thrown_message

namespace sweep {
namespace {

RunConfig parse(const std::string& text) { return apply_run_config(RunConfig{}, flatten_yaml(text, "x.yaml")); }

std::string error_of(const std::string& text) {
  return sweep_test::thrown_message<ConfigError>([&] { parse(text); });
}

TEST(KeyTable, DescribesExactlyTheKeysOfTheTableWithOneLineOfHelpEach) {
  const std::vector<KeyDoc> docs = describe_keys("decoder");
  std::vector<std::string> want = {"model.kind"};
  for (const auto& k : run_config_keys()) {
    want.push_back(k);
    if (k == "train.min_lr") want.emplace_back("train.min_lr_ratio");
  }
  std::vector<std::string> got;
  for (const KeyDoc& d : docs) {
    got.push_back(d.key);
    EXPECT_FALSE(d.help.empty()) << d.key;
    EXPECT_EQ(d.help.find('\n'), std::string::npos) << d.key;
    EXPECT_FALSE(d.range.empty()) << d.key;
    EXPECT_TRUE(d.type == "integer" || d.type == "real" || d.type == "choice" || d.type == "text") << d.key;
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(input_only_keys(), std::vector<std::string>{"train.min_lr_ratio"});
}

TEST(KeyTable, EveryConditionNamesAKeyOfTheTable) {
  std::set<std::string> keys(run_config_keys().begin(), run_config_keys().end());
  for (const KeyDoc& d : describe_keys("decoder")) {
    if (d.applies.empty()) continue;
    const std::string first = d.applies.substr(0, d.applies.find(' '));
    EXPECT_TRUE(keys.count(first)) << d.key << ": applies when '" << d.applies << "'";
  }
}

TEST(KeyTable, DefaultsAndRangesAreThoseTheKeysAccept) {
  std::map<std::string, KeyDoc> docs;
  for (const KeyDoc& d : describe_keys("decoder")) docs[d.key] = d;
  EXPECT_EQ(docs["train.lr"].default_value, "0.001");
  EXPECT_EQ(docs["train.lr"].range, "(0, 10]");
  EXPECT_EQ(docs["train.steps"].range, "[1, 2^40]");
  EXPECT_EQ(docs["data.seed"].range, "[0, 2^63 - 1]");
  EXPECT_EQ(docs["train.precision"].range, "fp32, bf16, fp16");
  EXPECT_EQ(docs["data.seed"].applies, "data.kind synthetic");
  EXPECT_EQ(docs["train.warmup"].applies, "");
  for (const auto& [key, v] : to_flat(RunConfig{})) EXPECT_EQ(docs[key].default_value, v) << key;
}

/// A key set to a value that has no effect in `idle` and one that has in `active`.
struct IdleCase {
  std::string key, value, idle, active;
};

/// One case per key with a condition: KeyTable.EveryConditionalKeyHasACase keeps it so.
const std::vector<IdleCase>& idle_cases() {
  static const std::vector<IdleCase> cases = {
      {"model.moe.top_k", "1", "{}", "model: {moe: {experts: 4}}"},
      {"model.moe.shared_experts", "0", "{}", "model: {moe: {experts: 4}}"},
      {"model.moe.expert_hidden", "16", "{}", "model: {moe: {experts: 4}}"},
      {"data.path", "d.bin", "{}", "data: {kind: tokens, path: other.bin}"},
      {"data.dataset", "ids", "data: {kind: tokens, path: d.bin}", "data: {kind: hdf5, path: d.h5}"},
      {"data.seed", "5", "data: {kind: text, path: t.txt}", "{}"},
      {"data.branching", "8", "data: {kind: text, path: t.txt}", "{}"},
      {"data.samples", "100", "data: {kind: hdf5, path: d.h5}", "{}"},
      {"data.eval_path", "e.bin", "error", "data: {kind: tokens, path: d.bin}"},
      {"train.min_lr", "0.0001", "train: {schedule: constant}", "train: {schedule: linear}"},
      {"train.loss_scale_init", "1024", "{}", "train: {precision: fp16}"},
      {"train.loss_scale_interval", "10", "train: {precision: bf16}", "train: {precision: fp16}"},
      {"train.loss_scale_growth", "4", "{}", "train: {precision: fp16}"},
      {"train.loss_scale_backoff", "0.25", "{}", "train: {precision: fp16}"},
      {"train.keep_checkpoints", "5", "{}", "train: {checkpoint_every: 10}"},
      {"train.spike_limit", "5", "{}", "train: {spike_policy: skip}"},
      {"train.spike_factor", "2", "{}", "train: {spike_policy: skip}"},
      {"train.spike_window", "5", "train: {spike_policy: skip}", "train: {spike_policy: skip, spike_factor: 2}"},
      {"train.spike_rewind_steps", "3", "{}", "train: {spike_policy: rewind, checkpoint_every: 5}"},
      {"train.spike_skip", "2", "{}", "train: {spike_policy: skip}"},
      {"train.lr_before_switch", "0.01", "{}", "train: {lr_switch_step: 5, lr_before_switch: 0.002}"},
      {"train.fork_step", "5", "{}", "train: {fork_parent: 0123456789abcdef, steps: 10}"},
      {"train.eval_every", "10", "error", "data: {eval_fraction: 0.1}"},
      {"train.eval_batches", "2", "{}", "data: {eval_fraction: 0.1}"},
      {"dist.reduction", "native", "train: {deterministic: false}", "{}"},
      {"fault.desync_rank", "0", "{}", "fault: {desync_step: 3}"},
      {"fault.kill_rank", "1", "{}", "fault: {kill_step: 3}"},
      {"fault.hang_rank", "1", "{}", "fault: {hang_step: 3}"},
      {"fault.hang_once", "1", "{}", "fault: {hang_step: 3}"},
      {"fault.slow_rank", "1", "{}", "fault: {slow_ms: 3}"},
      {"fault.slow_in", "exchange", "{}", "fault: {slow_ms: 3}"},
      {"fault.spike_lr", "0.5", "{}", "fault: {spike_step: 3}"},
      {"fault.spike_steps", "2", "{}", "fault: {spike_step: 3}"},
      {"fault.nan_rank", "1", "{}", "fault: {nan_step: 3}"},
      {"fault.nan_micro_batch", "1", "{}", "fault: {nan_step: 3}"},
      {"fault.nan_sample", "1", "{}", "fault: {nan_sample_step: 3}"},
      {"fault.corrupt_rank", "0", "{}", "fault: {corrupt_from: 3}"},
      {"fault.corrupt_host", "sweep-node2", "{}", "fault: {corrupt_from: 3}"},
      {"fault.transient_rank", "1", "{}", "fault: {transient_step: 3}"},
  };
  return cases;
}

/// `yaml` (a flow mapping of sections) with `key: value` added as a dotted key.
FlatConfig with(const std::string& yaml, const std::string& key, const std::string& value) {
  FlatConfig f = flatten_yaml(yaml, "x.yaml");
  f[key] = ConfigValue{value, "x.yaml:9:3"};
  return f;
}

TEST(KeyTable, EveryConditionalKeyHasACase) {
  std::set<std::string> conditional, covered;
  for (const KeyDoc& d : describe_keys("decoder"))
    if (!d.applies.empty() && d.key != "train.min_lr_ratio") conditional.insert(d.key);
  for (const IdleCase& c : idle_cases()) covered.insert(c.key);
  EXPECT_EQ(covered, conditional);
}

TEST(IdleKeys, AKeyWithoutEffectIsResetAndDoesNotSplitRunIds) {
  for (const IdleCase& c : idle_cases()) {
    SCOPED_TRACE(c.key + ": " + c.value);
    // Where the key applies, the value splits the run id.
    const RunConfig active_default = apply_run_config(RunConfig{}, flatten_yaml(c.active, "x.yaml"));
    const RunConfig active = apply_run_config(RunConfig{}, with(c.active, c.key, c.value));
    EXPECT_NE(run_id(active), run_id(active_default));
    RunConfig again = active;
    EXPECT_TRUE(reset_idle_keys(again).empty());
    if (c.idle == "error") continue;  // a contradiction the checks between keys refuse instead
    // Where it does not, the value is put back to the default: one run id.
    const RunConfig idle_default = apply_run_config(RunConfig{}, flatten_yaml(c.idle, "x.yaml"));
    const RunConfig idle = apply_run_config(RunConfig{}, with(c.idle, c.key, c.value));
    EXPECT_EQ(run_id(idle), run_id(idle_default));
    EXPECT_EQ(to_yaml(idle), to_yaml(idle_default));
    // reset_idle_keys names the key and why; apply_run_values alone keeps the value.
    RunConfig raw = apply_run_values(RunConfig{}, with(c.idle, c.key, c.value));
    const std::vector<IdleKey> idle_keys = reset_idle_keys(raw);
    ASSERT_EQ(idle_keys.size(), 1u);
    EXPECT_EQ(idle_keys[0].key, c.key);
    EXPECT_FALSE(idle_keys[0].reason.empty());
    EXPECT_EQ(run_id(raw), run_id(idle_default));
  }
}

TEST(IdleKeys, TheReasonNamesTheSettingThatMakesTheKeyIdle) {
  RunConfig c = apply_run_values(RunConfig{}, flatten_yaml("data: {kind: text, path: t, seed: 4}\n"
                                                           "train: {precision: bf16, loss_scale_init: 8}\n",
                                                           "x.yaml"));
  const std::vector<IdleKey> idle = reset_idle_keys(c);
  ASSERT_EQ(idle.size(), 2u);
  EXPECT_EQ(idle[0].key, "data.seed");
  EXPECT_EQ(idle[0].reason, "data.kind text");
  EXPECT_EQ(idle[1].key, "train.loss_scale_init");
  EXPECT_EQ(idle[1].reason, "train.precision bf16");
  EXPECT_EQ(c.data.seed, 0);
  EXPECT_EQ(c.train.loss_scale_init, RunConfig{}.train.loss_scale_init);
}

TEST(IdleKeys, ADefaultValueIsNeverReported) {
  RunConfig c = apply_run_values(RunConfig{}, flatten_yaml("data: {kind: text, path: t, seed: 0}\n", "x.yaml"));
  EXPECT_TRUE(reset_idle_keys(c).empty());
}

TEST(MinLrRatio, SetsMinLrFromTheLrAndKeepsOnlyMinLrInTheRunId) {
  const RunConfig ratio = parse("train: {lr: 0.003, min_lr_ratio: 0.1}\n");
  const RunConfig plain = parse("train: {lr: 0.003, min_lr: 0.0003}\n");
  EXPECT_EQ(ratio.train.min_lr, 3e-4);  // not 0.003 x 0.1 = 3.0000000000000003e-4
  EXPECT_EQ(to_yaml(ratio), to_yaml(plain));
  EXPECT_EQ(run_id(ratio), run_id(plain));
  EXPECT_EQ(to_yaml(ratio).find("ratio"), std::string::npos);
  // The ratio is remembered: an lr applied later (a grid axis over the base) moves min_lr.
  const RunConfig later = apply_run_config(ratio, flatten_yaml("train: {lr: 0.01}\n", "x.yaml"));
  EXPECT_EQ(later.train.min_lr, 1e-3);
  EXPECT_EQ(apply_run_config(ratio, flatten_yaml("train: {lr: 0.006}\n", "x.yaml")).train.min_lr, 6e-4);
  // An explicit min_lr applied later wins and forgets the ratio.
  const RunConfig then = apply_run_config(ratio, flatten_yaml("train: {min_lr: 0.0002}\n", "x.yaml"));
  EXPECT_EQ(then.train.min_lr, 2e-4);
  EXPECT_EQ(apply_run_config(then, flatten_yaml("train: {lr: 0.01}\n", "x.yaml")).train.min_lr, 2e-4);
  // Ratios 0 and 1 are the ends of its range.
  EXPECT_EQ(parse("train: {lr: 0.3, min_lr_ratio: 1}\n").train.min_lr, 0.3);
  EXPECT_EQ(run_id(parse("train: {min_lr_ratio: 0}\n")), run_id(RunConfig{}));
}

TEST(MinLrRatio, BothSpellingsAtOnceIsAnErrorNamingFileLineAndKey) {
  const std::string msg = error_of("train:\n  min_lr: 0.0001\n  min_lr_ratio: 0.1\n");
  EXPECT_CONTAINS(msg, "x.yaml:3:17: key 'train.min_lr_ratio': give either train.min_lr (at x.yaml:2:11)");
  EXPECT_CONTAINS(msg, "not both");
}

TEST(MinLrRatio, OutOfRangeMisspelledAndNotAScalar) {
  EXPECT_CONTAINS(error_of("train:\n  min_lr_ratio: 1.5\n"),
                  "x.yaml:2:17: key 'train.min_lr_ratio': expected a number in [0, 1], got '1.5'");
  EXPECT_CONTAINS(error_of("train:\n  min_lr_ratio: [0.1]\n"), "key 'train.min_lr_ratio': expected a single value");
  EXPECT_CONTAINS(error_of("train:\n  min_lr_rato: 0.1\n"),
                  "unknown key 'train.min_lr_rato' (did you mean 'train.min_lr_ratio'?)");
}

TEST(CanonicalPieces, JoinedTheyAreTheCanonicalTextOnePiecePerKey) {
  for (const char* yaml : {"{}", "model: {moe: {experts: 4}}\ndata: {eval_fraction: 0.1}\ntrain: {eval_every: 5}\n"}) {
    const RunConfig c = parse(yaml);
    const std::vector<std::string> pieces = canonical_pieces(c);
    ASSERT_EQ(pieces.size(), run_config_keys().size());
    std::string joined;
    for (const auto& p : pieces) joined += p;
    EXPECT_EQ(joined, to_yaml(c));
  }
}

}  // namespace
}  // namespace sweep
