// What a forward pass tells the trainer when it asks, module by module: the first module
// whose output held a non-finite value (with its input's statistics), and the test fault
// that poisons the embedding of some rows (fault.nan_sample). The built-in decoder reports
// to the running probe; with none running (every normal step) a report is one null test,
// so a normal step's cost and bits do not change.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sweep {

/// The first module of a forward whose output was non-finite.
struct NonfiniteModule {
  std::string name;                               ///< "embed", "layer1.attn", "head", ... (empty: none was)
  std::vector<int64_t> rows;                      ///< the batch rows (dim 0) whose output held a non-finite value
  double min = 0, max = 0, mean = 0, absmax = 0;  ///< of the module's input, over its finite values
  int64_t input_nonfinite = 0, input_numel = 0;   ///< non-finite values in the input, of all
};

struct ForwardProbe {
  std::vector<int64_t> poison_rows;  ///< rows whose embedding output becomes NaN (a test fault)
  bool poisoned = false;             ///< the model applied poison_rows
  bool watch = false;                ///< look for the first non-finite module output
  NonfiniteModule first;             ///< what watch found

  /// The module `name` (in forward order) mapped `in` to `out`: the first non-finite
  /// output, when watching and none was seen yet.
  void look(const std::string& name, const torch::Tensor& in, const torch::Tensor& out);
  /// The embedding output `x` [B, L, d], with poison_rows made NaN.
  torch::Tensor embedded(const torch::Tensor& x);
};

/// The running probe, or null (the trainer's thread only).
ForwardProbe* forward_probe();

/// Makes `probe` the running one for as long as it lives.
class ForwardProbeGuard {
 public:
  explicit ForwardProbeGuard(ForwardProbe* probe);
  ~ForwardProbeGuard();
  ForwardProbeGuard(const ForwardProbeGuard&) = delete;
  ForwardProbeGuard& operator=(const ForwardProbeGuard&) = delete;

 private:
  ForwardProbe* prev_;
};

/// "embed (rows 1; its input: min 3, max 60, mean 31.5, absmax 60, 0 of 32 non-finite)":
/// `rows` already in words (the caller knows which samples they are).
std::string describe(const NonfiniteModule& m, const std::string& rows);

}  // namespace sweep
