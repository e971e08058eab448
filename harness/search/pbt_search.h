// Running a pbt search (search.h: kind pbt): population-based training (Jaderberg et al.
// 2017, "Population Based Training of Neural Networks"), on a logical clock. Members are
// the space's first `population` draws. Every member trains to the next decision step
// (its run stops there with a checkpoint, as a halving rung does); once every member has
// its result at that step, or failed for good, the search ranks them (by `metric`, ties by
// member number) and each member of the bottom quantile, and each without a result, forks
// from a top member (a seeded draw) at its checkpoint, with every key perturbed (x down or
// x up, a choice key to a neighbour) or, with probability `resample`, drawn afresh. The
// others go on from their own checkpoints. A fork is `sweep fork`'s (fork_config): a new
// run whose record names its parent and step, so a member's lineage is the chain of its
// records' parents. Decisions are a function of the seed, the member numbers and their
// metrics at the step: never of arrival order or launch.parallel.
//
// search.log holds every decision; a driver started again (after a kill) decides the
// generations its log holds again from the records and stops if they differ (a changed
// record or checkpoint: each fork names its parent checkpoint's digest), then goes on.
#pragma once

#include <string>
#include <vector>

#include "grid.h"            // SweepSpec, GridPoint
#include "halving_search.h"  // RunRung
#include "sweep_run.h"       // SweepSummary

namespace sweep {

/// Runs the search generation by generation and writes <out>/search.log after each.
/// Stops early when a generation was stopped by a signal, or when a generation its log
/// had decided is decided otherwise now (stderr says which line; the summary counts one
/// failure). The summary counts runs, each once.
SweepSummary run_pbt_search(const SweepSpec& spec, const std::vector<GridPoint>& points, const std::string& out_dir,
                            const RunRung& run_rung);

}  // namespace sweep
