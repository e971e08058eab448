// Device half of the canonical reduction: each thread owns one element and adds the w
// pieces in the canonical pairwise order. __fadd_rn is never contracted into an FMA, so
// an element's bits do not depend on which thread or block computes it.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "nccl_communicator.h"

namespace sweep {
namespace {

constexpr int kMaxRanks = 1024;

// tree(lo,hi) = tree(lo, lo+P) + tree(lo+P, hi), P the largest power of two < hi-lo.
// Recursion depth is log2(w) <= 10.
__device__ float tree_at(const float* pieces, size_t len, size_t i, int lo, int hi) {
  if (hi - lo == 1) return pieces[size_t(lo) * len + i];
  int p = 1;
  while (p * 2 < hi - lo) p *= 2;
  return __fadd_rn(tree_at(pieces, len, i, lo, lo + p), tree_at(pieces, len, i, lo + p, hi));
}

__global__ void tree_kernel(const float* pieces, size_t len, int w, float* out) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < len) out[i] = tree_at(pieces, len, i, 0, w);
}

}  // namespace

void cuda_tree_sum(const float* pieces, size_t len, int w, float* out, void* stream) {
  if (w < 1 || w > kMaxRanks) throw std::invalid_argument("cuda_tree_sum: " + std::to_string(w) + " pieces");
  if (len == 0) return;
  const int threads = 256;
  const unsigned blocks = unsigned((len + threads - 1) / threads);
  tree_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(pieces, len, w, out);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string("cuda_tree_sum: ") + cudaGetErrorString(err));
}

}  // namespace sweep
