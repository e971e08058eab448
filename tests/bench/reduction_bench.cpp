// Canonical vs native all-reduce of float32 vectors, as in nccl-tests (issue 4):
//   mpiexec --allow-run-as-root -n 2 build/bin/reduction_bench
// (not --oversubscribe: it makes Open MPI yield the core while waiting, which costs
// bandwidth on a small machine). Options:
//   --sizes 1,4,16      sizes in MiB (default 1,4,16,32,64,256)
//   --rounds N          timed rounds per size (default: 60 at 1 MiB, down to 9 at 256 MiB)
//   --only canonical|native   time one side only (for perf); no ratio, no target
//   --min-ratio R       target: canonical busbw >= R x native busbw ... (default 0.8)
//   --target-from MiB   ... at every size from this one up (default 16)
//   --verify-only       no timing: one canonical call per size, its bits checked (ctest
//                       runs this at W=2 and W=3 on a size with several chunks per shard)
// Exit status: 0 when every size from --target-from up meets the target, 1 when one
// misses it, 2 on a usage error or when the canonical result is not the canonical tree.
//
// How both sides are timed (the same way): both in place on the same buffer, as the
// trainer calls them (canonical_allreduce(grads, grads) / allreduce_sum_native(grads)).
// Before every call the buffer is refilled from this rank's input (so every call reduces
// the same values and leaves the buffer equally warm in cache), then a barrier, then the
// call between two steady_clock reads; a call's time is the slowest rank's (max over
// ranks, taken after the call). A round is one call of each side, the order alternating
// between rounds so that neither side always runs second; the first 2 rounds are warm-up
// and not counted. Each side's time (and so its algbw and busbw) is its median over the
// timed rounds; the ratio is the median over rounds of each round's canonical busbw /
// native busbw (= native time / canonical time of the two calls of that round).
//
// The canonical result of the first call at each size is compared bit for bit with
// TreeAccumulator over all ranks' inputs (each rank can generate every rank's input), so
// the bench also checks the reduction at sizes the unit tests do not reach.
//
// Bandwidth (one formula each, as nccl-tests defines them; GB = 1e9 bytes):
//   algbw = bytes / time                  bytes = the vector's size, time = one call
//   busbw = algbw * 2(W-1)/W              all-reduce: each rank must send and receive
//                                         2(W-1)/W of the vector, so busbw is comparable
//                                         across world sizes and with link bandwidth.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "canonical_allreduce.h"  // canonical_allreduce, shard_layout
#include "canonical_reduce.h"     // TreeAccumulator: the reference the result is checked against
#include "mpi_communicator.h"     // MpiCommunicator

namespace {

constexpr size_t kMiB = size_t(1) << 20;
constexpr int kWarmup = 2;

// Timed rounds per size: enough to steady small sizes, few at 256 MiB (2 cores, 1 host).
int default_rounds(size_t bytes) { return int(std::clamp<size_t>((size_t(1) << 30) / bytes, 9, 60)); }

// Element i of rank r's input: magnitudes spread over 2^-12 .. 2^12, so that the summation
// order changes the bits and the check below means something.
float input(int r, size_t i) {
  uint64_t x = (uint64_t(r) << 40) ^ i;
  x ^= x >> 33, x *= 0xff51afd7ed558ccdULL, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ULL, x ^= x >> 33;
  double mantissa = double(x >> 40) / double(uint64_t(1) << 24) * 2.0 - 1.0;  // [-1, 1)
  return float(std::ldexp(mantissa, int((x >> 8) % 25) - 12));
}

// True when `out` (n elements) is TreeAccumulator's sum of every rank's input, checked in
// slices (the tree is elementwise, so slicing does not change a bit).
bool is_canonical(const float* out, size_t n, int world) {
  const size_t slice = size_t(1) << 18;
  std::vector<std::vector<float>> leaves(static_cast<size_t>(world), std::vector<float>(slice));
  std::vector<float> want(slice);
  for (size_t lo = 0; lo < n; lo += slice) {
    const size_t m = std::min(slice, n - lo);
    sweep::TreeAccumulator acc(m);
    for (int r = 0; r < world; ++r) {
      for (size_t i = 0; i < m; ++i) leaves[size_t(r)][i] = input(r, lo + i);
      acc.push(leaves[size_t(r)].data());
    }
    acc.finish(want.data());
    if (std::memcmp(want.data(), out + lo, m * sizeof(float)) != 0) return false;
  }
  return true;
}

struct Figures {
  double seconds, algbw, busbw;  // s, GB/s, GB/s
};

Figures figures(double seconds, size_t bytes, int world) {
  double algbw = double(bytes) / seconds / 1e9;
  return {seconds, algbw, algbw * 2.0 * (world - 1) / world};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "reduction_bench: %s\nusage: reduction_bench [--sizes MiB,MiB,...] [--rounds N] "
               "[--only canonical|native] [--min-ratio R] [--target-from MiB] [--verify-only]\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  sweep::MpiCommunicator comm(&argc, &argv);
  std::vector<size_t> sizes_mib = {1, 4, 16, 32, 64, 256};
  int rounds_opt = 0;
  std::string only;
  double min_ratio = 0.8;
  size_t target_from = 16;
  bool verify_only = false;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--verify-only") {
        verify_only = true;
        continue;
      }
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      std::string v = argv[++i];
      if (a == "--sizes") {
        sizes_mib.clear();
        for (size_t p = 0; p < v.size();) {
          size_t q = v.find(',', p);
          if (q == std::string::npos) q = v.size();
          sizes_mib.push_back(std::stoul(v.substr(p, q - p)));
          p = q + 1;
        }
      } else if (a == "--rounds") {
        rounds_opt = std::stoi(v);
      } else if (a == "--only") {
        if (v != "canonical" && v != "native") usage("--only takes canonical or native");
        only = v;
      } else if (a == "--min-ratio") {
        min_ratio = std::stod(v);
      } else if (a == "--target-from") {
        target_from = std::stoul(v);
      } else {
        usage(("unknown option " + a).c_str());
      }
    }
  } catch (const std::logic_error&) {  // std::stoul and friends: not a number
    usage("an option's value is not a number");
  }
  const int w = comm.size(), r = comm.rank();
  const bool root = r == 0;
  if (root && !verify_only) {
    std::printf("# reduction_bench: W=%d, float32, both in place on the same buffer, refilled before each call;\n", w);
    std::printf("# a round = one call of each side, order alternating; %d warm-up rounds not counted\n", kWarmup);
    std::printf("# algbw = bytes/time, busbw = algbw*2(W-1)/W, in GB/s (1e9); times are medians over rounds\n");
    std::printf("# ratio = canonical busbw / native busbw, median over rounds of the two calls of a round\n");
    std::printf("# target: ratio >= %.2f at every size from %zu MiB\n", min_ratio, target_from);
    std::printf("%9s %6s | %10s %8s %8s | %10s %8s %8s | %6s  %s\n", "size", "rounds", "canon ms", "algbw", "busbw",
                "native ms", "algbw", "busbw", "ratio", "target");
  }
  bool missed = false, wrong = false;
  std::vector<float> workspace;
  for (size_t mib : sizes_mib) {
    const size_t bytes = mib * kMiB, n = bytes / sizeof(float);
    const int rounds = rounds_opt > 0 ? rounds_opt : default_rounds(bytes);
    std::vector<float> in(n), buf(n);
    for (size_t i = 0; i < n; ++i) in[i] = input(r, i);
    const sweep::ShardLayout layout = sweep::shard_layout(n, w);

    std::vector<double> canon_t, native_t, ratios;
    bool checked = false;
    auto timed = [&](bool canonical) {
      std::memcpy(buf.data(), in.data(), bytes);
      comm.barrier();
      auto t0 = std::chrono::steady_clock::now();
      if (canonical)
        sweep::canonical_allreduce(comm, buf.data(), buf.data(), n, layout, true, &workspace);
      else
        comm.allreduce_sum_native(buf.data(), n);
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      comm.allreduce_max_double(&t, 1);
      if (canonical && !checked) {  // outside the timer: every rank checks its whole vector
        int64_t bad = is_canonical(buf.data(), n, w) ? 0 : 1;
        comm.allreduce_sum_i64(&bad, 1);
        wrong |= bad != 0;
        checked = true;
      }
      return t;
    };
    if (verify_only) {
      timed(true);
      if (root) std::printf("%zu MiB over %d ranks: canonical bits %s\n", mib, w, wrong ? "DIFFER" : "ok");
      continue;
    }
    for (int k = 0; k < kWarmup + rounds; ++k) {
      const bool canonical_first = k % 2 == 0;
      for (int side = 0; side < 2; ++side) {
        const bool canonical = (side == 0) == canonical_first;
        if (!only.empty() && canonical != (only == "canonical")) continue;
        double t = timed(canonical);
        if (k >= kWarmup) (canonical ? canon_t : native_t).push_back(t);
      }
      if (k >= kWarmup && only.empty()) ratios.push_back(native_t.back() / canon_t.back());
    }
    if (!root) continue;
    if (!only.empty()) {
      Figures f = figures(median(only == "canonical" ? canon_t : native_t), bytes, w);
      std::printf("%5zu MiB %6d | %s only: %10.3f ms %8.2f %8.2f\n", mib, rounds, only.c_str(), f.seconds * 1e3,
                  f.algbw, f.busbw);
      continue;
    }
    Figures canon = figures(median(canon_t), bytes, w), nat = figures(median(native_t), bytes, w);
    const double ratio = median(ratios);
    std::string target = "-";
    if (mib >= target_from) {
      const bool met = ratio >= min_ratio;
      missed |= !met;
      char text[64];
      std::snprintf(text, sizeof text, ">= %.2f: %s", min_ratio, met ? "met" : "MISSED");
      target = text;
    }
    std::printf("%5zu MiB %6d | %10.3f %8.2f %8.2f | %10.3f %8.2f %8.2f | %6.2f  %s\n", mib, rounds,
                canon.seconds * 1e3, canon.algbw, canon.busbw, nat.seconds * 1e3, nat.algbw, nat.busbw, ratio,
                target.c_str());
    std::fflush(stdout);
  }
  // Every rank exits with the same status (only rank 0 judged the target).
  int64_t verdict = wrong ? 2 : only.empty() && !verify_only && missed ? 1 : 0;
  {
    double v = double(verdict);
    comm.allreduce_max_double(&v, 1);
    verdict = int64_t(v);
  }
  if (root && verdict == 2)
    std::printf("ERROR: the canonical result differs from TreeAccumulator over the ranks' inputs\n");
  if (root && verdict < 2 && only.empty() && !verify_only)
    std::printf("%s\n", verdict ? "target MISSED (exit 1)" : "target met (exit 0)");
  return int(verdict);
}
