#include "faults.h"

#include <unistd.h>  // gethostname

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

namespace sweep {

std::unique_ptr<FaultInjector> FaultInjector::make(const FaultConfig& f, int rank, bool resumed) {
  const bool any = f.inf_grad_step || f.desync_step || f.kill_step || f.hang_step || f.nan_step || f.slow_ms ||
                   f.spike_step || f.crash_in_checkpoint_step || f.nan_sample_step || f.corrupt_from ||
                   f.transient_step;
  if (!any) return nullptr;
  return std::unique_ptr<FaultInjector>(new FaultInjector(f, rank, resumed));
}

FaultInjector::FaultInjector(const FaultConfig& f, int rank, bool resumed) : f_(f), rank_(rank), resumed_(resumed) {
  char host[256] = {};
  if (!f.corrupt_host.empty()) ::gethostname(host, sizeof host - 1);
  corrupt_here_ = f.corrupt_host.empty() ? rank == f.corrupt_rank : f.corrupt_host == host;
}

void FaultInjector::step_start(int64_t step) const {
  if (step == f_.kill_step && rank_ == f_.kill_rank) std::raise(SIGKILL);
  if (step == f_.hang_step && rank_ == f_.hang_rank && !(f_.hang_once && resumed_))
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));  // the watchdog ends it
}

void FaultInjector::compute() const {
  if (rank_ == f_.slow_rank && f_.slow_ms > 0 && f_.slow_in == "compute")
    std::this_thread::sleep_for(std::chrono::milliseconds(f_.slow_ms));
}

void FaultInjector::gradient(int64_t step, float* g, size_t begin, size_t size) const {
  if (step == f_.inf_grad_step && begin == 0 && size > 0) g[0] = std::numeric_limits<float>::infinity();
}

void FaultInjector::local_gradient(int64_t step, float* g, size_t n) const {
  const bool corrupt = f_.corrupt_from > 0 && step >= f_.corrupt_from && corrupt_here_;
  const bool transient = f_.transient_step > 0 && step == f_.transient_step && rank_ == f_.transient_rank && !resumed_;
  if (!(corrupt || transient) || !g || n == 0) return;
  // The first non-zero element from the middle on (a zero one, flipped, would be too
  // small to reach the update), its top mantissa bit: a wrong value, never a non-finite one.
  size_t i = n / 2;
  while (i + 1 < n && g[i] == 0.0f) ++i;
  uint32_t bits;
  std::memcpy(&bits, &g[i], sizeof bits);
  bits ^= uint32_t(1) << 22;
  std::memcpy(&g[i], &bits, sizeof bits);
}

void FaultInjector::parameters(int64_t step, float* params, int64_t n) const {
  if (step != f_.desync_step || rank_ != f_.desync_rank || !params) return;
  float* p = params + n / 2;
  *p = std::nextafter(*p, INFINITY);
}

void SlowExchangeCommunicator::sendrecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes,
                                        int src) {
  if (inner_.rank() == f_.slow_rank) std::this_thread::sleep_for(std::chrono::milliseconds(f_.slow_ms));
  inner_.sendrecv(send, send_bytes, dst, recv, recv_bytes, src);
}

void SlowExchangeCommunicator::abort(int code, const std::string& why) {
  inner_.abort(code, why);
  std::_Exit(code);  // not reached; GCC does not carry [[noreturn]] through a virtual call
}

}  // namespace sweep
