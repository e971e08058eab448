#include "grad_telemetry.h"

#include <algorithm>
#include <cmath>

#include "canonical_allreduce.h"  // slice_sums_of_squares
#include "run_health.h"           // spike_test, spike_window

namespace sweep {

std::vector<double> tensor_grad_norms(Communicator& comm, const float* grad, size_t begin, size_t size,
                                      const std::vector<ParamInfo>& table, bool sharded) {
  std::vector<Slice> slices;
  slices.reserve(table.size());
  for (const auto& p : table) slices.push_back({size_t(p.offset), size_t(p.numel)});
  std::vector<double> norms = slice_sums_of_squares(comm, grad, begin, size, slices, sharded);
  for (double& x : norms) x = std::sqrt(x);
  return norms;
}

std::string telemetry_reason(const StepMetrics& m, const std::vector<StepMetrics>& history, int64_t every,
                             int64_t last_step, bool norm_agreed, bool grad_finite) {
  std::string why;
  auto add = [&why](const char* w) { why += (why.empty() ? "" : ",") + std::string(w); };
  if (every > 0 && m.step % every == 0) add("every");
  if (m.step == last_step) add("last");
  // The last kSpikeWindow finite values before the step, as the loss_spike flag reads them.
  if (spike_test(spike_window(history, &StepMetrics::loss), m.loss).spike ||
      (norm_agreed && spike_test(spike_window(history, &StepMetrics::grad_norm), m.grad_norm).spike))
    add("spike");
  if (!std::isfinite(m.loss) || !grad_finite) add("nonfinite");
  return why;
}

}  // namespace sweep
