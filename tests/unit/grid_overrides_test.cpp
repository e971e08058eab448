// Command-line overrides of a grid: their spelling, each refusal naming the override (and
// the grid's line where it conflicts), and the grid as it ran written back as YAML that
// parses to the same runs.
#include "grid_overrides.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "grid.h"
#include "temp_dir.h"   // TempDirTest
#include "test_util.h"  // EXPECT_CONTAINS, thrown_message

namespace sweep {
namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

const char* kGrid =
    "name: demo\n"                         // 1
    "base:\n"                              // 2
    "  model: {layers: 1, d_model: 16}\n"  // 3
    "  train:\n"                           // 4
    "    steps: 20\n"                      // 5
    "    lr: 0.01\n"                       // 6
    "grid:\n"                              // 7
    "  train.lr: [0.1, 2e-2]\n"            // 8
    "  train.warmup: [0, 5]\n";            // 9

SweepSpec parse(const std::string& text, const Args& args, const std::string& name = "") {
  const GridOverrides o = parse_overrides(args, name);
  return parse_grid(text, "x.yaml", "", load_trainer_models, [&](SweepSpec& s) { apply_overrides(s, o); });
}

/// The message of the ConfigError that parsing `args`, or the grid with them, throws.
std::string error_of(const Args& args, const std::string& text = kGrid, const std::string& name = "") {
  return sweep_test::thrown_message<ConfigError>([&] { expand(parse(text, args, name)); });
}

std::vector<std::string> ids(const SweepSpec& s) {
  std::vector<std::string> out;
  for (const auto& p : expand(s)) out.push_back(p.id);
  return out;
}

TEST(GridOverrides, ParsesABaseValueAListChoiceAndGenerators) {
  const GridOverrides o = parse_overrides(
      {"train.steps=50", "train.lr=1e-3,3e-3", "train.clip_norm=choice(0.5)", "train.warmup=range(0,40,10)",
       "train.min_lr=linspace(0,1e-3,3)", "train.schedule= 'cosine' , linear"},
      "mine");
  EXPECT_EQ(o.name, "mine");
  ASSERT_EQ(o.keys.size(), 6u);
  auto texts = [&](size_t i) {
    std::vector<std::string> t;
    for (const auto& v : o.keys[i].values) t.push_back(v.text);
    return t;
  };
  EXPECT_EQ(o.keys[0].key, "train.steps");
  EXPECT_FALSE(o.keys[0].axis);
  EXPECT_EQ(texts(0), Args{"50"});
  EXPECT_EQ(o.keys[0].values[0].where, "override 'train.steps=50'");
  EXPECT_TRUE(o.keys[1].axis);
  EXPECT_EQ(texts(1), (Args{"1e-3", "3e-3"}));
  EXPECT_TRUE(o.keys[2].axis);  // choice() of one value is an axis of one value
  EXPECT_EQ(texts(2), Args{"0.5"});
  EXPECT_EQ(texts(3), (Args{"0", "10", "20", "30"}));  // stop excluded, as a grid's range
  EXPECT_EQ(texts(4), (Args{"0", "0.0005", "0.001"}));
  EXPECT_EQ(texts(5), (Args{"cosine", "linear"}));  // quotes and spaces around a value dropped
}

TEST(GridOverrides, AQuotedValueKeepsItsCommas) {
  const GridOverrides o = parse_overrides({"model.kind='a,b'", "train.schedule=\"x,y\",z"});
  ASSERT_EQ(o.keys[0].values.size(), 1u);
  EXPECT_FALSE(o.keys[0].axis);
  EXPECT_EQ(o.keys[0].values[0].text, "a,b");
  ASSERT_EQ(o.keys[1].values.size(), 2u);
  EXPECT_EQ(o.keys[1].values[0].text, "x,y");
}

TEST(GridOverrides, ADataPathIsRelativeToTheCurrentDirectory) {
  const GridOverrides o = parse_overrides({"data.path=corpus/a.bin", "data.eval_path=/abs/e.bin"});
  EXPECT_EQ(o.keys[0].values[0].text, (fs::current_path() / "corpus/a.bin").string());
  EXPECT_EQ(o.keys[1].values[0].text, "/abs/e.bin");
}

TEST(GridOverrides, AMalformedOverrideIsRefusedNamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train.lr=", "override 'train.lr=': no value after '='"},
      {"=3", "override '=3': no key before '='"},
      {"train.lr", "override 'train.lr': no '='"},
      {"train.steps=range(1,x)",
       "override 'train.steps=range(1,x)': key 'train.steps.range': expected a number, got 'x'"},
      {"train.steps=range(1)", "override 'train.steps=range(1)': key 'train.steps.range': expected [start, stop]"},
      {"train.steps=range()", "range() with nothing in it"},
      {"train.steps=rnage(1,3)", "unknown sweep 'rnage(...)' (did you mean 'range'?)"},
      {"train.lr=1,,2", "an empty value"},
      {"train.lr=1,", "an empty value"},
      {"train.lr='1,2", "the quote ' is not closed"},
      {"train.lr='1'2", "text after a closing quote"},
      {"train.lr=[1,2]", "a list or mapping is no run-config value"},
      {"train.lr={a: 1}", "a list or mapping is no run-config value"},
      {"+train.lr=1", "no +key or ~key here"},
      {"~train.lr", "no +key or ~key here"},
      {"train..lr=1", "is not a dotted key"},
      {"train lr=1", "is not a dotted key"},
      {"launch.parallel=4", "key 'launch.parallel' is the grid file's own"},
      {"name=x", "key 'name' is the grid file's own"},
  };
  for (const auto& [given, want] : cases) {
    const std::string arg = given;  // a structured binding cannot be captured (C++17)
    const std::string msg = sweep_test::thrown_message<ConfigError>([&] { parse_overrides({arg}); });
    EXPECT_CONTAINS(msg, want);
    EXPECT_EQ(msg.find('\n'), std::string::npos) << arg;  // one line
  }
}

TEST(GridOverrides, ARepeatedKeyIsRefused) {
  EXPECT_EQ(error_of({"train.steps=5", "train.lr=1", "train.steps=6"}),
            "override 'train.steps=6': key 'train.steps' is given twice (also override 'train.steps=5'); give its "
            "values once: train.steps=v1,v2");
}

TEST(GridOverrides, ABaseValueReplacesTheBasesAndAnAxisIsAddedAfterTheGrids) {
  const SweepSpec s = parse(kGrid, {"train.steps=50", "train.clip_norm=0.5,1"});
  EXPECT_EQ(s.base.at("train.steps").text, "50");
  EXPECT_EQ(s.base.at("train.steps").where, "override 'train.steps=50'");
  ASSERT_EQ(s.axes.size(), 3u);
  EXPECT_EQ(s.axes[2].key, "train.clip_norm");
  const auto points = expand(s);
  ASSERT_EQ(points.size(), 8u);
  EXPECT_EQ(points[0].config.train.steps, 50);
  EXPECT_EQ(points[0].config.train.clip_norm, 0.5);  // the new axis is the fastest
  EXPECT_EQ(points[1].config.train.clip_norm, 1.0);
}

TEST(GridOverrides, AnAxisReplacesTheGridAxisOfItsKeyWhereItStands) {
  const SweepSpec s = parse(kGrid, {"train.lr=1e-3,3e-3,1e-2"});
  ASSERT_EQ(s.axes.size(), 2u);
  EXPECT_EQ(s.axes[0].key, "train.lr");
  EXPECT_EQ(s.axes[0].values.size(), 3u);
  const auto points = expand(s);
  ASSERT_EQ(points.size(), 6u);  // 3 lr x 2 warmup, warmup still the fastest
  EXPECT_EQ(points[0].config.train.lr, 1e-3);
  EXPECT_EQ(points[1].config.train.lr, 1e-3);
  EXPECT_EQ(points[1].config.train.warmup, 5);
  // The same points as a grid file that says so: the same run ids.
  const std::string written =
      std::string(kGrid).replace(std::string(kGrid).find("[0.1, 2e-2]"), 11, "[1e-3, 3e-3, 1e-2]");
  EXPECT_EQ(ids(s), ids(parse_grid(written, "x.yaml")));
  // choice() of one value pins the axis.
  EXPECT_EQ(expand(parse(kGrid, {"train.lr=choice(0.001)"})).size(), 2u);
}

TEST(GridOverrides, AKeyOrValueTheGridWouldRefuseIsRefusedNamingTheOverride) {
  EXPECT_EQ(error_of({"train.lrr=1"}), "override 'train.lrr=1': unknown key 'train.lrr' (did you mean 'train.lr'?)");
  EXPECT_EQ(error_of({"train.stepz=1,2"}),
            "override 'train.stepz=1,2': unknown key 'train.stepz' (did you mean 'train.steps'?)");
  EXPECT_CONTAINS(error_of({"train.steps=many"}),
                  "override 'train.steps=many': key 'train.steps': expected an integer");
  EXPECT_CONTAINS(error_of({"train.steps=0"}),
                  "override 'train.steps=0': key 'train.steps': expected an integer in [1,");
  EXPECT_CONTAINS(error_of({"train.clip_norm=1,-1"}), "override 'train.clip_norm=1,-1': key 'train.clip_norm'");
  EXPECT_CONTAINS(error_of({"train.schedule=cosin"}), "override 'train.schedule=cosin': key 'train.schedule'");
  EXPECT_CONTAINS(error_of({"train.warmup=choice(50)"}), "override 'train.warmup=choice(50)'");  // warmup > steps
}

TEST(GridOverrides, AnOverrideThatConflictsWithHowTheGridSweepsItsKeyIsRefused) {
  EXPECT_EQ(error_of({"train.lr=1e-3"}),
            "override 'train.lr=1e-3': key 'train.lr' is an axis of the grid (grid at x.yaml:8:3), which would "
            "override this one value; to replace the axis give values: train.lr=v1,v2 (or choice(1e-3) for one)");
  const std::string zipped = std::string(kGrid) + "zip:\n  - train.accum: [1, 2]\n    train.micro_batch: [2, 1]\n";
  EXPECT_EQ(error_of({"train.accum=4,8"}, zipped),
            "override 'train.accum=4,8': key 'train.accum' is swept by zip at x.yaml:11:5; an override cannot "
            "change it (edit the grid file)");
  EXPECT_CONTAINS(error_of({"train.seed=3"}, std::string(kGrid) + "seeds: 2\n"),
                  "override 'train.seed=3': key 'train.seed' is swept by seeds at x.yaml:10:8");
  EXPECT_CONTAINS(error_of({"train.micro_batch=4"},
                           std::string(kGrid) + "constraints: {global_batch: 8, derive: train.micro_batch}\n"),
                  "key 'train.micro_batch' is swept by constraints.derive at x.yaml:10:");
  const std::string search =
      "name: s\nbase: {model: {layers: 1, d_model: 16}, train: {steps: 10}}\n"
      "search: {kind: random, samples: 2, space: {train.lr: {loguniform: [1.0e-4, 1.0e-2]}}}\n";
  EXPECT_CONTAINS(error_of({"train.lr=1e-3"}, search), "key 'train.lr' is swept by search.space at x.yaml:3:");
  EXPECT_CONTAINS(error_of({"train.warmup=1,2"}, search),
                  "override 'train.warmup=1,2': key 'train.warmup' cannot be an axis: search.kind random");
  EXPECT_EQ(expand(parse(search, {"train.warmup=2"})).front().config.train.warmup, 2);  // a base value is fine
  const std::string halving =
      "name: h\nbase: {model: {layers: 1, d_model: 16}, train: {steps: 40}}\n"
      "search: {kind: halving, min_steps: 10, samples: 4, space: {train.lr: {loguniform: [1.0e-4, 1.0e-2]}}}\n";
  EXPECT_CONTAINS(error_of({"train.warmup=1,2"}, halving), "cannot be an axis: search.kind halving");
}

TEST(GridOverrides, NameReplacesTheGridsName) {
  EXPECT_EQ(parse(kGrid, {}, "lr-study").name, "lr-study");
  EXPECT_EQ(parse("base: {train: {steps: 5}}\n", {}, "unnamed-grid").name, "unnamed-grid");
  EXPECT_EQ(error_of({}, kGrid, "../up"),
            "--name '../up': expected letters, digits, '-', '_' or '.' (not leading); a name is 1 to 128 characters");
}

class ResolvedGrid : public sweep_test::TempDirTest {
 protected:
  ResolvedGrid() : TempDirTest("resolved_grid") {}
};

TEST_F(ResolvedGrid, ParsesToTheSameRunsWhereverItLies) {
  fs::create_directories(dir_ / "g" / "data");
  sweep_test::write_file(dir_ / "g" / "data" / "a.bin", "abc");
  const std::string grid = (dir_ / "g" / "x.yaml").string();
  const std::string text =
      "# a comment\n"
      "name: demo\n"
      "base:\n"
      "  model: {layers: 1, d_model: 16, moe.experts: 2}\n"
      "  data: {kind: text, path: data/a.bin}\n"
      "  train: {steps: 20, lr: 0.01}\n"
      "grid:\n"
      "  train.lr: {range: [0.1, 0.3, 0.1]}\n"
      "  train.warmup: [0, 5]\n";
  sweep_test::write_file(grid, text);
  const GridOverrides o =
      parse_overrides({"train.steps=50", "train.lr=0.001,0.002", "dist.world_size=1", "train.clip_norm=range(1,3)",
                       "model.moe.experts=4", "train.schedule='linear'"},
                      "again");
  const SweepSpec s = parse_grid(text, grid, "", load_trainer_models, [&](SweepSpec& g) { apply_overrides(g, o); });
  const std::string resolved = resolved_grid(text, s, o);
  EXPECT_CONTAINS(resolved, "# The grid this sweep ran: " + grid + " with train.steps=50 ");
  EXPECT_CONTAINS(resolved, "name: again\n");
  EXPECT_CONTAINS(resolved, "steps: 50");                               // in place
  EXPECT_CONTAINS(resolved, "moe.experts: 4");                          // as the grid spells it
  EXPECT_CONTAINS(resolved, "train.lr: [0.001, 0.002]");                // the axis replaced
  EXPECT_CONTAINS(resolved, "train.clip_norm: [1, 2]");                 // an axis added
  EXPECT_CONTAINS(resolved, (dir_ / "g" / "data" / "a.bin").string());  // absolute
  // Elsewhere, with no override, the copy is the same runs.
  fs::create_directories(dir_ / "elsewhere");
  const std::string copy = (dir_ / "elsewhere" / "grid.yaml").string();
  sweep_test::write_file(copy, resolved);
  const SweepSpec again = parse_grid(resolved, copy);
  EXPECT_EQ(again.name, "again");
  ASSERT_EQ(expand(s).size(), 8u);
  EXPECT_EQ(ids(again), ids(s));
  // And a grid without overrides is written as itself.
  const SweepSpec plain = load_overridden_grid(grid, "", {});
  EXPECT_EQ(ids(parse_grid(plain.resolved, copy)), ids(plain));
}

TEST_F(ResolvedGrid, AProgramsPathsAreMadeAbsolute) {
  fs::create_directories(dir_ / "proj" / "lib");
  sweep_test::write_file(dir_ / "proj" / "train.py", "print('hi')\n");
  sweep_test::write_file(dir_ / "proj" / "lib" / "m.py", "\n");
  sweep_test::write_file(dir_ / "proj" / "run.sh", "#!/bin/sh\n");
  fs::permissions(dir_ / "proj" / "run.sh", fs::perms::owner_all);
  const std::string grid = (dir_ / "proj" / "g.yaml").string();
  const std::string text =
      "name: p\n"
      "program:\n"
      "  argv: [./run.sh, -u, ./train.py, --flag=a/b, train.py]\n"
      "  kind: overrides-one\n"
      "  files: [lib/]\n"
      "  keys:\n    width: {type: int, default: 4, min: 1, max: 64}\n";
  const GridOverrides o = parse_overrides({"model.width=8,16"});
  const SweepSpec s = parse_grid(text, grid, "", load_trainer_models, [&](SweepSpec& g) { apply_overrides(g, o); });
  const std::string resolved = resolved_grid(text, s, o);
  const std::string proj = (dir_ / "proj").string();
  EXPECT_CONTAINS(resolved, "[" + proj + "/run.sh, -u, " + proj + "/train.py, --flag=a/b, train.py]");
  EXPECT_CONTAINS(resolved, proj + "/lib");
  EXPECT_CONTAINS(resolved, "cwd: " + proj);  // a run starts where the grid file is
  const std::string copy = (dir_ / "grid.yaml").string();
  const SweepSpec again = parse_grid(resolved, copy);
  EXPECT_EQ(again.program.argv, s.program.argv);
  EXPECT_EQ(again.program.cwd, s.program.cwd);
  EXPECT_EQ(again.program.files, s.program.files);
  EXPECT_EQ(ids(again), ids(s));
}

}  // namespace
}  // namespace sweep
