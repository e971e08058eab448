#include "flat_params.h"

namespace sweep {

void FlatParams::bind_params() {
  const torch::Tensor& src = on_host() ? params : dev_params;
  for (size_t i = 0; i < handles.size(); ++i)
    handles[i].set_data(src.defined() ? src.narrow(0, table[i].offset, table[i].numel).view(table[i].shape)
                                      : torch::empty({0}, torch::kFloat));
}

void FlatParams::bind_grads() {
  const torch::Tensor& dst = on_host() ? grads : dev_grads;
  for (size_t i = 0; i < handles.size(); ++i)
    handles[i].mutable_grad() =
        dst.defined() ? dst.narrow(0, table[i].offset, table[i].numel).view(table[i].shape) : torch::Tensor();
}

std::string FlatParams::changed(torch::nn::Module& module) const {
  const auto now = module.named_parameters(/*recurse=*/true);
  if (now.size() != handles.size())
    return "it has " + std::to_string(now.size()) + " parameter tensors, " + std::to_string(handles.size()) +
           " when it was made (register every parameter in the constructor)";
  for (size_t i = 0; i < handles.size(); ++i)
    if (now[i].value().unsafeGetTensorImpl() != handles[i].unsafeGetTensorImpl())
      return "parameter '" + now[i].key() + "' is not the tensor it was made with (replaced or re-registered " +
             "after construction)";
  return "";
}

FlatParams flatten(torch::nn::Module& module, torch::Device device) {
  FlatParams f;
  f.device = device;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (item.value().scalar_type() != torch::kFloat)
      throw std::invalid_argument("parameter '" + item.key() + "' is " +
                                  std::string(c10::toString(item.value().scalar_type())) +
                                  "; the flat buffer holds fp32 parameters");
    f.table.push_back({item.key(), item.value().sizes().vec(), f.n, item.value().numel()});
    f.handles.push_back(item.value());
    f.n += item.value().numel();
  }
  f.params = torch::empty({f.n}, torch::kFloat);
  for (size_t i = 0; i < f.handles.size(); ++i)
    f.params.narrow(0, f.table[i].offset, f.table[i].numel).copy_(f.handles[i].detach().reshape({-1}));
  f.grads = torch::zeros({f.n}, torch::kFloat);
  if (!f.on_host()) {
    f.dev_params = f.params.to(device);
    f.dev_grads = torch::zeros({f.n}, torch::TensorOptions().dtype(torch::kFloat).device(device));
  }
  f.bind_params();
  f.bind_grads();
  return f;
}

}  // namespace sweep
