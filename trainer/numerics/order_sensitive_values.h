// Inputs for checking that two computations of the same sums agree bit for bit (the host
// loops against the device kernels: tests/unit/arith_test.cpp on the CPU,
// cuda/device_numerics_check.cpp on a GPU). Mixed magnitudes and signs, some subnormal,
// some signed zeros: sums of these change their bits when their order changes, so an
// agreement is not an accident (arith_test's OrderMattersForTheseInputs shows it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sweep {

/// n values from an xorshift stream seeded by `seed`.
inline std::vector<float> order_sensitive_values(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    const float unit = float(s >> 40) / float(1 << 24) - 0.5f;
    const int kind = int(s % 11);
    v[i] = kind == 0 ? unit * 1e4f : kind == 1 ? unit * 1e-40f : kind == 2 ? (s & 1 ? 0.0f : -0.0f) : unit;
  }
  return v;
}

}  // namespace sweep
