// Each kernel is one call of arith.h per thread; see device_numerics.h. Compiled with
// --fmad=false and without fast math (CMakeLists.txt), as arith.h requires.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "device_numerics.h"

namespace sweep::device {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxLeaves = 1 << 20;

unsigned grid_for(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string("device ") + what + ": " + cudaGetErrorString(err));
}

__global__ void norm_block_kernel(const float* g, size_t n, size_t blocks, double* block_sums) {
  const size_t b = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b < blocks) block_sums[b] = norm_block_sum(g, n, b);
}

__global__ void sum_in_order_kernel(const double* v, size_t n, double* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *out = sum_in_order(v, n);
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, size_t n, AdamWConsts k) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) adamw_element(p[i], g[i], m[i], v[i], k);
}

__global__ void scale_kernel(float* g, size_t n, float coef) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) g[i] = scaled(g[i], coef);
}

__global__ void nonfinite_kernel(const float* g, size_t n, int* nonfinite) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  // Every writer writes the same 1, so the result does not depend on which thread wins.
  if (i < n && !finite_bits(__float_as_uint(g[i]))) *nonfinite = 1;
}

__global__ void tree_kernel(const float* pieces, size_t n, int leaves, float* out) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tree_element(pieces, n, i, 0, leaves);
}

}  // namespace

void sum_of_squares(const float* g, size_t n, double* block_sums, double* out, void* stream) {
  const size_t blocks = norm_blocks(n);
  if (blocks > 0) norm_block_kernel<<<grid_for(blocks), kThreads, 0, as_stream(stream)>>>(g, n, blocks, block_sums);
  sum_in_order_kernel<<<1, 1, 0, as_stream(stream)>>>(block_sums, blocks, out);
  check_launch("sum_of_squares");
}

void adamw(float* p, const float* g, float* m, float* v, size_t n, const AdamWConsts& k, void* stream) {
  if (n == 0) return;
  adamw_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(p, g, m, v, n, k);
  check_launch("adamw");
}

void scale(float* g, size_t n, float coef, void* stream) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(g, n, coef);
  check_launch("scale");
}

void mark_nonfinite(const float* g, size_t n, int* nonfinite, void* stream) {
  if (n == 0) return;
  nonfinite_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(g, n, nonfinite);
  check_launch("mark_nonfinite");
}

void tree_sum(const float* pieces, size_t n, int leaves, float* out, void* stream) {
  if (leaves < 1 || leaves > kMaxLeaves)
    throw std::invalid_argument("device tree_sum: " + std::to_string(leaves) + " leaves");
  if (n == 0) return;
  tree_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(pieces, n, leaves, out);
  check_launch("tree_sum");
}

}  // namespace sweep::device
