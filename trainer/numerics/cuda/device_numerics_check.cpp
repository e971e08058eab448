// Device kernels against the host's, bit for bit, on one GPU: the canonical tree for 1..33
// leaves, the gradient norm's sum of squares, AdamW over three steps (with and without a
// clip factor and weight decay), and the non-finite check. Inputs mix magnitudes from
// subnormal to 1e4 and signed zeros. One line per check; exit 0 when all match, 1 when
// one differs, 2 when no GPU is visible and --require-device was given (0 otherwise, for
// builds on machines without one).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "canonical_reduce.h"
#include "device_numerics.h"
#include "optimizer.h"
#include "order_sensitive_values.h"

namespace {

int failures = 0;

void say(bool ok, const std::string& what) {
  std::printf("device_numerics_check: %s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

void cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "device_numerics_check: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

std::vector<float> values(size_t n, uint64_t seed) { return sweep::order_sensitive_values(n, seed); }

template <class T>
struct Device {
  T* p = nullptr;
  size_t n;
  explicit Device(size_t count) : n(count) { cuda(cudaMalloc(&p, (n ? n : 1) * sizeof(T)), "cudaMalloc"); }
  explicit Device(const std::vector<T>& h) : Device(h.size()) { put(h); }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  void put(const std::vector<T>& h) {
    cuda(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), "to device");
  }
  std::vector<T> get() const {
    std::vector<T> h(n);
    cuda(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "to host");
    return h;
  }
};

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

void check_tree() {
  const size_t n = 5003;
  bool ok = true;
  for (int leaves = 1; leaves <= 33; ++leaves) {
    const std::vector<float> pieces = values(n * size_t(leaves), uint64_t(leaves));
    sweep::TreeAccumulator acc(n);
    for (int k = 0; k < leaves; ++k) acc.push(pieces.data() + size_t(k) * n);
    std::vector<float> host(n);
    acc.finish(host.data());
    Device<float> d_pieces(pieces), d_out(n);
    sweep::device::tree_sum(d_pieces.p, n, leaves, d_out.p, nullptr);
    if (!same_bits(d_out.get(), host)) {
      ok = false;
      std::printf("device_numerics_check: tree over %d leaves differs\n", leaves);
    }
  }
  say(ok, "canonical tree, 1..33 leaves of 5003 floats");
}

void check_norm() {
  bool ok = true;
  for (size_t n : {size_t(0), size_t(1), size_t(7), sweep::kNormBlock, sweep::kNormBlock + 1, 3 * sweep::kNormBlock + 5,
                   size_t(1) << 22}) {
    const std::vector<float> g = values(n, n + 3);
    const double host = sweep::sum_of_squares(g.data(), n);
    Device<float> d_g(g);
    Device<double> blocks(sweep::norm_blocks(n)), out(1);
    sweep::device::sum_of_squares(d_g.p, n, blocks.p, out.p, nullptr);
    const double dev = out.get()[0];
    if (std::memcmp(&dev, &host, sizeof dev) != 0) {
      ok = false;
      std::printf("device_numerics_check: sum of squares of %zu floats: device %.17g, host %.17g\n", n, dev, host);
    }
  }
  say(ok, "sum of squares (gradient norm), 0..4194304 floats");
}

void check_adamw() {
  const size_t n = 100003;
  std::vector<float> p = values(n, 11), m(n, 0.0f), v(n, 0.0f);
  Device<float> d_p(p), d_g(n), d_m(m), d_v(v);
  sweep::TrainConfig t;
  t.beta1 = 0.9, t.beta2 = 0.95, t.eps = 1e-8;
  bool ok = true;
  for (int step = 1; step <= 3; ++step) {
    t.weight_decay = step == 2 ? 0.1 : 0.0;
    sweep::AdamWStep s = sweep::AdamWStep::at(t, 1e-3 * step, step);
    s.grad_scale = step == 3 ? 0.37f : 1.0f;
    const std::vector<float> g = values(n, 100 + uint64_t(step));
    sweep::adamw(p.data(), g.data(), m.data(), v.data(), n, s);
    d_g.put(g);
    sweep::device::adamw(d_p.p, d_g.p, d_m.p, d_v.p, n, s.consts(), nullptr);
    const bool same = same_bits(d_p.get(), p) && same_bits(d_m.get(), m) && same_bits(d_v.get(), v);
    if (!same) std::printf("device_numerics_check: AdamW step %d differs\n", step);
    ok = ok && same;
  }
  say(ok, "AdamW, 3 steps of 100003 parameters (weight decay, clip factor)");
}

void check_nonfinite() {
  bool ok = true;
  const float specials[] = {0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max()};
  for (float special : specials) {
    std::vector<float> g = values(70001, 5);
    g[69999] = special;
    Device<float> d_g(g);
    Device<int> flag(std::vector<int>{0});
    sweep::device::mark_nonfinite(d_g.p, g.size(), flag.p, nullptr);
    ok = ok && (flag.get()[0] == 0) == sweep::all_finite(g.data(), g.size());
  }
  say(ok, "non-finite check (0, +inf, -inf, NaN, FLT_MAX)");
}

}  // namespace

int main(int argc, char** argv) {
  const bool require = argc > 1 && std::strcmp(argv[1], "--require-device") == 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("device_numerics_check: no CUDA device%s\n", require ? "" : "; linked fine, nothing to run");
    return require ? 2 : 0;
  }
  check_tree();
  check_norm();
  check_adamw();
  check_nonfinite();
  return failures ? 1 : 0;
}
