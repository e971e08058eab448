#include "model.h"

#include <cmath>
#include <cstring>

#include "forward_probe.h"  // forward_probe: the first non-finite module, the sample NaN fault
#include "fused_ops.h"      // swiglu, split_heads_rope
#include "sweep/leaf.h"     // leaf-aware linear, embedding, rms_norm: plain layers outside a leaf step

namespace sweep {

namespace F = torch::nn::functional;

int64_t ffn_hidden(const ModelConfig& cfg) {
  int64_t h = cfg.ffn_mult * cfg.d_model * 2 / 3;
  return (h + 7) / 8 * 8;
}

int64_t expert_hidden(const ModelConfig& cfg) {
  if (cfg.moe_expert_hidden > 0) return cfg.moe_expert_hidden;
  int64_t h = ffn_hidden(cfg) / (cfg.moe_top_k + cfg.moe_shared_experts);
  return std::max<int64_t>(8, (h + 7) / 8 * 8);
}

namespace {

constexpr double kNormEps = 1e-6;

}  // namespace

TransformerImpl::Mlp::Mlp(int64_t d, int64_t hidden, double std_dev, double out_std) {
  w1 = register_parameter("w1", torch::randn({hidden, d}) * std_dev);
  w3 = register_parameter("w3", torch::randn({hidden, d}) * std_dev);
  w2 = register_parameter("w2", torch::randn({d, hidden}) * out_std);
}

TransformerImpl::Block::Block(const ModelConfig& cfg, int64_t index, double std_dev, double out_std) : index(index) {
  const int64_t d = cfg.d_model;
  attn_norm = register_parameter("attn_norm", torch::ones({d}));
  wq = register_parameter("attn_wq", torch::randn({d, d}) * std_dev);
  wk = register_parameter("attn_wk", torch::randn({d, d}) * std_dev);
  wv = register_parameter("attn_wv", torch::randn({d, d}) * std_dev);
  wo = register_parameter("attn_wo", torch::randn({d, d}) * out_std);
  mlp_norm = register_parameter("mlp_norm", torch::ones({d}));
  if (cfg.moe_experts == 0) {
    mlp = register_module("mlp", std::make_shared<Mlp>(d, ffn_hidden(cfg), std_dev, out_std));
    return;
  }
  const int64_t eh = expert_hidden(cfg);
  if (cfg.moe_shared_experts > 0)
    mlp = register_module("shared", std::make_shared<Mlp>(d, eh * cfg.moe_shared_experts, std_dev, out_std));
  router = register_parameter("router", torch::randn({cfg.moe_experts, d}) * std_dev);
  for (int64_t e = 0; e < cfg.moe_experts; ++e)
    experts.push_back(register_module("expert" + std::to_string(e), std::make_shared<Mlp>(d, eh, std_dev, out_std)));
}

TransformerImpl::TransformerImpl(const ModelConfig& cfg, MatmulPrecision precision) : cfg_(cfg), precision_(precision) {
  // Construction order fixes which random numbers each tensor gets from the seed.
  const double std_dev = 0.02;
  const double out_std = std_dev / std::sqrt(2.0 * double(cfg.layers));  // residual projections
  const int64_t d = cfg.d_model;
  embed_ = register_parameter("embed", torch::randn({cfg.vocab, d}) * std_dev);
  for (int64_t i = 0; i < cfg.layers; ++i)
    blocks_.push_back(register_module("layer" + std::to_string(i), std::make_shared<Block>(cfg, i, std_dev, out_std)));
  final_norm_ = register_parameter("final_norm", torch::ones({d}));
  head_ = register_parameter("head", torch::randn({cfg.vocab, d}) * std_dev);

  const int64_t hd = d / cfg.heads, L = cfg.seq_len;
  auto inv_freq = torch::pow(10000.0, -torch::arange(0, hd / 2, torch::kDouble) * 2.0 / double(hd));
  auto angles = torch::outer(torch::arange(0, L, torch::kDouble), inv_freq);
  rope_cos_ = register_buffer("rope_cos", torch::cos(angles).to(torch::kFloat));
  rope_sin_ = register_buffer("rope_sin", torch::sin(angles).to(torch::kFloat));
  causal_mask_ = register_buffer("causal_mask", torch::full({L, L}, -std::numeric_limits<float>::infinity()).triu(1));
}

torch::Tensor TransformerImpl::linear(const torch::Tensor& x, const std::vector<torch::Tensor>& w,
                                      const std::vector<int64_t>& rows_per_leaf) const {
  // fp16 emulation: both operands rounded to fp16 (overflowing to inf as real fp16 would);
  // the product accumulates in fp32. The casts' backward rounds gradients to fp16 as well.
  const bool fp16 = precision_ == MatmulPrecision::fp16_emulated;
  return leaf::linear(fp16 ? x.to(torch::kHalf).to(torch::kFloat) : x, w, rows_per_leaf, fp16);
}

torch::Tensor TransformerImpl::mlp_forward(const Mlp& m, const torch::Tensor& x,
                                           const std::vector<int64_t>& rows_per_leaf) const {
  // w1 and w3 as one [2 hidden, d] matrix: one wider matmul instead of two (and one
  // instead of two in the backward for x).
  return linear(swiglu(linear(x, {m.w1, m.w3}, rows_per_leaf)), {m.w2}, rows_per_leaf);
}

RoutedTokens TransformerImpl::take_routed_tokens() {
  if (cfg_.moe_experts == 0) return {};
  RoutedTokens r{cfg_.layers, cfg_.moe_experts, std::vector<int64_t>(size_t(cfg_.layers * cfg_.moe_experts), 0)};
  if (routed_.defined()) {  // one copy to the host a call, not one per layer and micro-batch
    const torch::Tensor host = routed_.to(torch::kCPU).contiguous();
    std::memcpy(r.counts.data(), host.data_ptr<int64_t>(), r.counts.size() * sizeof(int64_t));
    routed_.zero_();
  }
  return r;
}

torch::Tensor TransformerImpl::moe_forward(const Block& b, const torch::Tensor& x) {
  // x: [T, d] tokens. Routing: softmax over experts, top-k, gate = routed probability.
  // Experts that receive no token are not run, so their parameters get no gradient.
  auto probs = torch::softmax(linear(x, {b.router}).to(torch::kFloat), -1);
  auto top = probs.topk(cfg_.moe_top_k, -1);
  auto gates = std::get<0>(top), chosen = std::get<1>(top);  // [T, k]
  {  // the routing telemetry: tokens per expert (a token picks an expert at most once),
     // counted where the routing ran, without waiting for the device
    auto hits = (chosen.flatten().unsqueeze(1) == torch::arange(cfg_.moe_experts, chosen.options())).sum(0);
    if (!routed_.defined()) routed_ = torch::zeros({cfg_.layers, cfg_.moe_experts}, hits.options());
    routed_[b.index] += hits;
  }
  torch::Tensor out = b.mlp ? mlp_forward(*b.mlp, x) : torch::zeros_like(x);
  for (int64_t e = 0; e < cfg_.moe_experts; ++e) {
    auto hit = (chosen == e);  // [T, k]; a token picks an expert at most once
    auto rows = hit.any(-1).nonzero().squeeze(-1);
    if (rows.numel() == 0) continue;
    auto gate = (gates * hit.to(gates.scalar_type())).sum(-1).index_select(0, rows).unsqueeze(-1);
    // In a leaf step the expert's rows are counted per leaf: each leaf's tokens go through
    // it as they would in a micro-batch of that leaf alone.
    const auto counts = leaf::active() ? leaf::rows_per_leaf(rows, x.size(0)) : std::vector<int64_t>{};
    auto y = mlp_forward(*b.experts[size_t(e)], x.index_select(0, rows), counts) * gate;
    out = out.index_add(0, rows, y.to(out.scalar_type()));
  }
  return out;
}

torch::Tensor TransformerImpl::block_forward(const Block& b, const torch::Tensor& x) {
  const int64_t B = x.size(0), L = x.size(1), H = cfg_.heads, hd = cfg_.d_model / H;
  auto h = leaf::rms_norm(x, b.attn_norm, kNormEps);
  // q, k and v from one [3d, d] matmul, split into heads [B, H, L, hd] with rotary q, k.
  auto qkv = split_heads_rope(linear(h, {b.wq, b.wk, b.wv}), H, rope_cos_, rope_sin_);
  auto q = qkv[0].reshape({B * H, L, hd}), k = qkv[1].reshape({B * H, L, hd}), v = qkv[2].reshape({B * H, L, hd});
  // Scale and causal mask inside the batched matmul: mask + (q k^T) / sqrt(hd).
  auto scores = torch::baddbmm(causal_mask_.narrow(0, 0, L).narrow(1, 0, L), q, k.transpose(1, 2), /*beta=*/1.0,
                               /*alpha=*/1.0 / std::sqrt(double(hd)));
  auto att =
      torch::bmm(torch::softmax(scores, -1), v).view({B, H, L, hd}).transpose(1, 2).reshape({B, L, cfg_.d_model});
  auto a = linear(att, {b.wo});
  ForwardProbe* probe = forward_probe();  // null on every normal step
  if (probe) probe->look("layer" + std::to_string(b.index) + ".attn", x, a);
  auto y = x + a;
  auto m = leaf::rms_norm(y, b.mlp_norm, kNormEps);
  auto f = b.experts.empty() ? mlp_forward(*b.mlp, m)
                             : moe_forward(b, m.reshape({B * L, cfg_.d_model})).view({B, L, cfg_.d_model});
  if (probe) probe->look("layer" + std::to_string(b.index) + (b.experts.empty() ? ".mlp" : ".moe"), y, f);
  return y + f;
}

LeafLoss TransformerImpl::loss_sum(const torch::Tensor& tokens) {
  const int64_t L = tokens.size(1) - 1;
  auto inputs = tokens.narrow(1, 0, L), targets = tokens.narrow(1, 1, L);
  auto x = leaf::embedding(inputs, embed_);
  ForwardProbe* probe = forward_probe();  // null on every normal step: the modules' outputs unlooked at
  if (probe) x = probe->embedded(x), probe->look("embed", inputs, x);
  for (const auto& b : blocks_) x = block_forward(*b, x);
  auto normed = leaf::rms_norm(x, final_norm_, kNormEps);
  if (probe) probe->look("final_norm", x, normed);
  auto logits = linear(normed, {head_}).to(torch::kFloat);
  if (probe) probe->look("head", normed, logits);
  if (!leaf::active())
    return {F::cross_entropy(logits.reshape({-1, cfg_.vocab}), targets.reshape({-1}),
                             F::CrossEntropyFuncOptions().reduction(torch::kSum)),
            torch::Tensor()};
  // A leaf step: each leaf's tokens summed on their own.
  auto per_token = F::cross_entropy(logits.reshape({-1, cfg_.vocab}), targets.reshape({-1}),
                                    F::CrossEntropyFuncOptions().reduction(torch::kNone));
  auto per_leaf = leaf::sum_per_leaf(per_token);
  return {per_leaf.sum(), per_leaf};
}

}  // namespace sweep
