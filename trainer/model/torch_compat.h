// The one place that knows which LibTorch it is built against (Debian's 1.13 CPU build,
// or a CUDA LibTorch 2.x from an installed PyTorch). Everything else calls these.
#pragma once

#include <ATen/Version.h>  // show_config
#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cctype>
#include <cstring>
#include <mutex>
#include <string>

/// True when built against LibTorch MAJOR.MINOR or newer.
#define SWEEP_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace sweep::compat {

/// The instruction set LibTorch's vectorised CPU kernels run ("default", "avx2",
/// "avx512"; ATEN_CPU_CAPABILITY lowers it): their bits can differ from one to the next.
/// (get_cpu_capability is not exported by every build: read from show_config's line
/// "CPU capability usage: AVX2".)
inline std::string aten_cpu_isa() {
  const std::string config = at::show_config(), tag = "CPU capability usage: ";
  const size_t at = config.find(tag);
  if (at == std::string::npos) return "";
  std::string isa = config.substr(at + tag.size(), config.find('\n', at) - at - tag.size());
  for (char& ch : isa) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return isa;
}

/// Turns autocast on or off for `device` with compute dtype `dtype`; returns a guard
/// that restores the previous state (and clears the cast cache) when it goes.
class AutocastGuard {
 public:
  AutocastGuard(torch::DeviceType device, at::ScalarType dtype, bool enabled) : device_(device) {
#if SWEEP_TORCH_AT_LEAST(2, 4)
    prev_enabled_ = at::autocast::is_autocast_enabled(device);
    prev_dtype_ = at::autocast::get_autocast_dtype(device);
    at::autocast::set_autocast_enabled(device, enabled);
    at::autocast::set_autocast_dtype(device, dtype);
#else
    if (device == torch::kCPU) {
      prev_enabled_ = at::autocast::is_cpu_enabled();
      prev_dtype_ = at::autocast::get_autocast_cpu_dtype();
      at::autocast::set_cpu_enabled(enabled);
      at::autocast::set_autocast_cpu_dtype(dtype);
    } else {
      prev_enabled_ = at::autocast::is_enabled();
      prev_dtype_ = at::autocast::get_autocast_gpu_dtype();
      at::autocast::set_enabled(enabled);
      at::autocast::set_autocast_gpu_dtype(dtype);
    }
#endif
  }
  ~AutocastGuard() {
#if SWEEP_TORCH_AT_LEAST(2, 4)
    at::autocast::set_autocast_enabled(device_, prev_enabled_);
    at::autocast::set_autocast_dtype(device_, prev_dtype_);
#else
    if (device_ == torch::kCPU) {
      at::autocast::set_cpu_enabled(prev_enabled_);
      at::autocast::set_autocast_cpu_dtype(prev_dtype_);
    } else {
      at::autocast::set_enabled(prev_enabled_);
      at::autocast::set_autocast_gpu_dtype(prev_dtype_);
    }
#endif
    at::autocast::clear_cache();
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  torch::DeviceType device_;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kFloat;
};

/// Whether autocast is on for CPU tensors, and to which dtype.
inline bool cpu_autocast_on() {
#if SWEEP_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(torch::kCPU);
#else
  return at::autocast::is_cpu_enabled();
#endif
}
inline at::ScalarType cpu_autocast_dtype() {
#if SWEEP_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(torch::kCPU);
#else
  return at::autocast::get_autocast_cpu_dtype();
#endif
}

/// While it lives, ops on CPU tensors run in the dtypes they are given, autocast or not.
class NoCpuAutocast {
 public:
  NoCpuAutocast() : guard_(c10::DispatchKeySet(c10::DispatchKey::AutocastCPU)) {}

 private:
  c10::impl::ExcludeDispatchKeyGuard guard_;
};

/// CUDA math. Deterministic (`on`): cuDNN deterministic and not autotuned, no TF32 in
/// matmuls or convolutions (cuBLAS's workspace setting is an environment variable, set
/// before CUDA starts). Benchmark mode (train.deterministic false): cuDNN autotuned and
/// free to pick nondeterministic algorithms, TF32 allowed. The calls exist, as no-ops, in a
/// CPU-only LibTorch.
inline void set_cuda_determinism(bool on) {
  auto& ctx = at::globalContext();
  ctx.setDeterministicCuDNN(on);
  ctx.setBenchmarkCuDNN(!on);
  ctx.setAllowTF32CuBLAS(!on);
  ctx.setAllowTF32CuDNN(!on);
}

/// Serialized state of the default CPU generator (for checkpoints).
inline std::string cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  torch::Tensor t = gen.get_state();
  return std::string(static_cast<const char*>(t.data_ptr()), size_t(t.numel()));
}

/// Restores a state returned by cpu_rng_state().
inline void set_cpu_rng_state(const std::string& bytes) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  torch::Tensor t = torch::empty({int64_t(bytes.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  gen.set_state(t);
}

}  // namespace sweep::compat
