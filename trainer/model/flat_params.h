// The flat parameter and gradient buffers: every parameter of the model lives in one fp32
// vector (and its gradient in another), in the module's registration order, so reduction,
// optimizer, checksums and checkpoints see one vector whatever the model. The module's
// parameter tensors are views into the buffers; ZeRO 2/3 drop and rebind the buffers
// between steps.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "record.h"  // ParamInfo

namespace sweep {

struct FlatParams {
  torch::Tensor params, grads;  ///< full-size, on the host; undefined while released (ZeRO 2/3)
  std::vector<ParamInfo> table;
  std::vector<torch::Tensor> handles;  ///< the module's parameter tensors, table order
  int64_t n = 0;
  /// Off the CPU, the module's tensors are views of these device buffers instead; each
  /// step copies the host parameters in, and each micro-batch's gradient out.
  torch::Device device{torch::kCPU};
  torch::Tensor dev_params, dev_grads;

  bool on_host() const { return device.is_cpu(); }
  /// Points the module's parameters at the current buffer (or at nothing, released).
  void bind_params();
  /// A defined grad that is a view of the flat buffer: autograd accumulates into it in
  /// place, and a parameter that gets no gradient (an idle expert) stays zero.
  void bind_grads();
  /// Before forward: the device gets the host parameters (a no-op on the CPU).
  void push_params() {
    if (!on_host()) dev_params.copy_(params);
  }
  /// Before a micro-batch's backward: the gradient buffer it accumulates into is zero.
  void zero_grads() { (on_host() ? grads : dev_grads).zero_(); }
  /// After it: the host buffer holds that gradient (a no-op on the CPU).
  void pull_grads() {
    if (!on_host()) grads.copy_(dev_grads);
  }
  /// "" when `module` still has exactly the parameters flattened (the same tensors, in
  /// the same order); otherwise what changed, for an error naming the model.
  std::string changed(torch::nn::Module& module) const;
};

/// Moves the parameters of `module` (already on `device`) into flat buffers.
FlatParams flatten(torch::nn::Module& module, torch::Device device);

}  // namespace sweep
