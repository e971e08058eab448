// The decoder-only transformer: token embedding, pre-norm blocks of causal attention
// with rotary positions and a SwiGLU MLP (or a DeepSeekMoE-style layer: shared experts
// plus top-k routed experts), RMSNorm, an untied output head.
#pragma once

#include <torch/torch.h>

#include "run_config.h"
#include "sweep/trainer.h"  // RoutedTokens

namespace sweep {

/// How matrix products are computed.
enum class MatmulPrecision {
  fp32,           ///< plain fp32 (bf16 runs use autocast around the forward instead)
  fp16_emulated,  ///< inputs rounded to fp16, products accumulated in fp32 (CPU fp16)
};

/// The summed loss of a micro-batch and, in a leaf step, its per-leaf sums.
struct LeafLoss {
  torch::Tensor sum, per_leaf;
};

class TransformerImpl : public torch::nn::Module {
 public:
  TransformerImpl(const ModelConfig& cfg, MatmulPrecision precision);

  /// Summed (not mean) next-token cross-entropy of `tokens` [B, L+1]: inputs are
  /// tokens[:, :L], targets tokens[:, 1:]. Built from the leaf-aware layers (sweep/leaf.h):
  /// in a leaf step also each leaf's sum (per_leaf), else per_leaf is undefined.
  LeafLoss loss_sum(const torch::Tensor& tokens);

  /// MoE: the tokens each layer's router sent to each expert since the last call (Model::
  /// take_routed_tokens); {} for a dense model.
  RoutedTokens take_routed_tokens();

 private:
  /// A SwiGLU MLP: w2(silu(w1 x) * w3 x).
  struct Mlp : torch::nn::Module {
    Mlp(int64_t d, int64_t hidden, double std_dev, double out_std);
    torch::Tensor w1, w3, w2;
  };
  /// One pre-norm block; a module so its parameters are named "layer<i>.<name>".
  struct Block : torch::nn::Module {
    Block(const ModelConfig& cfg, int64_t index, double std_dev, double out_std);
    int64_t index;  // the layer's place in the stack
    torch::Tensor attn_norm, wq, wk, wv, wo, mlp_norm;
    std::shared_ptr<Mlp> mlp;                   // dense, or the shared experts of an MoE layer
    torch::Tensor router;                       // [experts, d] when MoE
    std::vector<std::shared_ptr<Mlp>> experts;  // routed experts
  };
  /// x [w_1; w_2; ...]^T, rounded as the precision says.
  torch::Tensor linear(const torch::Tensor& x, const std::vector<torch::Tensor>& w,
                       const std::vector<int64_t>& rows_per_leaf = {}) const;
  torch::Tensor mlp_forward(const Mlp& m, const torch::Tensor& x, const std::vector<int64_t>& rows_per_leaf = {}) const;
  torch::Tensor moe_forward(const Block& b, const torch::Tensor& x);
  torch::Tensor block_forward(const Block& b, const torch::Tensor& x);

  ModelConfig cfg_;
  MatmulPrecision precision_;
  torch::Tensor embed_, final_norm_, head_;
  std::vector<std::shared_ptr<Block>> blocks_;
  torch::Tensor rope_cos_, rope_sin_, causal_mask_;  // buffers, not parameters
  torch::Tensor routed_;  // MoE: [layers, experts] tokens since take_routed_tokens, on the compute device
};
TORCH_MODULE(Transformer);

/// SwiGLU hidden width for a config (2/3 of ffn_mult * d_model, rounded up to 8).
int64_t ffn_hidden(const ModelConfig& cfg);

/// Hidden width of one MoE expert.
int64_t expert_hidden(const ModelConfig& cfg);

}  // namespace sweep
