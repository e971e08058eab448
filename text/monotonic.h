// The monotonic clock in seconds: the one clock of deadlines and durations, for the
// harness (timeouts, grace periods), the record reader's helper and the trainer's hang
// watchdog alike. Header-only, standard library only.
#pragma once

#include <chrono>

namespace sweep {

/// Seconds on the monotonic clock (CLOCK_MONOTONIC: std::chrono::steady_clock on Linux):
/// for deadlines and durations, never for dates.
inline double monotonic_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace sweep
