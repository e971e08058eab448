// The communicator of a run of one process that no launcher started (sweep-train run
// directly, as the local launcher runs a one-rank run): its collectives are copies, and
// it needs no MPI. A singleton MPI_Init starts Open MPI's orted and takes about a second
// a run; a search of many small runs paid it on every one. Under mpirun or srun --mpi,
// MpiCommunicator, even for one rank.
#pragma once

#include <string>

#include "communicator.h"  // Communicator

namespace sweep {

class SoloCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void barrier() override {}
  void allgather(const void* send, size_t bytes_per_rank, void* recv) override;
  void sendrecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes, int src) override;
  void allreduce_sum_native(float*, size_t) override {}
  void allreduce_sum_i64(int64_t*, size_t) override {}
  void allreduce_max_double(double*, size_t) override {}
  [[noreturn]] void abort(int code, const std::string& why) override;
};

/// Whether a launcher started this process as an MPI rank: mpirun (OMPI_COMM_WORLD_SIZE),
/// srun --mpi=pmix or another PMIx launcher (PMIX_RANK), a PMI-1/2 launcher such as
/// MPICH's hydra or srun --mpi=pmi2 (PMI_RANK, PMI_SIZE).
bool started_as_mpi_rank();

}  // namespace sweep
