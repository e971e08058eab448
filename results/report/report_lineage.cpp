// The runs `sweep resume` and `sweep fork` started from another run's checkpoint, in
// families (report.h, lineage_lines): one walk that every format prints.
#include <map>
#include <set>

#include "compare.h"  // lineage_changes
#include "report.h"

namespace sweep {

std::string lineage_change_text(const Record& parent, const Record& child) {
  std::string out;
  for (const ValueDiff& d : lineage_changes(parent.config, child.config))
    out += (out.empty() ? "" : "; ") + d.key + ": " + (d.a.empty() ? "(unset)" : d.a) + " -> " +
           (d.b.empty() ? "(unset)" : d.b);
  return out;
}

std::vector<LineageLine> lineage_lines(const SweepRecords& sweep) {
  std::map<std::string, size_t> by_id;
  for (size_t i = 0; i < sweep.runs.size(); ++i) by_id.emplace(sweep.runs[i].run_id, i);
  std::map<size_t, std::vector<size_t>> children;  // a parent among the records -> its children
  std::vector<size_t> orphans;                     // a child whose parent's record is not here
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    const RecordLineage& l = sweep.runs[i].lineage;
    if (l.kind.empty()) continue;
    const auto p = by_id.find(l.parent_run_id);
    if (p == by_id.end() || p->second == i)
      orphans.push_back(i);
    else
      children[p->second].push_back(i);
  }
  std::vector<LineageLine> out;
  std::set<size_t> drawn;
  for (const auto& [root, kids] : children) {
    // A family from its root: a parent that is nobody's child here (or, in a loop, the first met).
    const RecordLineage& rl = sweep.runs[root].lineage;
    const auto up = rl.kind.empty() ? by_id.end() : by_id.find(rl.parent_run_id);
    if (up != by_id.end() && children.count(up->second) && !drawn.count(up->second)) continue;
    if (drawn.count(root)) continue;
    std::vector<std::pair<size_t, int>> todo{{root, 0}};  // depth-first, with the depth
    while (!todo.empty()) {
      const auto [i, depth] = todo.back();
      todo.pop_back();
      if (!drawn.insert(i).second) continue;
      LineageLine line{i, root, depth, true, ""};
      if (i != root)
        line.changes = lineage_change_text(sweep.runs[by_id.at(sweep.runs[i].lineage.parent_run_id)], sweep.runs[i]);
      out.push_back(std::move(line));
      if (const auto k = children.find(i); k != children.end())
        for (auto it = k->second.rbegin(); it != k->second.rend(); ++it) todo.push_back({*it, depth + 1});
    }
  }
  for (size_t i : orphans) out.push_back({i, i, 0, false, ""});
  return out;
}

std::string lineage_text(const SweepRecords& sweep, const LineageLine& l) {
  const Record& r = sweep.runs[l.run];
  if (l.run == l.root && l.parent_here) return r.run_id;
  return r.run_id + ": " + r.lineage.kind + " from " + r.lineage.parent_run_id + " at step " +
         std::to_string(r.lineage.parent_step) + (l.parent_here ? "" : " (its parent's record is not among these)") +
         (l.changes.empty() ? "" : " (" + l.changes + ")");
}

}  // namespace sweep
