#include "stall.h"

#include <algorithm>

namespace sweep {

double stall_threshold_s(const RecordProgress& p) { return std::max(kMinStallS, kStallSteps * p.step_time_s); }

double stalled_for_s(const RecordProgress& p, double now) {
  if (p.step <= 0 || p.written_at <= 0) return 0;
  const double age = now - p.written_at;
  return age > stall_threshold_s(p) ? age : 0;
}

}  // namespace sweep
