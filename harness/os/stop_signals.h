// Catching Ctrl-C, SIGTERM and SIGHUP (a closed terminal) in the driver: instead of dying
// and leaving its runs orphaned, it stops every run (SIGTERM, grace period, SIGKILL; or
// scancel) and records them as interrupted, so the next `sweep run` starts them again.
#pragma once

namespace sweep {

/// Installs SIGINT/SIGTERM/SIGHUP handlers while alive; restores the previous ones after.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// Restores the previous handlers now (once no run is left to stop: a signal then
  /// ends the driver at once, e.g. while it writes the final report).
  static void release();
  /// "SIGINT", "SIGTERM", "SIGHUP".
  static const char* name(int sig);
  /// The first stop signal received (SIGINT, SIGTERM or SIGHUP), or 0.
  static int received();
  /// How many arrived; a second one means "stop now" (no grace period).
  static int count();
  /// Forgets received signals (tests).
  static void reset();
};

}  // namespace sweep
