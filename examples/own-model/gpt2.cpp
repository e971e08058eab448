// gpt2-train: sweep-train with a model of its own, a GPT-2-style language model
// (model.kind: gpt2). Copy this file to train yours: change the module, its keys and the
// factory; main() stays as it is.
//
// The model: token embedding plus a learned absolute position embedding, n_layer
// pre-LayerNorm blocks (causal self-attention from one fused qkv projection, a GELU MLP
// of mlp_ratio x width), a final LayerNorm, and the output head tied to the token
// embedding. No dropout: a run is deterministic from its seed.
//
// Build against an installed sweep (scripts/build-own-model does this), then run it as
// sweep-train is run: `gpt2-train --config RUN.yaml --out DIR`, under mpiexec for
// several ranks, or from a grid with `launch: {trainer: PATH}` (sweeps/own-model.yaml).
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "sweep/trainer.h"

namespace {

namespace F = torch::nn::functional;

// The model's own config keys, model.<name> in a run config or grid. They get the same
// validation, canonical text and run ids as the built-in keys; model.vocab and
// model.seq_len every model has. Change these to your model's.
sweep::ModelSchema gpt2_schema() {
  return {"gpt2",
          "GPT-2-style decoder: learned positions, pre-LayerNorm, GELU MLP, tied head",
          {sweep::int_key("n_layer", 2, 1, 128, "transformer blocks"),
           sweep::int_key("n_embd", 64, 8, 16384, "embedding width, a multiple of n_head"),
           sweep::int_key("n_head", 4, 1, 256, "attention heads"),
           sweep::int_key("mlp_ratio", 4, 1, 16, "MLP hidden width in multiples of n_embd"),
           sweep::real_key("init_std", 0.02, 0.0, 1.0, "std of the normal initial weights", /*min_exclusive=*/true),
           sweep::choice_key("gelu", "tanh", {"tanh", "exact"}, "GELU: GPT-2's tanh approximation or the exact erf")}};
}

// The keys' values, read by the factory below.
struct Gpt2Options {
  int64_t vocab = 0, seq_len = 0, n_layer = 0, n_embd = 0, n_head = 0, mlp_ratio = 0;
  double init_std = 0;
  bool gelu_tanh = true;
};

// Weights from N(0, std), biases zero. The default generator is seeded from train.seed
// before the factory runs, so every rank and every run with that seed draws the same
// values. (The layers' own initialisation draws first; it is overwritten here.)
void init_linear(torch::nn::Linear& l, double std) {
  torch::NoGradGuard no_grad;
  l->weight.normal_(0.0, std);
  l->bias.zero_();
}

// One pre-LayerNorm block: x + attn(ln_1(x)), then + mlp(ln_2(x)). Its parameters are
// named h<i>.ln_1.weight, h<i>.c_attn.weight, ... in the record.
struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(const Gpt2Options& o) : n_head(o.n_head), gelu(o.gelu_tanh ? "tanh" : "none") {
    // Residual projections start smaller, by 1/sqrt(2 n_layer), as in GPT-2.
    const double proj_std = o.init_std / std::sqrt(2.0 * double(o.n_layer));
    ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.n_embd})));
    c_attn = register_module("c_attn", torch::nn::Linear(o.n_embd, 3 * o.n_embd));  // q, k, v in one matmul
    c_proj = register_module("c_proj", torch::nn::Linear(o.n_embd, o.n_embd));
    ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.n_embd})));
    mlp_fc = register_module("mlp_fc", torch::nn::Linear(o.n_embd, o.mlp_ratio * o.n_embd));
    mlp_proj = register_module("mlp_proj", torch::nn::Linear(o.mlp_ratio * o.n_embd, o.n_embd));
    init_linear(c_attn, o.init_std);
    init_linear(c_proj, proj_std);
    init_linear(mlp_fc, o.init_std);
    init_linear(mlp_proj, proj_std);
  }

  // x: [B, L, n_embd]; mask: [L, L], -inf above the diagonal.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) {
    const int64_t B = x.size(0), L = x.size(1), C = x.size(2), hd = C / n_head;
    // [B, L, 3C] -> q, k, v as [B, n_head, L, hd].
    auto qkv = c_attn(ln_1(x)).view({B, L, 3, n_head, hd}).permute({2, 0, 3, 1, 4});
    auto q = qkv[0], k = qkv[1], v = qkv[2];
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(hd)) + mask;
    auto att = torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({B, L, C});
    auto y = x + c_proj(att);
    return y + mlp_proj(torch::gelu(mlp_fc(ln_2(y)), gelu));
  }

  int64_t n_head;
  std::string gelu;  // torch::gelu's approximate: "tanh" or "none"
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr}, mlp_fc{nullptr}, mlp_proj{nullptr};
};
TORCH_MODULE(Block);

// The whole model. What the trainer needs of it: every parameter registered here, in the
// constructor (their order is the flat buffer's order: reduction, optimizer, checksums,
// checkpoints), and loss().
struct Gpt2Impl : torch::nn::Module {
  explicit Gpt2Impl(const Gpt2Options& o) : vocab(o.vocab) {
    wte = register_module("wte", torch::nn::Embedding(o.vocab, o.n_embd));
    wpe = register_module("wpe", torch::nn::Embedding(o.seq_len, o.n_embd));
    {
      torch::NoGradGuard no_grad;
      wte->weight.normal_(0.0, o.init_std);
      wpe->weight.normal_(0.0, o.init_std);
    }
    for (int64_t i = 0; i < o.n_layer; ++i) h.push_back(register_module("h" + std::to_string(i), Block(o)));
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.n_embd})));
    // No head parameter: the logits are ln_f(x) times the token embedding (tied).
  }

  // tokens: [B, L + 1] int64. Returns the summed (not mean) next-token cross-entropy of
  // inputs tokens[:, :L] against targets tokens[:, 1:], and its target count B * L: the
  // trainer divides by the whole step's count.
  sweep::LossSum loss(const torch::Tensor& tokens) {
    const int64_t B = tokens.size(0), L = tokens.size(1) - 1;
    auto inputs = tokens.narrow(1, 0, L), targets = tokens.narrow(1, 1, L);
    auto x = wte(inputs) + wpe(torch::arange(L, tokens.options()));
    auto mask = torch::full({L, L}, -std::numeric_limits<float>::infinity(), x.options()).triu(1);
    for (auto& block : h) x = block->forward(x, mask);
    auto logits = F::linear(ln_f(x), wte->weight).to(torch::kFloat);  // [B, L, vocab]
    auto sum = F::cross_entropy(logits.reshape({-1, vocab}), targets.reshape({-1}),
                                F::CrossEntropyFuncOptions().reduction(torch::kSum));
    return {sum, B * L};
  }

  int64_t vocab;
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  std::vector<Block> h;
  torch::nn::LayerNorm ln_f{nullptr};
};

// The factory: reads the keys (already validated against their ranges), checks what the
// ranges cannot express, builds the model. It runs once per rank, on the CPU, after the
// run's seed is set.
std::shared_ptr<Gpt2Impl> make_gpt2(const sweep::ModelArgs& a) {
  Gpt2Options o;
  o.vocab = a.vocab();
  o.seq_len = a.seq_len();
  o.n_layer = a.integer("n_layer");
  o.n_embd = a.integer("n_embd");
  o.n_head = a.integer("n_head");
  o.mlp_ratio = a.integer("mlp_ratio");
  o.init_std = a.real("init_std");
  o.gelu_tanh = a.choice("gelu") == "tanh";
  // Keys that contradict each other: std::invalid_argument is a config error (exit 2,
  // nothing written); the trainer puts "model 'gpt2': " before the message.
  if (o.n_embd % o.n_head != 0)
    throw std::invalid_argument("key 'model.n_head': must divide model.n_embd (" + std::to_string(o.n_embd) +
                                "), got " + std::to_string(o.n_head));
  // a.fp16_emulated(): train.precision fp16 on the CPU, where there is no fp16 autocast.
  // This model computes in fp32 then (the loss scale still runs); the built-in decoder
  // rounds its matmul inputs to fp16 instead.
  return std::make_shared<Gpt2Impl>(o);
}

}  // namespace

int main(int argc, char** argv) {
  sweep::Models models = sweep::builtin_models();  // model.kind: decoder stays available
  models.add<Gpt2Impl>(gpt2_schema(), make_gpt2);
  return sweep::train_main(argc, argv, models);
}
