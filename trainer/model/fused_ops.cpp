#include "fused_ops.h"

#include <cmath>
#include <cstring>

#include "arith.h"          // lane_dot
#include "vector_clones.h"  // SWEEP_VECTOR_CLONES

namespace sweep {
namespace kernels {

// ------------------------------------------------------------------------ RMSNorm

SWEEP_VECTOR_CLONES void rms_forward(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t d,
                                     float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    const float inv = 1.0f / std::sqrt(lane_dot<float>(xr, xr, size_t(d)) / float(d) + eps);
    rstd[r] = inv;
    for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] * inv) * w[j];
  }
}

// y = x r w with r = (mean(x^2) + eps)^-1/2, so dx = r g w - x (r^3 / d) sum(g w x) and
// dw = sum over rows of g x r. `dw` starts at zero; rows add to it in order.
SWEEP_VECTOR_CLONES void rms_backward(const float* g, const float* x, const float* w, const float* rstd, float* dx,
                                      float* dw, int64_t rows, int64_t d) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *gr = g + r * d, *xr = x + r * d;
    float* dxr = dx + r * d;
    const float inv = rstd[r];
    for (int64_t j = 0; j < d; ++j) dxr[j] = gr[j] * w[j];
    const float c = lane_dot<float>(dxr, xr, size_t(d)) * (inv * inv * inv) / float(d);
    for (int64_t j = 0; j < d; ++j) {
      dw[j] += gr[j] * (xr[j] * inv);
      dxr[j] = dxr[j] * inv - xr[j] * c;
    }
  }
}

}  // namespace kernels

namespace {

using kernels::rms_backward;
using kernels::rms_forward;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct RmsNormFn : torch::autograd::Function<RmsNormFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w, double eps) {
    auto xc = x.contiguous(), wc = w.contiguous();
    const int64_t d = xc.size(-1), rows = xc.numel() / d;
    auto y = torch::empty_like(xc);
    auto rstd = torch::empty({rows}, xc.options());
    rms_forward(xc.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(), rstd.data_ptr<float>(), rows, d,
                float(eps));
    ctx->save_for_backward({xc, wc, rstd});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1], &rstd = saved[2];
    auto g = grads[0].contiguous();
    const int64_t d = x.size(-1), rows = x.numel() / d;
    auto dx = torch::empty_like(x);
    auto dw = torch::zeros_like(w);
    rms_backward(g.data_ptr<float>(), x.data_ptr<float>(), w.data_ptr<float>(), rstd.data_ptr<float>(),
                 dx.data_ptr<float>(), dw.data_ptr<float>(), rows, d);
    return {dx, dw, torch::Tensor()};
  }
};

// ------------------------------------------------------------------------ SwiGLU

// out = a s b with s = sigmoid(a) (from ATen's vectorized kernel), a and b the halves of
// each row of gu.
SWEEP_VECTOR_CLONES void swiglu_forward(const float* gu, const float* s, float* out, int64_t rows, int64_t h) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *a = gu + r * 2 * h, *b = a + h, *sr = s + r * h;
    float* o = out + r * h;
    for (int64_t j = 0; j < h; ++j) o[j] = (a[j] * sr[j]) * b[j];
  }
}

// d/da = g b s (1 + a (1 - s)), d/db = g a s, written into the two halves of dgu's rows.
SWEEP_VECTOR_CLONES void swiglu_backward(const float* g, const float* gu, const float* s, float* dgu, int64_t rows,
                                         int64_t h) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *a = gu + r * 2 * h, *b = a + h, *sr = s + r * h, *gr = g + r * h;
    float *da = dgu + r * 2 * h, *db = da + h;
    for (int64_t j = 0; j < h; ++j) {
      da[j] = (gr[j] * b[j]) * (sr[j] * (1.0f + a[j] * (1.0f - sr[j])));
      db[j] = gr[j] * (a[j] * sr[j]);
    }
  }
}

struct SwigluFn : torch::autograd::Function<SwigluFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& gate_up) {
    auto gu = gate_up.contiguous();
    const int64_t h = gu.size(-1) / 2, rows = gu.numel() / (2 * h);
    auto s = torch::sigmoid(gu.narrow(-1, 0, h)).contiguous();
    auto sizes = gu.sizes().vec();
    sizes.back() = h;
    auto out = torch::empty(sizes, gu.options());
    swiglu_forward(gu.data_ptr<float>(), s.data_ptr<float>(), out.data_ptr<float>(), rows, h);
    ctx->save_for_backward({gu, s});
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &gu = saved[0], &s = saved[1];
    auto g = grads[0].contiguous();
    const int64_t h = gu.size(-1) / 2, rows = gu.numel() / (2 * h);
    auto dgu = torch::empty_like(gu);
    swiglu_backward(g.data_ptr<float>(), gu.data_ptr<float>(), s.data_ptr<float>(), dgu.data_ptr<float>(), rows, h);
    return {dgu};
  }
};

// ------------------------------------------------------------- heads and rotary

struct Shape {
  int64_t B, L, H, hd;
  int64_t half() const { return hd / 2; }
  int64_t d() const { return H * hd; }
};

inline void rotate(const float* x, const float* c, const float* s, float* y, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    y[i] = x[i] * c[i] - x[i + half] * s[i];
    y[i + half] = x[i] * s[i] + x[i + half] * c[i];
  }
}

// The transpose of `rotate`: the rotation by the opposite angle.
inline void unrotate(const float* g, const float* c, const float* s, float* x, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    x[i] = g[i] * c[i] + g[i + half] * s[i];
    x[i + half] = g[i + half] * c[i] - g[i] * s[i];
  }
}

SWEEP_VECTOR_CLONES void split_forward(const float* qkv, const float* cos, const float* sin, float* q, float* k,
                                       float* v, Shape sh) {
  const int64_t d = sh.d(), half = sh.half();
  for (int64_t b = 0; b < sh.B; ++b)
    for (int64_t l = 0; l < sh.L; ++l) {
      const float* row = qkv + (b * sh.L + l) * 3 * d;
      const float *c = cos + l * half, *s = sin + l * half;
      for (int64_t h = 0; h < sh.H; ++h) {
        const int64_t out = ((b * sh.H + h) * sh.L + l) * sh.hd;
        rotate(row + h * sh.hd, c, s, q + out, half);
        rotate(row + d + h * sh.hd, c, s, k + out, half);
        std::memcpy(v + out, row + 2 * d + h * sh.hd, size_t(sh.hd) * sizeof(float));
      }
    }
}

// A null gradient (an output nobody used) contributes zeros.
SWEEP_VECTOR_CLONES void split_backward(const float* gq, const float* gk, const float* gv, const float* cos,
                                        const float* sin, float* gqkv, Shape sh) {
  const int64_t d = sh.d(), half = sh.half();
  for (int64_t b = 0; b < sh.B; ++b)
    for (int64_t l = 0; l < sh.L; ++l) {
      float* row = gqkv + (b * sh.L + l) * 3 * d;
      const float *c = cos + l * half, *s = sin + l * half;
      for (int64_t h = 0; h < sh.H; ++h) {
        const int64_t in = ((b * sh.H + h) * sh.L + l) * sh.hd;
        float *dq = row + h * sh.hd, *dk = row + d + h * sh.hd, *dv = row + 2 * d + h * sh.hd;
        if (gq)
          unrotate(gq + in, c, s, dq, half);
        else
          std::memset(dq, 0, size_t(sh.hd) * sizeof(float));
        if (gk)
          unrotate(gk + in, c, s, dk, half);
        else
          std::memset(dk, 0, size_t(sh.hd) * sizeof(float));
        if (gv)
          std::memcpy(dv, gv + in, size_t(sh.hd) * sizeof(float));
        else
          std::memset(dv, 0, size_t(sh.hd) * sizeof(float));
      }
    }
}

struct SplitRopeFn : torch::autograd::Function<SplitRopeFn> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& qkv, int64_t heads, const torch::Tensor& cos,
                               const torch::Tensor& sin) {
    auto x = qkv.contiguous();
    const Shape sh{x.size(0), x.size(1), heads, x.size(2) / 3 / heads};
    auto c = cos.narrow(0, 0, sh.L).contiguous(), s = sin.narrow(0, 0, sh.L).contiguous();
    auto opts = x.options();
    auto q = torch::empty({sh.B, sh.H, sh.L, sh.hd}, opts), k = torch::empty_like(q), v = torch::empty_like(q);
    split_forward(x.data_ptr<float>(), c.data_ptr<float>(), s.data_ptr<float>(), q.data_ptr<float>(),
                  k.data_ptr<float>(), v.data_ptr<float>(), sh);
    ctx->save_for_backward({c, s});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["B"] = sh.B;
    return {q, k, v};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &c = saved[0], &s = saved[1];
    const int64_t H = ctx->saved_data["heads"].toInt(), B = ctx->saved_data["B"].toInt();
    const int64_t L = c.size(0), hd = 2 * c.size(1);
    const Shape sh{B, L, H, hd};
    torch::Tensor g[3];
    const float* p[3] = {nullptr, nullptr, nullptr};
    for (int i = 0; i < 3; ++i)
      if (grads[size_t(i)].defined()) g[i] = grads[size_t(i)].contiguous(), p[i] = g[i].data_ptr<float>();
    auto gqkv = torch::empty({B, L, 3 * sh.d()}, c.options());
    split_backward(p[0], p[1], p[2], c.data_ptr<float>(), s.data_ptr<float>(), gqkv.data_ptr<float>(), sh);
    return {gqkv, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

bool fusable(std::initializer_list<torch::Tensor> ts) {
  for (const auto& t : ts)
    if (t.scalar_type() != torch::kFloat || !t.device().is_cpu() || t.numel() == 0) return false;
  return true;
}

torch::Tensor rope_reference(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  auto half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

}  // namespace

torch::Tensor rms_norm_reference(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * w;
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  if (!fusable({x, w})) return rms_norm_reference(x, w, eps);
  return RmsNormFn::apply(x, w, eps);
}

torch::Tensor swiglu_reference(const torch::Tensor& gate_up) {
  auto halves = gate_up.chunk(2, -1);
  return torch::silu(halves[0]) * halves[1];
}

torch::Tensor swiglu(const torch::Tensor& gate_up) {
  if (!fusable({gate_up}) || gate_up.size(-1) % 2 != 0) return swiglu_reference(gate_up);
  return SwigluFn::apply(gate_up);
}

std::array<torch::Tensor, 3> split_heads_rope_reference(const torch::Tensor& qkv, int64_t heads,
                                                        const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t B = qkv.size(0), L = qkv.size(1), hd = qkv.size(2) / 3 / heads;
  auto parts = qkv.view({B, L, 3, heads, hd}).permute({2, 0, 3, 1, 4});  // [3, B, H, L, hd]
  auto c = cos.narrow(0, 0, L), s = sin.narrow(0, 0, L);
  return {rope_reference(parts[0], c, s), rope_reference(parts[1], c, s), parts[2].contiguous()};
}

std::array<torch::Tensor, 3> split_heads_rope(const torch::Tensor& qkv, int64_t heads, const torch::Tensor& cos,
                                              const torch::Tensor& sin) {
  if (!fusable({qkv, cos, sin}) || qkv.dim() != 3) return split_heads_rope_reference(qkv, heads, cos, sin);
  auto out = SplitRopeFn::apply(qkv, heads, cos, sin);
  return {out[0], out[1], out[2]};
}

}  // namespace sweep
