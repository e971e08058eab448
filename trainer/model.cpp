#include "model.h"

#include <cmath>

namespace sweep {

namespace F = torch::nn::functional;

int64_t ffn_hidden(const ModelConfig& cfg) {
  int64_t h = cfg.ffn_mult * cfg.d_model * 2 / 3;
  return (h + 7) / 8 * 8;
}

namespace {

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w) {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + 1e-6) * w;
}

/// Rotates the two halves of the head dimension by position-dependent angles.
torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  auto half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

}  // namespace

TransformerImpl::Block::Block(int64_t d, int64_t hidden, double std_dev, double out_std) {
  attn_norm = register_parameter("attn_norm", torch::ones({d}));
  wq = register_parameter("attn_wq", torch::randn({d, d}) * std_dev);
  wk = register_parameter("attn_wk", torch::randn({d, d}) * std_dev);
  wv = register_parameter("attn_wv", torch::randn({d, d}) * std_dev);
  wo = register_parameter("attn_wo", torch::randn({d, d}) * out_std);
  mlp_norm = register_parameter("mlp_norm", torch::ones({d}));
  w1 = register_parameter("mlp_w1", torch::randn({hidden, d}) * std_dev);
  w3 = register_parameter("mlp_w3", torch::randn({hidden, d}) * std_dev);
  w2 = register_parameter("mlp_w2", torch::randn({d, hidden}) * out_std);
}

TransformerImpl::TransformerImpl(const ModelConfig& cfg) : cfg_(cfg) {
  // Registration order is the canonical parameter order (flat buffer, checksums).
  const double std_dev = 0.02;
  const double out_std = std_dev / std::sqrt(2.0 * double(cfg.layers));  // residual projections
  const int64_t d = cfg.d_model, h = ffn_hidden(cfg);
  embed_ = register_parameter("embed", torch::randn({cfg.vocab, d}) * std_dev);
  for (int64_t i = 0; i < cfg.layers; ++i)
    blocks_.push_back(register_module("layer" + std::to_string(i), std::make_shared<Block>(d, h, std_dev, out_std)));
  final_norm_ = register_parameter("final_norm", torch::ones({d}));
  head_ = register_parameter("head", torch::randn({cfg.vocab, d}) * std_dev);

  const int64_t hd = d / cfg.heads, L = cfg.seq_len;
  auto inv_freq = torch::pow(10000.0, -torch::arange(0, hd / 2, torch::kDouble) * 2.0 / double(hd));
  auto angles = torch::outer(torch::arange(0, L, torch::kDouble), inv_freq);
  rope_cos_ = register_buffer("rope_cos", torch::cos(angles).to(torch::kFloat));
  rope_sin_ = register_buffer("rope_sin", torch::sin(angles).to(torch::kFloat));
  causal_mask_ = register_buffer(
      "causal_mask", torch::full({L, L}, -std::numeric_limits<float>::infinity()).triu(1));
}

torch::Tensor TransformerImpl::block_forward(const Block& b, const torch::Tensor& x) {
  const int64_t B = x.size(0), L = x.size(1), H = cfg_.heads, hd = cfg_.d_model / H;
  auto h = rms_norm(x, b.attn_norm);
  auto heads = [&](const torch::Tensor& w) { return F::linear(h, w).view({B, L, H, hd}).transpose(1, 2); };
  auto cos = rope_cos_.narrow(0, 0, L), sin = rope_sin_.narrow(0, 0, L);
  auto q = rope(heads(b.wq), cos, sin), k = rope(heads(b.wk), cos, sin), v = heads(b.wv);
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hd)));
  scores = scores + causal_mask_.narrow(0, 0, L).narrow(1, 0, L);
  auto att = torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({B, L, cfg_.d_model});
  auto y = x + F::linear(att, b.wo);
  auto m = rms_norm(y, b.mlp_norm);
  return y + F::linear(torch::silu(F::linear(m, b.w1)) * F::linear(m, b.w3), b.w2);
}

torch::Tensor TransformerImpl::loss_sum(const torch::Tensor& tokens) {
  const int64_t L = tokens.size(1) - 1;
  auto inputs = tokens.narrow(1, 0, L), targets = tokens.narrow(1, 1, L);
  auto x = F::embedding(inputs, embed_);
  for (const auto& b : blocks_) x = block_forward(*b, x);
  auto logits = F::linear(rms_norm(x, final_norm_), head_);
  return F::cross_entropy(logits.reshape({-1, cfg_.vocab}), targets.reshape({-1}),
                          F::CrossEntropyFuncOptions().reduction(torch::kSum));
}

}  // namespace sweep
