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

}  // namespace sweep
