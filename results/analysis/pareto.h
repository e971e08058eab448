// Judging runs on several objectives at once, one rule for the search that decides on it
// (harness/search/motpe.h) and the report that draws it: constraints on a run's figures
// ("memory_per_rank_mib <= 512"), constraint-domination (Deb et al., "A fast and elitist
// multiobjective genetic algorithm: NSGA-II", IEEE TEVC 2002: a feasible run beats an
// infeasible one, of two infeasible ones the smaller violation wins, of two feasible ones
// Pareto dominance decides), non-domination ranks, the hypervolume, and the greedy
// hypervolume subset selection that multi-objective TPE splits a front with (Ozaki et al.
// 2020/2022). Every function is a pure function of its arguments: no clock, no global
// state, the same order of floating-point operations on every machine.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace sweep {

/// `metric op bound`, as written in search.constraints: "memory_per_rank_mib <= 512".
struct MetricConstraint {
  std::string metric;  ///< a name record_metric knows (search_metric.h)
  std::string op;      ///< <=, <, >= or >
  double bound = 0;
  std::string bound_text;  ///< the bound as written
  /// "memory_per_rank_mib<=512": the form search.log's header keeps (no spaces).
  std::string text() const { return metric + op + bound_text; }
};

/// Parses "METRIC OP NUMBER" (spaces around OP optional). Returns "" and fills `out`, or
/// says what is wrong (the name is not checked here: the caller knows which it takes).
std::string parse_metric_constraint(const std::string& text, MetricConstraint* out);

/// How far `value` lies outside `c`: 0 inside, else the distance to the bound relative to
/// max(|bound|, 1) (so constraints in MiB and in loss add up on one scale); +inf when
/// `value` is not finite (unknown: worse than any known violation).
double constraint_violation(const MetricConstraint& c, double value);

/// One trial as a multi-objective search sees it.
struct ParetoEntry {
  /// Each objective, lower is better (a `max` objective negated). A trial with a
  /// non-finite one failed: it is worse than every trial that did not.
  std::vector<double> loss;
  double violation = 0;  ///< summed constraint_violation; 0 = feasible
  bool failed() const;
  bool feasible() const { return !failed() && violation == 0; }
};

/// Whether `a` dominates `b` under Pareto order: no objective worse, one better.
bool dominates(const std::vector<double>& a, const std::vector<double>& b);

/// Deb's constraint-domination rank of each entry, 0 best: feasible entries by
/// non-domination fronts (rank 0 = the Pareto front), then infeasible ones by their
/// violation (equal violations share a rank), then failed ones (one rank, last).
std::vector<size_t> domination_ranks(const std::vector<ParetoEntry>& entries);

/// The entries on the Pareto front: feasible and dominated by no feasible entry (indices,
/// ascending).
std::vector<size_t> pareto_front(const std::vector<ParetoEntry>& entries);

/// The hypervolume (area for two objectives) that `points` dominate below `ref`: the
/// measure of the union of the boxes [p, ref]. Points not below `ref` in every objective
/// add nothing.
double hypervolume(const std::vector<std::vector<double>>& points, const std::vector<double>& ref);

/// Optuna's reference point for a set of points: max(1.1 w, 0.9 w) per objective, w its
/// worst value, and 1e-12 where that is 0.
std::vector<double> reference_point(const std::vector<std::vector<double>>& points);

/// `count` of `points` chosen greedily, each adding the most hypervolume below `ref` to
/// those chosen before (ties: the earlier point): a (1 - 1/e) approximation of the subset
/// with the largest hypervolume (Guerreiro et al. 2016). Indices into `points`, in the
/// order chosen.
std::vector<size_t> greedy_hypervolume_subset(const std::vector<std::vector<double>>& points, size_t count,
                                              const std::vector<double>& ref);

}  // namespace sweep
