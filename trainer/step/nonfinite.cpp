#include "nonfinite.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "text.h"  // join

namespace sweep {

namespace {

std::string number(double x) { return std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"; }

/// The module text of the rank of the first non-finite loss (`rank`), else the first
/// rank's that has one.
std::string first_module(const NonfiniteStep& s, int64_t rank, Communicator& comm) {
  std::vector<char> mine(kModuleTextBytes, '\0'), all(kModuleTextBytes * size_t(comm.size()));
  if (s.module) std::copy_n(s.module->data(), std::min(s.module->size(), kModuleTextBytes - 1), mine.data());
  comm.allgather(mine.data(), kModuleTextBytes, all.data());
  auto text = [&](int64_t r) { return std::string(all.data() + size_t(r) * kModuleTextBytes); };
  if (rank >= 0 && rank < comm.size() && !text(rank).empty()) return text(rank);
  for (int64_t r = 0; r < comm.size(); ++r)
    if (!text(r).empty()) return text(r);
  return "";
}

}  // namespace

std::string locate_nonfinite(const NonfiniteStep& s, Communicator& comm) {
  std::vector<std::string> parts;
  const std::vector<double>& losses = *s.leaf_losses;
  const auto bad_loss = std::find_if(losses.begin(), losses.end(), [](double x) { return !std::isfinite(x); });
  int64_t bad_rank = -1;
  if (bad_loss != losses.end()) {
    const int64_t k = bad_loss - losses.begin(), per_rank = s.accum * s.leaves_per_micro_batch;
    const int64_t rank = k / per_rank, local = (k % per_rank) / s.leaves_per_micro_batch;
    bad_rank = rank;
    const int64_t global = rank * s.accum + local, micro_batches = int64_t(losses.size()) / s.leaves_per_micro_batch;
    std::string where = "rank " + std::to_string(rank) + ", its micro-batch " + std::to_string(local) +
                        " (global micro-batch " + std::to_string(global) + " of " + std::to_string(micro_batches);
    if (s.samples) {
      std::vector<std::string> ids;
      for (int64_t id : s.samples(global)) ids.push_back(std::to_string(id));
      where += "; samples " + join(ids, ", ");
    }
    parts.push_back(where + "), loss " + number(*bad_loss));
  }
  // The first non-finite element over every rank's part of the gradient.
  int64_t first = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < s.size; ++i)
    if (!std::isfinite(s.grad[i])) {
      first = s.begin + int64_t(i);
      break;
    }
  std::vector<int64_t> all(size_t(comm.size()));
  comm.allgather(&first, sizeof first, all.data());
  first = *std::min_element(all.begin(), all.end());
  if (first != std::numeric_limits<int64_t>::max() && s.table) {
    for (const ParamInfo& p : *s.table)
      if (first >= p.offset && first < p.offset + p.numel) {
        std::string g = "first non-finite gradient: " + p.name + "[" + std::to_string(first - p.offset) + "]";
        // Its value is on the rank that holds that element.
        if (first >= s.begin && first < s.begin + int64_t(s.size)) g += " = " + number(s.grad[first - s.begin]);
        parts.push_back(g);
        break;
      }
  }
  const std::string module = first_module(s, bad_rank, comm);
  if (!module.empty()) parts.push_back(module);
  return join(parts, "; ");
}

}  // namespace sweep
