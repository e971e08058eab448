// `sweep reproduce --lineage`: a forked run re-run with every run it descends from, each
// from the re-run before it, so that no checkpoint of the originals is read.
#include <algorithm>
#include <filesystem>
#include <set>

#include "reproduce.h"
#include "run_files.h"      // checkpoint_dir
#include "sweep_records.h"  // read_run_record
#include "text.h"           // printable

namespace fs = std::filesystem;

namespace sweep {

namespace {

/// One run of a lineage: its record, and where the part of it that is its own starts.
struct LineageLink {
  std::string path;  ///< its record.h5
  std::string id;    ///< its run directory's name
  Record record;
};

/// The run `target_path` names and the runs it was forked from, the first run first.
std::vector<LineageLink> lineage_chain(const std::string& target_path) {
  std::vector<LineageLink> chain;
  std::set<std::string> seen;
  std::string path = target_path;
  while (true) {
    LineageLink link{path, fs::path(path).parent_path().filename().string(), read_run_record(path)};
    if (!seen.insert(link.id).second)
      throw ConfigError(target_path + ": its lineage goes round in a circle through run " + printable(link.id));
    const Record& r = link.record;
    if (!chain.empty()) {
      // The child forked from this run at a step this run's record has.
      const int64_t at = chain.back().record.lineage.parent_step;
      if (r.steps.empty() || r.steps.back().step < at)
        throw ConfigError(chain.back().path + ": the run was forked from run " + printable(link.id) + " at step " +
                          std::to_string(at) + ", but that run's record ends " +
                          (r.steps.empty() ? std::string("before its first step")
                                           : "at step " + std::to_string(r.steps.back().step)));
    }
    const bool forked = r.lineage.kind == "forked";
    const std::string parent_id = r.lineage.parent_run_id;
    chain.push_back(std::move(link));
    if (!forked) break;
    const fs::path parent = fs::absolute(path).parent_path().parent_path() / parent_id / "record.h5";
    std::error_code ec;
    if (!fs::is_regular_file(parent, ec))
      throw ConfigError(path + ": the run was forked from run " + printable(parent_id) + " at step " +
                        std::to_string(chain.back().record.lineage.parent_step) + ", whose record " +
                        parent.lexically_normal().string() +
                        " is missing: the lineage cannot be re-run from step 0 (plain `sweep reproduce` re-runs "
                        "from the parent's checkpoint)");
    path = parent.lexically_normal().string();
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace

ReproduceResult reproduce_lineage(const ReproduceOptions& opt, ProcessRunner& runner) {
  if (opt.from_step > 0)
    throw ConfigError("--lineage re-runs every run of the lineage from step 0; it does not go with --from-step");
  if (!opt.fork_from.empty()) throw ConfigError("--lineage chooses each fork's checkpoint itself");
  const std::string target_path = resolve_record_path(opt.source);
  const std::vector<LineageLink> chain = lineage_chain(target_path);
  if (chain.size() == 1) {  // not forked: its own steps are all there is
    ReproduceResult res = reproduce(opt, runner);
    res.lines.insert(res.lines.begin() + (res.lines.empty() ? 0 : 1),
                     "lineage: the run was not forked; it is its whole lineage");
    return res;
  }

  const std::string out =
      opt.out_dir.empty() ? next_reproduce_dir(fs::path(target_path).parent_path().string()) : opt.out_dir;
  ReproduceResult res;
  res.out_dir = out;
  std::vector<std::string> parts;
  std::string fork_from;  // the previous part's re-run, as of the step the next run forked
  int64_t first = 1;      // the first step that is the part's own
  for (size_t k = 0; k < chain.size(); ++k) {
    const bool last = k + 1 == chain.size();
    ReproduceOptions o = opt;  // the layout, the overrides, the launch and the container
    o.source = chain[k].path;
    o.stop_at = last ? opt.stop_at : chain[k + 1].record.lineage.parent_step;
    o.fork_from = fork_from;
    o.out_dir = last ? out : out + "/lineage/" + std::to_string(k) + "-" + chain[k].id;
    const ReproduceResult part = reproduce(o, runner);
    const std::vector<StepMetrics>& rows = chain[k].record.steps;
    const int64_t end = o.stop_at > 0 ? o.stop_at : rows.empty() ? first - 1 : rows.back().step;
    const std::string what = "run " + chain[k].id + " (steps " + std::to_string(first) + "-" + std::to_string(end) +
                             ", part " + std::to_string(k + 1) + " of " + std::to_string(chain.size()) + ")";
    parts.push_back("  " + what + ": " + (part.lines.empty() ? "no verdict" : part.lines.front()));
    res.comparison = part.comparison;
    res.ran = part.ran;
    if (!part.reproduced()) {
      res.lines.push_back("not reproduced across its lineage: " + what + " " +
                          (part.ran ? "differs from its original" : "did not run to a record") +
                          "; the parts after it were not run");
      res.lines.insert(res.lines.end(), parts.begin(), parts.end());
      res.lines.insert(res.lines.end(), part.lines.begin() + (part.lines.empty() ? 0 : 1), part.lines.end());
      return res;
    }
    if (!last) {
      fork_from = checkpoint_dir(o.out_dir, o.stop_at);
      std::error_code ec;
      if (!fs::exists(fork_from + "/DONE", ec)) {
        res.ran = false;
        res.lines.push_back("not reproduced across its lineage: the re-run of " + what +
                            " left no complete checkpoint after step " + std::to_string(o.stop_at) + " (" + fork_from +
                            "), which its child forks from");
        res.lines.insert(res.lines.end(), parts.begin(), parts.end());
        return res;
      }
    }
    first = end + 1;
    if (last) {
      res.lines.push_back("reproduced bit-for-bit across its lineage: " + std::to_string(chain.size()) +
                          " runs, steps 1-" + std::to_string(end) +
                          ", each re-run from the re-run of its parent: no checkpoint of the originals was read");
      res.lines.insert(res.lines.end(), parts.begin(), parts.end());
      res.lines.insert(res.lines.end(), part.lines.begin() + (part.lines.empty() ? 0 : 1), part.lines.end());
    }
  }
  return res;
}

}  // namespace sweep
