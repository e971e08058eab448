#include "nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

namespace sweep {

struct NcclCommunicator::Impl {
  Communicator& bootstrap;
  int device = 0;
  double timeout_s = 300;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* staging = nullptr;  // device buffer for host-memory arguments
  size_t staging_bytes = 0;

  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("NCCL on rank " + std::to_string(bootstrap.rank()) + ": " + what);
  }
  void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(e));
  }
  void check(ncclResult_t r, const char* what) {
    if (r != ncclSuccess && r != ncclInProgress) fail(std::string(what) + ": " + ncclGetErrorString(r));
  }
  /// Waits for the stream with a deadline; on timeout or an asynchronous NCCL error the
  /// communicator is aborted (so peers stuck with us fail too) and this throws.
  void wait(const char* what) {
    auto t0 = std::chrono::steady_clock::now();
    while (true) {
      cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) check(q, what);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        ncclCommAbort(comm);
        comm = nullptr;
        fail(std::string(what) + ": " + ncclGetErrorString(async) + "; communicator aborted");
      }
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
        ncclCommAbort(comm);
        comm = nullptr;
        fail(std::string(what) + " made no progress for " + std::to_string(int(timeout_s)) +
             " s (dist.timeout_s): a peer rank died or hung; communicator aborted");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  static bool on_device(const void* p) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky error of a plain host pointer
      return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
  }
  void* stage(size_t bytes) {
    if (bytes > staging_bytes) {
      if (staging) cudaFree(staging);
      check(cudaMalloc(&staging, bytes), "cudaMalloc (staging)");
      staging_bytes = bytes;
    }
    return staging;
  }
  /// Runs an in-place collective on `data` (host or device, `bytes` long).
  template <class F>
  void in_place(void* data, size_t bytes, const char* what, F&& op) {
    if (on_device(data)) {
      check(op(data), what);
      wait(what);
      return;
    }
    void* d = stage(bytes);
    check(cudaMemcpyAsync(d, data, bytes, cudaMemcpyHostToDevice, stream), what);
    check(op(d), what);
    check(cudaMemcpyAsync(data, d, bytes, cudaMemcpyDeviceToHost, stream), what);
    wait(what);
  }
};

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int device, double timeout_s)
    : impl_(new Impl{bootstrap, device, timeout_s}) {
  Impl& m = *impl_;
  m.check(cudaSetDevice(device), "cudaSetDevice");
  m.check(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) m.check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  std::vector<ncclUniqueId> all(size_t(bootstrap.size()));
  bootstrap.allgather(&id, sizeof id, all.data());  // everyone takes rank 0's id
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // non-blocking: every wait is ours, with a deadline
  m.check(ncclCommInitRankConfig(&m.comm, bootstrap.size(), all[0], bootstrap.rank(), &config),
          "ncclCommInitRankConfig");
  ncclResult_t state = ncclInProgress;
  auto t0 = std::chrono::steady_clock::now();
  while (state == ncclInProgress) {
    ncclCommGetAsyncError(m.comm, &state);
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      ncclCommAbort(m.comm);
      m.comm = nullptr;
      m.fail("communicator creation timed out (dist.timeout_s)");
    }
  }
  m.check(state, "ncclCommInitRankConfig");
}

NcclCommunicator::~NcclCommunicator() {
  if (impl_->comm) ncclCommDestroy(impl_->comm);
  if (impl_->staging) cudaFree(impl_->staging);
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
}

int NcclCommunicator::rank() const { return impl_->bootstrap.rank(); }
int NcclCommunicator::size() const { return impl_->bootstrap.size(); }

void NcclCommunicator::barrier() {
  int64_t one = 1;
  allreduce_sum_i64(&one, 1);
}

void NcclCommunicator::allgather(const void* send, size_t bytes_per_rank, void* recv) {
  Impl& m = *impl_;
  const size_t total = bytes_per_rank * size_t(size());
  if (Impl::on_device(send) && Impl::on_device(recv)) {
    m.check(ncclAllGather(send, recv, bytes_per_rank, ncclChar, m.comm, m.stream), "ncclAllGather");
    m.wait("ncclAllGather");
    return;
  }
  char* d = static_cast<char*>(m.stage(total + bytes_per_rank));
  m.check(cudaMemcpyAsync(d + total, send, bytes_per_rank, cudaMemcpyHostToDevice, m.stream), "allgather");
  m.check(ncclAllGather(d + total, d, bytes_per_rank, ncclChar, m.comm, m.stream), "ncclAllGather");
  m.check(cudaMemcpyAsync(recv, d, total, cudaMemcpyDeviceToHost, m.stream), "allgather");
  m.wait("ncclAllGather");
}

void NcclCommunicator::sendrecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes, int src) {
  Impl& m = *impl_;
  if (dst == rank() && src == rank()) {
    m.check(cudaMemcpyAsync(recv, send, send_bytes, cudaMemcpyDefault, m.stream), "sendrecv (local)");
    m.wait("sendrecv (local)");
    return;
  }
  m.check(ncclGroupStart(), "ncclGroupStart");
  if (send_bytes) m.check(ncclSend(send, send_bytes, ncclChar, dst, m.comm, m.stream), "ncclSend");
  if (recv_bytes) m.check(ncclRecv(recv, recv_bytes, ncclChar, src, m.comm, m.stream), "ncclRecv");
  m.check(ncclGroupEnd(), "ncclGroupEnd");
  m.wait("ncclSend/ncclRecv");
}

void NcclCommunicator::allreduce_sum_native(float* data, size_t n) {
  Impl& m = *impl_;
  m.in_place(data, n * sizeof(float), "ncclAllReduce",
             [&](void* d) { return ncclAllReduce(d, d, n, ncclFloat, ncclSum, m.comm, m.stream); });
}

void NcclCommunicator::allreduce_sum_i64(int64_t* data, size_t n) {
  Impl& m = *impl_;
  m.in_place(data, n * sizeof(int64_t), "ncclAllReduce(int64)",
             [&](void* d) { return ncclAllReduce(d, d, n, ncclInt64, ncclSum, m.comm, m.stream); });
}

void NcclCommunicator::allreduce_max_double(double* data, size_t n) {
  Impl& m = *impl_;
  m.in_place(data, n * sizeof(double), "ncclAllReduce(max)",
             [&](void* d) { return ncclAllReduce(d, d, n, ncclDouble, ncclMax, m.comm, m.stream); });
}

void NcclCommunicator::abort(int code, const std::string& why) {
  if (impl_->comm) ncclCommAbort(impl_->comm);
  impl_->comm = nullptr;
  impl_->bootstrap.abort(code, why);
  std::_Exit(code);  // not reached: the bootstrap's abort ends the job
}

}  // namespace sweep
