// The forward probe (forward_probe.h).
#include "forward_probe.h"

#include <cmath>
#include <limits>

#include "model_schema.h"  // canonical_real

namespace sweep {

namespace {

thread_local ForwardProbe* g_probe = nullptr;

}  // namespace

ForwardProbe* forward_probe() { return g_probe; }

ForwardProbeGuard::ForwardProbeGuard(ForwardProbe* probe) : prev_(g_probe) { g_probe = probe; }
ForwardProbeGuard::~ForwardProbeGuard() { g_probe = prev_; }

void ForwardProbe::look(const std::string& name, const torch::Tensor& in, const torch::Tensor& out) {
  if (!watch || !first.name.empty()) return;
  const torch::Tensor o = out.detach().to(torch::kFloat);
  const torch::Tensor bad_rows = o.isfinite().logical_not().reshape({o.size(0), -1}).any(1);
  if (!bad_rows.any().item<bool>()) return;
  first.name = name;
  const torch::Tensor idx = bad_rows.nonzero().reshape({-1}).to(torch::kCPU).to(torch::kLong).contiguous();
  first.rows.assign(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + idx.numel());
  const torch::Tensor x = in.detach().to(torch::kDouble).reshape({-1});
  const torch::Tensor finite = x.isfinite();
  first.input_numel = x.numel();
  first.input_nonfinite = first.input_numel - finite.sum().item<int64_t>();
  const torch::Tensor f = x.masked_select(finite);
  if (f.numel() > 0) {
    first.min = f.min().item<double>();
    first.max = f.max().item<double>();
    first.mean = f.mean().item<double>();
    first.absmax = f.abs().max().item<double>();
  }
}

torch::Tensor ForwardProbe::embedded(const torch::Tensor& x) {
  if (poison_rows.empty()) return x;
  poisoned = true;
  const torch::Tensor rows = torch::tensor(poison_rows, torch::TensorOptions().dtype(torch::kLong)).to(x.device());
  // Out of place: the NaN reaches the loss and, through the backward, every gradient.
  return x.index_fill(0, rows, std::numeric_limits<double>::quiet_NaN());
}

std::string describe(const NonfiniteModule& m, const std::string& rows) {
  return m.name + " (" + rows + "; its input: min " + canonical_real(m.min) + ", max " + canonical_real(m.max) +
         ", mean " + canonical_real(m.mean) + ", absmax " + canonical_real(m.absmax) + ", " +
         std::to_string(m.input_nonfinite) + " of " + std::to_string(m.input_numel) + " non-finite)";
}

}  // namespace sweep
