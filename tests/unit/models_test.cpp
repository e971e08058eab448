// sweep::Models, the registry of a trainer program: a kind is refused when it is added, not
// when a run meets it, if its keys collide with the keys every model has, if it is the
// built-in decoder's, or if it is added twice; ModelArgs gives a factory only the keys its
// schema declares, with their types.
#include <gtest/gtest.h>

#include <stdexcept>

#include "model_schema.h"  // register_model_schema
#include "run_config.h"
#include "sweep/trainer.h"
#include "test_util.h"  // EXPECT_CONTAINS, thrown_message

namespace sweep {
namespace {

struct TinyImpl : torch::nn::Module {
  explicit TinyImpl(const ModelArgs& a) { w = register_parameter("w", torch::zeros({a.integer("width")})); }
  LossSum loss(const torch::Tensor&) { return {w.sum(), 1, /*per_leaf=*/{}}; }
  torch::Tensor w;
};

std::function<std::shared_ptr<TinyImpl>(const ModelArgs&)> tiny() {
  return [](const ModelArgs& a) { return std::make_shared<TinyImpl>(a); };
}

std::string add_error(Models& m, const ModelSchema& s) {
  return sweep_test::thrown_message<std::invalid_argument>([&] { m.add<TinyImpl>(s, tiny()); });
}

TEST(Models, AKindIsRefusedWhenItIsAdded) {
  Models m = builtin_models();
  ASSERT_NE(m.find("decoder"), nullptr);
  EXPECT_CONTAINS(add_error(m, {"tiny", "", {int_key("vocab", 8, 1, 9, "")}}),
                  "model 'tiny': key 'vocab': collides with the built-in key model.vocab, which every model has");
  EXPECT_CONTAINS(add_error(m, {"tiny", "", {int_key("seq_len", 8, 1, 9, "")}}), "collides with the built-in key");
  EXPECT_CONTAINS(add_error(m, {"decoder", "", {}}), "the built-in decoder has this kind");
  m.add<TinyImpl>({"tiny", "", {int_key("width", 4, 1, 9, "")}}, tiny());
  EXPECT_CONTAINS(add_error(m, {"tiny", "", {}}), "model 'tiny': added twice");
  EXPECT_EQ(m.specs().size(), 2u);
}

TEST(Models, ModelArgsGiveOnlyDeclaredKeysOfTheirType) {
  const ModelSchema s{"args-probe", "", {int_key("width", 4, 1, 9, ""), real_key("gain", 0.5, 0, 1, "")}};
  register_model_schema(s);
  RunConfig c = apply_run_config(RunConfig{}, {{"model.kind", {"args-probe", "t"}}, {"model.gain", {"0.25", "t"}}});
  const ModelArgs a(c, false);
  EXPECT_EQ(a.integer("width"), 4);
  EXPECT_EQ(a.real("gain"), 0.25);
  EXPECT_EQ(a.kind(), "args-probe");
  EXPECT_CONTAINS(sweep_test::thrown_message<std::invalid_argument>([&] { a.integer("gain"); }),
                  "model 'args-probe': no int key 'gain' is declared in its schema");
  EXPECT_CONTAINS(sweep_test::thrown_message<std::invalid_argument>([&] { a.choice("norm"); }), "no choice key 'norm'");
}

}  // namespace
}  // namespace sweep
