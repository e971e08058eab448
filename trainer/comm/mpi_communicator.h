// Communicator over MPI_COMM_WORLD, so the same binary runs under `mpirun` and
// `srun --mpi=pmix` (and as a singleton: one rank, no launcher).
#pragma once

#include <mpi.h>  // MPI_Comm

#include <cstddef>
#include <string>

#include "communicator.h"  // Communicator

namespace sweep {

/// Settings of the MPI transport.
struct MpiOptions {
  /// Largest single message or collective contribution; bigger transfers are split.
  /// MPI counts are `int`, and some transports mishandle messages near 2 GiB.
  size_t max_message_bytes = size_t(1) << 30;
};

/// Initialises MPI if nobody has yet (and then finalises it on destruction: RAII), and
/// works on a private duplicate of MPI_COMM_WORLD so its traffic never matches a user's.
/// Errors are returned, not fatal, and thrown as std::runtime_error with rank and call.
class MpiCommunicator final : public Communicator {
 public:
  /// `argc`/`argv` may be null; they are passed to MPI_Init_thread (FUNNELED: only the
  /// thread that constructed this object may call it).
  explicit MpiCommunicator(int* argc = nullptr, char*** argv = nullptr, MpiOptions options = {});
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  void allgather(const void* send, size_t bytes_per_rank, void* recv) override;
  void sendrecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes, int src) override;
  void allreduce_sum_native(float* data, size_t n) override;
  void allreduce_sum_i64(int64_t* data, size_t n) override;
  void allreduce_max_double(double* data, size_t n) override;
  [[noreturn]] void abort(int code, const std::string& why) override;

  /// Whether this object initialised MPI (and will finalise it).
  bool owns_mpi() const { return owns_mpi_; }

 private:
  void check(int err, const char* call) const;
  void allreduce(void* data, size_t n, size_t elem_bytes, MPI_Datatype type, MPI_Op op, const char* what);

  MpiOptions options_;
  bool owns_mpi_ = false;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace sweep
