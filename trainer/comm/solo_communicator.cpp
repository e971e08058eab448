#include "solo_communicator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace sweep {

void SoloCommunicator::allgather(const void* send, size_t bytes_per_rank, void* recv) {
  if (bytes_per_rank) std::memmove(recv, send, bytes_per_rank);
}

void SoloCommunicator::sendrecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes, int src) {
  if (dst != 0 || src != 0)
    throw std::logic_error("rank 0/1: sendrecv with rank " + std::to_string(dst != 0 ? dst : src) +
                           " of a one-rank run");
  if (send_bytes != recv_bytes) throw std::logic_error("sendrecv to self with different sizes");
  if (send_bytes) std::memmove(recv, send, send_bytes);
}

void SoloCommunicator::abort(int code, const std::string& why) {
  std::fprintf(stderr, "sweep: rank 0/1 aborting the job (exit %d): %s\n", code, why.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

bool started_as_mpi_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (const char* s = std::getenv(v); s && *s) return true;
  return false;
}

}  // namespace sweep
