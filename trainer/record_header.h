// What the run's record says about it before the first step: the header of record.h5,
// with the environment entries the trainer adds to collect_environment's (hosts, device,
// data, precision path, leaf path, reduction subtrees). LibTorch-free: the trainer hands
// it facts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "canonical_allreduce.h"  // ShardLayout
#include "leaf_plan.h"            // LeafPlan
#include "record.h"               // RecordHeader, ParamInfo
#include "run_config.h"           // RunConfig

namespace sweep {

class TokenSource;    // data_source.h
struct TrainOptions;  // train_options.h

/// The facts of a run its header records besides the config; every pointer and reference
/// outlives the call.
struct RunFacts {
  const RunConfig* cfg = nullptr;        ///< the run's config: the header's config and YAML
  const TrainOptions* opt = nullptr;     ///< the options of the process: the sweep id
  std::vector<std::string> model_kinds;  ///< the kinds of model this program offers
  std::string run_id;
  int world_size = 1;                              ///< ranks in the job
  std::vector<std::string> rank_hosts;             ///< rank r's host name at r, for every rank
  std::string device;                              ///< the compute device's name (e.g. "cuda:0"); "" on the host
  int64_t device_count = 0;                        ///< CUDA devices visible; 0 on the host
  const TokenSource* source = nullptr;             ///< what the run trains on
  const TokenSource* eval_source = nullptr;        ///< held-out sequences; null when the run does not evaluate
  bool model_leaf_aware = false;                   ///< the model is built from the leaf-aware layers
  const LeafPlan* leaves = nullptr;                ///< the leaf path and the reduction's subtrees
  const std::vector<ParamInfo>* params = nullptr;  ///< the flat parameter table
  const ShardLayout* layout = nullptr;             ///< every rank's shard of the flat vector
  int64_t moe_layers = 0, moe_experts = 0;         ///< the model's routing (Model::take_routed_tokens)
};

/// The record's header for the run `facts` describes.
RecordHeader record_header(const RunFacts& facts);

}  // namespace sweep
