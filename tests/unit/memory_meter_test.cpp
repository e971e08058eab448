// trainer/step/memory_meter.h: the counting allocator under LibTorch's CPU tensors.
#include "memory_meter.h"

#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

using sweep::TensorMemoryMeter;

TEST(TensorMemoryMeter, CountsTensorsWhileTheyLiveAndKeepsTheWindowsPeak) {
  auto& meter = TensorMemoryMeter::instance();
  ASSERT_TRUE(meter.installed());
  const int64_t before = meter.live();
  meter.start_window();
  {
    torch::Tensor a = torch::empty({1 << 20}, torch::kFloat);  // 4 MiB
    EXPECT_EQ(meter.live() - before, int64_t(4) << 20);
    torch::Tensor b = torch::ones({1 << 18}, torch::kFloat);  // 1 MiB more
    EXPECT_EQ(meter.live() - before, int64_t(5) << 20);
  }
  EXPECT_EQ(meter.live(), before);
  EXPECT_EQ(meter.window_peak() - before, int64_t(5) << 20);
  meter.start_window();
  EXPECT_EQ(meter.window_peak(), before);
}

TEST(TensorMemoryMeter, KeepsLibTorchsRawAllocationContract) {
  // Kernels ask the CPU allocator for scratch through raw_allocate, which requires the
  // context to be the data pointer and frees through raw_deleter().
  TensorMemoryMeter::instance();
  c10::Allocator* alloc = c10::GetCPUAllocator();
  const int64_t before = TensorMemoryMeter::instance().live();
  void* p = alloc->raw_allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);  // the default allocator's alignment
  EXPECT_EQ(TensorMemoryMeter::instance().live() - before, 1000);
  alloc->raw_deallocate(p);
  EXPECT_EQ(TensorMemoryMeter::instance().live(), before);
  // bf16 matmuls take that path on this LibTorch.
  torch::Tensor x = torch::randn({64, 64}).to(torch::kBFloat16);
  EXPECT_EQ(torch::mm(x, x).sizes(), (std::vector<int64_t>{64, 64}));
}

TEST(PeakResidentBytes, IsAtLeastWhatTheTestTouched) {
  std::vector<char> touched(size_t(64) << 20, 1);
  EXPECT_GE(sweep::peak_resident_bytes(), int64_t(64) << 20);
  EXPECT_EQ(touched[12345], 1);
}
