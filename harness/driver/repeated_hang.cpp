#include "repeated_hang.h"

#include <algorithm>
#include <regex>

#include "heartbeat.h"  // kNeverEntered: the words of the ranks that never entered
#include "sweep_dir.h"  // RunState, AttemptHang
#include "text.h"       // join, split

namespace sweep {
namespace {

std::vector<int> ascending(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

/// "1, 3" -> {1, 3}.
std::vector<int> rank_list(const std::string& text) {
  std::vector<int> out;
  for (const std::string& r : split(text, ','))
    if (const size_t at = r.find_first_not_of(' '); at != std::string::npos) out.push_back(std::stoi(r.substr(at)));
  return ascending(std::move(out));
}

/// "1 and 2", "1, 2 and 3".
std::string attempts_text(const std::vector<int>& attempts) {
  std::vector<std::string> items;
  items.reserve(attempts.size());
  for (int a : attempts) items.push_back(std::to_string(a));
  const std::string last = items.back();
  items.pop_back();
  return items.empty() ? last : join(items) + " and " + last;
}

}  // namespace

std::string HangSite::text() const {
  std::vector<std::string> items;
  items.reserve(ranks.size());
  for (int r : ranks) items.push_back(std::to_string(r));
  return "step " + std::to_string(step) + (ranks.size() == 1 ? " on rank " : " on ranks ") + join(items);
}

std::optional<HangSite> hang_site(const std::string& cause) {
  // The heartbeats' words: "ranks 1, 3 never entered collective #57 (allgather at step 12)".
  static const std::regex absent(std::string("\\branks? ([0-9]+(?:, [0-9]+)*)") + kNeverEntered +
                                 "[0-9]+ \\(.*? at step ([0-9]+)\\)");
  std::smatch m;
  if (std::regex_search(cause, m, absent)) return HangSite{std::stoll(m[2]), rank_list(m[1])};
  // A rank's own watchdog: "rank 1: no progress for 3 s (dist.timeout_s) at step 3 while
  // computing, outside any collective (...) (this rank is stuck)".
  static const std::regex stuck(
      "\\brank ([0-9]+): no progress for [0-9]+ s \\(dist\\.timeout_s\\) at step ([0-9]+) while computing, outside any "
      "collective[^;]*\\(this rank is stuck\\)");
  std::optional<HangSite> site;
  for (std::sregex_iterator it(cause.begin(), cause.end(), stuck), end; it != end; ++it) {
    const long long step = std::stoll((*it)[2]);
    if (!site) site = HangSite{step, {}};
    if (step == site->step) site->ranks.push_back(std::stoi((*it)[1]));
  }
  if (site) site->ranks = ascending(std::move(site->ranks));
  return site;
}

std::string note_hang(RunState& s, const std::string& cause) {
  const std::optional<HangSite> site = hang_site(cause);
  if (!site) return "";
  const std::string where = site->text();
  std::vector<int> same;
  for (const AttemptHang& h : s.hangs)
    if (h.site == where && h.attempt != s.attempts) same.push_back(h.attempt);
  s.hangs.push_back({s.attempts, where});
  if (same.empty()) return "";
  same.push_back(s.attempts);
  return "hang at " + where + ", repeated in attempts " + attempts_text(same) + ": deterministic, not retried";
}

}  // namespace sweep
