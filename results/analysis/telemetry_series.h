// The figures of a record's gradient telemetry (results/SCHEMA.md, /ranks/grad_norm and
// /telemetry), each computed by one function here, which `sweep show`, the report pages
// and the exports all call: an MoE layer's load (max over mean, busiest expert, routing
// entropy), the tensors whose gradient norms are largest, and where a step lies in the rows.
#pragma once

#include <cmath>  // NAN
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "record.h"  // Record

namespace sweep {

/// The load of one MoE layer: how its router spread the token slots over its experts.
struct ExpertLoad {
  double tokens = 0;           ///< token slots routed (a token counts once per top-k expert)
  double max_over_mean = NAN;  ///< the busiest expert's tokens over an even split: 1 even, E one expert
  int64_t busiest = -1;        ///< that expert (the first of equals); -1 without tokens
  double entropy = NAN;        ///< the entropy of the shares over ln(E): 1 even, 0 one expert (1 when E is 1)
};

/// The load of tokens per expert; NaN figures when no token was routed.
ExpertLoad expert_load(const std::vector<double>& tokens_per_expert);

/// Layer `layer`'s load at telemetry row `row` of `r`.
ExpertLoad expert_load_at(const Record& r, size_t row, int64_t layer);

/// Layer `layer`'s load over every telemetry row together.
ExpertLoad expert_load_pooled(const Record& r, int64_t layer);

/// True when `r` has routing telemetry: an MoE shape and rows that carry it.
bool has_routing(const Record& r);

/// True when `r` has any gradient telemetry: rank norms or /telemetry rows.
bool has_telemetry(const Record& r);

/// Indices into r.params, largest gradient norm first, by `norm(p)`: a non-finite norm
/// counts as the largest (a tensor that went NaN is what to look at), ties keep /params
/// order; at most `most`.
std::vector<size_t> tensors_by_norm(const std::vector<double>& norms, size_t most);

/// The `most` tensors whose gradient norm was largest at some telemetry row: each ranked
/// by its largest norm over the rows (tensors_by_norm of those maxima).
std::vector<size_t> largest_tensors(const Record& r, size_t most);

/// The index of the telemetry row of step `step`, or npos.
size_t telemetry_row_of(const Record& r, int64_t step);

/// The index into r.steps (and r.rank_grad_norm) of step `step`, or npos.
size_t step_index_of(const Record& r, int64_t step);

/// The telemetry rows' steps as text, "4, 8, 12" (the first and last few of a long list).
std::string telemetry_steps_text(const Record& r);

}  // namespace sweep
