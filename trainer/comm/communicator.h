// The few collective and point-to-point operations the trainer needs, behind an interface
// so the canonical reduction is written once and runs over MPI (mpi_communicator.h) or,
// later, NCCL — and so tests can count or fake traffic. No MPI header here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sweep {

/// A group of ranks. Every call except rank(), size() and abort() is collective over the
/// group, or (sendrecv) must be matched by the named peers; all ranks call them in the
/// same order. Failures throw std::runtime_error naming the rank and the operation.
class Communicator {
 public:
  virtual ~Communicator() = default;

  /// This process's rank in [0, size()).
  virtual int rank() const = 0;
  /// Number of ranks.
  virtual int size() const = 0;

  /// Returns once every rank has entered it.
  virtual void barrier() = 0;

  /// Every rank contributes `bytes_per_rank` bytes from `send`; `recv` (size() *
  /// bytes_per_rank bytes) receives all contributions in rank order.
  virtual void allgather(const void* send, size_t bytes_per_rank, void* recv) = 0;

  /// Sends `send_bytes` from `send` to rank `dst` while receiving `recv_bytes` into `recv`
  /// from rank `src`; returns when both are done. `dst` must be receiving exactly
  /// `send_bytes` from this rank in the same call (0 bytes: no message). The building block
  /// of the canonical all-to-all and ring all-gather: a pairwise or ring pattern of these
  /// never deadlocks. dst == src == rank() copies locally.
  virtual void sendrecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes, int src) = 0;

  /// In-place sum with the library's own all-reduce (MPI_Allreduce / ncclAllReduce). Its
  /// summation order depends on the library, world size and message size, so the bits
  /// are reproducible only for a fixed layout: `dist.reduction: native`, kept for speed.
  virtual void allreduce_sum_native(float* data, size_t n) = 0;

  /// In-place exact integer sum (token counts, failure flags).
  virtual void allreduce_sum_i64(int64_t* data, size_t n) = 0;

  /// In-place elementwise maximum (step times, "any rank saw a non-finite value").
  virtual void allreduce_max_double(double* data, size_t n) = 0;

  /// Ends every rank of the job with exit status `code` after printing `why` (with the
  /// rank) to stderr. Used from an executable's single catch, never from library code.
  [[noreturn]] virtual void abort(int code, const std::string& why) = 0;
};

}  // namespace sweep
