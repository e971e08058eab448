// Reading run records back in tests: the reader's error for a file, the completed records
// of a sweep directory, and whether two runs have the same bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "record.h"  // read_record, Record, RecordError

namespace sweep_test {

/// The message of the RecordError read_record(path) throws; "" when it reads fine.
inline std::string read_error(const std::filesystem::path& p) {
  try {
    sweep::read_record(p.string());
  } catch (const sweep::RecordError& e) {
    return e.what();
  }
  return "";
}

/// The completed records of a sweep directory, by run id (the name of the run's
/// directory under runs/). A run without record.h5 is left out; a record that does not
/// read throws.
inline std::map<std::string, sweep::Record> completed_records(const std::filesystem::path& sweep_dir) {
  std::map<std::string, sweep::Record> out;
  for (const auto& e : std::filesystem::directory_iterator(sweep_dir / "runs"))
    if (std::filesystem::exists(e.path() / "record.h5"))
      out[e.path().filename().string()] = sweep::read_record((e.path() / "record.h5").string());
  return out;
}

/// Equal bits; unlike ==, NaN equals the same NaN and 0.0 differs from -0.0.
inline bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// Where two runs' bits first part, in words; "" when they are the same: the same number
/// of steps with the same loss, gradient norm and loss scale bits at each, and the same
/// checksum rows (step and parameter checksum).
inline std::string bit_difference(const sweep::Record& a, const sweep::Record& b) {
  if (a.steps.size() != b.steps.size())
    return std::to_string(a.steps.size()) + " steps vs " + std::to_string(b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const sweep::StepMetrics &x = a.steps[i], &y = b.steps[i];
    const char* what = !same_bits(x.loss, y.loss)               ? "loss"
                       : !same_bits(x.grad_norm, y.grad_norm)   ? "grad norm"
                       : !same_bits(x.loss_scale, y.loss_scale) ? "loss scale"
                                                                : nullptr;
    if (what) return "step " + std::to_string(x.step) + ": " + what;
  }
  if (a.evals.size() != b.evals.size())
    return std::to_string(a.evals.size()) + " evaluations vs " + std::to_string(b.evals.size());
  for (size_t i = 0; i < a.evals.size(); ++i)
    if (a.evals[i].step != b.evals[i].step || !same_bits(a.evals[i].loss, b.evals[i].loss) ||
        a.evals[i].tokens != b.evals[i].tokens)
      return "evaluation " + std::to_string(i) + " (step " + std::to_string(a.evals[i].step) + "): held-out loss";
  // Gradient telemetry, at the steps both records took it (a resumed run has none before
  // its resume): each tensor's norm and the MoE routing are the same on every layout.
  for (const auto& x : a.telemetry)
    for (const auto& y : b.telemetry) {
      if (x.step != y.step) continue;
      const std::string at = "telemetry at step " + std::to_string(x.step) + ": ";
      if (x.tensor_grad_norm.size() != y.tensor_grad_norm.size() || x.routed_tokens != y.routed_tokens)
        return at + "routed tokens or tensor count";
      for (size_t t = 0; t < x.tensor_grad_norm.size(); ++t)
        if (!same_bits(x.tensor_grad_norm[t], y.tensor_grad_norm[t]))
          return at + "the gradient norm of tensor " + std::to_string(t);
    }
  if (a.checksums.size() != b.checksums.size())
    return std::to_string(a.checksums.size()) + " checksum rows vs " + std::to_string(b.checksums.size());
  for (size_t i = 0; i < a.checksums.size(); ++i)
    if (a.checksums[i].step != b.checksums[i].step || a.checksums[i].params != b.checksums[i].params)
      return "checksum row " + std::to_string(i) + " (step " + std::to_string(a.checksums[i].step) +
             "): parameters differ";
  return "";
}

/// Where two sweeps' records first part, in words; "" when every run of `a` is in `b`
/// with the same status and the same bits (bit_difference).
inline std::string sweep_bit_difference(const std::map<std::string, sweep::Record>& a,
                                        const std::map<std::string, sweep::Record>& b) {
  for (const auto& [id, r] : a) {
    const auto it = b.find(id);
    if (it == b.end()) return id + ": missing";
    if (it->second.status != r.status) return id + ": status " + r.status + " vs " + it->second.status;
    if (const std::string d = bit_difference(r, it->second); !d.empty()) return id + ": " + d;
  }
  return "";
}

}  // namespace sweep_test
