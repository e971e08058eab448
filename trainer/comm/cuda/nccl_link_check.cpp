// Built, never run in CI (no GPU there): proves the NCCL backend and the device tree
// link against this CUDA toolkit. On a GPU machine it also runs: W ranks under mpirun,
// one device each, checks the device tree against the host TreeAccumulator bits.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "canonical_reduce.h"
#include "device_numerics.h"
#include "mpi_communicator.h"
#include "nccl_communicator.h"

int main(int argc, char** argv) {
  sweep::MpiCommunicator mpi(&argc, &argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    if (mpi.rank() == 0) std::printf("nccl_link_check: no CUDA device; linked fine, nothing to run\n");
    return 0;
  }
  sweep::NcclCommunicator nccl(mpi, mpi.rank() % devices, 60);
  // Device tree vs host tree on 5 pieces of mixed magnitudes.
  const int w = 5;
  const size_t len = 1000;
  std::vector<float> host(w * len);
  for (size_t i = 0; i < host.size(); ++i) host[i] = float((i * 2654435761u) % 1000003) * (i % 7 ? 1e-3f : 1e3f);
  sweep::TreeAccumulator tree(len);
  std::vector<float> expect(len), got(len);
  // TreeAccumulator is only canonical for a power-of-two prefix followed by the rest;
  // pushing all 5 pieces in order gives the canonical tree over 5 leaves.
  for (int p = 0; p < w; ++p) tree.push(host.data() + size_t(p) * len);
  tree.finish(expect.data());
  float *d_in = nullptr, *d_out = nullptr;
  cudaMalloc(&d_in, host.size() * sizeof(float));
  cudaMalloc(&d_out, len * sizeof(float));
  cudaMemcpy(d_in, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  sweep::device::tree_sum(d_in, len, w, d_out, nullptr);
  cudaMemcpy(got.data(), d_out, len * sizeof(float), cudaMemcpyDeviceToHost);
  const bool same = std::memcmp(got.data(), expect.data(), len * sizeof(float)) == 0;
  int64_t bad = same ? 0 : 1;
  nccl.allreduce_sum_i64(&bad, 1);
  if (mpi.rank() == 0)
    std::printf("nccl_link_check: device tree %s the host tree on every rank\n", bad ? "DIFFERS from" : "matches");
  return bad ? 1 : 0;
}
