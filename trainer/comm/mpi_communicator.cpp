#include "mpi_communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace sweep {

namespace {

// Every chunk count must fit in an int as well as under the configured limit.
size_t chunk_limit(const MpiOptions& o, size_t elem_bytes) {
  size_t limit = std::max<size_t>(1, o.max_message_bytes / elem_bytes);
  return std::min<size_t>(limit, size_t(1) << 30);
}

size_t chunks(size_t bytes, size_t chunk) { return (bytes + chunk - 1) / chunk; }

}  // namespace

MpiCommunicator::MpiCommunicator(int* argc, char*** argv, MpiOptions options) : options_(options) {
  if (options_.max_message_bytes == 0) throw std::invalid_argument("MpiOptions.max_message_bytes must be > 0");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw std::runtime_error("MPI_Init_thread failed");
    owns_mpi_ = true;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (owns_mpi_) MPI_Finalize();
}

void MpiCommunicator::check(int err, const char* call) const {
  if (err == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(err, text, &len);
  throw std::runtime_error("rank " + std::to_string(rank_) + "/" + std::to_string(size_) + ": " + call + ": " +
                           std::string(text, size_t(len)));
}

void MpiCommunicator::barrier() { check(MPI_Barrier(comm_), "MPI_Barrier"); }

void MpiCommunicator::allgather(const void* send, size_t bytes_per_rank, void* recv) {
  const size_t chunk = chunk_limit(options_, 1);
  const auto* in = static_cast<const char*>(send);
  auto* out = static_cast<char*>(recv);
  // A chunk lands at out + off + r * bytes_per_rank: a byte run resized to the full stride
  // places every rank's piece without a staging copy or an int displacement.
  for (size_t off = 0; off < bytes_per_rank; off += chunk) {
    int count = int(std::min(chunk, bytes_per_rank - off));
    MPI_Datatype run, strided;
    MPI_Type_contiguous(count, MPI_BYTE, &run);
    MPI_Type_create_resized(run, 0, MPI_Aint(bytes_per_rank), &strided);
    MPI_Type_commit(&strided);
    int err = MPI_Allgather(in + off, count, MPI_BYTE, out + off, 1, strided, comm_);
    MPI_Type_free(&strided);
    MPI_Type_free(&run);
    check(err, "MPI_Allgather");
  }
}

void MpiCommunicator::sendrecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes, int src) {
  if (dst == rank_ && src == rank_) {
    if (send_bytes != recv_bytes) throw std::logic_error("sendrecv to self with different sizes");
    if (send_bytes) std::memmove(recv, send, send_bytes);
    return;
  }
  const size_t chunk = chunk_limit(options_, 1);
  std::vector<MPI_Request> requests;
  requests.reserve(chunks(send_bytes, chunk) + chunks(recv_bytes, chunk));
  // Chunks of one direction share a tag; MPI's non-overtaking rule keeps them in order.
  constexpr int kTag = 7311;
  auto* out = static_cast<char*>(recv);
  for (size_t off = 0; off < recv_bytes; off += chunk) {
    requests.emplace_back();
    check(MPI_Irecv(out + off, int(std::min(chunk, recv_bytes - off)), MPI_BYTE, src, kTag, comm_, &requests.back()),
          "MPI_Irecv");
  }
  const auto* in = static_cast<const char*>(send);
  for (size_t off = 0; off < send_bytes; off += chunk) {
    requests.emplace_back();
    check(MPI_Isend(in + off, int(std::min(chunk, send_bytes - off)), MPI_BYTE, dst, kTag, comm_, &requests.back()),
          "MPI_Isend");
  }
  check(MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall (sendrecv)");
}

void MpiCommunicator::allreduce(void* data, size_t n, size_t elem_bytes, MPI_Datatype type, MPI_Op op,
                                const char* what) {
  const size_t chunk = chunk_limit(options_, elem_bytes);
  auto* p = static_cast<char*>(data);
  for (size_t off = 0; off < n; off += chunk)
    check(MPI_Allreduce(MPI_IN_PLACE, p + off * elem_bytes, int(std::min(chunk, n - off)), type, op, comm_), what);
}

void MpiCommunicator::allreduce_sum_native(float* data, size_t n) {
  allreduce(data, n, sizeof(float), MPI_FLOAT, MPI_SUM, "MPI_Allreduce (float sum)");
}

void MpiCommunicator::allreduce_sum_i64(int64_t* data, size_t n) {
  allreduce(data, n, sizeof(int64_t), MPI_INT64_T, MPI_SUM, "MPI_Allreduce (int64 sum)");
}

void MpiCommunicator::allreduce_max_double(double* data, size_t n) {
  allreduce(data, n, sizeof(double), MPI_DOUBLE, MPI_MAX, "MPI_Allreduce (double max)");
}

void MpiCommunicator::abort(int code, const std::string& why) {
  std::fprintf(stderr, "sweep: rank %d/%d aborting the job (exit %d): %s\n", rank_, size_, code, why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort may return on some implementations
}

}  // namespace sweep
