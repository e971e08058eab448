// What the run's record says about it before the first step (record_header.h).
#include "record_header.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "data_source.h"    // TokenSource
#include "environment.h"    // collect_environment
#include "model_schema.h"   // kDecoderKind
#include "text.h"           // join, exact_double
#include "train_options.h"  // TrainOptions

namespace sweep {
namespace {

/// This program's path, for the record: `sweep reproduce` starts it again.
std::string self_path() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

}  // namespace

RecordHeader record_header(const RunFacts& facts) {
  const RunConfig& cfg = *facts.cfg;
  const LeafPlan& leaves = *facts.leaves;
  const int world = facts.world_size;
  const bool on_host = facts.device.empty();
  const bool fp16 = cfg.train.precision == "fp16", bf16 = cfg.train.precision == "bf16";
  const bool decoder = cfg.model.kind == kDecoderKind;
  RecordHeader header;
  header.run_id = facts.run_id;
  header.sweep_id = facts.opt->sweep_id;
  header.config_yaml = to_yaml(cfg);
  header.config = to_flat(cfg);
  header.environment = collect_environment(cfg);
  header.environment.emplace_back("world_size", std::to_string(world));
  // hosts: each host once, in the order of its first rank; rank_hosts: rank r's host at r.
  std::vector<std::string> distinct;
  for (const auto& h : facts.rank_hosts)
    if (std::find(distinct.begin(), distinct.end(), h) == distinct.end()) distinct.push_back(h);
  for (auto& [k, v] : header.environment)
    if (k == "hosts")
      v = join(distinct, ",");
    else if (k == "rank_hosts")
      v = join(facts.rank_hosts, ",");
  if (!on_host) {
    for (auto& [k, v] : header.environment)
      if (k == "device")
        v = facts.device + " (of " + std::to_string(facts.device_count) +
            (cfg.deterministic() ? "; cuDNN deterministic, TF32 off, CUBLAS_WORKSPACE_CONFIG " +
                                       std::string(std::getenv("CUBLAS_WORKSPACE_CONFIG")) + ")"
                                 : "; benchmark mode: cuDNN autotuned, TF32 on)");
      else if (k == "cuda")
        v = "available";
  }
  header.environment.emplace_back("data.source", facts.source->describe());
  header.environment.emplace_back("data.entropy_floor", exact_double(facts.source->entropy_floor()));
  if (facts.eval_source) header.environment.emplace_back("data.eval_source", facts.eval_source->describe());
  header.eval = facts.eval_source != nullptr;
  header.moe_layers = facts.moe_layers, header.moe_experts = facts.moe_experts;
  if (on_host)
    header.environment.emplace_back("precision.cpu",
                                    fp16   ? (decoder ? "fp16 emulated: fp16-rounded matmul inputs, fp32 accumulation"
                                                      : "fp16: dynamic loss scale; fp16 rounding is the model's own")
                                    : bf16 ? "bf16 autocast"
                                           : "fp32");
  else
    header.environment.emplace_back("precision.cuda", fp16                  ? "fp16 autocast"
                                                      : bf16                ? "bf16 autocast"
                                                      : cfg.deterministic() ? "fp32, TF32 off"
                                                                            : "fp32, TF32 on");
  // Which program trained it: `sweep reproduce` starts a model of its own again.
  header.environment.emplace_back("trainer", self_path());
  header.environment.emplace_back("trainer.models", join(facts.model_kinds));
  if (cfg.train.leaf > 0)
    header.environment.emplace_back(
        "leaf.path", leaves.fused ? "fused: one forward and backward per micro-batch, through the leaf-aware layers"
                                  : std::string("split: one forward and backward per leaf (") +
                                        (facts.model_leaf_aware ? "leaf-aware layers run on the host only"
                                                                : "the model is not built from the leaf-aware layers") +
                                        ")");
  if (leaves.sums_subtrees) {
    // What the reduction moves beyond one partial per rank: each extra subtree of a rank
    // goes to every other rank's shard.
    const int64_t n = int64_t(facts.layout->n);
    size_t most = 0;
    int64_t extra = 0;
    for (int s = 0; s < world; ++s) {
      most = std::max(most, leaves.rank_covers[size_t(s)].size());
      extra += int64_t(leaves.rank_covers[size_t(s)].size() - 1) * int64_t(n - int64_t(facts.layout->size(s))) * 4;
    }
    header.environment.emplace_back("reduction.subtrees", std::to_string(most) + " at most per rank; " +
                                                              std::to_string(extra) +
                                                              " bytes per step beyond one partial sum per rank");
  }
  header.params = *facts.params;
  header.world_size = world;
  return header;
}

}  // namespace sweep
