// ZeRO sharding of the flat vectors (zero_shards.h).
#include "zero_shards.h"

#include <torch/torch.h>

#include <algorithm>

#include "flat_params.h"  // FlatParams

namespace sweep {

void ZeroShards::plan(size_t n, int world, int rank, int64_t zero_stage) {
  stage = zero_stage;
  layout = shard_layout(n, world);
  shard_begin = layout.begin(rank), shard_size = layout.size(rank);
  adam_m.assign(stage >= 1 ? shard_size : n, 0.0f);
  adam_v.assign(adam_m.size(), 0.0f);
  if (stage >= 2) grad_shard.assign(shard_size, 0.0f);
}

void ZeroShards::gather_params(Communicator& comm, FlatParams& flat) const {
  if (stage != 3) return;
  flat.params = torch::empty({flat.n}, torch::kFloat);
  std::copy(param_shard.begin(), param_shard.end(), flat.params.data_ptr<float>() + shard_begin);
  allgather_shards(comm, flat.params.data_ptr<float>(), layout);
  flat.bind_params();
}

void ZeroShards::release_params(FlatParams& flat) const {
  if (stage != 3) return;
  flat.params = torch::Tensor();
  flat.bind_params();
}

void ZeroShards::shard_buffers(FlatParams& flat) {
  if (stage == 3) {
    const float* params = flat.params.data_ptr<float>();
    param_shard.assign(params + shard_begin, params + shard_begin + shard_size);
    flat.params = torch::Tensor();
    flat.bind_params();
  }
  if (stage >= 2) {
    flat.grads = torch::Tensor();
    flat.bind_grads();
  }
}

void ZeroShards::allocate_grads(FlatParams& flat) const {
  if (stage < 2) return;
  flat.grads = torch::zeros({flat.n}, torch::kFloat);
  flat.bind_grads();
}

float* ZeroShards::optimizer_gradient(FlatParams& flat, float* grads, size_t& size) {
  if (stage < 2) {
    size = size_t(flat.n);
    return grads;
  }
  std::copy(grads + shard_begin, grads + shard_begin + shard_size, grad_shard.begin());
  flat.grads = torch::Tensor();
  flat.bind_grads();
  size = shard_size;
  return grad_shard.data();
}

void ZeroShards::adamw_update(Communicator& comm, FlatParams& flat, const float* g, const AdamWStep& hp) {
  if (stage == 0) {
    adamw(flat.params.data_ptr<float>(), g, adam_m.data(), adam_v.data(), size_t(flat.n), hp);
  } else if (stage < 3) {
    float* p = flat.params.data_ptr<float>();
    adamw(p + shard_begin, g + (stage == 1 ? shard_begin : 0), adam_m.data(), adam_v.data(), shard_size, hp);
    allgather_shards(comm, p, layout);
  } else {
    adamw(param_shard.data(), g, adam_m.data(), adam_v.data(), shard_size, hp);
  }
}

std::vector<float> ZeroShards::gather_whole(Communicator& comm, const std::vector<float>& shard) const {
  std::vector<float> whole(layout.n, 0.0f);
  std::copy(shard.begin(), shard.end(), whole.begin() + long(shard_begin));
  allgather_shards(comm, whole.data(), layout);
  return whole;
}

int64_t ZeroShards::held_bytes() const {
  return int64_t(adam_m.capacity() + adam_v.capacity() + grad_shard.capacity() + param_shard.capacity() +
                 reduce_workspace.capacity()) *
         int64_t(sizeof(float));
}

}  // namespace sweep
