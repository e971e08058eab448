// Catching Ctrl-C and SIGTERM in the driver: instead of dying and leaving its runs
// orphaned, it stops every run (SIGTERM, grace period, SIGKILL; or scancel) and records
// them as interrupted, so the next `sweep run` starts them again.
#pragma once

namespace sweep {

/// Installs SIGINT/SIGTERM handlers while alive; restores the previous ones after.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// The first stop signal received (SIGINT or SIGTERM), or 0.
  static int received();
  /// How many arrived; a second one means "stop now" (no grace period).
  static int count();
  /// Forgets received signals (tests).
  static void reset();
};

}  // namespace sweep
