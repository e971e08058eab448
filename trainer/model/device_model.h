// The run's model on its compute device: the device a rank uses, the model built there
// with its parameters in flat buffers, each micro-batch's tokens moved to it, autocast as
// the run's precision asks, and the checks on what the model's loss() returns.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "flat_params.h"    // FlatParams
#include "run_config.h"     // RunConfig
#include "sweep/trainer.h"  // Model, ModelSpec, LossSum
#include "torch_compat.h"   // AutocastGuard
#include "train_options.h"  // TrainOptions

namespace sweep {

/// The device forward and backward run on. CUDA: GPU local_rank modulo the GPU count,
/// with deterministic math unless in benchmark mode; cuBLAS reads its workspace setting
/// when it starts.
torch::Device compute_device(const TrainOptions& opt, bool deterministic);

/// A model of the registry on the run's device, and the checks on what it gives back.
class DeviceModel {
 public:
  DeviceModel(const RunConfig& cfg, torch::Device device) : cfg_(cfg), device_(device) {}

  /// Builds the model of `spec` on the device and returns its parameters as flat buffers.
  /// Throws ConfigError when the factory rejects its keys' values.
  FlatParams build(const ModelSpec& spec);
  /// The model build() made.
  Model& model() { return *model_; }
  const Model& model() const { return *model_; }
  /// Where forward and backward run.
  torch::Device device() const { return device_; }
  /// Forward and backward run on the host (the CPU).
  bool on_host() const { return device_.is_cpu(); }

  /// Off the host: allocates the pinned host buffer that batch() stages tokens through.
  void pin_batch_buffer();
  /// A micro-batch of host tokens (micro_batch rows of seq_len + 1) as the model's input,
  /// on the compute device.
  torch::Tensor batch(const int64_t* tokens);
  /// Autocast as the run's precision asks (bf16; fp16 on CUDA) for as long as `guard` lives.
  void autocast(std::optional<compat::AutocastGuard>& guard) const;
  /// Checks what the model's loss() returned for a micro-batch.
  void check_loss(const LossSum& ls) const;
  /// A leaf-aware model's per-leaf losses [leaves]; throws naming the model when it gave none.
  torch::Tensor per_leaf(const LossSum& ls, int64_t leaves) const;
  /// Throws naming the model when its parameters are no longer the ones in `flat`.
  void check_params_unchanged(const FlatParams& flat, int64_t step) const;
  /// "model 'KIND': " + what, for the errors about a model.
  std::string error(const std::string& what) const { return "model '" + cfg_.model.kind + "': " + what; }

 private:
  const RunConfig& cfg_;
  torch::Device device_;
  std::unique_ptr<Model> model_;
  torch::Tensor pinned_batch_;  // host staging for the device's batches (off the host only)
};

}  // namespace sweep
