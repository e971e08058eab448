// The optimizer and norm kernels of optimizer.h on the device: the same arithmetic (each
// is one call of arith.h per thread), so a device step gives the host's bits. Pointers are
// device memory; `stream` is a cudaStream_t (nullptr: the default stream). Every function
// launches asynchronously on `stream` and throws std::runtime_error on a launch error.
#pragma once

#include <cstddef>

#include "arith.h"

namespace sweep::device {

/// Sum of squares of g[0, n) as optimizer.h's sum_of_squares computes it: block b's sum
/// into block_sums[b] (norm_blocks(n) doubles of device scratch), then the blocks in
/// order into *out (one double, device).
void sum_of_squares(const float* g, size_t n, double* block_sums, double* out, void* stream);

/// One AdamW update of n elements with the step's constants (AdamWStep::consts()).
void adamw(float* p, const float* g, float* m, float* v, size_t n, const AdamWConsts& k, void* stream);

/// g *= coef.
void scale(float* g, size_t n, float coef, void* stream);

/// *nonfinite (an int on the device) is set to 1 when some element of g[0, n) is inf or
/// NaN, left alone otherwise: clear it first.
void mark_nonfinite(const float* g, size_t n, int* nonfinite, void* stream);

/// The canonical tree over `leaves` pieces of n floats laid out one after another in
/// `pieces`, into out[0, n): element i is arith.h's tree_element.
void tree_sum(const float* pieces, size_t n, int leaves, float* out, void* stream);

}  // namespace sweep::device
