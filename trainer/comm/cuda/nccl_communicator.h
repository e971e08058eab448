// The NCCL backend of Communicator, for CUDA tensors: one GPU per rank, bootstrapped over
// MPI (rank 0's unique id is shared through the MPI communicator). Every NCCL call is
// non-blocking and polled with a deadline, so a dead or hung peer makes this rank abort
// its communicator and throw, naming the operation, instead of hanging.
#pragma once

#include <memory>
#include <string>

#include "communicator.h"

namespace sweep {

class NcclCommunicator final : public Communicator {
 public:
  /// Collective over `bootstrap`'s ranks: selects `device`, creates the communicator.
  /// `timeout_s` bounds every operation (dist.timeout_s).
  NcclCommunicator(Communicator& bootstrap, int device, double timeout_s);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  void barrier() override;
  /// Buffers may be device or host memory; host buffers are staged through the device.
  void allgather(const void* send, size_t bytes_per_rank, void* recv) override;
  void sendrecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes, int src) override;
  void allreduce_sum_native(float* data, size_t n) override;
  void allreduce_sum_i64(int64_t* data, size_t n) override;
  void allreduce_max_double(double* data, size_t n) override;
  [[noreturn]] void abort(int code, const std::string& why) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sweep
