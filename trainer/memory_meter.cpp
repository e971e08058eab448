#include "memory_meter.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <fstream>
#include <string>

#include "torch_compat.h"  // SWEEP_TORCH_AT_LEAST

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

/// One counted allocation: the base allocator's pointer (freed with this) and its size.
struct Counted {
  c10::DataPtr inner;
  int64_t bytes;
};

void release(void* ctx) {
  auto* c = static_cast<Counted*>(ctx);
  g_live.fetch_sub(c->bytes, std::memory_order_relaxed);
  delete c;  // frees the storage through the base allocator's deleter
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}
  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    const c10::Device device = inner.device();
    add(int64_t(n));
    return {data, new Counted{std::move(inner), int64_t(n)}, &release, device};
  }
#if SWEEP_TORCH_AT_LEAST(2, 3)
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#endif

 private:
  c10::Allocator* base_;
};

}  // namespace

TensorMemoryMeter& TensorMemoryMeter::instance() {
  static TensorMemoryMeter meter;
  static const bool installed = [] {
    // Leaked on purpose: tensors may be freed after every static destructor has run.
    // Priority 1, above the default allocator's 0, so LibTorch takes it.
    c10::SetCPUAllocator(new CountingAllocator(c10::GetCPUAllocator()), /*priority=*/1);
    return true;
  }();
  (void)installed;
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

}  // namespace sweep
