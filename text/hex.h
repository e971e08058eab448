// 64-bit values as hex digits: digests, checksums and the exact bits of a double, spelled
// one way everywhere. Standard library only.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace sweep {

/// `v` as 16 lower-case hex digits, zero-padded ("00000000deadbeef"), as printf's "%016llx".
inline std::string hex16(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (size_t i = 16; i-- > 0; v >>= 4) s[i] = kDigits[v & 15];
  return s;
}

/// The bits of `x` as hex16: what "the same loss" means bit for bit.
inline std::string double_bits(double x) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return hex16(u);
}

}  // namespace sweep
