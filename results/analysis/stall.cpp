#include "stall.h"

#include <algorithm>
#include <chrono>

namespace sweep {

double stall_threshold_s(const RecordProgress& p) { return std::max(kMinStallS, kStallSteps * p.step_time_s); }

double stalled_for_s(const RecordProgress& p, double now) {
  if (p.step <= 0 || p.written_at <= 0) return 0;
  const double age = now - p.written_at;
  return age > stall_threshold_s(p) ? age : 0;
}

std::string stall_words(const RecordProgress& p) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double stalled = stalled_for_s(p, now);
  return stalled > 0 ? ", no progress for " + std::to_string(static_cast<long long>(stalled)) + " s" : "";
}

}  // namespace sweep
