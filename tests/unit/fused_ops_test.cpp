// The fused CPU kernels against the composite ATen ops they replace, evaluated in double:
// values and gradients agree to float rounding; rotary positions agree to the bit.
#include "fused_ops.h"

#include <gtest/gtest.h>

namespace sweep {
namespace {

void expect_close(const torch::Tensor& got, const torch::Tensor& want, double rtol, double atol, const char* what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(torch::allclose(got.to(torch::kDouble), want.to(torch::kDouble), rtol, atol))
      << what << ": max abs difference "
      << (got.to(torch::kDouble) - want.to(torch::kDouble)).abs().max().item<double>();
}

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), size_t(a.numel()) * a.element_size()) == 0;
}

TEST(FusedRmsNorm, ValuesAndGradientsMatchTheCompositeOps) {
  torch::manual_seed(1);
  // d = 37: whole groups of 8 lanes plus a tail.
  auto x = torch::randn({3, 5, 37}).requires_grad_(true), w = (torch::rand({37}) + 0.5).requires_grad_(true);
  auto xd = x.detach().to(torch::kDouble).requires_grad_(true), wd = w.detach().to(torch::kDouble).requires_grad_(true);
  auto r = torch::randn({3, 5, 37});
  auto y = rms_norm(x, w, 1e-6);
  auto yd = rms_norm_reference(xd, wd, 1e-6);
  expect_close(y, yd, 1e-5, 1e-6, "forward");
  (y * r).sum().backward();
  (yd * r.to(torch::kDouble)).sum().backward();
  expect_close(x.grad(), xd.grad(), 1e-4, 1e-5, "d/dx");
  expect_close(w.grad(), wd.grad(), 1e-4, 1e-5, "d/dw");

  // The same inputs give the same bits, and other dtypes take the composite path.
  EXPECT_TRUE(same_bits(rms_norm(x, w, 1e-6), y));
  auto xb = x.detach().to(torch::kBFloat16);
  EXPECT_TRUE(same_bits(rms_norm(xb, w.detach(), 1e-6), rms_norm_reference(xb, w.detach(), 1e-6)));
}

TEST(FusedSwiglu, ValuesAndGradientsMatchTheCompositeOps) {
  torch::manual_seed(4);
  auto gu = (3 * torch::randn({3, 7, 2 * 13})).requires_grad_(true);  // 13: a tail after 8 lanes
  auto gud = gu.detach().to(torch::kDouble).requires_grad_(true);
  auto r = torch::randn({3, 7, 13});
  auto y = swiglu(gu);
  auto yd = swiglu_reference(gud);
  expect_close(y, yd, 1e-5, 1e-6, "forward");
  (y * r).sum().backward();
  (yd * r.to(torch::kDouble)).sum().backward();
  expect_close(gu.grad(), gud.grad(), 1e-5, 1e-6, "d/dgate_up");
  EXPECT_TRUE(same_bits(swiglu(gu), y));
}

struct Rope {
  torch::Tensor cos, sin;
  explicit Rope(int64_t L, int64_t half) {
    auto angles = torch::outer(torch::arange(L, torch::kDouble), torch::rand({half}, torch::kDouble));
    cos = torch::cos(angles).to(torch::kFloat), sin = torch::sin(angles).to(torch::kFloat);
  }
};

TEST(FusedSplitRope, ForwardIsBitIdenticalAndGradientsMatch) {
  torch::manual_seed(2);
  const int64_t B = 2, L = 6, H = 4, hd = 8;
  Rope rope(10, hd / 2);  // buffers longer than the sequence, as in the model
  auto qkv = torch::randn({B, L, 3 * H * hd}).requires_grad_(true);
  auto ref_in = qkv.detach().clone().requires_grad_(true);
  auto got = split_heads_rope(qkv, H, rope.cos, rope.sin);
  auto want = split_heads_rope_reference(ref_in, H, rope.cos, rope.sin);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[size_t(i)].sizes(), (std::vector<int64_t>{B, H, L, hd}));
    EXPECT_TRUE(got[size_t(i)].is_contiguous());
    EXPECT_TRUE(same_bits(got[size_t(i)], want[size_t(i)].contiguous())) << "output " << i;
  }
  std::vector<torch::Tensor> r;
  for (int i = 0; i < 3; ++i) r.push_back(torch::randn({B, H, L, hd}));
  ((got[0] * r[0]).sum() + (got[1] * r[1]).sum() + (got[2] * r[2]).sum()).backward();
  ((want[0] * r[0]).sum() + (want[1] * r[1]).sum() + (want[2] * r[2]).sum()).backward();
  expect_close(qkv.grad(), ref_in.grad(), 1e-5, 1e-6, "d/dqkv");
}

TEST(FusedSplitRope, AnUnusedOutputContributesNoGradient) {
  torch::manual_seed(3);
  Rope rope(4, 2);
  auto qkv = torch::randn({1, 4, 3 * 2 * 4}).requires_grad_(true);
  auto out = split_heads_rope(qkv, 2, rope.cos, rope.sin);
  (out[0].sum() + out[2].sum()).backward();  // k unused
  auto g = qkv.grad().view({1, 4, 3, 8});
  EXPECT_EQ(g.select(2, 1).abs().sum().item<float>(), 0.0f);
  EXPECT_GT(g.select(2, 0).abs().sum().item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(g.select(2, 2), torch::ones({1, 4, 8})));
}

}  // namespace
}  // namespace sweep
