// Canonical vs native all-reduce of float32 vectors, as in nccl-tests:
//   mpirun --allow-run-as-root -n 2 build/bin/reduction_bench
// (not --oversubscribe: it makes Open MPI yield the core while waiting, which costs
// bandwidth on a small machine).
// Each size: warm-up calls, then timed calls; a call's time is the slowest rank's, and the
// median over calls is reported. Only rank 0 prints.
//
// Bandwidth (one formula each, as nccl-tests defines them; GB = 1e9 bytes):
//   algbw = bytes / time                  bytes = the vector's size, time = one call
//   busbw = algbw * 2(W-1)/W              all-reduce: each rank must send and receive
//                                         2(W-1)/W of the vector, so busbw is comparable
//                                         across world sizes and with link bandwidth.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "canonical_allreduce.h"  // canonical_allreduce, shard_layout
#include "mpi_communicator.h"     // MpiCommunicator

namespace {

constexpr size_t kMiB = size_t(1) << 20;
constexpr size_t kSizesMiB[] = {1, 16, 64, 256};
constexpr int kWarmup = 2;

// Timed calls per size: enough to steady small sizes, few at 256 MiB (2 cores, 1 host).
int iterations(size_t bytes) { return int(std::clamp<size_t>((size_t(1) << 30) / bytes, 5, 50)); }

// Median over calls of the slowest rank's time for `op`, in seconds.
template <class Op>
double median_seconds(sweep::Communicator& comm, int iters, Op op) {
  for (int i = 0; i < kWarmup; ++i) op();
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    comm.barrier();
    auto t0 = std::chrono::steady_clock::now();
    op();
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    comm.allreduce_max_double(&t, 1);
    times.push_back(t);
  }
  std::nth_element(times.begin(), times.begin() + iters / 2, times.end());
  return times[size_t(iters / 2)];
}

struct Figures {
  double seconds, algbw, busbw;  // s, GB/s, GB/s
};

Figures figures(double seconds, size_t bytes, int world) {
  double algbw = double(bytes) / seconds / 1e9;
  return {seconds, algbw, algbw * 2.0 * (world - 1) / world};
}

}  // namespace

int main(int argc, char** argv) {
  sweep::MpiCommunicator comm(&argc, &argv);
  const int w = comm.size();
  if (comm.rank() == 0) {
    std::printf("# reduction_bench: W=%d, float32, median of timed calls after %d warm-up\n", w, kWarmup);
    std::printf("# algbw = bytes/time, busbw = algbw*2(W-1)/W, in GB/s (1e9); ratio = canonical time / native time\n");
    std::printf("%9s %6s | %10s %8s %8s | %10s %8s %8s | %6s\n", "size", "iters", "canon ms", "algbw", "busbw",
                "native ms", "algbw", "busbw", "ratio");
  }
  std::vector<float> workspace;
  for (size_t mib : kSizesMiB) {
    const size_t bytes = mib * kMiB, n = bytes / sizeof(float);
    const int iters = iterations(bytes);
    std::vector<float> partial(n), out(n), native(n);
    for (size_t i = 0; i < n; ++i) partial[i] = native[i] = float(i % 1000) / 1000.0f;
    const sweep::ShardLayout layout = sweep::shard_layout(n, w);

    Figures canon =
        figures(median_seconds(
                    comm, iters,
                    [&] { sweep::canonical_allreduce(comm, partial.data(), out.data(), n, layout, true, &workspace); }),
                bytes, w);
    // In place: values grow by W per call, from < 1, which stays far below float's range.
    Figures nat = figures(median_seconds(comm, iters, [&] { comm.allreduce_sum_native(native.data(), n); }), bytes, w);
    if (comm.rank() == 0)
      std::printf("%5zu MiB %6d | %10.3f %8.2f %8.2f | %10.3f %8.2f %8.2f | %6.2f\n", mib, iters, canon.seconds * 1e3,
                  canon.algbw, canon.busbw, nat.seconds * 1e3, nat.algbw, nat.busbw, canon.seconds / nat.seconds);
  }
  return 0;
}
