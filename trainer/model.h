// The decoder-only transformer: token embedding, pre-norm blocks of causal attention
// with rotary positions and a SwiGLU MLP, RMSNorm, an untied output head.
#pragma once

#include <torch/torch.h>

#include "run_config.h"

namespace sweep {

class TransformerImpl : public torch::nn::Module {
 public:
  explicit TransformerImpl(const ModelConfig& cfg);

  /// Summed (not mean) next-token cross-entropy of `tokens` [B, L+1]: inputs are
  /// tokens[:, :L], targets tokens[:, 1:].
  torch::Tensor loss_sum(const torch::Tensor& tokens);

 private:
  /// One pre-norm block; a module so its parameters are named "layer<i>.<name>".
  struct Block : torch::nn::Module {
    Block(int64_t d, int64_t hidden, double std_dev, double out_std);
    torch::Tensor attn_norm, wq, wk, wv, wo, mlp_norm, w1, w3, w2;
  };
  torch::Tensor block_forward(const Block& b, const torch::Tensor& x);

  ModelConfig cfg_;
  torch::Tensor embed_, final_norm_, head_;
  std::vector<std::shared_ptr<Block>> blocks_;
  torch::Tensor rope_cos_, rope_sin_, causal_mask_;  // buffers, not parameters
};
TORCH_MODULE(Transformer);

/// SwiGLU hidden width for a config (2/3 of ffn_mult * d_model, rounded up to 8).
int64_t ffn_hidden(const ModelConfig& cfg);

}  // namespace sweep
