// The leaf-aware layers of sweep/leaf.h. Each computes leaf by leaf with the calls a
// micro-batch of one leaf would make, on the same shapes, so a leaf's rows and its
// parameter gradients never depend on which leaves share its micro-batch; each
// parameter's per-leaf gradients are folded into the running leaf step's subtree sums
// (LeafScope) with the canonical tree, never handed to autograd.
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "canonical_reduce.h"  // TreeAccumulator, tree_over_nodes
#include "fused_ops.h"         // kernels::rms_forward, rms_backward
#include "leaf_scope.h"
#include "sweep/leaf.h"
#include "torch_compat.h"  // cpu_autocast_on, NoCpuAutocast

namespace sweep {

namespace {

thread_local LeafScope* g_scope = nullptr;

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// The running leaf step. A leaf-aware layer's backward runs inside it too: on the CPU,
/// autograd runs the backward on the thread that called backward(), within the trainer's
/// LeafScopeGuard.
LeafScope& running_scope(const char* what) {
  if (!g_scope)
    throw std::logic_error(std::string("sweep::leaf::") + what +
                           ": its backward ran outside the leaf step that ran its forward");
  return *g_scope;
}

/// Row ranges of the leaves: `counts` when given (checked), else rows / leaves each.
std::vector<int64_t> leaf_starts(int64_t rows, int64_t leaves, const std::vector<int64_t>& counts, const char* what) {
  std::vector<int64_t> starts{0};
  if (counts.empty()) {
    if (rows % leaves != 0)
      throw std::invalid_argument(std::string("sweep::leaf::") + what + ": " + std::to_string(rows) +
                                  " rows do not split evenly into " + std::to_string(leaves) +
                                  " leaves; pass rows_per_leaf");
    for (int64_t l = 0; l < leaves; ++l) starts.push_back(starts.back() + rows / leaves);
    return starts;
  }
  if (int64_t(counts.size()) != leaves)
    throw std::invalid_argument(std::string("sweep::leaf::") + what + ": rows_per_leaf has " +
                                std::to_string(counts.size()) + " entries for " + std::to_string(leaves) + " leaves");
  for (int64_t c : counts) starts.push_back(starts.back() + c);
  if (starts.back() != rows)
    throw std::invalid_argument(std::string("sweep::leaf::") + what + ": rows_per_leaf adds up to " +
                                std::to_string(starts.back()) + " rows, the input has " + std::to_string(rows));
  return starts;
}

/// The parameters `params` (adjacent blocks of one gradient of `numel` floats, in order)
/// as the scope's parameter indices, each marked written and used; a parameter written
/// twice in one micro-batch is refused.
std::vector<size_t> claim(LeafScope& s, const std::vector<torch::Tensor>& params, int64_t numel) {
  std::vector<size_t> index;
  int64_t total = 0;
  for (const auto& p : params) {
    const size_t i = s.param_index(p.data_ptr<float>(), p.numel());
    if (s.written[i])
      throw std::runtime_error("a leaf-aware layer got parameter " + std::to_string(i) +
                               " a second time in one micro-batch; each parameter must feed exactly one layer");
    s.written[i] = 1;
    if (s.used) (*s.used)[i] = 1;
    index.push_back(i);
    total += p.numel();
  }
  if (total != numel) throw std::logic_error("leaf fold: parameter sizes do not add up");
  return index;
}

/// Writes a node's sum (numel floats) into its buffer, parameter by parameter.
void scatter(const LeafScope& s, const std::vector<size_t>& index, size_t node, const float* sum) {
  int64_t at = 0;
  for (size_t i : index) {
    std::memcpy(s.bufs[node] + s.offsets[i], sum + at, size_t(s.numels[i]) * sizeof(float));
    at += s.numels[i];
  }
}

/// Folds every leaf's gradient of `params`, rows of `per_leaf` ([leaves, numel] fp32,
/// contiguous, overwritten), into the scope's subtree sums.
void fold_rows(LeafScope& s, const std::vector<torch::Tensor>& params, const torch::Tensor& per_leaf) {
  const int64_t numel = per_leaf.size(1);
  const auto index = claim(s, params, numel);
  float* g = per_leaf.data_ptr<float>();
  for (size_t j = 0; j < s.nodes.size(); ++j) {
    // The node's canonical tree over its leaves' rows, in place: each row is its own
    // scratch, and the sum ends in the node's first row.
    const TreeNode node = s.nodes[j];
    std::vector<TreeNode> leaves;
    std::vector<float*> rows;
    for (int64_t l = 0; l < node.count; ++l) leaves.push_back({l, 1}), rows.push_back(g + (node.lo + l) * numel);
    const std::vector<const float*> pieces(rows.begin(), rows.end());
    tree_over_nodes(leaves, pieces.data(), rows.data(), size_t(numel), node.count, rows[0]);
    scatter(s, index, j, rows[0]);
  }
}

/// The same, one leaf at a time (a gradient too large to hold for every leaf at once):
/// `leaf_grad(l, out)` overwrites out (numel floats) with leaf l's, written straight into
/// the TreeAccumulator that sums each node's leaves.
template <class F>
void fold_stream(LeafScope& s, const std::vector<torch::Tensor>& params, int64_t numel, F&& leaf_grad) {
  const auto index = claim(s, params, numel);
  TreeAccumulator acc{size_t(numel)};
  std::vector<float> sum(static_cast<size_t>(numel));
  for (size_t j = 0; j < s.nodes.size(); ++j) {
    for (int64_t l = s.nodes[j].lo; l < s.nodes[j].end(); ++l) {
      leaf_grad(l, acc.next());
      acc.push_next();
    }
    acc.finish(sum.data());
    scatter(s, index, j, sum.data());
  }
}

// ---------------------------------------------------------------------- linear

struct LinearFn : torch::autograd::Function<LinearFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, at::TensorList weights,
                               const std::vector<int64_t>& counts, bool round_fp16) {
    LeafScope& s = *g_scope;
    const at::ScalarType ct = compat::cpu_autocast_on() ? compat::cpu_autocast_dtype() : at::kFloat;
    compat::NoCpuAutocast no_autocast;
    torch::NoGradGuard no_grad;
    const int64_t in = x.size(-1);
    auto xc = x.reshape({-1, in}).to(ct).contiguous();
    std::vector<torch::Tensor> ws;
    for (const auto& w : weights) ws.push_back(w.detach());
    auto w = (ws.size() == 1 ? ws[0] : torch::cat(ws, 0));
    if (round_fp16) w = w.to(torch::kHalf).to(torch::kFloat);
    w = w.to(ct).contiguous();
    const int64_t rows = xc.size(0), out = w.size(0);
    const auto starts = leaf_starts(rows, s.leaves, counts, "linear");
    auto y = torch::empty({rows, out}, xc.options());
    const auto wt = w.t();
    for (int64_t l = 0; l < s.leaves; ++l) {
      const int64_t r0 = starts[size_t(l)], rl = starts[size_t(l) + 1] - r0;
      if (rl == 0) continue;
      torch::Tensor yl = y.narrow(0, r0, rl);
      torch::mm_out(yl, xc.narrow(0, r0, rl), wt);
    }
    ctx->save_for_backward({xc, w});
    ctx->saved_data["starts"] = starts;
    ctx->saved_data["round"] = round_fp16;
    ctx->saved_data["x_dtype"] = x.scalar_type();
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    ctx->saved_data["weights"] = int64_t(weights.size());
    for (size_t i = 0; i < weights.size(); ++i) ctx->saved_data["w" + std::to_string(i)] = weights[i];
    auto sizes = x.sizes().vec();
    sizes.back() = out;
    return y.view(sizes);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    LeafScope& s = running_scope("linear");
    compat::NoCpuAutocast no_autocast;
    torch::NoGradGuard no_grad;
    const auto saved = ctx->get_saved_variables();
    const auto &xc = saved[0], &w = saved[1];
    const auto starts = ctx->saved_data["starts"].toIntVector();
    const bool round_fp16 = ctx->saved_data["round"].toBool();
    const int64_t rows = xc.size(0), in = xc.size(1), out = w.size(0);
    const int64_t nw = ctx->saved_data["weights"].toInt();
    std::vector<torch::Tensor> params;
    for (int64_t i = 0; i < nw; ++i) params.push_back(ctx->saved_data["w" + std::to_string(i)].toTensor());
    torch::Tensor g = grads[0].defined() ? grads[0].reshape({-1, out}).to(xc.scalar_type()).contiguous()
                                         : torch::zeros({rows, out}, xc.options());
    auto dx = torch::empty({rows, in}, xc.options());
    for (size_t l = 0; l + 1 < starts.size(); ++l) {
      const int64_t r0 = starts[l], rl = starts[l + 1] - r0;
      if (rl == 0) continue;
      torch::Tensor dxl = dx.narrow(0, r0, rl);
      torch::mm_out(dxl, g.narrow(0, r0, rl), w);
    }
    // Each leaf's weight gradient g_l^T x_l, one matmul per leaf into its row of
    // per_leaf: the same call on the same shape for a leaf whatever the other leaves are
    // (a batched matmul may pick its kernel by the batch: oneDNN's bf16 one gave other bits
    // for 16 leaves than for one).
    const int64_t leaves = int64_t(starts.size()) - 1;
    torch::Tensor per_leaf = torch::empty({leaves, out, in}, xc.options());
    for (int64_t l = 0; l < leaves; ++l) {
      const int64_t r0 = starts[size_t(l)], rl = starts[size_t(l) + 1] - r0;
      torch::Tensor dst = per_leaf[l];
      if (rl == 0) {
        dst.zero_();
        continue;
      }
      torch::mm_out(dst, g.narrow(0, r0, rl).t(), xc.narrow(0, r0, rl));
    }
    if (round_fp16) per_leaf = per_leaf.to(torch::kHalf);
    fold_rows(s, params, per_leaf.to(torch::kFloat).contiguous().view({leaves, out * in}));
    variable_list result{
        dx.to(c10::ScalarType(ctx->saved_data["x_dtype"].toInt())).view(ctx->saved_data["x_sizes"].toIntVector())};
    for (int64_t i = 0; i < nw; ++i) result.emplace_back();
    result.emplace_back();  // counts
    result.emplace_back();  // round_fp16
    return result;
  }
};

// ------------------------------------------------------------------- embedding

struct EmbeddingFn : torch::autograd::Function<EmbeddingFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& ids, const torch::Tensor& weight) {
    torch::NoGradGuard no_grad;
    auto flat = ids.reshape({-1}).contiguous();
    ctx->saved_data["ids"] = flat;
    ctx->saved_data["weight"] = weight;
    auto sizes = ids.sizes().vec();
    sizes.push_back(weight.size(1));
    return weight.detach().index_select(0, flat).view(sizes);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    LeafScope& s = running_scope("embedding");
    torch::NoGradGuard no_grad;
    const auto ids = ctx->saved_data["ids"].toTensor();
    const auto weight = ctx->saved_data["weight"].toTensor();
    const int64_t rows = ids.numel(), vocab = weight.size(0), d = weight.size(1);
    const auto starts = leaf_starts(rows, s.leaves, {}, "embedding");
    torch::Tensor g = grads[0].defined() ? grads[0].reshape({-1, d}).to(torch::kFloat).contiguous()
                                         : torch::zeros({rows, d}, torch::kFloat);
    const int64_t* id = ids.data_ptr<int64_t>();
    const float* gp = g.data_ptr<float>();
    fold_stream(s, {weight}, vocab * d, [&](int64_t l, float* dst) {
      std::fill(dst, dst + vocab * d, 0.0f);
      for (int64_t r = starts[size_t(l)]; r < starts[size_t(l) + 1]; ++r) {
        float* row = dst + id[r] * d;
        const float* gr = gp + r * d;
        for (int64_t j = 0; j < d; ++j) row[j] += gr[j];
      }
    });
    return {torch::Tensor(), torch::Tensor()};
  }
};

// --------------------------------------------------------------------- RMSNorm

struct LeafRmsNormFn : torch::autograd::Function<LeafRmsNormFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight, double eps) {
    torch::NoGradGuard no_grad;
    auto xc = x.to(torch::kFloat).contiguous();
    auto wc = weight.detach().contiguous();
    const int64_t d = xc.size(-1), rows = xc.numel() / d;
    auto y = torch::empty_like(xc);
    auto rstd = torch::empty({rows}, xc.options());
    kernels::rms_forward(xc.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(), rstd.data_ptr<float>(), rows,
                         d, float(eps));
    ctx->save_for_backward({xc, wc, rstd});
    ctx->saved_data["weight"] = weight;
    ctx->saved_data["x_dtype"] = x.scalar_type();
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    LeafScope& s = running_scope("rms_norm");
    torch::NoGradGuard no_grad;
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1], &rstd = saved[2];
    const int64_t d = x.size(-1), rows = x.numel() / d;
    const auto starts = leaf_starts(rows, s.leaves, {}, "rms_norm");
    torch::Tensor g = grads[0].defined() ? grads[0].to(torch::kFloat).contiguous() : torch::zeros_like(x);
    auto dx = torch::empty_like(x);
    fold_stream(s, {ctx->saved_data["weight"].toTensor()}, d, [&](int64_t l, float* dw) {
      std::fill(dw, dw + d, 0.0f);
      const int64_t r0 = starts[size_t(l)], rl = starts[size_t(l) + 1] - r0;
      kernels::rms_backward(g.data_ptr<float>() + r0 * d, x.data_ptr<float>() + r0 * d, w.data_ptr<float>(),
                            rstd.data_ptr<float>() + r0, dx.data_ptr<float>() + r0 * d, dw, rl, d);
    });
    return {dx.to(c10::ScalarType(ctx->saved_data["x_dtype"].toInt())), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

size_t LeafScope::param_index(const float* data, int64_t numel) const {
  const int64_t off = data - params;
  const auto it = std::lower_bound(offsets.begin(), offsets.end(), off);
  if (data < params || off >= n || it == offsets.end() || *it != off || numels[size_t(it - offsets.begin())] != numel)
    throw std::runtime_error(
        "a leaf-aware layer was given a tensor that is not one of the model's parameters (a parameter's slice or "
        "copy?); pass the registered parameter itself");
  return size_t(it - offsets.begin());
}

LeafScopeGuard::LeafScopeGuard(LeafScope* scope) : prev_(g_scope) { g_scope = scope; }
LeafScopeGuard::~LeafScopeGuard() { g_scope = prev_; }

namespace leaf {

bool active() { return g_scope != nullptr; }
int64_t leaves() { return g_scope ? g_scope->leaves : 1; }

torch::Tensor linear(const torch::Tensor& x, const std::vector<torch::Tensor>& weights,
                     const std::vector<int64_t>& rows_per_leaf, bool round_fp16) {
  if (weights.empty()) throw std::invalid_argument("sweep::leaf::linear: no weight");
  if (g_scope) return LinearFn::apply(x, weights, rows_per_leaf, round_fp16);
  torch::Tensor w = weights.size() == 1 ? weights[0] : torch::cat(weights, 0);
  if (round_fp16)
    return torch::nn::functional::linear(x.to(torch::kHalf).to(torch::kFloat), w.to(torch::kHalf).to(torch::kFloat));
  return torch::nn::functional::linear(x, w);
}

torch::Tensor embedding(const torch::Tensor& ids, const torch::Tensor& weight) {
  if (g_scope) return EmbeddingFn::apply(ids, weight);
  return torch::nn::functional::embedding(ids, weight);
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  if (g_scope) return LeafRmsNormFn::apply(x, weight, eps);
  return sweep::rms_norm(x, weight, eps);
}

torch::Tensor sum_per_leaf(const torch::Tensor& per_row) {
  auto flat = per_row.reshape({-1});
  if (!g_scope) return flat.sum().reshape({1});
  const auto starts = leaf_starts(flat.numel(), g_scope->leaves, {}, "sum_per_leaf");
  std::vector<torch::Tensor> sums;
  for (size_t l = 0; l + 1 < starts.size(); ++l)
    sums.push_back(flat.narrow(0, starts[l], starts[l + 1] - starts[l]).sum());
  return torch::stack(sums);
}

std::vector<int64_t> rows_per_leaf(const torch::Tensor& rows, int64_t total_rows) {
  const int64_t k = leaves();
  if (total_rows % k != 0)
    throw std::invalid_argument("sweep::leaf::rows_per_leaf: " + std::to_string(total_rows) +
                                " rows do not split evenly into " + std::to_string(k) + " leaves");
  std::vector<int64_t> counts(size_t(k), 0);
  auto r = rows.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t* p = r.data_ptr<int64_t>();
  for (int64_t i = 0; i < r.numel(); ++i) {
    if (p[i] < 0 || p[i] >= total_rows)
      throw std::invalid_argument("sweep::leaf::rows_per_leaf: row " + std::to_string(p[i]) + " outside [0, " +
                                  std::to_string(total_rows) + ")");
    if (i > 0 && p[i] < p[i - 1]) throw std::invalid_argument("sweep::leaf::rows_per_leaf: rows are not sorted");
    ++counts[size_t(p[i] / (total_rows / k))];
  }
  return counts;
}

}  // namespace leaf
}  // namespace sweep
