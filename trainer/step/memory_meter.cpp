#include "memory_meter.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "communicator.h"  // Communicator
#include "flat_params.h"   // FlatParams
#include "torch_compat.h"  // SWEEP_TORCH_AT_LEAST
#include "zero_shards.h"   // ZeroShards

namespace sweep {
namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

void add(int64_t n) {
  const int64_t now = g_live.fetch_add(n, std::memory_order_relaxed) + n;
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

/// Each allocation carries its size in a header in front of the data, so the storage
/// keeps LibTorch's raw-allocation contract (the context is the data pointer, freed by
/// raw_deleter()), which some kernels' scratch buffers rely on. 64 bytes keep the data at
/// the base allocator's alignment.
constexpr size_t kHeader = 64;
c10::DeleterFnPtr g_base_free = nullptr;

void release(void* data) {
  if (!data) return;
  char* block = static_cast<char*>(data) - kHeader;
  int64_t bytes;
  std::memcpy(&bytes, block, sizeof bytes);
  g_live.fetch_sub(bytes, std::memory_order_relaxed);
  g_base_free(block);
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}
  c10::DataPtr allocate(size_t n) const override {
    if (n == 0)
      return {nullptr, nullptr, &release, c10::Device(c10::DeviceType::CPU)};  // as the default allocator does
    char* block = static_cast<char*>(base_->raw_allocate(n + kHeader));
    const auto bytes = int64_t(n);
    std::memcpy(block, &bytes, sizeof bytes);
    add(bytes);
    char* data = block + kHeader;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
#if SWEEP_TORCH_AT_LEAST(2, 3)
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#endif

 private:
  c10::Allocator* base_;
};

}  // namespace

TensorMemoryMeter& TensorMemoryMeter::instance() {
  static TensorMemoryMeter meter([] {
    c10::Allocator* base = c10::GetCPUAllocator();
    g_base_free = base->raw_deleter();
    if (!g_base_free) return false;  // no raw allocation to build on: nothing is counted
    // Leaked on purpose: tensors may be freed after every static destructor has run.
    // Priority 1, above the default allocator's 0, so LibTorch takes it.
    c10::SetCPUAllocator(new CountingAllocator(base), /*priority=*/1);
    return true;
  }());
  return meter;
}

int64_t TensorMemoryMeter::live() const { return g_live.load(std::memory_order_relaxed); }

void TensorMemoryMeter::start_window() { g_peak.store(live(), std::memory_order_relaxed); }

int64_t TensorMemoryMeter::window_peak() const { return g_peak.load(std::memory_order_relaxed); }

int64_t peak_resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:  123456 kB"
  return -1;
}

RankMemory gather_rank_memory(Communicator& comm, const FlatParams& flat, const ZeroShards& zero,
                              int64_t step_peak_tensor_bytes) {
  auto bytes = [](const torch::Tensor& t) { return t.defined() ? int64_t(t.numel()) * 4 : 0; };
  const int64_t own = zero.held_bytes();
  constexpr int kFigures = 5;
  const bool metered = step_peak_tensor_bytes >= 0 && TensorMemoryMeter::instance().installed();
  int64_t mine[kFigures] = {bytes(flat.params) + int64_t(zero.param_shard.size()) * 4,
                            bytes(flat.grads) + int64_t(zero.grad_shard.size()) * 4,
                            int64_t(zero.adam_m.size() + zero.adam_v.size()) * 4,
                            metered ? step_peak_tensor_bytes + own : -1, peak_resident_bytes()};
  const int world = comm.size();
  std::vector<int64_t> all(static_cast<size_t>(kFigures * world));
  comm.allgather(mine, sizeof mine, all.data());
  RankMemory m;
  for (int r = 0; r < world; ++r) {
    const int64_t* f = all.data() + size_t(kFigures * r);
    m.params.push_back(f[0]);
    m.grads.push_back(f[1]);
    m.optimizer.push_back(f[2]);
    m.step_peak.push_back(f[3]);
    m.peak_rss.push_back(f[4]);
  }
  return m;
}

}  // namespace sweep
