// Fused CPU kernels for the elementwise parts of a block, each one pass forward and one
// backward instead of a chain of ATen ops (and their temporaries): RMSNorm, the SwiGLU
// gate, and the split of the fused q/k/v projection into heads with rotary positions. Used for fp32
// tensors; anything else (bf16 under autocast) takes the composite ATen path, which is
// also the reference the tests hold the kernels to.
#pragma once

#include <torch/torch.h>

#include <array>

namespace sweep {

/// x * rsqrt(mean(x^2 over the last dim) + eps) * w.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps);
torch::Tensor rms_norm_reference(const torch::Tensor& x, const torch::Tensor& w, double eps);

/// silu(a) * b for gate_up = [a | b] (the two halves of the last dimension).
torch::Tensor swiglu(const torch::Tensor& gate_up);
torch::Tensor swiglu_reference(const torch::Tensor& gate_up);

/// From qkv [B, L, 3 * H * hd] (q, k, v side by side, each H heads of hd): q, k and v
/// as contiguous [B, H, L, hd], with q and k rotated: for i < hd/2,
/// (x_i, x_{i+hd/2}) -> (x_i cos - x_{i+hd/2} sin, x_i sin + x_{i+hd/2} cos) at angles
/// cos, sin [>= L, hd/2] of the position.
std::array<torch::Tensor, 3> split_heads_rope(const torch::Tensor& qkv, int64_t heads, const torch::Tensor& cos,
                                              const torch::Tensor& sin);
std::array<torch::Tensor, 3> split_heads_rope_reference(const torch::Tensor& qkv, int64_t heads,
                                                        const torch::Tensor& cos, const torch::Tensor& sin);

namespace kernels {

/// RMSNorm's fp32 kernels over `rows` rows of d: y and rstd from x and w; dx from g, and
/// dw += each row's g x rstd in row order (dw starts where the caller left it).
void rms_forward(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t d, float eps);
void rms_backward(const float* g, const float* x, const float* w, const float* rstd, float* dx, float* dw, int64_t rows,
                  int64_t d);

}  // namespace kernels

}  // namespace sweep
