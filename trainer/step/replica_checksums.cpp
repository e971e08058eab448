// Parameter checksums and the replicas' check (replica_checksums.h).
#include "replica_checksums.h"

#include <stdexcept>
#include <string>

#include "checksum.h"  // flat_checksum, tensor_checksum

namespace sweep {
namespace {

/// Throws when another rank's parameters differ from this one's `mine` (collective).
void check_replicas(int64_t step, Communicator& comm, const ChecksumRow& mine, const std::vector<ParamInfo>& table) {
  const int world = comm.size();
  if (world == 1) return;
  std::vector<uint64_t> all(static_cast<size_t>(world));
  comm.allgather(&mine.params, sizeof(uint64_t), all.data());
  int other = -1;
  for (int r = 1; r < world; ++r)
    if (all[size_t(r)] != all[0]) other = r;
  if (other < 0) return;
  const size_t tensors_per_rank = mine.tensors.size();
  std::vector<uint64_t> tensors(tensors_per_rank * size_t(world));
  comm.allgather(mine.tensors.data(), tensors_per_rank * sizeof(uint64_t), tensors.data());
  std::string name = "?";
  for (size_t t = 0; t < tensors_per_rank; ++t)
    if (tensors[t] != tensors[size_t(other) * tensors_per_rank + t]) {
      name = table[t].name;
      break;
    }
  throw std::runtime_error("desync at step " + std::to_string(step) + ": rank 0 and rank " + std::to_string(other) +
                           " hold different parameters; first differing parameter: " + name);
}

}  // namespace

ChecksumRow checksum_row(int64_t step, const float* params, const std::vector<ParamInfo>& table, int64_t n) {
  ChecksumRow row{step, flat_checksum(params, size_t(n)), {}};
  for (const auto& p : table) row.tensors.push_back(tensor_checksum(params + p.offset, size_t(p.numel)));
  return row;
}

std::optional<ChecksumRow> checksum_if_due(int64_t step, const RunConfig& cfg, Communicator& comm, const float* params,
                                           const std::vector<ParamInfo>& table, const ZeroShards& zero) {
  // The evidence of the steps up to dist.diagnose_step names the parameters after each update.
  if (step % cfg.train.checksum_every != 0 && step != cfg.train.steps && step > cfg.dist.diagnose_step)
    return std::nullopt;
  std::vector<float> gathered;
  if (zero.stage == 3) {  // checksums need the whole vector: gather it for the moment
    gathered = zero.gather_whole(comm, zero.param_shard);
    params = gathered.data();
  }
  ChecksumRow row = checksum_row(step, params, table, int64_t(zero.layout.n));
  check_replicas(step, comm, row, table);
  return row;
}

}  // namespace sweep
