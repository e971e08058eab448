#include "pbt_plan.h"

#include <algorithm>
#include <set>
#include <string>

#include "text.h"  // significant

namespace sweep {
namespace {

/// Why a fork cannot change `key`, or "" when it can.
std::string unforkable(const std::string& key) {
  const auto starts = [&](const char* p) { return key.rfind(p, 0) == 0; };
  if (starts("model.")) return "it changes the model, and a fork continues the parent's parameters";
  if (starts("dist.") || key == "train.micro_batch" || key == "train.accum" || key == "train.threads")
    return "it changes the layout, which a member keeps";
  if (starts("data.")) return "it changes the data a member reads, which its checkpoint has read part of";
  if (key == "train.steps") return "it is the budget (train.steps), the same for every member";
  if (key == "train.seed") return "it is the run's seed, not a hyperparameter";
  if (starts("train.fork_") || key == "train.lr_switch_step" || key == "train.lr_before_switch")
    return "the search sets it when a member forks";
  if (key == "train.checkpoint_every" || key == "train.keep_checkpoints")
    return "the members fork from their checkpoints, which the search needs the same in every member";
  return "";
}

}  // namespace

std::vector<int64_t> pbt_decision_steps(const SearchSpec& s, int64_t budget) {
  std::vector<int64_t> steps;
  const int64_t most = s.interval > 0 ? budget / s.interval - 1 : 0;
  const int64_t n = s.generations > 0 ? std::min(s.generations, most) : most;
  for (int64_t g = 1; g <= n; ++g) steps.push_back(g * s.interval);
  return steps;
}

void check_pbt(const SweepSpec& spec, const std::vector<GridPoint>& points) {
  const SearchSpec& s = spec.search;
  const std::string kind = s.where + ": key 'search.kind': ";
  if (!spec.program.argv.empty())
    throw ConfigError(kind + "a pbt member forks from another member's checkpoint (sweep fork), which starts " +
                      "sweep-train or a launch.trainer program; a grid's program restores only its own checkpoint");
  const std::vector<KeyDoc> docs =
      points.empty() ? std::vector<KeyDoc>{} : describe_keys(points.front().config.model.kind);
  for (const SearchDim& d : s.space) {
    if (const std::string why = unforkable(d.key); !why.empty())
      throw ConfigError(d.where + ": key 'search.space." + d.key + "': a pbt search cannot perturb it: " + why);
    if (d.kind == "choice") continue;
    const auto doc = std::find_if(docs.begin(), docs.end(), [&](const KeyDoc& k) { return k.key == d.key; });
    if (doc != docs.end() && doc->type != "integer" && doc->type != "real")
      throw ConfigError(d.where + ": key 'search.space." + d.key + "': a pbt search perturbs a " + d.kind +
                        " key by factors, and this key is not a number (" + doc->type +
                        "); list its values as {choice: [...]}, whose neighbours it moves to");
  }
  // The schedule needs train.min_lr <= the learning rate, before a fork's step too
  // (train.lr_before_switch: its parent's), and a fork moves only its learning rate (a
  // min_lr_ratio's min_lr moves with it, above the parent's rate when it moves up far):
  // every rate the search may reach must be at least every member's min_lr.
  for (const SearchDim& d : s.space)
    if (d.key == "train.lr")
      for (const GridPoint& p : points)
        if (p.config.train.min_lr > d.lo)
          throw ConfigError(d.where + ": key 'search.space.train.lr': a pbt member's learning rate may move down to " +
                            significant(d.lo, 6) + ", and member " + p.id + " has train.min_lr " +
                            significant(p.config.train.min_lr, 6) +
                            " above it; the schedule needs min_lr <= the learning rate before and after a fork's "
                            "step: set train.min_lr at most the space's lower bound (not train.min_lr_ratio)");
  if (int64_t(points.size()) != s.population)
    throw ConfigError(kind + "a pbt search trains search.population (" + std::to_string(s.population) +
                      ") members, one run each, and the grid makes " + std::to_string(points.size()) +
                      " runs; give one seed (a member is one run)");
  if (points.empty()) return;
  const RunConfig& c = points.front().config;
  const int64_t budget = c.train.steps;
  for (const GridPoint& p : points)
    if (p.config.train.steps != budget)
      throw ConfigError(kind + "a pbt search's members train one train.steps; points have " + std::to_string(budget) +
                        " and " + std::to_string(p.config.train.steps) + " (put train.steps in base)");
  if (budget % s.interval != 0 || s.interval >= budget)
    throw ConfigError(s.interval_where + ": key 'search.interval': " + std::to_string(s.interval) +
                      " does not divide train.steps " + std::to_string(budget) +
                      " into two intervals or more; expected a divisor of it below it");
  const int64_t most = budget / s.interval - 1;
  if (s.generations > most)
    throw ConfigError(s.generations_where + ": key 'search.generations': " + std::to_string(s.generations) +
                      " decisions, but train.steps " + std::to_string(budget) + " / interval " +
                      std::to_string(s.interval) + " leaves room for " + std::to_string(most) +
                      "; expected <= " + std::to_string(most));
  // A member writes a checkpoint at every decision it reaches (its stop) and every
  // train.checkpoint_every steps; `sweep reproduce` of a fork starts from its parent's
  // checkpoint at the fork's step, so none may be deleted.
  std::set<int64_t> written;
  for (int64_t st : pbt_decision_steps(s, budget)) written.insert(st);
  for (int64_t st = c.train.checkpoint_every; c.train.checkpoint_every > 0 && st <= budget;
       st += c.train.checkpoint_every)
    written.insert(st);
  if (c.train.keep_checkpoints < int64_t(written.size()))
    throw ConfigError(kind + "a pbt member may write " + std::to_string(written.size()) +
                      " checkpoints (one at each decision" +
                      (c.train.checkpoint_every > 0 ? std::string(" and every train.checkpoint_every steps") : "") +
                      "), and each may be the parent checkpoint of a fork that `sweep reproduce` starts from; " +
                      "train.keep_checkpoints is " + std::to_string(c.train.keep_checkpoints) +
                      ": expected >= " + std::to_string(written.size()) +
                      (c.train.checkpoint_every > 0 ? std::string()
                                                    : " (it applies with train.checkpoint_every > 0: set it to the "
                                                      "interval)"));
}

}  // namespace sweep
