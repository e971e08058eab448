// Test-only fault injection (the fault.* keys of a run config): each fault is one hook at
// the point of the step where it strikes. The loop holds a FaultInjector only when some
// fault is on, so a real run pays one null-pointer test per hook.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "communicator.h"  // Communicator
#include "run_config.h"

namespace sweep {

class FaultInjector {
 public:
  /// nullptr when every fault of `f` is off (see FaultConfig); `resumed`: this process
  /// continues a run, so the checkpoint crash, a hang_once hang and the transient fault
  /// are not repeated.
  static std::unique_ptr<FaultInjector> make(const FaultConfig& f, int rank, bool resumed);

  /// At the start of `step`: kill (SIGKILL) or hang this rank (fault.hang_once: unless it
  /// resumed).
  void step_start(int64_t step) const;
  /// Inside the step's compute: sleep when this rank is the slow one (and the sleep is
  /// the compute's, fault.slow_in).
  void compute() const;
  /// Micro-batch `k`'s loss on this rank: NaN at fault.nan_step on rank fault.nan_rank,
  /// micro-batch fault.nan_micro_batch.
  bool nan_loss(int64_t step, int64_t k) const {
    return step == f_.nan_step && rank_ == f_.nan_rank && k == f_.nan_micro_batch;
  }
  /// Whether the forward of the micro-batch holding sample fault.nan_sample goes non-finite
  /// at `step` (on whichever rank holds it).
  bool nan_sample_at(int64_t step) const { return step == f_.nan_sample_step; }
  /// The sample fault.nan_sample_step poisons.
  int64_t nan_sample() const { return f_.nan_sample; }
  /// The gradient of the first share (micro-batch, or its first leaf) this rank computes
  /// in a step (`n` floats, before any sum): one bit flipped in one element from
  /// fault.corrupt_from on, every step, on rank fault.corrupt_rank or every rank on host
  /// fault.corrupt_host (a bad device or node: whatever share it computes comes out wrong), and at fault.transient_step
  /// on rank fault.transient_rank unless this process continues an earlier attempt (a fault that a replay does not
  /// repeat).
  void local_gradient(int64_t step, float* g, size_t n) const;
  /// The learning rate of `step`'s update, `lr` as scheduled: fault.spike_lr (1: far too
  /// large for any model, the loss spikes after it) for fault.spike_steps updates from
  /// fault.spike_step on.
  double lr(int64_t step, double lr) const {
    return f_.spike_step > 0 && step >= f_.spike_step && step < f_.spike_step + f_.spike_steps ? f_.spike_lr : lr;
  }
  /// The reduced gradient (or this rank's shard of it, starting at element `begin` of the
  /// whole vector, `size` long): element 0 of the whole vector becomes +inf at fault.inf_grad_step.
  void gradient(int64_t step, float* g, size_t begin, size_t size) const;
  /// After the update: one bit of the middle element of this rank's replica at fault.desync_step.
  void parameters(int64_t step, float* params, int64_t n) const;
  /// Whether the checkpoint of `step` ends the process before it is complete.
  bool crash_in_checkpoint(int64_t step) const { return step == f_.crash_in_checkpoint_step && !resumed_; }

 private:
  FaultInjector(const FaultConfig& f, int rank, bool resumed);
  FaultConfig f_;
  int rank_;
  bool resumed_;
  bool corrupt_here_;  ///< this rank is the corrupt one: rank fault.corrupt_rank, or on host fault.corrupt_host
};

/// fault.slow_in exchange: forwards every call to `inner`, and on the slow rank sleeps
/// fault.slow_ms at the start of every sendrecv (the gradient exchange) before it sends
/// anything. Placed under the WatchedCommunicator, the rank sleeps inside the exchange as
/// its heartbeat tells: the peer that waits for it cannot have its data, as with a rank
/// stuck inside a collective.
class SlowExchangeCommunicator : public Communicator {
 public:
  SlowExchangeCommunicator(Communicator& inner, const FaultConfig& f) : inner_(inner), f_(f) {}
  /// Whether `f` asks for it (slow_ms > 0 and slow_in exchange).
  static bool wanted(const FaultConfig& f) { return f.slow_ms > 0 && f.slow_in == "exchange"; }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void barrier() override { inner_.barrier(); }
  void allgather(const void* send, size_t bytes_per_rank, void* recv) override {
    inner_.allgather(send, bytes_per_rank, recv);
  }
  void sendrecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes, int src) override;
  void allreduce_sum_native(float* data, size_t n) override { inner_.allreduce_sum_native(data, n); }
  void allreduce_sum_i64(int64_t* data, size_t n) override { inner_.allreduce_sum_i64(data, n); }
  void allreduce_max_double(double* data, size_t n) override { inner_.allreduce_max_double(data, n); }
  [[noreturn]] void abort(int code, const std::string& why) override;

 private:
  Communicator& inner_;
  FaultConfig f_;
};

}  // namespace sweep
