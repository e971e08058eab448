// Leaf-aware layers: a model built from these gets a gradient per leaf (train.leaf
// sequences) from one forward and backward over a micro-batch of several leaves, so its
// bits do not depend on the micro-batch size (docs/design.md, "Leaves"). Each layer
// computes every leaf with the same calls on the same shapes as a micro-batch of that
// one leaf would, and folds the leaves' parameter gradients into the canonical tree
// itself; autograd never sees a parameter gradient from them.
//
// Outside a leaf step (a run without train.leaf, or no run at all) every function here is
// the plain layer it names, with autograd's gradients. A model says it is built from them
// by `bool leaf_aware() const { return true; }` on its module (or Model::leaf_aware()), and
// its loss() then returns LossSum::per_leaf. A model that does not gets one forward and
// backward per leaf instead: the same guarantee, at the price of smaller passes.
//
// Rows: x [..., in] is read as rows of its last dimension, in order, the leaves' rows one
// after another. By default each leaf has the same number of rows (the tokens of its
// sequences); a layer fed a selection of rows (an MoE expert's tokens) says how many
// rows each leaf has.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace sweep::leaf {

/// Whether a leaf step is running (the trainer set one up for this forward).
bool active();

/// Leaves in the micro-batch of the running leaf step; 1 when none runs.
int64_t leaves();

/// y = x [w_1; w_2; ...]^T: one linear layer over the weights stacked by rows (q, k and v
/// as one matmul). Under bf16 autocast the matmuls run in bf16. `round_fp16`: both
/// operands rounded to fp16 and the weight's gradient too (the CPU's fp16 emulation).
torch::Tensor linear(const torch::Tensor& x, const std::vector<torch::Tensor>& weights,
                     const std::vector<int64_t>& rows_per_leaf = {}, bool round_fp16 = false);

/// Rows of `weight` [vocab, d] picked by `ids` (int64, any shape): [ids..., d].
torch::Tensor embedding(const torch::Tensor& ids, const torch::Tensor& weight);

/// RMSNorm over the last dimension: x * rsqrt(mean(x^2) + eps) * weight (fp32).
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

/// Per-leaf sums of a per-row value (a token's loss): [leaves()], each leaf's rows summed
/// by one call on one leaf's shape. Outside a leaf step: a [1] tensor, the sum.
torch::Tensor sum_per_leaf(const torch::Tensor& per_row);

/// How many of `rows` (sorted indices into the micro-batch's `total_rows` rows, as
/// nonzero() gives them) fall in each leaf: the rows_per_leaf of a layer fed those rows.
std::vector<int64_t> rows_per_leaf(const torch::Tensor& rows, int64_t total_rows);

}  // namespace sweep::leaf
