// What a record's gradient telemetry says, in words (results/SCHEMA.md, /ranks/grad_norm
// and /telemetry): each rank's own gradient against its peers', the largest tensor norms
// of the last row, and an MoE model's load and routing entropy per layer. `sweep show`
// prints it.
#pragma once

#include <string>
#include <vector>

#include "record.h"  // Record

namespace sweep {

/// One line per finding, empty for a record without telemetry:
///  - "rank gradient norms: median 0.41, 0.39, 0.44 (largest over the lower median of the
///    ranks: 1.13x, rank 2)": each rank's median over the steps that gave one;
///  - "rows: 9 (5 every, 3 spike, 1 last); at step 20: layer0.attn_wo 1.2, head 0.8, ...":
///    how many rows and why, and the `most` largest tensor norms of the last row;
///  - per MoE layer, over every row: "routing layer 0: 256 tokens, load max/mean 1.41
///    (expert 3), entropy 0.97 of the most": the busiest expert's share against an even
///    split, and the entropy of the load over ln(experts) (1 = even, 0 = one expert).
std::vector<std::string> telemetry_summary(const Record& r, size_t most = 3);

/// Why `sweep show --telemetry --step S` cannot show step `step` of `r` ("" when it can;
/// 0 asks for the default step): no telemetry at all, no such recorded step, or a step
/// with neither a /telemetry row nor rank gradient norms. Names the steps that have rows.
std::string telemetry_step_problem(const Record& r, int64_t step);

/// `sweep show --telemetry`: the telemetry at step `step` (0: the last /telemetry row, or
/// the last step when there are only rank norms) as aligned text lines: a title naming the
/// step and why its row was taken; each rank's own gradient norm and its ratio to the
/// ranks' lower median; the `most` largest tensor gradient norms; and per MoE layer its
/// tokens, load max/mean, busiest expert, entropy and tokens per expert. Numbers as "%.4g".
/// The step must pass telemetry_step_problem.
std::vector<std::string> telemetry_table(const Record& r, int64_t step, size_t most = 8);

}  // namespace sweep
