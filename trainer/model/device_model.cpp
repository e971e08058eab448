// The run's model on its compute device (device_model.h).
#include "device_model.h"

#include <cstdlib>
#include <stdexcept>

namespace sweep {

torch::Device compute_device(const TrainOptions& opt, bool deterministic) {
  if (opt.device == "cpu") return torch::Device(torch::kCPU);
  if (opt.device != "cuda") throw ConfigError("--device: expected cpu or cuda, got '" + opt.device + "'");
  if (!torch::cuda::is_available())
    throw ConfigError("--device cuda: no CUDA device is visible, or this LibTorch is built without CUDA");
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  compat::set_cuda_determinism(deterministic);
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(opt.local_rank % int(torch::cuda::device_count())));
}

FlatParams DeviceModel::build(const ModelSpec& spec) {
  // fp16 on the CPU is emulated in the model; on CUDA it is autocast, like bf16.
  const bool fp16_emulated = cfg_.train.precision == "fp16" && device_.is_cpu();
  try {
    model_ = spec.make(ModelArgs(cfg_, fp16_emulated));
  } catch (const std::invalid_argument& e) {  // the factory rejects its keys' values
    throw ConfigError(error(e.what()));
  }
  if (!model_) throw std::runtime_error(error("its factory returned no model"));
  model_->module().to(device_);  // the same initial values: they were drawn on the CPU
  FlatParams flat;
  try {
    flat = flatten(model_->module(), device_);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(error(e.what()));
  }
  if (flat.n == 0) throw std::runtime_error(error("it has no parameters to train"));
  return flat;
}

void DeviceModel::pin_batch_buffer() {
  if (!device_.is_cpu())
    pinned_batch_ = torch::empty({cfg_.train.micro_batch, cfg_.model.seq_len + 1}, torch::kLong).pin_memory();
}

torch::Tensor DeviceModel::batch(const int64_t* tokens) {
  torch::Tensor batch =
      torch::from_blob(const_cast<int64_t*>(tokens), {cfg_.train.micro_batch, cfg_.model.seq_len + 1}, torch::kLong);
  if (device_.is_cpu()) return batch;
  // Through a pinned buffer, so the copy can overlap; the loss's item() waits for it.
  pinned_batch_.copy_(batch);
  return pinned_batch_.to(device_, /*non_blocking=*/true);
}

void DeviceModel::autocast(std::optional<compat::AutocastGuard>& guard) const {
  const std::string& p = cfg_.train.precision;
  if (p == "bf16") guard.emplace(device_.type(), at::kBFloat16, true);
  if (p == "fp16" && !device_.is_cpu()) guard.emplace(device_.type(), at::kHalf, true);
}

void DeviceModel::check_loss(const LossSum& ls) const {
  if (!ls.sum.defined() || ls.sum.dim() != 0 || !ls.sum.is_floating_point())
    throw std::runtime_error(error("loss() returned " +
                                   (ls.sum.defined() ? "a " + std::string(c10::toString(ls.sum.scalar_type())) +
                                                           " tensor of shape " + c10::str(ls.sum.sizes())
                                                     : std::string("no tensor")) +
                                   "; expected the summed loss as a floating-point scalar (0-dim) tensor"));
  if (ls.targets < 1)
    throw std::runtime_error(
        error("loss() reported " + std::to_string(ls.targets) + " targets for a micro-batch; expected at least 1"));
}

torch::Tensor DeviceModel::per_leaf(const LossSum& ls, int64_t leaves) const {
  if (!ls.per_leaf.defined() || ls.per_leaf.dim() != 1 || ls.per_leaf.size(0) != leaves)
    throw std::runtime_error(error(
        "it is leaf-aware, but loss() returned " +
        (ls.per_leaf.defined() ? "per_leaf of shape " + c10::str(ls.per_leaf.sizes()) : std::string("no per_leaf")) +
        "; expected [" + std::to_string(leaves) + "] (sweep::leaf::sum_per_leaf)"));
  return ls.per_leaf;
}

void DeviceModel::check_params_unchanged(const FlatParams& flat, int64_t step) const {
  // A parameter registered or replaced after construction is not in the flat buffer: it
  // would train outside every guarantee.
  if (const std::string what = flat.changed(model_->module()); !what.empty())
    throw std::runtime_error(error("its parameters changed during step " + std::to_string(step) + ": " + what));
}

}  // namespace sweep
