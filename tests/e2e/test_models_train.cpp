// test-models-train: a train_main program with models that exercise the seam's edges, for
// own_model_e2e_test.cpp. "masked" trains properly but counts only some positions as
// targets (so a step's target count is not its token count); the others break one rule
// of sweep/trainer.h each, and the run must fail with one line naming the model. "leafy" is
// built from the leaf-aware layers (sweep/leaf.h) and says so; "leaf-liar" says so but is
// built from plain layers (leaf_e2e_test.cpp).
#include <torch/torch.h>

#include "sweep/leaf.h"
#include "sweep/trainer.h"

namespace {

/// Embedding -> linear head; the loss counts only targets whose id is not a multiple of 3.
struct MaskedImpl : torch::nn::Module {
  explicit MaskedImpl(const sweep::ModelArgs& a) : vocab(a.vocab()) {
    const int64_t w = a.integer("width");
    embed = register_parameter("embed", torch::randn({vocab, w}) * 0.1);
    head = register_parameter("head", torch::randn({vocab, w}) * 0.1);
  }
  torch::Tensor logits(const torch::Tensor& tokens) {
    const int64_t L = tokens.size(1) - 1;
    return torch::matmul(torch::embedding(embed, tokens.narrow(1, 0, L)), head.t());
  }
  sweep::LossSum loss(const torch::Tensor& tokens) {
    const int64_t L = tokens.size(1) - 1;
    auto targets = tokens.narrow(1, 1, L).reshape({-1});
    auto per =
        torch::nn::functional::cross_entropy(logits(tokens).reshape({-1, vocab}), targets,
                                             torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    auto keep = (targets.remainder(3) != 0);
    const int64_t n = keep.sum().item<int64_t>();
    // A micro-batch without a kept target still counts one, so the count is never zero.
    return {(per * keep.to(torch::kFloat)).sum(), std::max<int64_t>(n, 1)};
  }
  int64_t vocab;
  torch::Tensor embed, head;
};

/// One of the broken models: `how` says which rule it breaks.
struct BrokenImpl : torch::nn::Module {
  BrokenImpl(const sweep::ModelArgs& a, std::string how) : m(a), how(std::move(how)) {
    register_module("m", std::shared_ptr<MaskedImpl>(&m, [](MaskedImpl*) {}));
    if (this->how == "fp64") register_parameter("scale64", torch::ones({1}, torch::kDouble));
  }
  sweep::LossSum loss(const torch::Tensor& tokens) {
    sweep::LossSum s = m.loss(tokens);
    if (how == "nonscalar") return {s.sum * torch::ones({2}), s.targets};
    if (how == "no-targets") return {s.sum, 0};
    if (how == "detached") return {s.sum.detach(), s.targets};
    if (how == "grows" && ++calls == 2) register_parameter("late", torch::zeros({3}));
    return s;
  }
  MaskedImpl m;
  std::string how;
  int calls = 0;
};

/// A user's model of leaf-aware layers: embedding, RMSNorm, a tanh MLP, an untied head.
struct LeafyImpl : torch::nn::Module {
  explicit LeafyImpl(const sweep::ModelArgs& a) : vocab(a.vocab()) {
    const int64_t w = a.integer("width");
    embed = register_parameter("embed", torch::randn({vocab, w}) * 0.1);
    norm = register_parameter("norm", torch::ones({w}));
    up = register_parameter("up", torch::randn({2 * w, w}) * 0.1);
    down = register_parameter("down", torch::randn({w, 2 * w}) * 0.1);
    head = register_parameter("head", torch::randn({vocab, w}) * 0.1);
  }
  bool leaf_aware() const { return true; }
  sweep::LossSum loss(const torch::Tensor& tokens) {
    namespace leaf = sweep::leaf;
    const int64_t L = tokens.size(1) - 1;
    auto x = leaf::embedding(tokens.narrow(1, 0, L), embed);
    x = x + leaf::linear(torch::tanh(leaf::linear(leaf::rms_norm(x, norm, 1e-6), {up})), {down});
    auto per = torch::nn::functional::cross_entropy(
        leaf::linear(x, {head}).reshape({-1, vocab}), tokens.narrow(1, 1, L).reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    auto per_leaf = leaf::sum_per_leaf(per);
    return {per_leaf.sum(), per.numel(), leaf::active() ? per_leaf : torch::Tensor()};
  }
  int64_t vocab;
  torch::Tensor embed, norm, up, down, head;
};

/// Says it is leaf-aware, but its layers are plain LibTorch.
struct LeafLiarImpl : MaskedImpl {
  using MaskedImpl::MaskedImpl;
  bool leaf_aware() const { return true; }
  sweep::LossSum loss(const torch::Tensor& tokens) {
    sweep::LossSum s = MaskedImpl::loss(tokens);
    s.per_leaf = torch::ones({sweep::leaf::leaves()}) * s.sum.detach() / double(sweep::leaf::leaves());
    return s;
  }
};

/// The program's own data (data.kind: program): sequence s is an arithmetic progression
/// modulo vocab; `off` > 0 shifts every token out of range (a broken source).
class Progressions : public sweep::DataSource {
 public:
  Progressions(int64_t vocab, int64_t off) : vocab_(vocab), off_(off) {}
  int64_t samples() const override { return 97; }
  void sequence(int64_t sample, int64_t len, int64_t* out) const override {
    for (int64_t i = 0; i < len; ++i) out[i] = (sample * 5 + i * (1 + sample % 3)) % vocab_ + off_;
  }
  std::string describe() const override { return "arithmetic progressions mod " + std::to_string(vocab_); }

 private:
  int64_t vocab_, off_;
};

}  // namespace

int main(int argc, char** argv) {
  sweep::Models models = sweep::builtin_models();
  models.add<MaskedImpl>(
      {"masked", "counts only targets not divisible by 3", {sweep::int_key("width", 8, 1, 64, "")}},
      [](const sweep::ModelArgs& a) { return std::make_shared<MaskedImpl>(a); },
      [](const sweep::ModelArgs& a) { return std::make_unique<Progressions>(a.vocab(), 0); });
  models.add<MaskedImpl>(
      {"bad-data", "its data source gives tokens past the vocabulary", {sweep::int_key("width", 8, 1, 64, "")}},
      [](const sweep::ModelArgs& a) { return std::make_shared<MaskedImpl>(a); },
      [](const sweep::ModelArgs& a) { return std::make_unique<Progressions>(a.vocab(), a.vocab()); });
  models.add<LeafyImpl>({"leafy", "built from the leaf-aware layers", {sweep::int_key("width", 8, 1, 64, "")}},
                        [](const sweep::ModelArgs& a) { return std::make_shared<LeafyImpl>(a); });
  models.add<LeafLiarImpl>({"leaf-liar", "says it is leaf-aware; is not", {sweep::int_key("width", 8, 1, 64, "")}},
                           [](const sweep::ModelArgs& a) { return std::make_shared<LeafLiarImpl>(a); });
  for (const char* how : {"nonscalar", "no-targets", "detached", "grows", "fp64"})
    models.add<BrokenImpl>({how, "breaks a rule", {sweep::int_key("width", 8, 1, 64, "")}},
                           [how](const sweep::ModelArgs& a) { return std::make_shared<BrokenImpl>(a, how); });
  return sweep::train_main(argc, argv, models);
}
